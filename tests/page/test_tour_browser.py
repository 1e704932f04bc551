"""The guided tour as a room sees it: headless Chromium at 1280×720 in presentation mode, light and dark.

From lesson 1, the tour's Next button walks every lesson of ``toylab.lessons.tour.LESSONS`` (however many there are):
each opens its tab with its box on top, and every numbered mark of the lesson — each ring and each rule its chart
draws (the named layers of ``charts.mark_layers``) — lies inside the viewport without scrolling, one mark drawn per
mark of its evidence, no two rings closer than a label's height, and no console warning. The Your run tab with the example log and with the example run has its
first chart inside the viewport.
"""

import numpy as np
import pytest

from tests.browser import wait_for_app
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.presentation.charts import MARK_NAMES
from toylab.state.query import VIEW_DEFAULTS, to_query, view_query

pytestmark = pytest.mark.browser
SCREEN = {"width": 1280, "height": 720}
LABEL_HEIGHT = 20.8                 # px: a 16-px label's line (labels.LINE_HEIGHT × 16)
IGNORED_CONSOLE = ("Failed to load resource",)    # the page icon's font file, fetched from the internet (offline here)

DRAWN_JS = """() => {
    const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.getClientRects().length);
    const charts = panel ? [...panel.querySelectorAll('[data-testid="stVegaLiteChart"]')] : [];
    return charts.length > 0 && charts.every(e => e.querySelector('svg.marks, canvas'));
}"""

# Every drawn mark of the lesson on show, in viewport coordinates: rings (one path each) and rules (one line each);
# the banner's text; the first chart's box.
MARKS_JS = """names => {
    const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.getClientRects().length);
    const box = element => { const r = element.getBoundingClientRect();
                             return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
    const named = name => [...panel.querySelectorAll('g')].filter(g => [...g.classList].some(
        c => new RegExp(`^${name}(_[0-9]+)?_marks$`).test(c)));          // one layer, or one a panel: name_0, name_1
    const marks = names.flatMap(name => named(name).flatMap(g => [...g.querySelectorAll(':scope > path, :scope > line')])
        .map(element => ({name, ...box(element)})));
    const banner = document.querySelector('.st-key-lesson_banner');
    const chart = panel.querySelector('[data-testid="stVegaLiteChart"]');
    return {marks, banner: banner ? banner.innerText : "", firstChart: chart ? box(chart) : null,
            viewport: {width: innerWidth, height: innerHeight}};
}"""


def lesson_link(lesson):
    """The lesson's link in presentation mode (its view's panel shows only there)."""
    view = VIEW_DEFAULTS | view_of(lesson) | {"present": True}
    return "&".join(f"{name}={value}" for name, value in (to_query(lesson_settings(lesson)) | view_query(view)).items())


def open_page(app, query, scheme, drawn=True):
    """A new session at ``query`` (settled, its charts drawn unless ``drawn`` is False); the page and its warnings."""
    url, browser = app
    context = browser.new_context(viewport=SCREEN, color_scheme=scheme)
    page = context.new_page()
    warnings = []
    page.on("console", lambda message: warnings.append(message.text) if message.type in ("warning", "error")
            and not message.text.startswith(IGNORED_CONSOLE) else None)
    page.goto(f"{url}/?{query}")
    if drawn:
        settle(page)
    else:
        wait_for_app(page, timeout=180_000)
    return page, warnings


def settle(page):
    wait_for_app(page, timeout=180_000)
    page.wait_for_function(DRAWN_JS, timeout=120_000)


def inside(box, viewport):
    return box["top"] >= 0 and box["left"] >= 0 and box["bottom"] <= viewport["height"] + 0.5 \
        and box["right"] <= viewport["width"] + 0.5


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_tour_shows_every_mark_of_every_lesson_without_scrolling(app, scheme):
    page, warnings = open_page(app, lesson_link(LESSONS[0]), scheme)
    names = [MARK_NAMES["ring"], MARK_NAMES["rule"]]
    for number, lesson in enumerate(LESSONS, start=1):
        if number > 1:
            page.get_by_role("button", name="Next").click()
            settle(page)
            page.wait_for_function("text => document.querySelector('.st-key-lesson_banner')?.innerText.includes(text)",
                                   arg=f"Lesson {number} of {len(LESSONS)}", timeout=120_000)
            settle(page)
        shown = page.evaluate(MARKS_JS, names)
        expected = len(lesson.check(lesson_settings(lesson)).marks)
        assert f"Lesson {number} of {len(LESSONS)}" in shown["banner"], lesson.id
        assert len(shown["marks"]) == expected, (lesson.id, len(shown["marks"]), expected)
        outside = [mark for mark in shown["marks"] if not inside(mark, shown["viewport"])]
        assert not outside, (lesson.id, outside)
        rings = [((mark["left"] + mark["right"]) / 2, (mark["top"] + mark["bottom"]) / 2) for mark in shown["marks"]
                 if mark["name"] == MARK_NAMES["ring"]]
        closest = min((np.hypot(a[0] - b[0], a[1] - b[1]) for i, a in enumerate(rings) for b in rings[:i]),
                      default=np.inf)
        assert closest >= LABEL_HEIGHT, (lesson.id, closest)        # no mark closer than a label's height
    assert not warnings, warnings[:3]
    page.context.close()


@pytest.mark.parametrize("example", ["Use the example log", "Use the example run"])
def test_your_run_shows_its_first_chart_without_scrolling(app, example):
    page, warnings = open_page(app, "present=1&tab=Your%20run", "light", drawn=False)
    page.get_by_role("button", name=example).click()
    settle(page)
    shown = page.evaluate(MARKS_JS, [])
    assert shown["firstChart"] is not None and inside(shown["firstChart"], shown["viewport"]), shown["firstChart"]
    assert not warnings, warnings[:3]
    page.context.close()
