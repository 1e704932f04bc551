"""Checks the end-to-end harness in tests/browser.py on a tiny throw-away Streamlit script."""

from __future__ import annotations

import textwrap
import urllib.error
import urllib.request

import pytest

from tests.browser import browser_available, launch_browser, running_app, skip_or_fail, wait_for_app

TINY_APP = textwrap.dedent(
    """
    import streamlit as st

    st.title("Harness check")
    x = st.slider("x", 0, 10, 3, key="x")
    st.write(f"x = {x}")
    """
)


@pytest.mark.browser
def test_running_app_serves_page_and_stops(tmp_path):
    ok, reason = browser_available()
    if not ok:
        skip_or_fail(reason)
    from playwright.sync_api import expect, sync_playwright

    script = tmp_path / "tiny_app.py"
    script.write_text(TINY_APP)

    with running_app(script) as url:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as resp:
            assert resp.read().decode().strip() == "ok"
        with sync_playwright() as pw:
            browser = launch_browser(pw)
            try:
                page = browser.new_page()
                page.goto(url)
                wait_for_app(page)
                expect(page.get_by_text("Harness check")).to_be_visible()
                expect(page.get_by_text("x = 3")).to_be_visible()
                assert page.locator('[data-testid="stException"]').count() == 0
            finally:
                browser.close()

    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
