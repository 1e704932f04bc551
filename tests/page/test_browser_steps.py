"""What a step leaves out, in headless Chromium: the page config (sent once a session) stays — the title, the wide
layout, the icon — and a step back to a value shown before, whose charts and table come as references to the
browser's message cache, draws every chart and the table of that value."""

import pytest

from tests.browser import wait_for_app

pytestmark = pytest.mark.browser

DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(e => e.checkVisibility())
    .every(e => e.querySelector('svg.marks, canvas'))"""
LAYOUT_JS = """() => ({title: document.title, width: document.querySelector('[data-testid="stMainBlockContainer"]')
    .getBoundingClientRect().width, icon: document.querySelector('link[rel*="icon"]')?.getAttribute('href') || ''})"""


def _step(page, key):
    page.get_by_role("slider", name="mismatch").press(key)
    wait_for_app(page)
    page.wait_for_function(DRAWN_JS, timeout=60_000)


def _shown(page):
    """The header's numbers and the table's cells: what a step changes."""
    return (page.locator('[data-testid="stMetricValue"]').all_inner_texts(),
            page.locator('[data-testid="stDataFrame"]').last.locator("td[role=gridcell]").all_text_contents())


@pytest.mark.parametrize("tab", ["Estimators", "Training"])
def test_a_step_keeps_the_page_config_and_a_step_back_draws_its_references(app, tab):
    url, browser = app
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{url}/?tab={tab.replace(' ', '+')}")
    wait_for_app(page)
    page.wait_for_function(DRAWN_JS, timeout=60_000)
    page.wait_for_function("() => document.querySelector('[data-testid=\"stDataFrame\"] td[role=gridcell]')")
    first, opened = _shown(page), page.evaluate(LAYOUT_JS)
    assert opened["title"] == "toylab: sampler ≠ trainer" and opened["width"] > 1200 and opened["icon"]
    _step(page, "ArrowRight")
    assert _shown(page) != first
    _step(page, "ArrowLeft")                        # back to the value opened: its charts come as references
    page.wait_for_function("() => document.querySelector('[data-testid=\"stDataFrame\"] td[role=gridcell]')")
    assert _shown(page) == first
    assert page.evaluate(LAYOUT_JS) == opened
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
