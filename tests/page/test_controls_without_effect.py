"""A control the current choice leaves without effect is greyed, and the page says why (under streamlit.testing):
β with the KL penalty off, the replay buttons under a replay preset, the stamp, prefix mask and π_prox under a version
preset, the stamp and the mask with no version switch, and the Experts & versions tab's switch position under a drawn
switch. The same controls are live where they act. Slow tier: each opens the Training tab's run."""

import pytest
from test_app import run

from toylab.catalogue.replay import REPLAY_PRESETS
from toylab.catalogue.version_handling import VERSION_PRESETS
from toylab.state.query import EXPERTS_TAB, TRAINING_TAB

pytestmark = pytest.mark.slow


def captions(at):
    return " ".join(caption.value for caption in at.caption)


def test_beta_is_greyed_while_the_kl_penalty_is_off_and_live_when_it_is_on():
    off = run({"tab": TRAINING_TAB, "train_ref_distance": "0.5"})          # the reference's group opened by the link
    assert not off.exception and off.select_slider(key="train_beta").disabled
    assert "KL penalty off: β is ignored" in captions(off)
    on = run({"tab": TRAINING_TAB, "train_kl": "k3.loss"})
    assert not on.exception and not on.select_slider(key="train_beta").disabled
    assert "β is ignored" not in captions(on)


def test_a_replay_preset_greys_the_replay_buttons_and_names_its_mode():
    preset = "verl:R3"
    at = run({"tab": TRAINING_TAB, "train_replay_preset": preset})
    assert not at.exception and at.radio(key="train_replay").disabled
    assert f"{preset} sets the replay ({REPLAY_PRESETS[preset].replay})" in captions(at)
    assert not at.radio(key="train_switch").disabled                   # the version switch is its own


def test_a_version_preset_greys_what_it_sets_and_says_its_values():
    preset = "slime:mask_offpolicy_in_partial_rollout"
    at = run({"tab": TRAINING_TAB, "train_version_preset": preset, "train_switch": "fixed"})
    assert not at.exception
    assert at.radio(key="train_stamp").disabled and at.toggle(key="train_mask_stale").disabled
    assert at.radio(key="train_prox").disabled
    chosen = VERSION_PRESETS[preset]
    assert (f"{preset} sets the stamp ({chosen.stamp}), the prefix mask ({'on' if chosen.mask_stale else 'off'}) "
            f"and π_prox ({chosen.prox})") in captions(at)
    assert not at.radio(key="train_replay").disabled


def test_without_a_version_switch_the_stamp_and_the_mask_are_greyed_and_pi_prox_is_live():
    off = run({"tab": TRAINING_TAB, "train_prox": "loglinear"})             # the group opened by the link
    assert not off.exception
    assert off.radio(key="train_stamp").disabled and off.toggle(key="train_mask_stale").disabled
    assert not off.radio(key="train_prox").disabled and "No version switch" in captions(off)
    fixed = run({"tab": TRAINING_TAB, "train_switch": "fixed"})
    assert not fixed.radio(key="train_stamp").disabled and not fixed.toggle(key="train_mask_stale").disabled
    assert "No version switch" not in captions(fixed)


def test_the_versions_switch_position_is_greyed_for_a_drawn_switch():
    drawn = run({"tab": EXPERTS_TAB})
    assert not drawn.exception and drawn.radio(key="versions_switch").value == "drawn"
    assert drawn.slider(key="versions_at").disabled
    fixed = run({"tab": EXPERTS_TAB, "versions_switch": "fixed"})
    assert not fixed.exception and not fixed.slider(key="versions_at").disabled
