"""Every framework's update preset computes, token by token, what its framework's policy-loss code computes with
π_θ, π_old and μ apart: numbers frozen from running that code (tests/catalogue/reference/<framework>/, "updates").

Each frozen check is a batch of one-token rows at PPO ratios r = π_θ/π_old and engine ratios w = π_old/μ on both
sides of every clip, cap and bound of a setting, far beyond them and beyond ±20 clamps, both signs of A
(harness.update_probes), with the framework's loss of each token and its gradient ∂loss/∂log π_θ by autograd.
toylab's side is ``batch_surrogate`` of the preset's ``Update`` (its loss parameters as the setting sets them) and
its correction: the framework's per-token loss is −g·L and its gradient −g·∂L/∂log π_θ. Under the bypass anchor
toylab's π_old is μ (the framework's own π_old, in the batch, must not matter). Tokens agree to 10⁻¹² relative
(float32 rounding where the framework exponentiates in float32), with the same tokens exactly zero.
"""

import numpy as np
import pytest
from framework_reference import (
    assert_frozen_equal,
    frameworks,
    load,
    update_batch,
    update_id,
    update_tolerance,
    updates,
)

from toylab.catalogue.update_presets import UPDATE_PRESETS
from toylab.catalogue.updates import Update
from toylab.engine.surrogate import batch_surrogate

CHECKS = [pytest.param(framework, entry, id=update_id(entry)) for framework in frameworks()
          for entry in updates(framework)]


def preset_update(entry):
    """The preset's update with the setting's loss parameters."""
    update = UPDATE_PRESETS[entry["preset"]].update
    return Update(update.anchor, update.loss, {**update.loss_params, **entry["params"]}, update.minibatches,
                  update.epochs, update.weights_at)


@pytest.mark.parametrize("framework, entry", CHECKS)
def test_update_preset_equals_its_framework_loss(framework, entry):
    trainer, old, sampler, mask, advantages = update_batch(framework, entry["batch"])
    update = preset_update(entry)
    anchor = sampler if update.anchor == "bypass" else old
    correction = entry["correction"], entry["correction_params"]
    surrogate = batch_surrogate(update, correction[0], trainer, anchor, sampler, advantages, mask, **correction[1])
    objective, derivative = surrogate.objective, surrogate.derivative
    if update.weights_at == "current":                   # the correction reads sg(π_θ)/μ, not π_old/μ
        weight = batch_surrogate(update, correction[0], trainer, trainer, sampler, advantages, mask,
                                 **correction[1]).weight
        loss = update.token_loss(trainer, anchor, sampler, advantages[:, None])
        objective, derivative = weight * loss.objective, weight * loss.derivative
    rtol = update_tolerance(framework, entry["batch"], entry.get("float32", False))
    assert_frozen_equal(-objective, entry["loss"], rtol)
    assert_frozen_equal(-derivative, entry["gradient"], rtol)


def checked_as(update, correction):
    return update.anchor == "bypass", update.loss, update.params, update.weights_at, correction


def test_every_update_preset_is_checked_against_its_framework_code():
    """Each update preset's loss, parameters and correction at its defaults are those of a frozen check of its
    framework: its anchor's kind (bypass or not), loss, resolved parameters, where its weights read their ratio,
    and correction."""
    checked = {checked_as(UPDATE_PRESETS[entry["preset"]].update, entry["correction"])
               for framework in frameworks() for entry in updates(framework) if not entry["params"]}
    missing = [preset.id for preset in UPDATE_PRESETS.values()
               if checked_as(preset.update, preset.correction) not in checked]
    assert not missing


def test_the_probes_reach_past_every_bound():
    """The frozen checks hold both signs of A, gradients of many sizes per unit of A (clipped, capped, free), and
    for a PPO clip tokens it holds (gradient 0) beside tokens it does not: a check that never crossed a bound could
    not tell a clip from its absence."""
    for framework in frameworks():
        for entry in updates(framework):
            gradient = np.array(entry["gradient"])[:, 0]
            advantages = np.array(load(framework)["batches"][entry["batch"]]["advantages"])
            assert {0.9, -0.6} <= set(advantages.tolist())
            loss = UPDATE_PRESETS[entry["preset"]].update.loss
            if loss != "reinforce" or entry["correction"]:            # REINFORCE alone reads no ratio
                assert len(np.unique(np.round(gradient / advantages, 9))) >= 3, update_id(entry)
            if loss == "ppo":
                assert (gradient == 0).any() and (gradient != 0).any(), update_id(entry)
