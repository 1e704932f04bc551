"""The SGA one-step view: exact second-order pieces against the dense oracle and Monte Carlo of exact J."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy, resolve_params
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens, tokens_from_uniforms
from toylab.engine.counts import curvature
from toylab.engine.toy import Toy
from toylab.training import sga
from toylab.training.loop import TrainingConfig, train
from toylab.training.sga import monte_carlo_improvement, second_order

Z = 5.0


def concave_toy():
    """The default toy after 30 steps of on-policy ascent (J ≈ 0.82), where J curves down."""
    base = make_toy(mismatch=0.3)
    theta = train(base, {"on_policy": {}}, "none", TrainingConfig(steps=30))["on_policy"].theta[-1]
    return Toy(theta, base.b, base.mismatch, base.seed)


@pytest.mark.parametrize("estimator, params, baseline", [
    ("on_policy", {}, "none"), ("naive", {}, "logged"), ("tok_tis", {"C": 1.2}, "none"), ("prefix_is", {}, "true"),
    ("seq_mis", {}, "none"), ("geo_rs", {"lo": 0.8, "hi": 1.2}, "logged"),
])
def test_second_order_pieces_equal_the_dense_oracle(estimator, params, baseline):
    toy = make_toy(4, 3, 0.8, 5)
    dense = DenseToy(toy)
    resolved = resolve_params(estimator, params)
    coefficient = dense.coefficients(estimator, resolved) * (dense.R - dense.baseline(baseline))[:, None]
    estimates = (coefficient[:, :, None] * dense.score).reshape(toy.M, -1)          # ĝ(y), flattened
    probability = dense.p_train if estimator == "on_policy" else dense.p_sampler
    mean = probability @ estimates
    H = curvature(toy.pi).matrix()
    second = np.einsum("m,mi,ij,mj->", probability, estimates, H, estimates)
    result = second_order(toy, estimator, params, baseline, N=16)
    assert result.slope == pytest.approx(float(dense.true_grad.ravel() @ mean), rel=1e-10, abs=1e-15)
    assert result.mean_curvature == pytest.approx(mean @ H @ mean, rel=1e-9, abs=1e-15)
    assert result.noise_curvature == pytest.approx(second - mean @ H @ mean, rel=1e-9, abs=1e-15)
    assert result.improvement(0.5) == pytest.approx(0.5 * result.slope + 0.125 * result.curvature, rel=1e-12)


def test_second_order_term_equals_monte_carlo_of_the_remainder():
    """MC of J(θ + lr·ĝ_N) − J(θ) − lr·⟨∇J, ĝ_N⟩ (J by enumeration) equals (lr²/2)·E[ĝ_Nᵀ H ĝ_N] at a small lr."""
    toy, N, lr = concave_toy(), 8, 0.5
    for estimator in ("on_policy", "tok_tis", "seq_tis"):
        result = second_order(toy, estimator, {}, "none", N)
        sampling = toy.pi if estimator == "on_policy" else toy.mu
        tokens = draw_tokens(np.random.default_rng(7), sampling, (4000, N))
        steps = batch_estimates(Batches(toy, tokens, np.array([N]), 0.0), estimator)[:, 0]
        remainder = np.array([Toy(toy.theta + lr * g, toy.b, toy.mismatch, 0).J - toy.J - lr * np.sum(toy.true_grad * g)
                              for g in steps])
        se = remainder.std(ddof=1) / np.sqrt(len(remainder))
        expected = 0.5 * lr**2 * result.curvature
        assert abs(remainder.mean() - expected) < Z * se, (estimator, remainder.mean(), expected, se)
        assert abs(expected) > 3 * se                                   # the term is resolved, not noise


def test_library_monte_carlo_agrees_with_second_order_at_small_lr_and_not_at_large():
    toy, N = concave_toy(), 8
    selection = {"on_policy": {}, "naive": {}, "seq_tis": {}}
    lrs = np.array([0.3, 30.0])
    mc = monte_carlo_improvement(toy, selection, "none", N, lrs, batches=2000, seed=3)
    for estimator in selection:
        predicted = second_order(toy, estimator, {}, "none", N).improvement(lrs)
        assert abs(mc[estimator].mean[0] - predicted[0]) < Z * mc[estimator].se[0], estimator
        assert abs(mc[estimator].mean[1] - predicted[1]) > Z * mc[estimator].se[1], estimator   # J ≤ 1 caps it
        assert mc[estimator].se[0] > 0


def test_monte_carlo_improvement_is_exact_J_of_each_sampled_step():
    toy, N = make_toy(4, 3, 0.5, 1), 4
    mc = monte_carlo_improvement(toy, {"grpo": {}}, "logged", N, [2.0], batches=5, seed=0)["grpo"]
    uniforms = np.random.default_rng(0).random((5, N, toy.T))
    batches = Batches(toy, tokens_from_uniforms(uniforms, toy.mu), np.array([N]), toy.logged_reward)
    gains = [Toy(toy.theta + 2.0 * g, toy.b, toy.mismatch, 0).J - toy.J for g in batch_estimates(batches, "grpo")[:, 0]]
    assert mc.mean[0] == pytest.approx(np.mean(gains), abs=1e-14)
    assert mc.se[0] == pytest.approx(np.std(gains, ddof=1) / np.sqrt(5), rel=1e-10)


def test_best_lr_is_where_the_quadratic_peaks():
    result = second_order(concave_toy(), "naive", {}, "none", 16)
    assert result.curvature < 0 < result.slope and np.isfinite(result.best_lr)
    around = result.improvement(result.best_lr * np.array([0.9, 1.0, 1.1]))
    assert around[1] > around[0] and around[1] > around[2]
    assert second_order(make_toy(), "naive", {}, "none", 16).best_lr == np.inf      # convex at the start


def test_batch_coupled_estimators_have_no_second_order_value():
    with pytest.raises(ValueError, match="Monte Carlo only"):
        second_order(make_toy(), "seq_snis")


def test_sequences_in_chunks_give_the_same_second_order(monkeypatch):
    toy = make_toy(5, 3, 0.7, 2)
    whole = second_order(toy, "prefix_is", {}, "logged", 8)
    monkeypatch.setattr(sga, "SEQUENCES_AT_ONCE", 7)                      # 243 sequences in 35 chunks
    chunked = second_order(toy, "prefix_is", {}, "logged", 8)
    assert chunked.noise_curvature == pytest.approx(whole.noise_curvature, rel=1e-12)
