"""The families the other frameworks need (issue 19), with thresholds that bite, against the dense brute force
(tests/dense.py) to 1e-10; the factorising ones against the count recursion; the additive penalty through every
path that sums an estimate (exact pass, training, Monte Carlo, stratified Monte Carlo)."""

import numpy as np
import pytest
from dense import DenseToy, assert_exact_equals_dense, bernoulli_kl, statistic_values

from toylab import exact_moments, make_toy, resolve_params
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens
from toylab.analysis.stratified import stratified_moments
from toylab.engine.moments import baseline_value
from toylab.engine.recursion import exact_by_recursion
from toylab.engine.split_grid import split_grid
from toylab.training.exact import Population, enumerated_means, exact_means
from toylab.training.toy_rows import ToyRows

TOYS = [(5, 3, 1.0, 7), (4, 4, 0.4, 3)]
BASELINES = ["none", "logged", "true"]
Z = 5.0


@pytest.fixture(scope="module", params=TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def toy_pair(request):
    toy = make_toy(*request.param)
    return toy, DenseToy(toy)


def cut(dense, values, tail, share, low=-np.inf, high=np.inf):
    """A threshold strictly between two distinct values of ``values`` (per sequence, or per token), or beyond them
    all, within [low, high], whose μ-share of values beyond it (``tail`` "below" or "above") is closest to
    ``share``: no rounding decides a comparison."""
    values = np.asarray(values)
    weights = np.broadcast_to(dense.p_sampler.reshape(-1, *[1] * (values.ndim - 1)), values.shape)
    weights = weights / weights.sum()
    distinct = np.unique(values)
    ends = [distinct[0] / 2 if distinct[0] > 0 else distinct[0] - 1, distinct[-1] * 2 if distinct[-1] > 0 else 1]
    middles = np.concatenate([(distinct[:-1] + distinct[1:]) / 2, ends])
    middles = middles[(middles >= low) & (middles <= high)]
    beyond = [weights[values < m].sum() if tail == "below" else weights[values > m].sum() for m in middles]
    return float(middles[np.argmin(np.abs(np.array(beyond) - share))])


def biting_params(dense):
    """{case: (estimator, params)} with every threshold cut inside its statistic's range on this toy."""
    rho, pi, mu = dense.rho, dense.pi_tokens, dense.mu_tokens
    geo = np.exp(np.log(rho).mean(axis=1))
    moved = pi - mu
    kl = bernoulli_kl(mu, pi)
    gap = np.abs(rho - 1).mean(axis=1)
    k3_reverse = statistic_values("k3_reverse", np.log(rho)).mean(axis=1)
    return {
        "geo_tis": ("geo_tis", {"C": cut(dense, geo, "above", 0.2, low=1)}),
        "geo_clip": ("geo_clip", {"C_min": cut(dense, geo, "below", 0.2, high=1),
                                  "C_max": cut(dense, geo, "above", 0.2, low=1)}),
        "outlier_rs": ("outlier_rs", {"lo": cut(dense, rho.min(axis=1), "below", 0.2, high=1),
                                      "hi": cut(dense, rho.max(axis=1), "above", 0.2, low=1)}),
        "veto": ("veto", {"C_v": cut(dense, rho.min(axis=1), "below", 0.6, high=1)}),
        "dppo_tv": ("dppo", {"delta_low": cut(dense, -moved, "above", 0.2, low=0),
                             "delta_high": cut(dense, moved, "above", 0.2, low=0)}),
        "dppo_kl": ("dppo", {"delta_low": cut(dense, kl, "above", 0.5, low=0),
                             "delta_high": cut(dense, kl, "above", 0.3, low=0), "dppo_type": "binary_kl"}),
        "kpop": ("kpop", {"delta": cut(dense, statistic_values("kpop", np.log(rho), (pi, mu)), "above", 0.3,
                                       low=1e-6)}),
        "tv_mask": ("tv_mask", {"lo": cut(dense, gap, "below", 0.2, high=1), "hi": cut(dense, gap, "above", 0.2),
                                "weight": "tok_tis"}),
        "k2_penalty": ("k2_penalty", {"tau": 0.05}),
        "k2_penalty_dppo": ("k2_penalty", {"tau": 0.2, "weight": "dppo"}),
        "topr": ("topr", {"positive_weight": 0.7, "negative_weight": 1.3}),
        "vespo": ("vespo", {}),
        "vespo_mask": ("vespo", {"mode": "token_mask", "clip_min": cut(dense, rho, "below", 0.03, high=1),
                                 "clip_max": cut(dense, rho, "above", 0.03, low=1), "k_pos": 1.5, "lambda_pos": 0.5,
                                 "k_neg": 4.0, "lambda_neg": 5.0}),
        "gspo_clip": ("gspo_clip", {"eps_low": 1 - cut(dense, geo, "below", 0.3, high=1),
                                    "eps_high": cut(dense, geo, "above", 0.3, low=1) - 1,
                                    "C_dual": cut(dense, geo, "above", 0.1, low=1.01)}),
        "rs_k3_reverse": ("rs", {"statistic": "k3_reverse", "scope": "seq_mean", "lo": -1000,
                                 "hi": cut(dense, k3_reverse, "above", 0.3)}),
        "rs_mult_error": ("rs", {"statistic": "mult_error", "scope": "seq_mean", "lo": -1000,
                                 "hi": cut(dense, np.exp(np.abs(np.log(rho))).mean(axis=1), "above", 0.3)}),
        "rs_prob_diff": ("rs", {"statistic": "prob_diff", "scope": "token", "lo": cut(dense, moved, "below", 0.2),
                                "hi": cut(dense, moved, "above", 0.2), "weight": "geo_tis"}),
    }


CASES = ["geo_tis", "geo_clip", "outlier_rs", "veto", "dppo_tv", "dppo_kl", "kpop", "tv_mask", "k2_penalty",
         "k2_penalty_dppo", "topr", "vespo", "vespo_mask", "gspo_clip", "rs_k3_reverse", "rs_mult_error", "rs_prob_diff"]
MASKS = {"geo_tis", "geo_clip", "outlier_rs", "veto", "dppo_tv", "dppo_kl", "kpop", "tv_mask", "rs_k3_reverse",
         "rs_mult_error", "rs_prob_diff", "topr", "gspo_clip"}


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("case", CASES)
def test_every_new_family_equals_dense_with_thresholds_that_bite(toy_pair, case, baseline):
    toy, dense = toy_pair
    estimator, params = biting_params(dense)[case]
    moments = assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator, params), baseline)
    if case in MASKS and not (case == "tv_mask" and baseline == "none"):
        assert 0 < moments.tokens_affected < 1, case
    if case in ("geo_tis", "geo_clip", "outlier_rs", "veto", "rs_k3_reverse", "rs_mult_error"):
        assert 0 < moments.sequences_affected < 1, case


