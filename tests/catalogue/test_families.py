"""The estimator families, with thresholds that bite, against the dense brute force (tests/dense.py) to 1e-10."""

import numpy as np
import pytest
from dense import DenseToy, assert_exact_equals_dense, statistic_values

from toylab import exact_moments, make_toy, resolve_params
from toylab.catalogue.families import REJECTION_SCOPES, REJECTION_STATISTICS

TOYS = [(5, 3, 1.0, 7), (4, 4, 0.4, 3)]
BASELINES = ["none", "logged", "true"]


@pytest.fixture(scope="module", params=TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def toy_pair(request):
    toy = make_toy(*request.param)
    return toy, DenseToy(toy)


def assert_matches_dense(toy, dense, estimator, params, baseline):
    return assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator, params), baseline)


def biting_bounds(dense, statistic, scope):
    """lo, hi just outside the 20 % and 80 % μ-quantiles of the statistic (midway to the neighbouring distinct
    value, so no rounding decides a comparison): the rejection bites on both sides."""
    value = statistic_values(statistic, np.log(dense.rho), (dense.pi_tokens, dense.mu_tokens))
    value = {"token": value, "seq_sum": value.sum(axis=1, keepdims=True),
             "seq_mean": value.mean(axis=1, keepdims=True), "seq_max": value.max(axis=1, keepdims=True)}[scope]
    weights = np.broadcast_to(dense.p_sampler[:, None], value.shape).ravel()
    order = np.argsort(value.ravel())
    cumulative = np.cumsum(weights[order]) / weights.sum()
    lo, hi = (value.ravel()[order][np.searchsorted(cumulative, q)] for q in (0.2, 0.8))
    distinct = np.unique(value)
    below, above = distinct[distinct < lo - 1e-9], distinct[distinct > hi + 1e-9]
    return (float((lo + below[-1]) / 2) if below.size else float(lo) - 1.0,
            float((hi + above[0]) / 2) if above.size else float(hi) + 1.0)


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("scope", REJECTION_SCOPES)
@pytest.mark.parametrize("statistic", REJECTION_STATISTICS)
def test_rejection_by_every_statistic_at_every_scope(toy_pair, statistic, scope, baseline):
    toy, dense = toy_pair
    lo, hi = biting_bounds(dense, statistic, scope)
    moments = assert_matches_dense(toy, dense, "rs", {"statistic": statistic, "scope": scope, "lo": lo, "hi": hi},
                                   baseline)
    assert 0 < moments.tokens_affected < 1


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("estimator, params", [
    ("rs", {"statistic": "k1", "scope": "seq_mean", "lo": -0.3, "hi": 0.1, "weight": "tok_tis"}),
    ("rs", {"statistic": "k3", "scope": "token", "hi": 0.1, "weight": "geo_rs"}),     # k3_t reaches 0.153 here
    ("rs", {"statistic": "k2", "scope": "seq_max", "hi": 0.3, "weight": "verl:decoupled_k3_rs_token_tis"}),
    ("rs", {"statistic": "log_ratio", "scope": "token", "lo": -0.5, "hi": 0.5, "weight": "prefix_is"}),
    ("rs", {"statistic": "k1", "scope": "token", "lo": -0.5, "hi": 0.5, "weight": "ppo_clip"}),
    ("tok_clip", {"C_min": 0.8, "C_max": 1.3}),
    ("seq_clip", {"C_min": 0.7, "C_max": 1.5}),
    ("seq_band", {"C_min": 0.6, "C_max": 1.4}),
    ("ppo_clip", {"eps_low": 0.1, "eps_high": 0.28, "C_dual": 1.5}),
    ("opsm", {"delta": 0.02}),
    ("opsm", {"delta": 0.0, "weight": "seq_tis"}),
    ("gspo_clip", {"eps_low": 0.05, "eps_high": 0.08}),
])
def test_families_with_thresholds_that_bite(toy_pair, estimator, params, baseline):
    toy, dense = toy_pair
    moments = assert_matches_dense(toy, dense, estimator, params, baseline)
    if not (estimator == "opsm" and baseline == "none"):          # without a baseline no advantage is negative
        assert moments.sequences_affected > 1e-6                    # bites, not a share of rounding error


def test_affected_fractions_of_the_families_equal_dense_counts(toy_pair):
    toy, dense = toy_pair
    mu, rho, W = dense.p_sampler, dense.rho, dense.W[:, None] * np.ones_like(dense.rho)
    negative = (dense.R - dense.baseline("logged") < 0)[:, None]
    expected = {
        ("tok_clip", (("C_min", 0.8), ("C_max", 1.3))): (rho < 0.8) | (rho > 1.3),
        ("seq_band", (("C_min", 0.6), ("C_max", 1.4))): (W < 0.6) | (W > 1.4),
        ("ppo_clip", (("eps_low", 0.1), ("eps_high", 0.28), ("C_dual", 1.5))):
            np.where(negative, (rho < 0.9) | (rho > 1.5), rho > 1.28),
        ("opsm", (("delta", 0.02),)): negative & ((-np.log(rho)).mean(axis=1, keepdims=True) > 0.02)
                                       & np.ones_like(rho, bool),
    }
    for (estimator, params), hit in expected.items():
        moments = exact_moments(toy, estimator, dict(params), "logged")
        assert moments.tokens_affected == pytest.approx(mu @ hit.mean(axis=1), abs=1e-12), estimator
        assert moments.sequences_affected == pytest.approx(mu @ hit.any(axis=1), abs=1e-12), estimator


def test_a_rejection_that_keeps_everything_is_its_weight(toy_pair):
    toy, _ = toy_pair
    keep_all = exact_moments(toy, "rs", {"lo": -1000, "hi": 1000, "weight": "seq_tis"}, "logged")
    weight = exact_moments(toy, "seq_tis", None, "logged")
    np.testing.assert_allclose(keep_all.mean, weight.mean, rtol=1e-13, atol=1e-16)
    assert keep_all.var == pytest.approx(weight.var, rel=1e-13)


def test_the_ratio_reading_of_k1_is_the_documented_geo_rs(toy_pair):
    """rs with statistic log_ratio at seq_mean, lo = log C_low, hi = log C_high is geo_rs(C_low, C_high)."""
    toy, _ = toy_pair
    ratio = exact_moments(toy, "rs", {"statistic": "log_ratio", "scope": "seq_mean", "lo": np.log(0.9),
                                      "hi": np.log(1.2)}, "logged")
    geo = exact_moments(toy, "geo_rs", {"lo": 0.9, "hi": 1.2}, "logged")
    np.testing.assert_allclose(ratio.mean, geo.mean, rtol=1e-13, atol=1e-16)


def test_ppo_clip_treats_the_two_signs_of_the_advantage_differently(toy_pair):
    """Without a baseline every advantage is ≥ 0 and only ε_high clips; with one, ε_low and C_dual matter too."""
    toy, _ = toy_pair
    base = {"eps_low": 0.2, "eps_high": 0.2, "C_dual": 3.0}
    loose_negative = base | {"eps_low": 0.99, "C_dual": 100.0}
    assert exact_moments(toy, "ppo_clip", base, "none").var == \
        pytest.approx(exact_moments(toy, "ppo_clip", loose_negative, "none").var, rel=1e-13)
    assert exact_moments(toy, "ppo_clip", base, "logged").var != \
        pytest.approx(exact_moments(toy, "ppo_clip", loose_negative, "logged").var, rel=1e-6)
