"""The ``toylab`` command an installed package puts on the PATH (pyproject.toml's ``[project.scripts]``).

    toylab app [STREAMLIT OPTIONS]     the page, served by Streamlit with the project's settings (``toylab app``)
    toylab [inspect | train] …         the library's command line, as ``python -m toylab`` (toylab/cli/main.py)

``toylab app`` runs ``streamlit run`` on ``script/served.py`` with every setting of the project's
``.streamlit/config.toml`` (shipped as ``streamlit_config.toml``) given as a flag, so the page is served the same
from any folder; options given after ``app`` (``--server.port 8502``) come later and win. ``served.py`` is an
``st.App`` whose lifespan loads the page before the server answers (toylab_app/startup.py), as a clone's
``streamlit_app.py`` is.
"""

import sys
import tomllib
from pathlib import Path

from toylab.cli.main import main as main_of_library
from toylab.cli.main import run

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "script" / "served.py"
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


def serve(arguments):
    """``streamlit run`` on the page's ``st.App`` with the project's settings, then the caller's options."""
    if {"-h", "--help"} & set(arguments):
        print(HELP)
        return 0
    from streamlit.web import cli as streamlit_cli

    with CONFIG.open("rb") as config:
        settings = tomllib.load(config)
    return streamlit_cli.main(args=["run", str(SCRIPT), *flags(settings), *arguments], prog_name="toylab app")


def dispatch(argv):
    return serve(argv[1:]) if argv[:1] == ["app"] else main_of_library(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run(argv, entry=dispatch)
