"""Version switches against the brute force: every version pattern and every sequence summed (tests/dense_hidden.py)."""

import numpy as np
import pytest
from dense_hidden import dense_version_samples, moments
from tiers import fast_then_slow

from toylab import make_toy, resolve_params
from toylab.analysis.versions import (
    MODES,
    anchor_tables,
    dense_moments,
    first_update,
    first_updates,
    version_tables,
    versions_problem,
    versions_view,
)
from toylab.catalogue.updates import Update
from toylab.engine.hidden import correction_marginals_each
from toylab.engine.versions import Versions, loglinear_alpha, patterns, stamped_lags, token_lags

TOYS = {                       # (T, V, mismatch, seed, sampler keywords)
    "plain": (4, 2, 0.4, 1, {}),
    "top_p": (3, 3, 0.5, 2, {"top_p": 0.85, "scored": "temperature", "temperature": 0.8}),
    "raw": (3, 3, 0.2, 5, {"logged": "raw", "temperature": 1.2, "precision": "bf16"}),
}
ESTIMATORS = ("naive", "tok_tis", "seq_is", "seq_tis", "geo_rs")
UPDATES = {"ppo": Update(), "cispo": Update(loss="cispo"), "dppo": Update(loss="dppo_kl"),
           "dual": Update(params={"dual_clip": 3.0, "eps_high": 0.28})}


def history_for(toy, lag):
    """θ_{k−v}: a walk from the toy's θ, each version a step of a fixed random direction (no training needed)."""
    rng = np.random.default_rng(11)
    steps = [toy.theta + 0.4 * rng.standard_normal(toy.theta.shape) * v for v in range(lag + 1)]
    return lambda v: steps[min(v, lag)]


def library(toy, history, versions, lag, anchor, update, b):
    tables = version_tables(toy, history, versions, lag)
    log_old = anchor_tables(toy, tables, anchor, history)
    first, second = first_update(toy, tables, log_old, update, [(id, resolve_params(id, {})) for id in ESTIMATORS], b)
    mean, second = dense_moments(first, second, np.exp(tables.log_pi), toy.sampler.score_scale)
    return mean.reshape(len(ESTIMATORS), -1), second - np.sum(mean**2, axis=(-2, -1))


CASES = [(name, switch, anchor, stamp, masked, loss)
         for name in TOYS for switch in ("fixed", "drawn") for anchor in ("recompute", "rollout", "bypass", "loglinear")
         for stamp, masked in MODES for loss in UPDATES]


@pytest.mark.parametrize("name, switch, anchor, stamp, masked, loss", fast_then_slow(CASES, [
    ("plain", "drawn", "rollout", "head", False, "ppo"), ("plain", "fixed", "loglinear", "tail", False, "cispo"),
    ("top_p", "drawn", "loglinear", "token", True, "dual"), ("raw", "fixed", "recompute", "token", True, "dppo"),
    ("raw", "drawn", "bypass", "tail", False, "ppo")]))
def test_each_mode_s_first_update_equals_the_brute_force_over_every_pattern(name, switch, anchor, stamp, masked,
                                                                           loss):
    T, V, mismatch, seed, sampler = TOYS[name]
    toy = make_toy(T, V, mismatch, seed, **sampler)
    lag = 3 if switch == "drawn" else 2
    history = history_for(toy, lag)
    versions = Versions(switch=switch, at=1 if T == 3 else 2, stamp=stamp, mask_stale=masked)
    b = 0.3
    mean, var = library(toy, history, versions, lag, anchor, UPDATES[loss], b)
    for index, estimator in enumerate(ESTIMATORS):
        expected_mean, expected_var = moments(dense_version_samples(
            toy, history, switch, versions.at, lag, stamp, masked, anchor, UPDATES[loss], estimator, {}, b))
        scale = max(np.abs(expected_mean).max(), 1e-3)
        np.testing.assert_allclose(mean[index], expected_mean, rtol=0, atol=1e-12 * scale, err_msg=estimator)
        assert var[index] == pytest.approx(expected_var, rel=1e-11, abs=1e-14), estimator


def test_patterns_stamps_and_alpha():
    drawn = patterns(Versions(switch="drawn"), 4, 2)
    assert [(p.head, p.at) for p in drawn] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert sum(p.probability for p in drawn) == pytest.approx(1.0)
    assert patterns(Versions(switch="fixed", at=2), 4, 0)[0].head == 0          # nothing older: no switch
    pattern = drawn[4]                                                           # head 2, switch at 2
    assert token_lags(pattern, 4).tolist() == [2, 2, 1, 1]
    assert stamped_lags(pattern, 4, "head").tolist() == [2] * 4
    assert stamped_lags(pattern, 4, "tail").tolist() == [1] * 4
    np.testing.assert_allclose(loglinear_alpha(np.array([0, 1, 2, 4])), [0.0, 0.0, 0.5, 0.75])


def test_bad_versions_are_refused():
    for bad, match in (({"switch": "twice"}, "switch"), ({"stamp": "middle"}, "stamp"), ({"at": 0}, "position"),
                       ({"at": 1.5}, "position"), ({"mask_stale": "yes"}, "mask_stale")):
        with pytest.raises(ValueError, match=match):
            Versions(**bad)
    with pytest.raises(ValueError, match="between 1 and T − 1"):
        patterns(Versions(switch="fixed", at=4), 4, 1)
    assert "keep_mask" in versions_problem(make_toy(3, 3, scored="keep_mask", top_p=0.9).sampler)
    with pytest.raises(ValueError, match="anchor"):
        toy = make_toy(3, 2)
        versions_view(toy, Versions(switch="fixed"), 1, "current", Update(), {"naive": {}}, history_for(toy, 1))


def test_only_anchors_that_read_versions_see_the_stamp():
    toy = make_toy(4, 2, 0.4, 1)
    history = history_for(toy, 2)
    view = {anchor: versions_view(toy, Versions(switch="drawn"), 2, anchor, Update(), {"tok_is": {}}, history)
            for anchor in ("recompute", "bypass", "rollout", "loglinear")}
    for anchor in ("recompute", "bypass"):
        assert all(row.from_truth == 0 for row in view[anchor].rows if not row.masked)
    for anchor in ("rollout", "loglinear"):
        assert any(row.from_truth > 1e-3 for row in view[anchor].rows if not row.masked and row.stamp != "token")


def test_the_modes_summed_in_one_pass_equal_each_alone_and_mixtures_that_draw_apart_are_refused():
    toy = make_toy(4, 3, 0.4, 1)
    history = history_for(toy, 2)
    estimators = [(id, resolve_params(id, {})) for id in ESTIMATORS]
    modes = []
    for stamp, masked in MODES:
        tables = version_tables(toy, history, Versions(switch="drawn", stamp=stamp, mask_stale=masked), 2)
        modes.append((tables, anchor_tables(toy, tables, "loglinear", history)))
    together = first_updates(modes, Update(), estimators, 0.3)
    for (tables, log_old), (first, second) in zip(modes, together, strict=True):
        alone = first_update(toy, tables, log_old, Update(), estimators, 0.3)
        np.testing.assert_array_equal(first, alone[0])
        np.testing.assert_array_equal(second, alone[1])
    other = version_tables(toy, history_for(toy, 3), Versions(switch="drawn"), 3)
    with pytest.raises(ValueError, match="draw alike"):
        correction_marginals_each([modes[0][0].mixture, other.mixture], estimators, np.zeros(len(estimators)))
