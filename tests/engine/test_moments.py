"""The O(M) exact engine agrees with the dense brute force, and with the known identities."""

import numpy as np
import pytest
from dense import DenseToy, assert_exact_equals_dense

from toylab import ESTIMATORS, EXACT_IDS, exact_moments, exact_table, make_toy, resolve_params
from toylab.catalogue.presets import PRESETS
from toylab.engine import moments as moments_module

TOYS = [(6, 4, 0.3, 0), (5, 3, 1.0, 7), (4, 5, 0.05, 3), (3, 4, 2.0, 21)]
BASELINES = ["none", "logged", "true"]


@pytest.fixture(scope="module", params=TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def toy_pair(request):
    toy = make_toy(*request.param)
    return toy, DenseToy(toy)


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("estimator", EXACT_IDS)
def test_exact_moments_equal_dense_brute_force(toy_pair, estimator, baseline):
    toy, dense = toy_pair
    assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), baseline)


@pytest.mark.parametrize("chunk", [4, 16])
@pytest.mark.parametrize("estimator", EXACT_IDS)
def test_the_pass_in_chunks_equals_dense_brute_force(toy_pair, estimator, chunk, monkeypatch):
    """The exact pass goes through the sequences in prefix chunks (moments.CHUNK); with tiny chunks every
    prefix path (fixed tokens, carried products, token marks in the prefix) is taken, and still equals the
    dense oracle, every baseline."""
    monkeypatch.setattr(moments_module, "CHUNK", chunk)
    toy, dense = toy_pair
    for baseline in BASELINES:
        assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), baseline)
    moments = exact_moments(toy, estimator)
    monkeypatch.setattr(moments_module, "CHUNK", 2**16)
    whole = exact_moments(toy, estimator)
    assert (moments.tokens_affected, moments.sequences_affected) == pytest.approx(
        (whole.tokens_affected, whole.sequences_affected), abs=1e-12)
    assert moments.note == whole.note


BEYOND_THE_CLAMPS = [(3, 3, 20.0, 0), (4, 3, 12.0, 1), (3, 3, 14.0, 5)]


@pytest.fixture(scope="module", params=BEYOND_THE_CLAMPS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def clamped_toy_pair(request):
    """Toys with log ratios beyond every framework's clamp (up to 133) and sums beyond ±20."""
    toy = make_toy(*request.param)
    assert np.abs(toy.log_rho).max() > 30
    return toy, DenseToy(toy)


@pytest.mark.parametrize("estimator", [preset.id for preset in PRESETS if not preset.batch])
def test_presets_beyond_their_clamps_equal_dense_brute_force(clamped_toy_pair, estimator):
    """Each framework's clamp (of each token, or of the sum), its zero gradient beyond it and its means' ε, in the
    O(M) engine and in the dense oracle's ``through``."""
    toy, dense = clamped_toy_pair
    for baseline in ("none", "logged"):
        assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), baseline)


@pytest.mark.parametrize("estimator, params", [
    ("slime:mis_sequence", {"tis_mode": "mask"}), ("slime:mis_geometric", {"tis_mode": "mask", "rs_veto_threshold": 0.0,
                                                                           "tis_lower_bound": 0.9, "tis_upper_bound": 1.2}),
    ("miles:mis_sequence", {"tis_mode": "clip"}), ("areal:sequence_clamp", {"agg": "sum", "upper": 2.0}),
    ("areal:sequence_clamp", {"agg": "max", "upper": 2.5}),
    ("areal:sequence_mask", {"metric": "binary_kl", "agg": "max", "upper": 0.5}),
    ("areal:token_mask", {"metric": "binary_kl", "upper": 0.5}), ("skyrl:dppo_binary_kl", {"delta_low": 0.05}),
])
def test_preset_options_beyond_their_clamps_equal_dense_brute_force(clamped_toy_pair, estimator, params):
    """The options beside each preset's defaults: slime's mask and clip modes through the clamp of the sum, AReaL's
    agg sum and max for the clamp and its binary_kl (KPop) metric, SkyRL's guarded binary KL."""
    toy, dense = clamped_toy_pair
    assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator, params), "logged")


@pytest.mark.parametrize("estimator, params", [
    ("tok_tis", {"C": 1.1}), ("tok_mis", {"lo": 0.9, "hi": 1.2}), ("seq_tis", {"C": 1.05}),
    ("seq_mis", {"C": 1.5}), ("geo_rs", {"lo": 0.95, "hi": 1.03}), ("geo_rs_tok_tis", {"lo": 0.9, "hi": 1.1, "C": 1.2}),
    ("k3_rs", {"delta": 0.02}), ("trm", {"eps": 0.3}),
])
def test_thresholds_that_bite_still_match_dense(toy_pair, estimator, params):
    toy, dense = toy_pair
    mean, bias, var = dense.moments(estimator, resolve_params(estimator, params), "logged")
    moments = exact_moments(toy, estimator, params, "logged")
    assert moments.bias == pytest.approx(bias, rel=1e-10, abs=1e-12)
    assert moments.var == pytest.approx(var, rel=1e-10, abs=1e-14)


