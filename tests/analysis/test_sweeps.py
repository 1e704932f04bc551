"""Sweeps: every point equals the estimator table at that setting; the identities hold along them."""

import numpy as np
import pytest
from dense import DenseToy
from tiers import fast_then_slow

from toylab import EXACT_IDS, exact_table, make_toy
from toylab.analysis.sweeps import (
    SWEPT_PARAMETER,
    best_thresholds,
    grid_points,
    rule_of_thumb,
    sampler_sweep,
    sweep_grid,
    threshold_sweep,
)
from toylab.engine.sampler import DEFAULT_SAMPLER, Sampler
from toylab.state.settings import Settings

THRESHOLDED = tuple(SWEPT_PARAMETER)
SETTINGS = [Settings(estimators=THRESHOLDED + ("naive", "seq_is", "grpo")),
            Settings(T=5, V=3, mismatch=1.0, seed=7, estimators=THRESHOLDED, baseline="logged", N=8,
                     thresholds=(("tok_mis", "lo", 0.8), ("geo_rs", "lo", 0.7), ("seq_tis", "C", 3.5)))]


def _table_row(toy, estimator, params, baseline, N):
    return exact_table(toy, {estimator: params}, baseline, N)[0]


@pytest.mark.parametrize("settings", SETTINGS)
def test_threshold_sweep_equals_the_table_at_every_threshold(settings):
    toy = make_toy(*settings.toy_key)
    rows = threshold_sweep(toy, settings.selection(), settings.baseline, settings.N)
    assert {row["estimator"] for row in rows} == set(THRESHOLDED)
    for row in rows:
        params = settings.params(row["estimator"]) | {row["parameter"]: row["threshold"]}
        expected = _table_row(toy, row["estimator"], params, settings.baseline, settings.N)
        for key in ("rel_bias", "rel_std", "rel_rmse"):
            assert row[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-15), (row, key)
    for estimator in THRESHOLDED:
        chosen = [row for row in rows if row["estimator"] == estimator and row["chosen"]]
        assert len(chosen) == 1
        assert chosen[0]["threshold"] == settings.params(estimator)[SWEPT_PARAMETER[estimator]]
        assert 41 <= sum(row["estimator"] == estimator for row in rows) <= 42


def test_best_threshold_is_the_lowest_rmse_and_rmse_adds_up():
    settings = SETTINGS[0]
    rows = threshold_sweep(make_toy(*settings.toy_key), settings.selection(), "none", 64)
    for estimator, best in best_thresholds(rows).items():
        own = [row for row in rows if row["estimator"] == estimator]
        assert best["rel_rmse"] == min(row["rel_rmse"] for row in own)
    for row in rows:
        assert row["rel_rmse"] ** 2 == pytest.approx(row["rel_bias"] ** 2 + row["rel_std"] ** 2, rel=1e-12)


@pytest.mark.parametrize("toy_key", [(6, 4, 0.3, 0), (5, 3, 1.0, 7)])
def test_rule_of_thumb_is_sqrt_two_times_second_moment_of_W(toy_key):
    toy = make_toy(*toy_key)
    dense = DenseToy(toy)
    assert rule_of_thumb(toy) == pytest.approx(np.sqrt(2 * (dense.p_sampler @ dense.W**2)), rel=1e-12)


@pytest.mark.parametrize("baseline", fast_then_slow(["none", "logged", "true"], ["none"]))   # each ≈ 3 s alone
def test_at_zero_mismatch_every_correction_equals_naive(baseline):
    selection = {id: {} for id in EXACT_IDS} | {"trm": {"eps": 0.01}, "k3_rs": {"delta": 1e-4}}
    rows, _, _ = sampler_sweep(5, 3, 2, 0.3, DEFAULT_SAMPLER, "mismatch", selection, baseline, 16)
    at_zero = {row["estimator"]: row for row in rows if row["mismatch"] == 0.0}
    assert set(at_zero) == set(EXACT_IDS)
    for row in at_zero.values():
        for key in ("rel_bias", "rel_std", "rel_rmse"):
            assert row[key] == pytest.approx(at_zero["naive"][key], rel=1e-12, abs=1e-12), row
        assert row["rel_bias"] < 1e-12


def test_mismatch_sweep_equals_the_table_and_dense_divergences():
    settings = Settings(T=4, V=3, mismatch=0.73, seed=5, estimators=("naive", "tok_tis", "seq_mis", "seq_snis"),
                        baseline="true", N=32)
    rows, divergences, left_out = sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch,
                                                settings.sampler, "mismatch", settings.selection(), settings.baseline,
                                                settings.N)
    assert left_out == [] and all(row["unreachable_mass"] == 0 and row["rel_out_of_reach"] == 0 for row in divergences)
    mismatches = sorted({row["mismatch"] for row in divergences})
    assert mismatches == sorted(set(np.linspace(0, 2, 41)) | {0.73})
    assert {row["estimator"] for row in rows} == {"naive", "tok_tis", "seq_mis"}      # seq_snis is batch-coupled
    for row in rows[::7]:
        toy = make_toy(settings.T, settings.V, row["mismatch"], settings.seed)
        expected = _table_row(toy, row["estimator"], settings.params(row["estimator"]), "true", 32)
        assert row["rel_rmse"] == pytest.approx(expected["rel_rmse"], rel=1e-12)
        assert row["rel_bias"] == pytest.approx(expected["rel_bias"], rel=1e-12, abs=1e-15)
    for row in divergences[::5]:
        dense = DenseToy(make_toy(settings.T, settings.V, row["mismatch"], settings.seed))
        assert row["kl_mu_pi"] == pytest.approx(-dense.p_sampler @ np.log(dense.W), rel=1e-10, abs=1e-15)
        assert row["chi2_seq"] == pytest.approx(dense.p_sampler @ dense.W**2 - 1, rel=1e-9, abs=1e-13)


