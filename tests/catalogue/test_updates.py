"""The update's per-token losses: ∂L/∂log π_θ against the oracle's case-by-case derivative (tests/dense.py) at ratios
near and far beyond each clip with both signs of A, against central differences of the objective away from the
kinks, the dual clip's tie, r = 1 for every loss, and the batch surrogate against its parts."""

import numpy as np
import pytest
from dense import dense_token_derivative

from toylab import coefficients
from toylab.catalogue.updates import LOSSES, Update, token_loss
from toylab.engine.surrogate import batch_surrogate

PARAMS = {"ppo": [{}, {"dual_clip": 3.0}, {"eps_low": 0.1, "eps_high": 0.28, "dual_clip": 1.5, "clamp": 2.0}],
          "reinforce": [{}], "cispo": [{}, {"eps_low": 1.0, "eps_high": 0.28, "clamp": 1.0}],
          "dppo_kl": [{}, {"delta_low": 0.05, "delta_high": 0.3, "tau": 0.5}], "ipo_kl": [{}, {"delta": 0.02, "tau": 2.0}]}
CASES = [(loss, params) for loss, settings in PARAMS.items() for params in settings]
LOG_RATIOS = np.concatenate([np.linspace(-4, 4, 161), np.log([0.5, 0.79, 0.81, 1.19, 1.21, 2.9, 3.1, 2.5])])


@pytest.mark.parametrize("loss, params", CASES, ids=[f"{loss}-{i}" for i, (loss, _) in enumerate(CASES)])
@pytest.mark.parametrize("advantage", [1.3, -0.7, 0.0])
def test_the_derivative_is_the_oracles_case_by_case_at_ratios_near_and_beyond_the_clips(loss, params, advantage):
    log_old = np.log(np.linspace(0.05, 0.9, LOG_RATIOS.size))
    log_pi = np.minimum(log_old + LOG_RATIOS, 0.0)                  # a probability at most 1
    resolved = Update(loss=loss, params=params).loss_params
    result = token_loss(loss, log_pi, log_old, np.zeros_like(log_pi), advantage, **params)
    derivative, held = dense_token_derivative(loss, log_pi, log_old, np.full(log_pi.shape, advantage), resolved)
    np.testing.assert_allclose(result.derivative, derivative, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(result.clipped | result.dual_clipped, held)
    assert not (result.clipped & result.dual_clipped).any()


SMOOTH = [(loss, params) for loss, params in CASES if loss != "cispo"]       # CISPO's clip(r) is detached: no slope


@pytest.mark.parametrize("loss, params", SMOOTH, ids=[f"{loss}-{i}" for i, (loss, _) in enumerate(SMOOTH)])
@pytest.mark.parametrize("advantage", [1.3, -0.7])
def test_the_derivative_is_the_objectives_slope_away_from_the_kinks(loss, params, advantage):
    """Central differences of L in log π_θ, log π_old fixed, where no clip or mask changes between the two points."""
    log_old = np.full(LOG_RATIOS.size, np.log(0.3))
    log_pi = np.minimum(log_old + LOG_RATIOS, -1e-3)
    h = 1e-6
    result = token_loss(loss, log_pi, log_old, 0.0, advantage, **params)
    up, down = (token_loss(loss, log_pi + d, log_old, 0.0, advantage, **params) for d in (h, -h))
    away = (up.clipped == down.clipped) & (up.dual_clipped == down.dual_clipped) & (result.clipped == up.clipped)
    if params.get("clamp") is not None:
        away &= np.abs(log_pi - log_old) < params["clamp"] - 1e-3
    numeric = (up.objective - down.objective) / (2 * h)
    assert away.sum() > 100
    np.testing.assert_allclose(result.derivative[away], numeric[away], rtol=1e-6, atol=1e-8)


def test_at_the_dual_clips_tie_torch_halves_the_gradient_and_at_r_1_every_loss_gives_A():
    c = float(np.exp(0.75))
    tie = token_loss("ppo", 0.75 - 1.0, -1.0, 0.0, -2.0, dual_clip=c)
    assert tie.derivative == pytest.approx(-2.0 * c / 2) and not tie.dual_clipped
    for loss, params in CASES:
        at_anchor = token_loss(loss, np.log([0.2, 0.7]), np.log([0.2, 0.7]), 0.0, np.array([1.5, -0.5]), **params)
        np.testing.assert_array_equal(at_anchor.derivative, [1.5, -0.5])
        assert not (at_anchor.clipped | at_anchor.dual_clipped).any()


def test_every_loss_has_an_entry_and_parameters_with_ranges():
    assert set(LOSSES) == {"ppo", "reinforce", "cispo", "dppo_kl", "ipo_kl"}
    for loss in LOSSES.values():
        for param in loss.params.values():
            assert param.low <= (param.default if param.default is not None else param.low) <= param.high


def test_the_batch_surrogate_is_the_correction_on_the_anchor_times_the_loss():
    rng = np.random.default_rng(2)
    log_pi, log_old, log_mu = (np.log(rng.uniform(0.05, 0.95, (4, 5))) for _ in range(3))
    mask = np.ones((4, 5))
    mask[2, 3:] = 0
    advantages = np.array([1.0, -0.5, 0.3, -1.2])
    update = Update("rollout", "ppo", {"dual_clip": 3.0})
    surrogate = batch_surrogate(update, "seq_tis", log_pi, log_old, log_mu, advantages, mask, C=1.5)
    g = coefficients("seq_tis", log_old, log_mu, mask, advantages, C=1.5)
    loss = token_loss("ppo", log_pi, log_old, log_mu, advantages[:, None], dual_clip=3.0)
    np.testing.assert_array_equal(surrogate.weight, g)
    np.testing.assert_array_equal(surrogate.objective, np.where(mask, g * loss.objective, 0.0))
    np.testing.assert_array_equal(surrogate.derivative, np.where(mask, g * loss.derivative, 0.0))
    np.testing.assert_array_equal(surrogate.clipped, loss.clipped & (mask > 0))
    plain = batch_surrogate(update, None, log_pi, log_old, log_mu, advantages, mask)
    np.testing.assert_array_equal(plain.weight, mask)
    with pytest.raises(ValueError, match="is a loss, not a correction weight"):
        batch_surrogate(update, "k2_penalty", log_pi, log_old, log_mu, advantages)
    with pytest.raises(ValueError, match="is a loss, not a correction weight"):      # a batch-coupled one's weight
        batch_surrogate(update, "grpo", log_pi, log_old, log_mu, advantages, weight="k2_penalty")
