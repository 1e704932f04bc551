"""The lean sidebar (AppTest): the mismatch is its one control always built; each group's widgets are built only while
it is open, and every value — set by a link, a widget or a lesson — stays in the link and the Settings while its group
is closed."""

from dataclasses import replace

import pytest
from test_app_links import run
from tiers import fast_then_slow

from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.tour import LESSONS
from toylab.state.query import parse_query
from toylab_app.address import DROPPED_KEY
from toylab_app.sidebar import GROUP_PREFIX, GROUPS

LINK = {"T": "4", "V": "3", "seed": "5", "est": "naive,tok_tis,seq_mis", "tok_tis.C": "1.5", "baseline": "logged",
        "N": "256", "agg": "token-mean", "framework": "verl", "compare_baseline": "true"}


def widgets(at):
    """The keys of the sidebar's widgets."""
    return [node.key for node in at.sidebar if getattr(node, "key", None)]


def step(at, mismatch):
    at.slider(key="mismatch").set_value(mismatch).run()
    assert not at.exception
    return at


def test_the_default_sidebar_builds_the_mismatch_and_four_closed_groups():
    at = run()
    assert not at.exception and not at.warning and at.query_params == {}
    assert widgets(at) == ["mismatch", *(GROUP_PREFIX + name for name in GROUPS), DROPPED_KEY]
    assert [expander.label for expander in at.sidebar.expander] == list(GROUPS.values())


def test_a_link_keeps_every_value_through_steps_with_its_groups_closed():
    at = run(LINK)
    assert not at.exception and widgets(at)[0] == "mismatch" and "T" not in widgets(at)
    step(at, 0.4)
    assert at.query_params == LINK | {"mismatch": "0.4"}
    assert list(at.dataframe[0].value["estimator"]) == ["naive", "tok_tis", "seq_mis"]
    assert at.metric[0].value == f"{3**4:,}"


def test_opening_a_group_shows_the_links_values_and_closing_it_keeps_a_change():
    at = run(LINK)
    at.session_state[GROUP_PREFIX + "toy"] = True
    at.session_state[GROUP_PREFIX + "estimators"] = True
    at.run()
    assert (at.slider(key="T").value, at.number_input(key="seed").value, at.number_input(key="tok_tis.C").value) \
        == (4, 5, 1.5)
    assert at.selectbox(key="framework").value == "verl"
    at.number_input(key="tok_tis.C").set_value(2.5)
    at.slider(key="T").set_value(5).run()
    at.session_state[GROUP_PREFIX + "toy"] = False
    at.session_state[GROUP_PREFIX + "estimators"] = False
    at.run()
    assert "T" not in widgets(at) and "tok_tis.C" not in widgets(at)
    step(at, 0.5)
    step(at, 0.6)
    expected = LINK | {"T": "5", "tok_tis.C": "2.5", "mismatch": "0.6"}
    assert at.query_params == expected
    assert parse_query(expected)[1] == [] and at.metric[0].value == f"{3**5:,}"
    at.session_state[GROUP_PREFIX + "toy"] = True
    at.run()
    assert at.slider(key="T").value == 5


def test_a_link_that_sets_the_sampler_opens_its_group_and_no_other():
    at = run({"top_p": "0.9"})
    assert not at.exception
    assert at.slider(key="top_p").value == 0.9 and "T" not in widgets(at) and "est" not in widgets(at)


@pytest.mark.parametrize("lesson", fast_then_slow(LESSONS, [LESSONS[1], LESSONS[12]]), ids=lambda lesson: lesson.id)
def test_a_lesson_sets_its_view_with_the_groups_closed(lesson):
    at = run(tab="Lessons")
    at.button(key=f"lesson.{lesson.id}").click().run()
    assert not at.exception and not at.error and at.session_state["tab"] == lesson.tab
    assert parse_query(dict(at.query_params)) == (lesson_settings(lesson), []), lesson.id
    assert widgets(at)[0] == "mismatch" and "T" not in widgets(at)
    step(at, round(lesson_settings(lesson).mismatch + 0.01, 2))         # the next step keeps the lesson's values
    assert parse_query(dict(at.query_params))[0] == replace(lesson_settings(lesson), mismatch=at.session_state["mismatch"])
