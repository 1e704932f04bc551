"""At 1280×720, in the light and the dark theme, without and with presentation mode: every lesson's view, as its
button opens it, shows no text cut off and its tab's first chart in view (``tests/screen_fit.py``: what is measured).

Every lesson of the tour, so a lesson added later is measured too; the tabs themselves: test_fits_the_screen.py.
"""

import pytest
from screen_fit import SCREEN, first_chart_in_view, lesson_link, measure

from tests.browser import wait_for_app
from toylab.lessons.tour import LESSONS

pytestmark = pytest.mark.browser
MODES = [("normal", "light"), ("normal", "dark"), ("present", "light"), ("present", "dark")]


@pytest.mark.parametrize("mode, scheme", MODES, ids=[f"{mode}-{scheme}" for mode, scheme in MODES])
def test_every_lesson_fits_with_its_first_chart_in_view(app, mode, scheme):
    url, browser = app
    context = browser.new_context(viewport=SCREEN, color_scheme=scheme)
    page = context.new_page()
    found = []
    for number, lesson in enumerate(LESSONS, start=1):
        page.goto(f"{url}/?{'present=1&' if mode == 'present' else ''}{lesson_link(lesson)}")
        wait_for_app(page)
        measured = measure(page)
        if not first_chart_in_view(measured):
            found.append(f"lesson {number} ({lesson.id}): the first chart starts at {measured['first_chart_top']:.0f} px")
        found += [f"lesson {number} ({lesson.id}): {problem}" for problem in measured["problems"]]
    assert not found, "\n".join(found)
    context.close()
