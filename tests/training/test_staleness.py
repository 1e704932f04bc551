"""The staleness view's runs: every curve against the dense oracle (the lag drawn up to η, the cap on w), a
population trained together against each toy alone, and what the view reads of them against a direct reading."""

import numpy as np
import pytest
from dense import dense_three_policies

from toylab import make_toy
from toylab.catalogue.updates import Update
from toylab.training.loop import REACHED, TrainingConfig
from toylab.training.staleness import (
    CAPPED,
    OBJECTIVES,
    SATURATED,
    VISIBLE,
    reading,
    staleness,
    staleness_population,
    tally,
)

LAGS = (0, 2, 5)


@pytest.mark.parametrize("draw, cap", [("fixed", None), ("uniform", 2.0)])
def test_every_curve_is_the_dense_oracles(draw, cap):
    """J at every step of every objective and lag (η for the uniform draw), and on_policy's, by brute force."""
    toy, config = make_toy(3, 3, 0.6, 2), TrainingConfig(7)
    result = staleness(toy, "logged", config, lags=LAGS, draw=draw, cap=cap)
    runs = dict(OBJECTIVES) | ({"capped": CAPPED} if cap else {})
    assert list(result.curves) == list(runs)
    for objective, (anchor, correction) in runs.items():
        params = {"upper": cap, "lower": None, "metric": "ratio"} if objective == "capped" else {}
        for lag, curve in zip(LAGS, result.curves[objective], strict=True):
            dense = dense_three_policies(toy, correction, params, "logged", Update(anchor), 7, 1.0, lag=lag,
                                         lag_draw=draw)
            np.testing.assert_allclose(curve, dense["J"], rtol=0, atol=1e-10, err_msg=f"{objective} at {lag}")
    dense = dense_three_policies(toy, "on_policy", {}, "logged", Update(), 7, 1.0)
    np.testing.assert_allclose(result.on_policy_curve, dense["J"], rtol=0, atol=1e-10)


def test_the_cap_drops_the_tokens_whose_w_exceeds_it():
    """A cap above every w changes nothing (the capped run is the decoupled one); a cap below some w does."""
    toy, config = make_toy(3, 3, 0.6, 2), TrainingConfig(6)
    loose = staleness(toy, "none", config, lags=(0, 3), cap=1000.0)
    np.testing.assert_allclose(loose.curves["capped"], loose.curves["decoupled"], rtol=1e-12)   # enumerated, factorised
    tight = staleness(toy, "none", config, lags=(0, 3), cap=1.05)
    assert not np.allclose(tight.curves["capped"], tight.curves["decoupled"])


def test_a_population_is_each_toy_alone():
    toys = [make_toy(4, 3, 0.5, seed) for seed in (1, 2, 3)]
    config = TrainingConfig(9)
    together = staleness_population(toys, "none", config, lags=LAGS, draw="uniform", cap=2.0)
    for toy, result in zip(toys, together, strict=True):
        alone = staleness(toy, "none", config, lags=LAGS, draw="uniform", cap=2.0)
        for objective, curves in alone.curves.items():
            np.testing.assert_allclose(result.curves[objective], curves, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(result.on_policy_curve, alone.on_policy_curve, rtol=1e-12, atol=1e-15)


def _first(J, target):
    for step, value in enumerate(J):
        if value >= target:
            return step
    return None


def test_what_the_view_reads_against_a_direct_reading():
    """Steps to the target, the lead over the first lag, ahead, behind, the order, saturation and the tally, each
    written out here from the curves."""
    toys = [make_toy(4, 3, 0.5, seed) for seed in range(6)]
    results = staleness_population(toys, "none", TrainingConfig(40), lags=LAGS)
    readings = [reading(result) for result in results]
    expected_ahead = {objective: 0 for objective in OBJECTIVES}
    for result, read in zip(results, readings, strict=True):
        target = REACHED * result.on_policy_curve[-1]
        for objective, curves in result.curves.items():
            steps = [_first(curve, target) for curve in curves]
            assert list(read.steps[objective]) == steps
            leads = [max(0.0, float(np.max(curve - curves[0]))) for curve in curves[1:]]
            np.testing.assert_allclose(read.lead[objective], leads, rtol=0, atol=1e-15)
            never = 10**9
            ahead = [(steps[i] if steps[i] is not None else never) < (steps[0] if steps[0] is not None else never)
                     or leads[i - 1] > VISIBLE for i in range(1, len(steps))]
            assert list(read.ahead(objective)) == ahead
            expected_ahead[objective] += any(ahead)
            last, first = (s if s is not None else never for s in (steps[-1], steps[0]))
            assert read.behind_at_largest(objective) == (last > first)
            assert result.saturated()[0][objective] == tuple(bool(J >= 1 - SATURATED) for J in curves[:, -1])
        for index in range(len(LAGS)):
            order = [read.steps[o][index] if read.steps[o][index] is not None else 10**9
                     for o in ("decoupled", "recompute", "bypass")]
            assert read.ordered(index) == (order[0] <= order[1] <= order[2])
    assert tally(readings).ahead == expected_ahead and tally(readings).toys == len(toys)