def test_affected_fractions_equal_dense_counts(toy_pair):
    toy, dense = toy_pair
    mu = dense.p_sampler
    rho, W, T = dense.rho, dense.W, dense.T
    geo = W ** (1 / T)
    expected = {
        "tok_tis": rho > 2,
        "tok_mis": (rho < 0.5) | (rho > 5),
        "seq_tis": np.repeat((W > 2)[:, None], T, axis=1),
        "geo_rs_tok_tis": ((geo < 0.5) | (geo > 2))[:, None] | (rho > 2),
        "trm": np.repeat((np.abs(np.log(rho)).max(axis=1) > 0.5)[:, None], T, axis=1),
    }
    for estimator, hit in expected.items():
        moments = exact_moments(toy, estimator)
        assert moments.tokens_affected == pytest.approx(mu @ hit.mean(axis=1), abs=1e-12), estimator
        assert moments.sequences_affected == pytest.approx(mu @ hit.any(axis=1), abs=1e-12), estimator
    assert exact_moments(toy, "seq_is").sequences_affected == 0


@pytest.mark.parametrize("baseline", BASELINES)
def test_unbiased_estimators_are_unbiased_and_the_rest_are_not(toy_pair, baseline):
    toy, _ = toy_pair
    for estimator in ("on_policy", "seq_is"):
        assert exact_moments(toy, estimator, baseline=baseline).rel_bias < 1e-12
    assert exact_moments(toy, "naive", baseline=baseline).rel_bias > 1e-3


def test_on_policy_mean_is_the_true_gradient(toy_pair):
    toy, _ = toy_pair
    np.testing.assert_allclose(exact_moments(toy, "on_policy").mean, toy.true_grad, atol=1e-15)


def test_at_zero_mismatch_every_correction_equals_naive():
    toy = make_toy(mismatch=0.0)
    naive = exact_moments(toy, "naive")
    for estimator in EXACT_IDS:
        moments = exact_moments(toy, estimator)
        assert moments.var == pytest.approx(naive.var, rel=1e-12), estimator
        assert moments.rel_bias < 1e-12


def test_table_rows_are_the_moments_at_N():
    toy = make_toy()
    rows = exact_table(toy, {"tok_tis": {"C": 3}, "seq_is": {}}, baseline="logged", N=16)
    moments = exact_moments(toy, "tok_tis", {"C": 3}, "logged")
    assert [row["estimator"] for row in rows] == ["tok_tis", "seq_is"]
    assert rows[0]["rel_rmse"] == pytest.approx(np.sqrt(moments.bias**2 + moments.var / 16) / moments.grad_norm)
    assert rows[0]["rel_std"] ** 2 + rows[0]["rel_bias"] ** 2 == pytest.approx(rows[0]["rel_rmse"] ** 2)
    cosine = np.sum(moments.mean * toy.true_grad) / np.linalg.norm(moments.mean) / np.linalg.norm(toy.true_grad)
    assert rows[0]["cosine"] == pytest.approx(cosine)
    assert rows[1]["unbiased"] and not rows[0]["unbiased"]


def test_every_registry_entry_is_complete():
    for estimator in ESTIMATORS.values():
        assert estimator.label and estimator.latex and estimator.source and estimator.colour.startswith("#")
        assert estimator.exact != (estimator.batch_estimate is not None)
    assert len({e.colour for e in ESTIMATORS.values()}) == len(ESTIMATORS)


@pytest.mark.parametrize("estimator, params, message", [
    ("nope", {}, "unknown estimator"), ("tok_tis", {"D": 1}, "no parameter 'D'"),
    ("tok_tis", {"C": "abc"}, "must be a number"), ("tok_tis", {"C": 0.5}, "outside"),
    ("tok_mis", {"lo": 0.9, "hi": 1.0 - 1e-9}, "outside"), ("geo_rs", {"lo": 1.0, "hi": 1.0}, None),
    ("grpo", {"weight": "seq_snis"}, "exact estimator"),
])
def test_parameters_are_checked(estimator, params, message):
    if message is None:
        assert resolve_params(estimator, params) == {"lo": 1.0, "hi": 1.0}
        return
    with pytest.raises(ValueError, match=message):
        resolve_params(estimator, params)
