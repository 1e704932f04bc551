"""The ``toylab`` command an installed package puts on the PATH (pyproject.toml's ``[project.scripts]``).

    toylab app [STREAMLIT OPTIONS]     the page, served by Streamlit with the project's settings (``toylab app``)
    toylab [inspect | train] …         the library's command line, as ``python -m toylab`` (toylab/cli/main.py)

``toylab app`` runs ``streamlit run`` on ``script/streamlit_app.py`` with every setting of the project's
``.streamlit/config.toml`` (shipped as ``streamlit_config.toml``) given as a flag, so the page is served the same
from any folder; options given after ``app`` (``--server.port 8502``) come later and win. While the server starts,
it loads the page in the background, so that its first visitors do not wait for it (``load_page_while_starting``).
"""

import sys
import threading
import time
import tomllib
from pathlib import Path

from toylab.cli.main import main as main_of_library
from toylab.cli.main import run
from toylab_app.startup import load_page

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "script" / "streamlit_app.py"
CONFIG = HERE / "streamlit_config.toml"
HELP = """usage: toylab app [STREAMLIT OPTIONS]

Serve toylab's page (open http://localhost:8501). STREAMLIT OPTIONS are `streamlit run`'s, e.g. --server.port 8502
or --server.address 0.0.0.0; the page's own settings (theme, upload size, no usage statistics) are set already."""


def flags(settings, section=""):
    """``{"server": {"headless": True}}`` → ``["--server.headless=true"]``: a nested TOML table as Streamlit's
    command-line options, one per leaf."""
    out = []
    for key, value in settings.items():
        name = f"{section}.{key}" if section else key
        if isinstance(value, dict):
            out += flags(value, name)
        else:
            out.append(f"--{name}={str(value).lower() if isinstance(value, bool) else value}")
    return out


def load_page_while_starting():
    """Once Streamlit's runtime exists (its options read), load the page (toylab_app/startup.py)."""
    from streamlit import runtime

    while not runtime.exists():
        time.sleep(0.05)
    load_page("before its first visitor")


def serve(arguments):
    """``streamlit run`` on the page's script with the project's settings, then the caller's options; the page
    loaded in the background meanwhile."""
    if {"-h", "--help"} & set(arguments):
        print(HELP)
        return 0
    from streamlit.web import cli as streamlit_cli

    with CONFIG.open("rb") as config:
        settings = tomllib.load(config)
    threading.Thread(target=load_page_while_starting, name="toylab page loader", daemon=True).start()
    return streamlit_cli.main(args=["run", str(SCRIPT), *flags(settings), *arguments], prog_name="toylab app")


def dispatch(argv):
    return serve(argv[1:]) if argv[:1] == ["app"] else main_of_library(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run(argv, entry=dispatch)
