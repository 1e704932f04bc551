"""Hostile link values for the parameters merged with issues 45 and 46 (issue 41's promise extended): the KL penalty
(train_kl, train_beta, train_ref_distance) and view (kl_view, kl_distance, kl_frameworks), the mixture of experts
(moe_…), routing replay and version switches (train_replay…, train_switch…, train_stamp, train_mask_stale,
train_prox, train_version_preset) and the Experts & versions tab's own (flip_axis, versions_…). Each bad value falls
back to the parameter's default with a notice naming it; no value read is NaN or infinite; a control character or a
bidirectional override reaches no notice raw; a preset and a control that contradicts it say which one counts."""

import math

import pytest

from toylab.catalogue.replay import REPLAY_PRESETS
from toylab.catalogue.version_handling import VERSION_PRESETS
from toylab.state.query import VIEW_PARAMETERS, parse_link, view_query

NEW_PARAMETERS = ("train_kl", "train_beta", "train_ref_distance", "kl_view", "kl_distance", "kl_frameworks",
                  "moe_layers", "moe_experts", "moe_top_k", "moe_error", "moe_draws", "moe_draw", "moe_spread",
                  "train_replay", "train_replay_preset", "train_switch", "train_switch_at", "train_stamp",
                  "train_mask_stale", "train_prox", "train_version_preset", "flip_axis", "versions_switch",
                  "versions_at", "versions_lag", "versions_anchor", "versions_step", "versions_lr")
HOSTILE = ["", "nan", "NaN", "inf", "-inf", "1e400", "-1", "abc", "1e9", "9" * 30, "x" * 5_000, "\x1b[2J",
           "\u202e1", "0x10", "1/0", "None"]


def test_the_sweep_names_every_parameter_the_merges_added():
    for name in NEW_PARAMETERS:
        assert name in VIEW_PARAMETERS, name


@pytest.mark.parametrize("name", NEW_PARAMETERS)
@pytest.mark.parametrize("raw", HOSTILE, ids=lambda raw: repr(raw[:12]))
def test_a_hostile_value_falls_back_to_the_default_with_a_notice(name, raw):
    settings, view, notices = parse_link({"tab": "Training", name: raw})
    value = view[name]
    assert not (isinstance(value, float) and not math.isfinite(value))
    assert value == VIEW_PARAMETERS[name].default
    assert any(f"URL parameter {name} = " in notice and "using the default" in notice for notice in notices), notices
    assert not any(character in notice for notice in notices for character in ("\x1b", "\u202e"))
    assert all(len(notice) < 600 for notice in notices)


@pytest.mark.parametrize("link, words", [
    ({"train_replay_preset": "verl:R3", "train_replay": "R2"},
     ["train_replay_preset = verl:R3 sets train_replay = R3", "the link's train_replay = 'R2' ignored"]),
    ({"train_version_preset": "areal:loglinear", "train_prox": "recompute", "train_stamp": "tail"},
     ["train_version_preset = areal:loglinear sets train_stamp = token and train_prox = loglinear",
      "train_stamp = 'tail' and train_prox = 'recompute' ignored"]),
    ({"train_version_preset": "slime:mask_offpolicy_in_partial_rollout", "train_mask_stale": "0"},
     ["train_version_preset = slime:mask_offpolicy_in_partial_rollout sets train_mask_stale = 1"]),
])
def test_a_preset_and_a_control_that_contradicts_it_say_which_counts(link, words):
    """The command line refuses such a pair (--versions areal:loglinear --prox recompute); the link uses the preset and
    says so, as it does for a pipeline preset and logged or scored."""
    _, _, notices = parse_link({"tab": "Training", **link})
    [notice] = notices
    for word in words:
        assert word in notice, notice


@pytest.mark.parametrize("preset", REPLAY_PRESETS)
def test_a_replay_preset_with_its_own_mode_says_nothing(preset):
    assert parse_link({"train_replay_preset": preset, "train_replay": REPLAY_PRESETS[preset].replay})[2] == []


@pytest.mark.parametrize("preset", VERSION_PRESETS)
def test_a_version_preset_with_its_own_controls_says_nothing(preset):
    chosen = VERSION_PRESETS[preset]
    link = {"train_version_preset": preset, "train_stamp": chosen.stamp,
            "train_mask_stale": "1" if chosen.mask_stale else "0", "train_prox": chosen.prox}
    assert parse_link(link)[2] == []


def test_a_link_the_page_writes_under_a_preset_names_the_preset_not_the_controls_it_sets():
    """So reopening the page's own address gives no notice, whatever the controls under the preset held."""
    view = parse_link({})[1] | {"tab": "Training", "train_replay_preset": "verl:R3", "train_replay": "R2",
                                "train_version_preset": "areal:loglinear", "train_stamp": "tail", "train_prox": "recompute",
                                "train_mask_stale": True, "train_switch": "fixed"}
    link = view_query(view)
    assert link == {"tab": "Training", "train_replay_preset": "verl:R3", "train_version_preset": "areal:loglinear",
                    "train_switch": "fixed"}
    assert parse_link(link)[2] == []
