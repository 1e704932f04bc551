"""The page's browser tests share one fixture: the app served by ``streamlit run`` and a headless Chromium."""

import pytest

from tests.browser import browser_available, launch_browser, running_app, skip_or_fail


@pytest.fixture(scope="module")
def app():
    """(url, browser): the app served for one test module, and Chromium (skipped, or failed under
    TOYLAB_REQUIRE_BROWSER=1, when it cannot run)."""
    ok, reason = browser_available()
    if not ok:
        skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    with running_app("streamlit_app.py") as url, sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            yield url, browser
        finally:
            browser.close()


@pytest.fixture(autouse=True)
def _nothing_made_ahead_after_a_test():
    """Pictures a test's page runs left to make in the background (toylab_app/caches/ahead.py) are made before the
    next test starts, so none of them is counted by it."""
    yield
    from toylab_app.caches import ahead

    assert ahead.settled(300), "pictures made ahead still waiting after 300 s"
