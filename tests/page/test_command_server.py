"""The page is loaded before its server answers anyone (toylab_app/startup.py): a real server, started as a clone
starts it (``streamlit run streamlit_app.py``) and as the installed command starts it (``toylab app``), each an
``st.App`` whose lifespan loads the page, that no browser has opened."""

import sys
import urllib.request

import pytest

from tests.browser import GZIP_MAY_NOT_SHRINK_BYTES, frontend_assets, running_app

pytestmark = pytest.mark.slow

TOYLAB_APP = (sys.executable, "-c", "import sys; from toylab_app.command import main; sys.exit(main())", "app")


def content_encoding(url):
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("content-encoding")


def large_scripts_and_styles():
    """The frontend's scripts and styles that gzip shrinks (the smallest left out)."""
    static, names = frontend_assets()
    return [name for name in names if name.endswith((".js", ".css"))
            and (static / name).stat().st_size > GZIP_MAY_NOT_SHRINK_BYTES]


def test_streamlit_run_loads_the_page_before_the_server_answers():
    """Only the page's import serves Streamlit's scripts and styles gzipped from memory (toylab_app/internals.py;
    Streamlit's own handler sends them plain, from disk). At the server's first answer to its health check, with no
    browser connected, they already are: streamlit_app.py's lifespan imported the page before the server answered."""
    with running_app() as url:
        assert all(content_encoding(f"{url}/{name}") == "gzip" for name in large_scripts_and_styles())


def test_toylab_app_loads_the_page_before_the_server_answers():
    """The same, started as the installed command starts it."""
    with running_app(server=TOYLAB_APP) as url:
        assert all(content_encoding(f"{url}/{name}") == "gzip" for name in large_scripts_and_styles())