@pytest.mark.parametrize("case", ["k2_penalty", "k2_penalty_dppo", "vespo", "vespo_mask", "topr"])
def test_the_shaped_losses_change_the_estimate(toy_pair, case):
    """Not a test that cannot fail: each differs from its unshaped weight by far more than the tolerance."""
    toy, dense = toy_pair
    estimator, params = biting_params(dense)[case]
    shaped = exact_moments(toy, estimator, params, "logged")
    plain = exact_moments(toy, params.get("weight", "naive"), None, "logged")
    assert np.abs(shaped.mean - plain.mean).max() > 1e-4 * np.abs(plain.mean).max()


def test_affected_fractions_of_the_new_families_equal_dense_counts(toy_pair):
    toy, dense = toy_pair
    cases = biting_params(dense)
    mu, rho, pi_t, mu_t = dense.p_sampler, dense.rho, dense.pi_tokens, dense.mu_tokens
    advantage = (dense.R - dense.baseline("logged"))[:, None]
    every = np.ones_like(rho, bool)
    geo = np.exp(np.log(rho).mean(axis=1, keepdims=True))
    p = {case: params for case, (_, params) in cases.items()}
    gap = np.abs(rho - 1).mean(axis=1, keepdims=True)
    out = (gap < p["tv_mask"]["lo"]) | (gap > p["tv_mask"]["hi"])
    expected = {
        "geo_tis": (geo > p["geo_tis"]["C"]) & every,
        "outlier_rs": ~((rho >= p["outlier_rs"]["lo"]) & (rho <= p["outlier_rs"]["hi"])).all(axis=1, keepdims=True)
        & every,
        "veto": ~(rho >= p["veto"]["C_v"]).all(axis=1, keepdims=True) & every,
        "dppo_tv": np.where(advantage > 0, pi_t - mu_t > p["dppo_tv"]["delta_high"],
                            mu_t - pi_t > p["dppo_tv"]["delta_low"]),
        "kpop": statistic_values("kpop", np.log(rho), (pi_t, mu_t)) > p["kpop"]["delta"],
        "tv_mask": (out & (np.sign(np.log(rho)) * advantage > 0)) | (rho > 2),          # its weight: tok_tis, C = 2
        "topr": (advantage <= 0) & (rho > 1),
    }
    for case, hit in expected.items():
        estimator, params = cases[case]
        moments = exact_moments(toy, estimator, params, "logged")
        assert moments.tokens_affected == pytest.approx(mu @ hit.mean(axis=1), abs=1e-12), case
        assert moments.sequences_affected == pytest.approx(mu @ hit.any(axis=1), abs=1e-12), case


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("case", ["outlier_rs", "veto", "kpop"])
def test_the_factorising_families_by_recursion_equal_enumeration(toy_pair, case, baseline):
    toy, dense = toy_pair
    estimator, params = biting_params(dense)[case]
    expected = exact_moments(toy, estimator, params, baseline)
    found = exact_by_recursion(toy, estimator, params, baseline)
    np.testing.assert_allclose(found.mean, expected.mean, rtol=1e-10, atol=1e-14)
    assert found.var == pytest.approx(expected.var, rel=1e-10, abs=1e-14)
    assert (found.tokens_affected, found.sequences_affected) == \
        pytest.approx((expected.tokens_affected, expected.sequences_affected), abs=1e-12)


