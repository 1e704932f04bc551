"""The toy's routing replay and version handling against numbers from the frameworks' own code
(tests/catalogue/reference/hidden/numbers.json, written by the generate.py beside it: Megatron-LM's router with
verl's and slime's replay hooks, slime's partial-rollout mask, AReaL's log-linear π_prox and loss), token by token."""

import json
from pathlib import Path

import numpy as np
import pytest

from toylab import coefficients
from toylab.catalogue.updates import Update
from toylab.engine.experts import gates, top_k_chosen
from toylab.engine.versions import Pattern, loglinear_alpha, loglinear_anchor, loss_positions

NUMBERS = json.loads((Path(__file__).parent / "reference" / "hidden" / "numbers.json").read_text())
FLOAT32 = 2.0**-23          # Megatron's softmax runs in float32; AReaL's version numbers and its masks' ratio too


def chosen_of(indices, experts):
    chosen = np.zeros((len(indices), experts), bool)
    np.put_along_axis(chosen, np.array(indices), True, axis=1)
    return chosen


@pytest.mark.parametrize("case", NUMBERS["routing"], ids=lambda case: f"{len(case['logits'])}x{len(case['logits'][0])}"
                                                                      f"-top{case['top_k']}")
def test_the_router_and_its_replays_pick_and_gate_as_the_toy(case):
    """Megatron's top-k and softmax over the picked are the toy's routing and gates; a replay (verl REPLAY_FORWARD and
    REPLAY_BACKWARD, slime replay_forward and replay_backward) picks the replayed experts and gates them with the
    current scores; recording (verl RECORD, slime record) routes natively."""
    logits = np.array(case["logits"])
    own = top_k_chosen(logits, case["top_k"])
    replayed = chosen_of(case["replayed"], logits.shape[1])
    expected = {"native": own, "verl_record": own, "slime_record": own, "verl_replay_forward": replayed,
                "verl_replay_backward": replayed, "slime_replay_forward": replayed, "slime_replay_backward": replayed}
    for run, chosen in expected.items():
        found = case["runs"][run]
        np.testing.assert_array_equal(np.array(found["map"]), chosen, err_msg=run)
        np.testing.assert_allclose(np.array(found["probs"]), gates(logits, chosen), rtol=4 * FLOAT32, atol=1e-12,
                                   err_msg=run)
    np.testing.assert_array_equal(chosen_of(case["verl_recorded"], logits.shape[1]), own)
    assert (own != replayed).any()                       # the replays are tested against a routing of their own


@pytest.mark.parametrize("case", NUMBERS["masks"], ids=lambda case: f"T{case['T']}-at{case['switch']}-"
                                                                    f"{'masked' if case['masked'] else 'kept'}")
def test_slime_s_partial_rollout_mask_is_the_toy_s_stale_prefix(case):
    pattern = Pattern(1.0, 1, case["switch"])
    assert loss_positions(pattern, case["T"], case["masked"]).astype(int).tolist() == case["loss_mask"]


def test_areal_s_log_linear_prox_and_its_loss_are_the_toy_s_token_by_token():
    """π_prox from the stamped lag s = current_version − version, and the gradient of ppo_actor_loss_fn at it: the
    toy's D = ∂L/∂log π_θ of PPO (ε 0.2) at π_old = π_prox, times areal:token_mask's weight on π_prox/μ with rejection
    sampling at 5 (none without: AReaL applies no behaviour weight then)."""
    for case in NUMBERS["loglinear"]:
        log_pi, log_mu, A = case["trainer"], case["sampler"], case["advantage"]
        alpha = loglinear_alpha(np.array([case["current_version"] - case["version"]]))
        prox = float(loglinear_anchor(np.array([[log_mu]]), np.array([[log_pi]]), alpha)[0, 0])
        assert prox == pytest.approx(case["prox"], rel=0, abs=FLOAT32 * (1 + abs(log_pi - log_mu))), case
        weight = 1.0 if case["rejection"] is None else \
            float(coefficients("areal:token_mask", [[case["prox"]]], [[log_mu]], advantages=[A], upper=5.0)[0, 0])
        derivative = float(Update().token_loss(log_pi, case["prox"], log_mu, A).derivative)
        assert weight * derivative == pytest.approx(-case["gradient"], rel=4 * FLOAT32, abs=1e-12), case


def test_the_references_cover_every_lag_and_both_clips():
    lags = {case["current_version"] - case["version"] for case in NUMBERS["loglinear"]}
    assert lags == {0, 1, 2, 3, 4}
    clipped = [case for case in NUMBERS["loglinear"] if case["gradient"] == 0]
    assert clipped and len(clipped) < len(NUMBERS["loglinear"])
