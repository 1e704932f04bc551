"""What the Training tab's update equation says (``toylab.presentation.update_text``) holds over a population of
toys: 30 seeds at the default mismatch 0.3, and the neighbourhood ×0.5 and ×2 of it and T = 3, V = 3 (expected mode,
every step):

- recomputed anchor (or the rollout's at lag 0), one update a batch: r ≡ 1, so no clip binds and the PPO KL is 0;
- anchor μ (bypass) with the correction reading w = π_old/μ: w ≡ 1 (its spread 0), and every estimator whose weight
  at w = 1 is 1 trains exactly as naive does — only on_policy differs;
- the rollout's anchor at lag s: w = π_θ(k−s)/μ is the engine's mismatch alone (w ≡ 1 at mismatch 0), where the
  recomputed anchor's w = π_θk/μ carries the staleness.
"""

import numpy as np
import pytest
from tiers import fast_then_slow

from toylab.catalogue.updates import Update
from toylab.engine.toy import make_toy
from toylab.presentation.update_text import correction_moot, equation, label
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.training.loop import TrainingConfig, train

SEEDS = range(30)
TOYS = [(4, 3, 0.3), (4, 3, 0.15), (4, 3, 0.6), (3, 3, 0.3)]          # (T, V, mismatch)
STEPS = 8


def runs(update, lag=0, selection=None, toys=TOYS):
    config = TrainingConfig(steps=STEPS, lr=1.0, update=update, lag=lag)
    for T, V, mismatch in toys:
        for seed in SEEDS:
            yield (T, V, mismatch, seed), train(make_toy(T, V, mismatch, seed),
                                                selection or {id: {} for id in DEFAULT_ESTIMATORS}, "none", config)


@pytest.mark.parametrize("update, lag", [(Update("recompute"), 0), (Update("rollout"), 0),
                                         (Update("recompute", "cispo"), 2)], ids=["recompute", "rollout-lag-0",
                                                                                  "recompute-cispo-lag-2"])
def test_one_update_from_the_anchor_never_clips(update, lag):
    assert "r ≡ 1: no clip" in equation(update, lag, "fixed")
    for toy, trajectories in runs(update, lag, {"naive": {}, "tok_tis": {}}, toys=TOYS[:2]):
        for id, trajectory in trajectories.items():
            assert np.all(trajectory.clip_share == 0) and np.all(trajectory.ppo_kl == 0), (toy, id)


@pytest.mark.parametrize("T, V, mismatch", fast_then_slow(TOYS, TOYS[:1]))
def test_bypass_reading_w_trains_every_unit_weight_as_naive(T, V, mismatch):
    update = Update("bypass", weights_at="anchor")
    assert correction_moot(update) and "w = π_old/μ ≡ 1" in label(update, 0, "fixed")
    for toy, trajectories in runs(update, toys=[(T, V, mismatch)]):
        naive = trajectories["naive"].J
        for id, trajectory in trajectories.items():
            assert np.all(trajectory.w_std == 0), (toy, id)
            if id != "on_policy":
                np.testing.assert_allclose(trajectory.J, naive, rtol=1e-12, atol=1e-15, err_msg=f"{toy} {id}")
        assert np.abs(trajectories["on_policy"].J - naive).max() > 1e-6, toy          # it samples π: it differs


def test_bypass_reading_the_current_policy_is_no_longer_moot():
    update = Update("bypass", weights_at="current")
    assert not correction_moot(update) and "≡ 1" not in label(update, 0, "fixed")
    moved = [np.abs(trajectories["seq_tis"].J - trajectories["naive"].J).max()
             for _, trajectories in runs(update, selection={"naive": {}, "seq_tis": {}}, toys=TOYS[:1])]
    assert min(moved) > 1e-9                               # on every seed the correction changes the run


def test_the_rollout_anchor_leaves_the_staleness_to_r():
    lag = 2
    assert "w is the engine's mismatch alone" in equation(Update("rollout"), lag, "fixed")
    assert "carries the staleness" in equation(Update("recompute"), lag, "fixed")
    exact = [(4, 3, 0.0)]
    for toy, trajectories in runs(Update("rollout"), lag, {"naive": {}}, toys=exact):
        assert np.all(trajectories["naive"].w_std[1:] < 1e-12), toy
    stale = [trajectories["naive"].w_std[1:].max() for _, trajectories in runs(Update("recompute"), lag, {"naive": {}},
                                                                               toys=exact)]
    assert min(stale) > 1e-6                               # θ moved, μ lags: w is not 1
