"""Loss aggregations: the Monte Carlo fast path equals the per-batch formula, and each mode's error is what
its exact distribution says (fixed seeds, 5 standard errors).

Under token-mean with sequence-level rejection, a batch of N keeps K ~ Binomial(N, p) sequences, i.i.d. from μ
conditioned on being kept, and ĝ is their mean (0 when K = 0). So, exactly,
    E[ĝ] = (1 − (1 − p)^N)·m/p,    E‖ĝ − ∇J‖² = P(K = 0)·‖∇J‖² + Σ_{k≥1} P(K = k)·(‖m/p − ∇J‖² + v_p/k),
with m, E‖c·A·s‖² the estimator's exact mean and second moment (``exact_moments``) and
v_p = E‖c·A·s‖²/p − ‖m/p‖² the variance among kept sequences.
"""

import math

import numpy as np
import pytest
from dense import DenseToy

from toylab import exact_moments, gradient_weights, make_toy, resolve_params
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens, monte_carlo
from toylab.catalogue.aggregation import AGGREGATIONS

Z = 5.0
TOY = make_toy(T=4, V=3, mismatch=0.5, seed=1)


def batches(aggregation, replicates, n, sizes, seed, baseline=0.0, toy=TOY):
    tokens = draw_tokens(np.random.default_rng(seed), toy.mu, (replicates, n))
    return Batches(toy, tokens, np.array(sizes), baseline, aggregation)


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize("estimator, params", [("geo_rs", {"lo": 0.9, "hi": 1.1}),
                                               ("rs", {"statistic": "k3", "scope": "token", "hi": 0.05}),
                                               ("verl:decoupled_geo_rs_token_tis", {"rs_threshold": "0.8_1.2"}),
                                               ("grpo", {"weight": "tok_mis"})])
def test_monte_carlo_aggregation_is_the_per_batch_formula(mode, estimator, params):
    """ĝ_N from cumulative sums equals Σ_i Σ_t g_{i,t}·A_i·s_{i,t} with g from gradient_weights on the first N."""
    batch = batches(mode, 3, 12, (1, 5, 12), seed=4, baseline=TOY.logged_reward)
    estimates = batch_estimates(batch, estimator, params)
    weight = params.get("weight", estimator) if estimator == "grpo" else estimator
    c, kept = batch.coefficients_and_kept(weight, {} if estimator == "grpo" else params)
    onehot = np.eye(TOY.V)[batch.tokens]
    for r in range(3):
        for k, N in enumerate(batch.N):
            advantage = batch.advantage[r, :N]
            if estimator == "grpo":
                advantage = batch.reward[r, :N] - batch.reward[r, :N].mean()
            g = gradient_weights(c[r, :N], kept[r, :N], mode=mode)
            expected = np.einsum("it,i,itv->tv", g, advantage, onehot[r, :N] - TOY.pi)
            np.testing.assert_allclose(estimates[r, k], expected, rtol=1e-10, atol=1e-14)


def test_without_rejection_every_mode_is_seq_mean_token_sum():
    """Up to seq-mean-token-mean's factor T/(T + 1e-8), verl's guard in its per-sequence denominator."""
    results = {mode: batch_estimates(batches(mode, 50, 64, (1, 64), seed=2), "tok_tis") for mode in AGGREGATIONS}
    for mode in AGGREGATIONS:
        scale = TOY.T / (TOY.T + 1e-8) if mode == "seq-mean-token-mean" else 1.0
        np.testing.assert_allclose(results[mode], scale * results["seq-mean-token-sum"], rtol=1e-12, atol=1e-16)


def test_dapo_is_seq_mean_token_sum_on_the_fixed_length_toy_even_with_rejection():
    dapo = batch_estimates(batches("dapo", 50, 64, (1, 64), seed=2), "geo_rs", {"lo": 0.9, "hi": 1.1})
    plain = batch_estimates(batches("seq-mean-token-sum", 50, 64, (1, 64), seed=2), "geo_rs", {"lo": 0.9, "hi": 1.1})
    np.testing.assert_allclose(dapo, plain, rtol=1e-12, atol=1e-16)


def binomial(N, p):
    k = np.arange(N + 1)
    log_choose = np.array([math.lgamma(N + 1) - math.lgamma(i + 1) - math.lgamma(N - i + 1) for i in k])
    return np.exp(log_choose + k * np.log(p) + (N - k) * np.log1p(-p))


def token_mean_exact(estimator, params, baseline, N, scale=1.0):
    """(E[ĝ], E‖ĝ − ∇J‖²) of token-mean with sequence rejection (module docstring); ``scale`` multiplies ĝ."""
    moments = exact_moments(TOY, estimator, params, baseline)
    p = 1 - moments.sequences_affected
    grad = TOY.true_grad
    kept_mean = scale * moments.mean / p
    kept_variance = scale**2 * (moments.var + np.sum(moments.mean**2)) / p - np.sum(kept_mean**2)
    probability = binomial(N, p)
    squared_error = probability[0] * np.sum(grad**2) + np.sum(
        probability[1:] * (np.sum((kept_mean - grad) ** 2) + kept_variance / np.arange(1, N + 1)))
    return (1 - probability[0]) * kept_mean, squared_error


