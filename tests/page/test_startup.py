"""A clone's ``streamlit_app.py`` and the installed ``toylab app``'s ``toylab_app/script/served.py`` are each an
``st.App`` that Streamlit's own ``streamlit run`` finds (its discovery reads the file, it does not run it), serving
the page's script once its lifespan has loaded the page (toylab_app/startup.py). The real servers:
tests/page/test_command_server.py."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.web.server.app_discovery import discover_asgi_app

from toylab_app import startup

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("main_file", "module"), [(Path("streamlit_app.py"), "streamlit_app"),
                                                  (Path("toylab_app", "script", "served.py"), "served")],
                         ids=["a clone's streamlit run", "toylab app"])
def test_streamlit_run_finds_the_app_and_its_script_is_the_page_s(main_file, module):
    """The app is made in a process of its own, as ``streamlit run`` would import it (its folder first on sys.path):
    the first st.App of a process pins Streamlit's configuration."""
    found = discover_asgi_app(ROOT / main_file)
    assert found.is_asgi_app and found.import_string == f"{module}:app"
    folder = (ROOT / main_file).parent
    made = subprocess.run([sys.executable, "-c", f"from {module} import app; from toylab_app import startup; "
                           "print(app.script_path); print(app._user_lifespan is startup.page_loaded_first)"],
                          cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          check=True)
    script, lifespan = made.stdout.split()
    assert (folder / script).resolve() == ROOT / "toylab_app" / "script" / "streamlit_app.py" and lifespan == "True"


def test_the_lifespan_loads_the_page_before_it_yields(monkeypatch, capsys):
    imported = []
    monkeypatch.setattr(startup, "import_module", imported.append)

    async def serving():
        async with startup.page_loaded_first(app=None):
            return list(imported)
    assert asyncio.run(serving()) == ["toylab_app.page"]
    assert startup.PAGE_LOADED in capsys.readouterr().out


def test_a_page_that_cannot_be_loaded_does_not_stop_the_server(monkeypatch, caplog):
    """uvicorn exits when a lifespan raises: the page's error is logged, and the server serves (each visit shows it)."""
    def broken(name):
        raise ImportError("no module named 'pandas'")
    monkeypatch.setattr(startup, "import_module", broken)

    async def serving():
        async with startup.page_loaded_first(app=None):
            return "serving"
    assert asyncio.run(serving()) == "serving"
    assert "could not be loaded" in caplog.text and "no module named 'pandas'" in caplog.text
