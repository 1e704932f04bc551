"""At 1280×720, in the light and the dark theme, without and with presentation mode: every tab, every expander in it
opened, and the Your run tab with the example log and the example run, show no text cut off and each tab's first
chart in view on arrival (``tests/screen_fit.py`` says what is measured, in the browser, from the page's boxes).

A sweep, not a list: a tab, an expander or a chart added later is measured too. The lessons' views:
test_lessons_fit_the_screen.py. Set TOYLAB_SCREENSHOTS=DIR to save a screenshot of each view there.
"""

import os

import pytest
from screen_fit import SCREEN, first_chart_in_view, measure

from tests.browser import wait_for_app
from toylab.state.query import LESSONS_TAB, TAB_LABELS, YOUR_RUN_TAB

pytestmark = pytest.mark.browser
MODES = [("normal", "light"), ("normal", "dark"), ("present", "light"), ("present", "dark")]
EXAMPLES = ("Use the example log", "Use the example run")
SHOTS = os.environ.get("TOYLAB_SCREENSHOTS")
CLOSED = '[data-testid="stExpander"] details:not([open]) > summary'


def screenshot(page, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"))


def open_page(app, mode, scheme, query=""):
    url, browser = app
    context = browser.new_context(viewport=SCREEN, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{url}/?" + "&".join(filter(None, ["present=1" if mode == "present" else "", query])))
    wait_for_app(page)
    return page


def open_tab(page, label):
    page.get_by_role("tab", name=label, exact=True).click()
    wait_for_app(page)


def open_expanders(page, label):
    """Each closed expander of the open tab, opened one after the other (each reruns the page)."""
    panel = page.get_by_role("tabpanel", name=label)
    for _ in range(panel.locator(CLOSED).count()):
        panel.locator(CLOSED).first.click()
        wait_for_app(page)


@pytest.mark.parametrize("mode, scheme", MODES, ids=[f"{mode}-{scheme}" for mode, scheme in MODES])
def test_every_tab_fits_with_its_first_chart_in_view(app, mode, scheme):
    page = open_page(app, mode, scheme)
    found = []
    for label in TAB_LABELS:
        open_tab(page, label)
        arrived = measure(page)
        screenshot(page, f"{mode}-{scheme}-{label}")
        if not first_chart_in_view(arrived):
            found.append(f"{label}: the first chart starts at {arrived['first_chart_top']:.0f} px")
        found += [f"{label}: {problem}" for problem in arrived["problems"]]
        if label != LESSONS_TAB or mode == "normal":      # the lessons' numbers: one mode is enough (a slow open)
            open_expanders(page, label)
            found += [f"{label}, expanders open: {problem}" for problem in measure(page)["problems"]]
    assert not found, "\n".join(found)
    page.context.close()


@pytest.mark.parametrize("mode, scheme", MODES, ids=[f"{mode}-{scheme}" for mode, scheme in MODES])
@pytest.mark.parametrize("example", EXAMPLES)
def test_your_run_fits_with_an_example(app, mode, scheme, example):
    page = open_page(app, mode, scheme, f"tab={YOUR_RUN_TAB.replace(' ', '%20')}")
    page.get_by_role("button", name=example).click()
    wait_for_app(page)
    page.get_by_role("tabpanel", name=YOUR_RUN_TAB).locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    measured = measure(page)
    screenshot(page, f"{mode}-{scheme}-{YOUR_RUN_TAB}-{example.split()[-1]}")
    assert first_chart_in_view(measured), measured["first_chart_top"]
    open_expanders(page, YOUR_RUN_TAB)
    problems = measured["problems"] + [f"expanders open: {problem}" for problem in measure(page)["problems"]]
    assert not problems, "\n".join(problems)
    page.context.close()
