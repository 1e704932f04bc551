"""How often each lesson holds, on the page: under every lesson of the Lessons tab its count over its population (the
shipped tallies) and a link to a toy where it does not hold; the grid of its toys, each a link that opens that toy,
built only while open; and in the tour's banner the same count, opening the same grid."""

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from streamlit.testing.v1 import AppTest

from toylab.lessons.lesson import settings_of
from toylab.lessons.shares import shipped, toy_controls, toy_link
from toylab.lessons.tour import LESSONS
from toylab.presentation import lesson_shares
from toylab.state.query import parse_link
from toylab_app import tour
from toylab_app.lessons_tab import TOYS_KEY

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
SHARES = shipped()
LINK = re.compile(r"\]\((\?[^ )]*)(?: \"([^\"]*)\")?\)")


def _render(function_name, state, lesson_id=None):
    def script(function_name, state, lesson_id):
        import streamlit as st

        from toylab.lessons.tour import LESSONS
        from toylab.state.settings import Settings
        from toylab_app import lessons_tab, tour
        st.session_state.update(state)
        if function_name == "lessons_tab":
            lessons_tab.render(Settings())
        else:
            tour.why(next(lesson for lesson in LESSONS if lesson.id == lesson_id))

    return AppTest.from_function(script, args=(function_name, state, lesson_id), default_timeout=120).run()


def _links(text):
    """(settings, view, title) of every relative link in a markdown text."""
    found = []
    for query, title in LINK.findall(text):
        params = {name: values for name, values in parse_qs(urlsplit(query).query).items()}
        opened, view, notices = parse_link(params)
        assert notices == [], query
        found.append((opened, view, title))
    return found


def test_every_lesson_shows_its_count_and_a_toy_where_it_does_not_hold():
    app = _render("lessons_tab", {})
    assert not app.exception
    captions = [caption.value for caption in app.caption]
    for lesson in LESSONS:
        tallies = SHARES[lesson.id]
        shown = lesson_shares.summary(lesson, tallies)
        assert shown in captions, lesson.id
        count, applicable = lesson_shares.totals(tallies)
        assert shown.startswith(f"Holds at {count} of {applicable} toys: ")
        broken = lesson_shares.counterexample(tallies)
        links = _links(shown)
        if broken:
            group, seed = broken
            ((opened, view, _),) = links
            assert opened == settings_of(toy_controls(lesson, group, seed)) and view["tab"] == lesson.tab
        else:
            assert not links
    assert not any("| toys: holds at |" in markdown.value for markdown in app.markdown)   # grids are built when opened


def test_a_lesson_s_grid_links_every_toy_of_its_population_when_opened():
    lesson = next(lesson for lesson in LESSONS if lesson.id == "token_mask_collapse")
    app = _render("lessons_tab", {f"{TOYS_KEY}.{lesson.id}": True})
    assert not app.exception
    (grid,) = [markdown.value for markdown in app.markdown if "| toys: holds at |" in markdown.value]
    cells = _links(grid)
    tallies = SHARES[lesson.id]
    expected = [(settings_of(toy_controls(lesson, t.group, seed)), held) for t in tallies
                for seed, held in zip(t.seeds, t.holds, strict=True)]
    assert [opened for opened, _, _ in cells] == [opened for opened, _ in expected]
    assert all(view["tab"] == lesson.tab and view["train_pick"] == "tok_mis" for _, view, _ in cells)
    verdicts = {True: "the claim holds", False: "the claim does not hold", None: "the claim does not apply"}
    assert all(title.endswith(verdicts[held]) for (_, _, title), (_, held) in zip(cells, expected, strict=True))
    assert grid.count(lesson_shares.CELLS[True]) == sum(t.count for t in tallies)
    assert any(lesson.predicate in caption.value for caption in app.caption)


def test_the_tour_banner_s_why_counts_the_toys_and_opens_their_grid():
    lesson = next(lesson for lesson in LESSONS if lesson.id == "logged_reward")
    closed = _render("why", {}, lesson.id)
    count, applicable = lesson_shares.totals(SHARES[lesson.id])
    (popover,) = closed.get("popover")
    summary = lesson_shares.summary(lesson, SHARES[lesson.id])
    assert popover.proto.popover.label == "Why" and f"at {count} of the {applicable} toys" in popover.proto.popover.help
    assert [markdown.value for markdown in closed.markdown][::2] == [lesson.text, summary]   # the grid: when open
    opened = _render("why", {tour.WHY_KEY: True}, lesson.id)
    assert not opened.exception
    assert [markdown.value for markdown in opened.markdown][2:] == [summary, lesson_shares.grid(lesson, SHARES[lesson.id])]


def test_the_banner_says_how_often_the_lesson_on_show_holds():
    lesson = next(lesson for lesson in LESSONS if lesson.id == "token_mask_collapse")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(toy_link(lesson, lesson.population.groups[0], lesson.controls["seed"]))
    at.run()
    count, applicable = lesson_shares.totals(SHARES[lesson.id])
    (banner,) = [markdown.value for markdown in at.markdown if markdown.value.startswith("**Lesson 8 of ")]
    assert banner.endswith(f"{lesson.claim} :gray[Holds at {count}/{applicable} toys.]")
