"""Sweeps: every point equals the estimator table at that setting; the identities hold along them."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import EXACT_IDS, exact_table, make_toy
from toylab.analysis.sweeps import (
    SWEPT_PARAMETER,
    best_thresholds,
    grid_points,
    mismatch_grid,
    mismatch_sweep,
    rule_of_thumb,
    threshold_sweep,
)
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


@pytest.mark.parametrize("baseline", ["none", "logged", "true"])
def test_at_zero_mismatch_every_correction_equals_naive(baseline):
    selection = {id: {} for id in EXACT_IDS} | {"trm": {"eps": 0.01}, "k3_rs": {"delta": 1e-4}}
    rows, _ = mismatch_sweep(5, 3, 2, 0.3, selection, baseline, 16)
    at_zero = {row["estimator"]: row for row in rows if row["mismatch"] == 0.0}
    assert set(at_zero) == set(EXACT_IDS)
    for row in at_zero.values():
        for key in ("rel_bias", "rel_std", "rel_rmse"):
            assert row[key] == pytest.approx(at_zero["naive"][key], rel=1e-12, abs=1e-12), row
        assert row["rel_bias"] < 1e-12


def test_mismatch_sweep_equals_the_table_and_dense_divergences():
    settings = Settings(T=4, V=3, mismatch=0.73, seed=5, estimators=("naive", "tok_tis", "seq_mis", "seq_snis"),
                        baseline="true", N=32)
    rows, divergences = mismatch_sweep(settings.T, settings.V, settings.seed, settings.mismatch,
                                       settings.selection(), settings.baseline, settings.N)
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
    assert mismatch_grid(4**11)[[0, -1]].tolist() == [0.0, 2.0] and len(mismatch_grid(4**11)) == 11