def test_the_trainer_stays_fixed_along_the_mismatch():
    low, high = make_toy(6, 4, 0.0, 3), make_toy(6, 4, 2.0, 3)
    np.testing.assert_array_equal(low.pi, high.pi)
    assert not np.allclose(low.mu, high.mu)


def test_large_toys_get_coarser_grids():
    assert [grid_points(M) for M in (4**6, 2**16, 2**16 + 1, 4**10, 4**11)] == [41, 41, 21, 21, 11]
    assert sweep_grid("mismatch", 4**11)[[0, -1]].tolist() == [0.0, 2.0] and len(sweep_grid("mismatch", 4**11)) == 11
    assert sweep_grid("temperature", 4**6)[[0, -1]].tolist() == [0.25, 4.0]
    top_p = sweep_grid("top_p", 4**6)
    assert top_p[-1] == 1.0 and 0 < top_p[0] < top_p[-2] < 1 and len(top_p) == 41
    assert sweep_grid("precision", 4**11) == ("none", "fp16", "bf16")      # no rounding, then ever coarser


@pytest.mark.parametrize("parameter, sampler", [("top_p", Sampler(top_k=3, precision="bf16")),
                                                ("temperature", Sampler(top_p=0.9)),
                                                ("precision", Sampler(top_p=0.9, precision="bf16"))])
def test_sampler_sweeps_equal_the_table_and_the_dense_sums(parameter, sampler):
    """Every point of a top-p, temperature or precision sweep is the table of the toy with that sampler; its divergences, π-mass
    out of reach and ∇J's part out of reach equal the dense sums over the sequences μ can draw."""
    settings = Settings(T=4, V=3, mismatch=0.6, seed=5, estimators=("naive", "tok_tis", "seq_is", "seq_mis"),
                        baseline="logged", N=16, **sampler.parameters())
    rows, divergences, left_out = sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch,
                                                settings.sampler, parameter, settings.selection(), settings.baseline,
                                                settings.N)
    assert left_out == []
    values = sorted({row[parameter] for row in divergences})
    assert values == sorted(set(sweep_grid(parameter, 3**4)) | {getattr(sampler, parameter)})
    for row in rows[::5]:
        toy = make_toy(*settings.toy_key, **{parameter: row[parameter]})
        expected = _table_row(toy, row["estimator"], settings.params(row["estimator"]), "logged", 16)
        assert row["rel_rmse"] == pytest.approx(expected["rel_rmse"], rel=1e-12)
        assert row["rel_bias"] == pytest.approx(expected["rel_bias"], rel=1e-12, abs=1e-15)
    seq_is = {row[parameter]: row["rel_bias"] for row in rows if row["estimator"] == "seq_is"}
    for row in divergences[::4]:
        dense = DenseToy(make_toy(*settings.toy_key, **{parameter: row[parameter]}))
        on_support = dense.on_support
        mu, W = on_support.p_sampler, on_support.W
        assert row["kl_mu_pi"] == pytest.approx(-mu @ np.log(W), rel=1e-10, abs=1e-15)
        assert row["chi2_seq"] == pytest.approx((mu @ W**2) / (mu @ W) ** 2 - 1, rel=1e-9, abs=1e-13)
        assert row["unreachable_mass"] == pytest.approx(dense.unreachable_mass(), rel=1e-10, abs=1e-15)
        out_of_reach = np.linalg.norm(dense.true_grad - dense.reachable_gradient("logged")) / np.linalg.norm(dense.true_grad)
        assert row["rel_out_of_reach"] == pytest.approx(out_of_reach, rel=1e-9, abs=1e-13)
        assert seq_is[row[parameter]] == pytest.approx(row["rel_out_of_reach"], rel=1e-9, abs=1e-12)   # seq_is: all out of reach


def test_a_point_beyond_float64_is_left_out_and_named():
    """At T = 4, V = 4, mismatch 2, seed 3558 (a b of about 100 in Student-t(3)'s tail), temperature 0.25 is refused:
    W could reach e^803. The sweep leaves it out and says so."""
    selection = {"naive": {}}
    _, divergences, left_out = sampler_sweep(4, 4, 3558, 2.0, DEFAULT_SAMPLER, "temperature", selection, "none", 64)
    assert left_out and min(left_out) == 0.25 and 0.25 not in {row["temperature"] for row in divergences}
