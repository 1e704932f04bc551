"""Hostile links to the parameters merged with issues 45 and 46, on the page (streamlit.testing): contradicting
combinations (a KL penalty with routing or a version switch, a preset with a control it sets, sampled hidden-variable
runs, AReaL's log-linear π_prox without the recomputed anchor), toys too small for a switch (T = 1, 2) or too large for
the hidden sums. Each is a notice; the tab and the page around it keep working (no error element, no traceback, the
sidebar drawn); no notice or table shows NaN as a number."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
pytestmark = pytest.mark.slow


def opened(link, **state):
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(link)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [exception.message for exception in at.exception]
    assert not at.error, [error.value for error in at.error]
    assert [slider.key for slider in at.sidebar.slider] == ["mismatch"]       # the sidebar is drawn: the page goes on
    shown = [element.value for element in (*at.warning, *at.info, *at.caption)]
    assert not any("nan" in text.lower().replace("nano", "").split() for text in shown), shown
    return at


def notes(at):
    return [element.value for element in (*at.warning, *at.info)]


@pytest.mark.parametrize("link, words", [
    ({"tab": "Training", "train_kl": "k3.loss", "train_replay": "R3"}, "train one at a time"),
    ({"tab": "Training", "train_kl": "verl:kl_loss", "train_switch": "drawn"}, "train one at a time"),
    ({"tab": "Training", "train_mode": "sampled", "train_replay": "R3"}, "train in expected mode"),
    ({"tab": "Training", "train_mode": "sampled", "train_switch": "fixed"}, "train in expected mode"),
    ({"tab": "Training", "train_version_preset": "areal:loglinear", "train_anchor": "rollout",
      "train_switch": "fixed"}, "use the anchor recompute"),
    ({"tab": "Training", "T": "1", "train_switch": "drawn"}, "at least T = 2 tokens"),
    ({"tab": "Training", "T": "1", "train_switch": "fixed"}, "between 1 and T − 1 = 0"),
    ({"tab": "Experts & versions", "T": "10", "V": "4", "moe_draws": "16", "moe_draw": "token"},
     "over the limit of 4,194,304"),
], ids=["KL with routing", "KL with a switch", "sampled routing", "sampled switch", "loglinear with rollout",
        "drawn switch at T = 1", "fixed switch at T = 1", "hidden sums too large"])
def test_a_combination_the_models_refuse_is_a_notice_and_the_page_goes_on(link, words):
    at = opened(link)
    assert any(words in note for note in notes(at)), notes(at)


def test_a_preset_and_a_control_it_sets_otherwise_is_said_on_the_page():
    at = opened({"tab": "Training", "train_replay_preset": "verl:R3", "train_replay": "R2", "train_steps": "10"})
    assert any("train_replay_preset = verl:R3 sets train_replay = R3" in note for note in notes(at)), notes(at)


@pytest.mark.parametrize("T", [1, 2, 3])
def test_the_versions_view_at_the_smallest_toys_is_drawn_or_says_why_not(T):
    """At T = 1 and T = 2 the switch position's slider had one value (min = max = 1): the tab stopped on
    StreamlitInvalidMinMaxError."""
    at = opened({"tab": "Experts & versions", "T": str(T), "V": "8"})
    assert ("A switch needs at least two tokens (T ≥ 2)." in notes(at)) == (T == 1)


def test_the_training_tab_s_switch_position_at_t_2_is_said_not_a_slider():
    at = opened({"tab": "Training", "T": "2", "train_switch": "fixed", "train_steps": "10"}, group_policies=True)
    assert "at 1: the only position" in [caption.value for caption in at.caption]
