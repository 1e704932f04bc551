"""The toy reproduces the reference code's numbers (frozen here) and its dict interface."""

import itertools

import numpy as np
import pytest

import toylab
from toylab.engine.toy import make_toy

# Computed once from the reading groups' reference code, default toy (T=6, V=4, mismatch=0.3, seed=0).
REFERENCE_TRUE_GRAD = np.array([
    [0.02413829287405729, -0.00619282054394393, -0.01063510055713008, -0.00731037177298325],
    [0.01625084769661586, -0.00365947692937084, -0.00707808729321943, -0.00551328347402558],
    [0.02391670236586137, -0.00472324468612826, -0.00740384087619968, -0.01178961680353342],
    [0.01484696056492479, -0.00679395473258166, -0.00331033604544568, -0.00474266978689745],
    [0.01932631092106344, -0.00367890379032983, -0.00612369890175692, -0.00952370822897669],
    [0.02140560345991536, -0.01235456525051175, -0.00297982612009801, -0.00607121208930558]])
REFERENCE_P_SAMPLER_HEAD = [7.530641440766381e-06, 5.761552259006489e-05, 6.248726676324193e-06]
REFERENCE_J = 0.05542126876540503
REFERENCE_DRAWS_RNG123 = [2936, 319, 725, 603, 561, 3551, 3813, 799, 3558, 3759]
REFERENCE_NAIVE = {"bias": 0.030306948629754745, "var": 0.27958304412682095,
                   "rel_bias": 0.5193385538669256, "rel_rmse_64": 1.245985104808724}
REFERENCE_SEQ_IS_VAR = 0.5607417620368702
# T=5, V=3, mismatch=1.0, seed=7
REFERENCE_SMALL = {
    "theta0": [0.0008611073502378, 0.2091218762559289, -0.1918964987535523],
    "b0": [1.7612759496691865, -4.614952117563818, -0.561093146855757],
    "true_grad2": [0.0511997116588938, -0.0400846749020136, -0.01111503675688017],
    "mean_index": 39.728401556044716,
    "draws_rng0": [40, 16, 7, 4, 44, 71, 37, 43],
}


def test_default_toy_matches_reference():
    toy = toylab.make_toy()
    np.testing.assert_allclose(toy["true_grad"], REFERENCE_TRUE_GRAD, rtol=0, atol=1e-12)
    np.testing.assert_allclose(toy["p_sampler"][:3], REFERENCE_P_SAMPLER_HEAD, rtol=1e-12)
    assert toy["p_train"] @ toy["R"] == pytest.approx(REFERENCE_J, abs=1e-12)


def test_small_toy_matches_reference():
    toy = toylab.make_toy(T=5, V=3, mismatch=1.0, seed=7)
    np.testing.assert_allclose(toy["theta"][0], REFERENCE_SMALL["theta0"], atol=1e-12)
    np.testing.assert_allclose(toy["b"][0], REFERENCE_SMALL["b0"], atol=1e-12)
    np.testing.assert_allclose(toy["true_grad"][2], REFERENCE_SMALL["true_grad2"], atol=1e-12)
    assert toy["p_sampler"] @ np.arange(toy.M) == pytest.approx(REFERENCE_SMALL["mean_index"], abs=1e-10)
    draws = toylab.sample_from_sampler(toy, 8, np.random.default_rng(0))
    assert draws.tolist() == REFERENCE_SMALL["draws_rng0"]


def test_sampler_draws_match_reference():
    draws = toylab.sample_from_sampler(toylab.make_toy(), 10, np.random.default_rng(123))
    assert draws.tolist() == REFERENCE_DRAWS_RNG123


def test_estimator_moments_matches_reference():
    toy = toylab.make_toy()
    naive = toylab.estimator_moments(toy, toy["R"][:, None, None] * toy["score"])
    assert naive["bias"] == pytest.approx(REFERENCE_NAIVE["bias"], rel=1e-12)
    assert naive["var"] == pytest.approx(REFERENCE_NAIVE["var"], rel=1e-12)
    assert naive["rel_bias"] == pytest.approx(REFERENCE_NAIVE["rel_bias"], rel=1e-12)
    assert naive["rel_rmse"](64) == pytest.approx(REFERENCE_NAIVE["rel_rmse_64"], rel=1e-12)
    W = np.exp(toy["logp_train"].sum(1) - toy["logp_sampler"].sum(1))
    seq_is = toylab.estimator_moments(toy, (W * toy["R"])[:, None, None] * toy["score"])
    assert seq_is["var"] == pytest.approx(REFERENCE_SEQ_IS_VAR, rel=1e-12)
    assert seq_is["rel_bias"] < 1e-12


@pytest.mark.parametrize("T, V, mismatch, seed", [(6, 4, 0.3, 0), (3, 5, 2.0, 9), (1, 2, 0.0, 1)])
def test_dense_arrays_follow_their_definitions(T, V, mismatch, seed):
    toy = make_toy(T, V, mismatch, seed)
    Y = np.array(list(itertools.product(range(V), repeat=T)))
    assert np.array_equal(toy["Y"], Y)
    np.testing.assert_allclose(toy["logp_train"], toy.log_pi[np.arange(T), Y], atol=0)
    np.testing.assert_allclose(toy["p_sampler"], np.exp(toy.log_mu[np.arange(T), Y].sum(1)), rtol=1e-12)
    np.testing.assert_array_equal(toy["R"], ((Y == 0).mean(axis=1) >= 0.5).astype(float))
    np.testing.assert_allclose(toy["score"], np.eye(V)[Y] - toy.pi[None], atol=0)
    assert set(toy) == {"Y", "logp_train", "logp_sampler", "p_train", "p_sampler", "R", "score",
                        "true_grad", "theta", "b", "mismatch", "T", "V"}
    assert toy["p_sampler"].sum() == pytest.approx(1, abs=1e-12)


def test_dense_arrays_are_built_only_on_request():
    toy = make_toy(T=8, V=4)
    toylab.exact_table(toy)
    assert "Y" not in vars(toy)


@pytest.mark.parametrize("kwargs, message", [
    ({"T": 0}, "T must be an integer"), ({"T": 2.5}, "T must be an integer"),
    ({"V": 1}, "V must be an integer"), ({"mismatch": -0.1}, "mismatch must be"),
    ({"mismatch": float("nan")}, "mismatch must be"), ({"mismatch": "0.3"}, "mismatch must be"),
    ({"seed": 1.5}, "seed must be"), ({"T": 12, "V": 4}, "over the exact-size limit of 4,194,304"),
    ({"T": 5, "V": 4, "max_sequences": 100}, "fewer tokens or a smaller vocabulary"),
])
def test_bad_arguments_raise_value_error_naming_the_rule(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_toy(**kwargs)


def test_limit_can_be_raised():
    assert make_toy(T=12, V=2, max_sequences=2**12).M == 4096