@pytest.mark.parametrize("mode, scale", [("token-mean", 1.0), ("seq-mean-token-mean", TOY.T / (TOY.T + 1e-8))])
@pytest.mark.parametrize("N", [4, 32])
def test_token_mean_with_sequence_rejection_is_the_mean_of_the_kept(mode, scale, N):
    batch = batches(mode, 4000, N, (N,), seed=8, baseline=TOY.logged_reward)
    estimates = batch_estimates(batch, "geo_rs", {"lo": 0.9, "hi": 1.1})[:, 0]
    expected, _ = token_mean_exact("geo_rs", {"lo": 0.9, "hi": 1.1}, "logged", N, scale)
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(estimates.mean(axis=0) - expected) < Z * standard_error + 1e-15)


def test_seq_mean_token_mean_with_token_rejection_reweights_each_sequence_by_its_kept_tokens():
    """Each surviving sequence gets T/(K + 1e-8): E[ĝ] = (1 − P(K = 0)^N)·E_μ[T/(K + ε)·Σ_t c·A·s | K > 0]."""
    params = {"statistic": "k3", "scope": "token", "hi": 0.05}
    N = 16
    batch = batches("seq-mean-token-mean", 4000, N, (N,), seed=9, baseline=TOY.logged_reward)
    estimates = batch_estimates(batch, "rs", params)[:, 0]
    dense = DenseToy(TOY)
    coefficient = dense.coefficients("rs", resolve_params("rs", params))
    kept = dense.rejection_kept("k3", "token", None, 0.05, np.log(dense.rho))
    K = kept.sum(axis=1)
    advantage = dense.R - dense.baseline("logged")
    weighted = (TOY.T / (K + 1e-8))[:, None] * coefficient * advantage[:, None]
    survive = dense.p_sampler * (K > 0)
    p = survive.sum()
    conditional = np.einsum("m,mt,mtv->tv", survive, weighted, dense.score) / p
    expected = (1 - (1 - p) ** N) * conditional
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert 0.05 < p < 0.95
    assert np.all(np.abs(estimates.mean(axis=0) - expected) < Z * standard_error + 1e-15)


def test_aggregation_changes_the_error_and_each_mode_matches_its_exact_error():
    """geo_rs (0.9 ≤ ρ_geo ≤ 1.1) keeps 21 % of the sequences here: dividing by the kept tokens (verl's token-mean)
    scales the kept gradient by 1/p and raises the relative RMSE at N = 100 from 0.79 to 1.13."""
    params = {"lo": 0.9, "hi": 1.1}
    N = 100
    errors = {mode: monte_carlo(TOY, {"geo_rs": params}, "logged", batch_sizes=(N,), replicates=3000, seed=12,
                                aggregation=mode)["geo_rs"][0] ** 2 for mode in ("seq-mean-token-sum", "token-mean")}
    moments = exact_moments(TOY, "geo_rs", params, "logged")
    exact = {"seq-mean-token-sum": moments.rel_rmse(N) ** 2,
             "token-mean": token_mean_exact("geo_rs", params, "logged", N)[1] / np.sum(TOY.true_grad**2)}
    for mode, squared in errors.items():
        assert abs(squared.mean() - exact[mode]) < Z * squared.std(ddof=1) / np.sqrt(len(squared)), mode
    difference = errors["token-mean"] - errors["seq-mean-token-sum"]               # paired: the same batches
    assert difference.mean() > Z * difference.std(ddof=1) / np.sqrt(len(difference))
    assert np.sqrt(exact["seq-mean-token-sum"]) == pytest.approx(0.786, abs=5e-3)
    assert np.sqrt(exact["token-mean"]) == pytest.approx(1.128, abs=5e-3)


def test_an_empty_batch_gives_zero():
    """No kept token (every sequence rejected): ĝ = 0 in every mode (verl would divide 0 by 0)."""
    rejecting_all = {"lo": 1.0, "hi": 1.0}
    for mode in AGGREGATIONS:
        estimates = batch_estimates(batches(mode, 5, 8, (1, 8), seed=1), "geo_rs", rejecting_all)
        assert np.all(estimates == 0)


def test_slime_divides_each_sequence_by_its_length_before_rejection():
    """seq-mean-original-length on a ragged batch, from slime's reducer written out: sequence b contributes
    Σ_t c·k·A·s / max(L_b, 1), the batch is divided by B (rejected and empty sequences count), times T."""
    c = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], bool)
    kept = mask & np.array([[True, False, True], [True, True, True], [False, False, False], [True, True, True]])
    g = gradient_weights(c, kept, mask, "seq-mean-original-length")
    lengths = np.array([3, 2, 1, 1])                                   # an empty sequence divides by max(0, 1)
    np.testing.assert_allclose(g, 3 * c * kept / lengths[:, None] / 4, rtol=1e-15)
    assert g[0, 1] == 0 and np.all(g[2] == 0)
    token_mean_of_kept = gradient_weights(c, kept, mask, "seq-mean-token-mean")
    assert not np.allclose(g[0], token_mean_of_kept[0])                # the kept count (2) is not the length (3)


def test_slime_on_the_fixed_length_toy_is_seq_mean_token_sum_of_the_kept_tokens():
    """Every toy sequence has T tokens, so slime's mode is 1/N on the kept tokens: with token rejection it differs
    from verl's seq-mean-token-mean (which rescales each sequence to its kept tokens) and, where the coefficient
    is 0 at the rejected tokens anyway, equals seq-mean-token-sum."""
    params = {"statistic": "k3", "scope": "token", "hi": 0.05}
    slime, plain, verl = (batch_estimates(batches(mode, 20, 16, (1, 16), seed=3), "rs", params)
                          for mode in ("seq-mean-original-length", "seq-mean-token-sum", "seq-mean-token-mean"))
    np.testing.assert_allclose(slime, plain, rtol=1e-12, atol=1e-16)
    assert np.abs(slime - verl).max() > 1e-3