def test_veto_is_outlier_rs_without_an_upper_bound(toy_pair):
    toy, dense = toy_pair
    C_v = biting_params(dense)["veto"][1]["C_v"]
    veto = exact_moments(toy, "veto", {"C_v": C_v}, "logged")
    outlier = exact_moments(toy, "outlier_rs", {"lo": C_v, "hi": 1e6}, "logged")
    np.testing.assert_array_equal(veto.mean, outlier.mean)


def test_training_means_of_the_new_families_equal_the_moments_engine(toy_pair):
    """The training loop's enumeration (token classes, additive term) against exact_moments, at biting thresholds."""
    toy, dense = toy_pair
    estimators = [(estimator, resolve_params(estimator, params)) for estimator, params in biting_params(dense).values()]
    theta = np.repeat(toy.theta[None], len(estimators), axis=0)
    rows = ToyRows(theta, toy.b, toy.mismatch, split_grid(toy.T, toy.V))
    b = Population.of(rows).baseline("logged")
    for means in (exact_means(rows, estimators, b), enumerated_means(rows, estimators, b)):
        for (estimator, params), mean in zip(estimators, means, strict=True):
            reference = exact_moments(toy, estimator, params, "logged").mean
            np.testing.assert_allclose(mean, reference, rtol=0, atol=1e-11 * np.abs(reference).max(), err_msg=estimator)


def test_the_penalty_alone_adds_its_closed_form_mean():
    """k2_penalty with w = naive: E[ĝ] − E[ĝ_naive] = Σ_v μ_t[v]·d[t, v]·(onehot(v) − π_t), d = −2τ·log ρ."""
    toy = make_toy(5, 3, 1.0, 7)
    tau = 0.3
    difference = exact_moments(toy, "k2_penalty", {"tau": tau}, "logged").mean - exact_moments(toy, "naive",
                                                                                                baseline="logged").mean
    d = -2 * tau * toy.log_rho
    expected = toy.mu * d - toy.pi * (toy.mu * d).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(difference, expected, rtol=0, atol=1e-14)


