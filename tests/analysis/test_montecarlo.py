"""Monte Carlo agrees with the exact moments within statistically sound tolerances (fixed seeds)."""

import numpy as np
import pytest

from toylab import ESTIMATORS, exact_moments, make_toy
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens, monte_carlo, summarise

Z = 5.0   # tolerance in standard errors: a fixed-seed test that is wrong by chance about once in 10⁶


def test_drawn_tokens_follow_each_position_distribution():
    toy = make_toy(T=5, V=4, mismatch=1.0, seed=2)
    tokens = draw_tokens(np.random.default_rng(0), toy.mu, (200_000,))
    for t in range(toy.T):
        frequency = np.bincount(tokens[:, t], minlength=toy.V) / len(tokens)
        standard_error = np.sqrt(toy.mu[t] * (1 - toy.mu[t]) / len(tokens))
        assert np.all(np.abs(frequency - toy.mu[t]) < Z * standard_error + 1e-12)


@pytest.mark.parametrize("estimator", ["on_policy", "naive", "tok_tis", "prefix_is", "seq_tis", "geo_rs_tok_tis",
                                       "trm", "gspo_geo"])
def test_mean_squared_error_matches_bias_squared_plus_var_over_N(estimator):
    toy = make_toy(T=4, V=3, mismatch=0.5, seed=1)
    sizes = (8, 64)
    params = {"eps": 1.5} if estimator == "trm" else {}        # the default ε masks every sequence here
    errors = monte_carlo(toy, {estimator: params}, "logged", batch_sizes=sizes, replicates=3000, seed=11)[estimator]
    moments = exact_moments(toy, estimator, params, baseline="logged")
    assert moments.sequences_affected < 1
    for n, error in zip(sizes, errors, strict=True):
        squared = error**2
        standard_error = squared.std(ddof=1) / np.sqrt(len(squared))
        assert abs(squared.mean() - moments.rel_rmse(n) ** 2) < Z * standard_error, (estimator, n)


@pytest.mark.parametrize("estimator", ["tok_mis", "prefix_is", "seq_is", "k3_rs", "geo_rs"])
def test_batch_mean_estimate_is_unbiased_for_the_exact_mean(estimator):
    toy = make_toy(T=4, V=3, mismatch=0.5, seed=1)
    params = {"delta": 0.05} if estimator == "k3_rs" else {}
    batches = Batches(toy, draw_tokens(np.random.default_rng(5), toy.mu, (4000, 16)), np.array([16]), toy.J)
    estimates = batch_estimates(batches, estimator, params)[:, 0]          # (R, T, V)
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    exact = exact_moments(toy, estimator, params, "true").mean
    assert np.all(np.abs(estimates.mean(axis=0) - exact) < Z * standard_error + 1e-15)


def test_leave_one_out_is_unbiased_for_naive_with_the_logged_baseline():
    """E[(r_i − mean of the others)·s_i] = E_μ[r·s] − E_μ[r]·E_μ[s]: naive's mean with b = E_μ[r]."""
    toy = make_toy(T=4, V=3, mismatch=0.5, seed=1)
    batches = Batches(toy, draw_tokens(np.random.default_rng(6), toy.mu, (4000, 8)), np.array([8]), 0.0)
    exact = exact_moments(toy, "naive", baseline="logged").mean
    for estimator, factor in (("rloo", 1.0), ("grpo", 7 / 8)):
        estimates = batch_estimates(batches, estimator)[:, 0]
        standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
        assert np.all(np.abs(estimates.mean(axis=0) - factor * exact) < Z * standard_error + 1e-15), estimator


def test_self_normalised_is_is_consistent():
    """Its error shrinks like 1/sqrt(N), close to seq_is's: 16 → 4096 divides it by about 16."""
    toy = make_toy(T=4, V=3, mismatch=0.2, seed=1)
    errors = monte_carlo(toy, {"seq_snis": {}}, batch_sizes=(16, 4096), replicates=100, seed=3)["seq_snis"]
    rms_small, rms_large = np.sqrt(np.mean(errors**2, axis=1))
    assert rms_large < rms_small / 8
    assert rms_large < 1.5 * exact_moments(toy, "seq_is").rel_rmse(4096)


def test_every_estimator_runs_and_the_summary_has_a_row_per_batch_size():
    toy = make_toy()
    sizes = (1, 2, 4)
    errors = monte_carlo(toy, {id: {} for id in ESTIMATORS}, "none", batch_sizes=sizes, replicates=20, seed=0)
    rows = summarise(errors, sizes)
    assert {row["estimator"] for row in rows} == set(ESTIMATORS)
    assert not any(row["estimator"] == "rloo" and row["N"] == 1 for row in rows)     # undefined at N = 1
    for row in rows:
        assert row["q10"] <= row["median"] <= row["q90"] and row["rms"] > 0


def test_results_depend_only_on_the_seed():
    toy = make_toy()
    first = monte_carlo(toy, {"naive": {}}, batch_sizes=(1, 8), replicates=50, seed=9)["naive"]
    again = monte_carlo(toy, {"naive": {}}, batch_sizes=(8, 1), replicates=50, seed=9)["naive"]
    other = monte_carlo(toy, {"naive": {}}, batch_sizes=(1, 8), replicates=50, seed=10)["naive"]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_an_estimators_errors_do_not_depend_on_the_others_chosen():
    """The page keeps each estimator's errors on their own: sampled alone or with others (on-policy ones draw from π
    with the same uniforms), its errors are the same."""
    toy = make_toy(mismatch=0.7)
    sizes = (1, 10, 100)
    together = monte_carlo(toy, {"on_policy": {}, "naive": {}, "tok_tis": {"C": 1.5}, "grpo": {}}, "logged", sizes,
                           replicates=30, seed=0, aggregation="token-mean")
    for id, params in (("naive", {}), ("tok_tis", {"C": 1.5}), ("grpo", {}), ("on_policy", {})):
        alone = monte_carlo(toy, {id: params}, "logged", sizes, replicates=30, seed=0, aggregation="token-mean")[id]
        np.testing.assert_array_equal(alone, together[id])
