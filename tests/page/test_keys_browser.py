"""The key table (``toylab.lessons.tour.KEYS``: the header's tooltip, the menu's About, the Lessons tab) holds in
either mode, pressed in headless Chromium: L opens the Lessons tab from every tab, a lesson on show or not; N starts
the tour from the Lessons tab and steps it; B steps it back; P turns presentation mode on and off."""

from urllib.parse import quote

import pytest

from tests.browser import wait_for_app
from toylab.lessons.tour import KEYS, LESSONS
from toylab.state.query import LESSONS_TAB, TAB_LABELS

pytestmark = pytest.mark.browser


def selected_tab(page):
    return page.locator('[data-testid="stTabs"] [role="tab"][aria-selected="true"]').inner_text().strip()


def press(page, key, done, tries=3):
    """Press ``key`` with no text field focused until ``done()`` holds, ``tries`` times at most. On CI's busy machine a
    press has gone unanswered (Streamlit's shortcut made no run, once in many runs); a user presses again, and so
    does this, once the page is idle and 10 s have passed without the press's effect."""
    for _ in range(tries):
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press(key)
        wait_for_app(page)
        for _ in range(20):
            if done():
                return
            page.wait_for_timeout(500)
        print(f"key {key!r}: no effect after the page was idle for 10 s; pressed again")
    raise AssertionError(f"key {key!r}: no effect after {tries} presses")


def lesson_number(page):
    banner = page.locator(".st-key-lesson_banner")
    return None if not banner.count() else int(banner.inner_text().split("Lesson ")[1].split(" ")[0])


@pytest.mark.parametrize("present", [False, True], ids=["normal", "present"])
def test_every_key_does_what_the_table_says(app, present):
    assert set(KEYS) == {"N", "B", "L", "P"}
    url, browser = app
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    for label in TAB_LABELS:                                   # no lesson on show: L opens the Lessons tab from each
        page.goto(f"{url}/?tab={quote(label)}" + ("&present=1" if present else ""))
        wait_for_app(page)
        assert lesson_number(page) is None and selected_tab(page) == label
        press(page, "l", lambda: f"tab={LESSONS_TAB}" in page.evaluate("() => location.search"))
        assert selected_tab(page) == LESSONS_TAB, label
    press(page, "n", lambda: lesson_number(page) is not None)  # on the Lessons tab: the first lesson
    assert lesson_number(page) == 1 and selected_tab(page) == LESSONS[0].tab
    press(page, "n", lambda: lesson_number(page) != 1)
    assert lesson_number(page) == 2 and selected_tab(page) == LESSONS[1].tab
    press(page, "b", lambda: lesson_number(page) != 2)
    assert lesson_number(page) == 1
    press(page, "l", lambda: selected_tab(page) != LESSONS[0].tab)   # a lesson on show: L opens the Lessons tab too
    assert selected_tab(page) == LESSONS_TAB
    press(page, "p", lambda: ("present=1" in page.evaluate("() => location.search")) != present)
    page.close()