@pytest.mark.parametrize("estimator, params", [("k2_penalty", {"tau": 0.2, "weight": "dppo"}), ("topr", {}),
                                               ("vespo", {}), ("dppo", {"delta_low": 0.1, "delta_high": 0.05})])
def test_monte_carlo_batch_means_are_unbiased_for_the_exact_mean(estimator, params):
    toy = make_toy(T=4, V=3, mismatch=0.8, seed=1)
    batches = Batches(toy, draw_tokens(np.random.default_rng(5), toy.mu, (4000, 16)), np.array([16]), toy.J)
    estimates = batch_estimates(batches, estimator, params)[:, 0]
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    exact = exact_moments(toy, estimator, params, "true").mean
    assert np.all(np.abs(estimates.mean(axis=0) - exact) < Z * standard_error + 1e-15)


@pytest.mark.parametrize("estimator, params", [("k2_penalty", {"tau": 0.2, "weight": "dppo"}),
                                               ("k2_penalty", {"tau": 0.5}), ("vespo", {})])
def test_stratified_monte_carlo_with_an_additive_term_agrees_with_exact(estimator, params):
    toy = make_toy(6, 4, 1.0, 0)
    for baseline in ("none", "logged"):
        expected = exact_moments(toy, estimator, params, baseline)
        found = stratified_moments(toy, estimator, params, baseline_value(toy, baseline), toy.true_grad, 20_000,
                                   np.random.default_rng(3))
        assert np.linalg.norm(found.mean - expected.mean) < Z * found.bias_se + 1e-12
        assert abs(found.var - expected.var) < Z * found.var_se


def test_statistics_and_new_families_stay_free_of_nan_where_the_sampler_never_draws_a_token():
    """Issue 18's truncated samplers give μ_t(v) = 0 (log ρ = +∞) on tokens never drawn: every statistic is finite
    or +∞ there, and the exact pass of every new family stays finite on such a toy."""
    from types import SimpleNamespace

    from toylab.catalogue.statistics import STATISTICS

    log_pi = np.log(np.array([[0.5, 0.3, 0.2], [0.6, 0.4 - 1e-300, 1e-300]]))
    with np.errstate(divide="ignore"):
        log_mu = np.log(np.array([[0.7, 0.3, 0.0], [1.0, 0.0, 0.0]]))
    view = SimpleNamespace(log_pi=log_pi, log_mu=log_mu, log_rho=log_pi - log_mu)
    for name, statistic in STATISTICS.items():
        value = statistic(view)
        assert not np.any(np.isnan(value)), name
    toy = make_toy(4, 3, 0.6, 5)
    with np.errstate(divide="ignore"):
        toy.mu[:, 2] = 0.0
        toy.mu /= toy.mu.sum(axis=1, keepdims=True)
        toy.log_mu = np.log(toy.mu)
    toy.log_rho = toy.log_pi - toy.log_mu
    toy.rho = np.exp(toy.log_rho)
    for estimator in ("geo_tis", "geo_clip", "outlier_rs", "veto", "dppo", "kpop", "tv_mask", "k2_penalty", "topr",
                      "vespo"):
        moments = exact_moments(toy, estimator, None, "logged")
        assert np.all(np.isfinite(moments.mean)) and np.isfinite(moments.var), estimator


def test_the_additive_table_is_read_off_any_toy_even_where_the_sampler_never_draws():
    from toylab.engine.coefficients import additive_table

    toy = make_toy(4, 3, 0.6, 5)
    d = additive_table("k2_penalty", toy.log_pi, toy.log_mu, resolve_params("k2_penalty", {"tau": 0.3}))
    np.testing.assert_allclose(d, -0.6 * toy.log_rho, rtol=1e-15)
    with np.errstate(divide="ignore"):
        log_mu = np.where(np.arange(3) == 2, -np.inf, toy.log_mu)
    d = additive_table("k2_penalty", toy.log_pi, log_mu, resolve_params("k2_penalty", {"tau": 0.3}))
    np.testing.assert_allclose(d[:, :2], -0.6 * (toy.log_pi - log_mu)[:, :2], rtol=1e-15)
    assert np.all(np.isfinite(d))
