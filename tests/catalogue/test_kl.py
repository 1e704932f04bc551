"""The KL penalty's per-token term and derivative against the dense oracle's complex step, on each side of every
clamp, and its refusals."""

import itertools

import numpy as np
import pytest
from dense import dense_kl_derivative, dense_kl_term, dense_kl_values

from toylab.catalogue.kl import KL_ESTIMATORS, RATIOS, KLPenalty

RNG = np.random.default_rng(45)
BOUND_X, BOUND_V = 0.8, 0.5
STEP = 1e-4
# log ratios x = log π − log π_ref: near 0, far, 10⁻⁴ on each side of the clamp of x, and where k2's and k3's values
# are 10⁻⁴ on each side of the value clamp
SIDES = np.array([-STEP, STEP])
X = np.concatenate([RNG.normal(0, 0.3, 20), RNG.normal(0, 4, 20), [0.0], np.outer([-1, 1], BOUND_X + SIDES).ravel(),
                    np.outer([-1, 1], np.sqrt(2 * (BOUND_V + SIDES))).ravel(), [-0.857676673945899 - STEP, -0.857676673945899 + STEP]])
TOKENS = dict(log_pi=np.log(RNG.uniform(0.05, 0.95, X.size)))
TOKENS["log_ref"] = TOKENS["log_pi"] - X.ravel()
TOKENS["log_old"] = TOKENS["log_pi"] + RNG.normal(0, 0.5, X.size)
TOKENS["log_mu"] = TOKENS["log_pi"] + RNG.normal(0, 0.7, X.size)

CASES = [(estimator, ratio, clamps) for estimator, ratio, clamps in
         itertools.product([e for e in KL_ESTIMATORS if e != "full"], RATIOS,
                           [(None, None, False), (BOUND_X, None, False), (None, BOUND_V, False),
                            (BOUND_X, BOUND_V, True), (BOUND_X, BOUND_V, False)])
         if ratio == "none" or not estimator.endswith("+")]


@pytest.mark.parametrize("estimator, ratio, clamps", CASES)
def test_the_term_and_its_derivative_are_the_complex_step_of_the_frameworks_formula(estimator, ratio, clamps):
    penalty = KLPenalty(1.0, estimator, ratio=ratio, log_ratio_clamp=clamps[0], value_clamp=clamps[1],
                        ratio_held_by_clamp=clamps[2])
    arguments = (TOKENS["log_pi"], TOKENS["log_old"], TOKENS["log_mu"], TOKENS["log_ref"])
    term, derivative = penalty.loss_terms(*arguments)
    expected_term = dense_kl_term(penalty, TOKENS["log_pi"].astype(complex), *arguments[1:]).real
    np.testing.assert_allclose(term, expected_term, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(derivative, dense_kl_derivative(penalty, TOKENS["log_pi"].astype(complex),
                                                               *arguments[1:]), rtol=1e-12, atol=1e-14)


def test_a_clamp_holds_the_gradient_beyond_it_and_passes_it_at_its_bound():
    """torch.clamp: gradient 1 inside and at the bounds, 0 beyond them."""
    penalty = KLPenalty(1.0, "k2", log_ratio_clamp=1.0)
    x = np.array([-1.5, -1.0, 0.3, 1.0, 1.5])
    derivative = penalty.loss_terms(x, 0.0, 0.0, 0.0)[1]
    np.testing.assert_array_equal(derivative, [0.0, -1.0, 0.3, 1.0, 0.0])


def test_straight_through_is_the_base_value_with_k2s_gradient():
    penalty = KLPenalty(1.0, "k3+", log_ratio_clamp=20.0, value_clamp=10.0)
    x = np.array([-25.0, -2.0, 0.5, 30.0])
    term, derivative = penalty.loss_terms(x, 0.0, 0.0, 0.0)
    np.testing.assert_array_equal(derivative, x)
    assert term[0] == 10.0 and term[1] == pytest.approx(np.exp(2.0) - 3, rel=1e-14)


@pytest.mark.parametrize("estimator", [e for e in KL_ESTIMATORS if e != "full"])
def test_reward_values_are_the_oracles(estimator):
    penalty = KLPenalty(1.0, estimator, "reward", log_ratio_clamp=BOUND_X, value_clamp=BOUND_V)
    np.testing.assert_allclose(penalty.values(TOKENS["log_pi"], TOKENS["log_ref"]),
                               dense_kl_values(penalty, TOKENS["log_pi"], TOKENS["log_ref"]), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("arguments, message", [
    (dict(beta=-0.1), "β must be"), (dict(beta=float("inf")), "β must be"), (dict(beta="a lot"), "β must be"),
    (dict(estimator="k4"), "KL estimator must be one of"), (dict(placement="advantage"), "placement must be"),
    (dict(reward_sum="all"), "reward sum must be"), (dict(ratio="w"), "ratio on the KL term must be"),
    (dict(log_ratio_clamp=0), "log_ratio_clamp must be"), (dict(value_clamp=-1), "value_clamp must be"),
    (dict(placement="reward", ratio="anchor"), "takes no ratio of its own"),
    (dict(estimator="full", placement="reward"), "loss term only"),
    (dict(estimator="k3+", ratio="engine"), "takes no ratio"),
])
def test_bad_settings_are_refused_with_the_reason(arguments, message):
    with pytest.raises(ValueError, match=message):
        KLPenalty(**{"beta": 1.0, **arguments})
