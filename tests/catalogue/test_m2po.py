"""M2PO (batch-coupled) against a brute-force reading of AReaL's rule, on given batches and in Monte Carlo."""

import numpy as np
import pytest

from toylab import additive_terms, coefficients, gradient_weights, kept_tokens, make_toy
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens
from toylab.catalogue.aggregation import AGGREGATIONS
from toylab.catalogue.second_moment import second_moment_kept

TOY = make_toy(T=4, V=3, mismatch=0.8, seed=1)


def brute_force_kept(m2, threshold):
    """AReaL _get_m2po_loss_mask written out: try k = 0, 1, … masked tokens (largest m2 first, ties in order)
    until the mean of the rest is below the threshold; all but one when none is."""
    order = sorted(range(len(m2)), key=lambda i: -m2[i])
    masked = len(m2) - 1
    for k in range(len(m2)):
        rest = [m2[i] for i in order[k:]]
        if sum(rest) / len(rest) < threshold:
            masked = k
            break
    kept = np.ones(len(m2), bool)
    kept[order[:masked]] = False
    return kept


@pytest.mark.parametrize("threshold", [1e-3, 0.0537, 0.3117, 10.0])        # no mean of 2-decimal values
def test_the_kept_tokens_are_areal_s_rule(threshold):
    rng = np.random.default_rng(0)
    for _ in range(50):
        m2 = np.round(rng.exponential(0.1, rng.integers(1, 30)), 2)          # rounded: ties are common
        np.testing.assert_array_equal(second_moment_kept(m2, threshold), brute_force_kept(list(m2), threshold))
    assert second_moment_kept(np.array([5.0, 5.0, 5.0]), 1.0).sum() == 1    # none qualifies: one token kept
    assert second_moment_kept(np.zeros(0), 1.0).shape == (0,)


def test_coefficients_on_a_ragged_batch_are_the_weight_on_the_kept_tokens():
    rng = np.random.default_rng(1)
    trainer, sampler = rng.normal(-1.5, 0.6, (5, 7)), rng.normal(-1.5, 0.6, (5, 7))
    mask = np.ones((5, 7))
    mask[1, 4:] = 0
    mask[3] = 0
    threshold = 0.2
    kept = np.zeros((5, 7), bool)
    kept[mask == 1] = brute_force_kept(list(((trainer - sampler)[mask == 1]) ** 2), threshold)
    assert 0 < kept.sum() < mask.sum()
    c = coefficients("m2po", trainer, sampler, mask, m2_threshold=threshold)
    np.testing.assert_allclose(c, np.where(kept, np.exp(trainer - sampler), 0.0), rtol=1e-15)
    np.testing.assert_array_equal(kept_tokens("m2po", trainer, sampler, mask, m2_threshold=threshold), kept)
    np.testing.assert_array_equal(additive_terms("m2po", trainer, sampler, mask, m2_threshold=threshold), 0.0)


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_monte_carlo_is_the_per_batch_rule_for_every_batch_size(mode):
    """ĝ_N from the first N sequences of each replicate: M2PO's mask over their tokens, then the aggregation."""
    batch = Batches(TOY, draw_tokens(np.random.default_rng(4), TOY.mu, (3, 12)), np.array([1, 5, 12]),
                    TOY.logged_reward, mode)
    params = {"m2_threshold": 0.05, "weight": "tok_tis"}
    estimates = batch_estimates(batch, "m2po", params)
    c, kept = batch.coefficients_and_kept("tok_tis")
    m2 = batch.sequences.log_rho.reshape(3, 12, TOY.T) ** 2
    onehot = np.eye(TOY.V)[batch.tokens]
    masked_somewhere = False
    for r in range(3):
        for k, N in enumerate(batch.N):
            m2_kept = brute_force_kept(list(m2[r, :N].ravel()), params["m2_threshold"]).reshape(N, TOY.T)
            masked_somewhere |= not m2_kept.all()
            g = gradient_weights(c[r, :N] * m2_kept, kept[r, :N] & m2_kept, mode=mode)
            expected = np.einsum("it,i,itv->tv", g, batch.advantage[r, :N], onehot[r, :N] - TOY.pi)
            np.testing.assert_allclose(estimates[r, k], expected, rtol=1e-10, atol=1e-14)
    assert masked_somewhere
