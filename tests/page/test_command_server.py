"""``toylab app`` (toylab_app/command.py) loads the page while its server starts, before any visitor: a real server,
started as the installed command starts it, that no browser has opened."""

import sys
import time
import urllib.request

import pytest

from tests.browser import GZIP_MAY_NOT_SHRINK_BYTES, frontend_assets, running_app

pytestmark = pytest.mark.slow

TOYLAB_APP = (sys.executable, "-c", "import sys; from toylab_app.command import main; sys.exit(main())", "app")


def content_encoding(url):
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("content-encoding")


def test_toylab_app_serves_the_frontend_from_memory_before_its_first_visitor():
    """Only the page's import serves Streamlit's scripts and styles gzipped from memory (toylab_app/internals.py;
    Streamlit's own handler sends them plain, from disk). With no browser connected, no run has imported the page:
    the command's loader has, within 120 s of the server answering its health check (the smallest files left out:
    gzip may not shrink them)."""
    static, names = frontend_assets()
    scripts_and_styles = [name for name in names if name.endswith((".js", ".css"))
                          and (static / name).stat().st_size > GZIP_MAY_NOT_SHRINK_BYTES]
    with running_app(server=TOYLAB_APP) as url:
        deadline = time.monotonic() + 120
        while content_encoding(f"{url}/{scripts_and_styles[0]}") != "gzip":
            assert time.monotonic() < deadline, "toylab app: the page was not loaded 120 s after the server started"
            time.sleep(0.25)
        assert all(content_encoding(f"{url}/{name}") == "gzip" for name in scripts_and_styles)
