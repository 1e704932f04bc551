"""Training: the fast loop against slow, obvious gradient ascent with the dense oracle, and sampled mode
against expected mode (fixed seeds, 5 standard errors)."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import EXACT_IDS, exact_moments, make_toy, resolve_params
from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import Batches, batch_estimates, draw_tokens
from toylab.engine.recursion import FACTORS
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import Toy
from toylab.training import exact as training
from toylab.training.exact import Population, enumerated_means, exact_means
from toylab.training.loop import TrainingConfig, train
from toylab.training.toy_rows import ToyRows

Z = 5.0


def textbook_ascent(toy, gradient_at, steps, lr, optimizer):
    """θ_0 … θ_K of plain gradient ascent, written out: SGD, or Adam as in Kingma & Ba's Algorithm 1."""
    theta, m, v = toy.theta.copy(), 0.0, 0.0
    path = [theta]
    for k in range(1, steps + 1):
        g = gradient_at(theta)
        if optimizer == "sgd":
            theta = theta + lr * g
        else:
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            theta = theta + lr * (m / (1 - 0.9**k)) / (np.sqrt(v / (1 - 0.999**k)) + 1e-8)
        path.append(theta)
    return np.array(path)


def dense_at(toy, theta):
    return DenseToy(Toy(theta, toy.b, toy.mismatch, toy.seed))


@pytest.mark.parametrize("optimizer, lr", [("sgd", 2.0), ("adam", 0.1)])
@pytest.mark.parametrize("shape", [(4, 3, 0.7, 1), (6, 4, 0.3, 0)])
def test_on_policy_is_gradient_ascent_with_the_dense_true_gradient(shape, optimizer, lr):
    toy = make_toy(*shape)
    steps = 30
    expected = textbook_ascent(toy, lambda theta: dense_at(toy, theta).true_grad, steps, lr, optimizer)
    trajectory = train(toy, {"on_policy": {}}, "none", TrainingConfig(steps, lr, optimizer))["on_policy"]
    np.testing.assert_allclose(trajectory.theta, expected, rtol=0, atol=1e-9)
    J = [dense_at(toy, theta).p_train @ dense_at(toy, theta).R for theta in expected]
    np.testing.assert_allclose(trajectory.J, J, rtol=0, atol=1e-12)
    assert trajectory.J[-1] > trajectory.J[0] + 0.1                     # it did climb


@pytest.mark.parametrize("estimator, params, baseline", [
    ("naive", {}, "none"), ("naive", {}, "logged"), ("seq_tis", {}, "none"), ("seq_tis", {"C": 1.3}, "true"),
])
@pytest.mark.parametrize("optimizer, lr", [("sgd", 2.0), ("adam", 0.1)])
def test_biased_estimators_ascend_along_the_dense_oracle_mean(estimator, params, baseline, optimizer, lr):
    toy = make_toy(4, 3, 1.0, 1)
    resolved = resolve_params(estimator, params)
    expected = textbook_ascent(toy, lambda theta: dense_at(toy, theta).moments(estimator, resolved, baseline)[0],
                               25, lr, optimizer)
    trajectory = train(toy, {estimator: params}, baseline, TrainingConfig(25, lr, optimizer))[estimator]
    np.testing.assert_allclose(trajectory.theta, expected, rtol=0, atol=1e-9)


def test_every_recorded_number_equals_enumeration_at_every_step():
    toy = make_toy(5, 3, 0.8, 2)
    trajectories = train(toy, {"tok_tis": {}, "seq_mis": {}, "k3_rs": {"delta": 0.5}}, "logged",
                         TrainingConfig(12, 0.1, "adam"))
    for id, trajectory in trajectories.items():
        assert trajectory.grad_norm.min() > 1e-4            # away from J's maximum, where directions are rounding
        for k, theta in enumerate(trajectory.theta):
            here = Toy(theta, toy.b, toy.mismatch, toy.seed)
            d = diagnostics(here)
            moments = exact_moments(here, id, trajectory.params, "logged")
            assert trajectory.J[k] == pytest.approx(d.J, abs=1e-12)
            assert trajectory.logged_reward[k] == pytest.approx(d.logged_reward, abs=1e-12)
            assert trajectory.grad_norm[k] == pytest.approx(d.grad_norm, rel=1e-10)
            assert trajectory.kl_mu_pi[k] == pytest.approx(d.kl_mu_pi, rel=1e-10)
            assert trajectory.chi2_seq[k] == pytest.approx(d.chi2_seq, rel=1e-10)
            assert trajectory.cosine[k] == pytest.approx(moments.cosine, abs=1e-10)
            assert trajectory.rel_bias[k] == pytest.approx(moments.rel_bias, rel=1e-9)


TOYS = [(6, 4, 0.3, 0), (5, 3, 1.0, 7), (3, 4, 2.0, 21), (1, 3, 0.5, 2)]
THRESHOLDS_THAT_BITE = {"tok_tis": {"C": 1.1}, "tok_mis": {"lo": 0.9, "hi": 1.2}, "seq_tis": {"C": 1.05},
                        "seq_mis": {"C": 1.5}, "geo_rs": {"lo": 0.95, "hi": 1.03}, "k3_rs": {"delta": 0.02},
                        "geo_rs_tok_tis": {"lo": 0.9, "hi": 1.1, "C": 1.2}, "trm": {"eps": 0.3}}


@pytest.mark.parametrize("shape", TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
@pytest.mark.parametrize("thresholds", ["default", "biting"])
def test_exact_means_of_every_estimator_equal_the_moments_engine(shape, thresholds):
    """Many θ at once (each estimator at its own θ), both paths, against exact_moments one toy at a time."""
    toy = make_toy(*shape)
    rng = np.random.default_rng(4)
    estimators = [(id, resolve_params(id, THRESHOLDS_THAT_BITE.get(id, {}) if thresholds == "biting" else {}))
                  for id in EXACT_IDS]
    theta = toy.theta + 0.3 * rng.normal(size=(len(estimators), toy.T, toy.V))
    rows = ToyRows(theta, toy.b, toy.mismatch, split_grid(toy.T, toy.V))
    for baseline in ("none", "logged", "true"):
        b = Population.of(rows).baseline(baseline)
        means = exact_means(rows, estimators, b)
        enumerated = enumerated_means(rows, estimators, b)
        for index, (id, params) in enumerate(estimators):
            reference = exact_moments(Toy(theta[index], toy.b, toy.mismatch, 0), id, params, baseline).mean
            scale = max(np.abs(reference).max(), 1e-3)
            np.testing.assert_allclose(means[index], reference, rtol=0, atol=1e-11 * scale, err_msg=id)
            np.testing.assert_allclose(enumerated[index], reference, rtol=0, atol=1e-11 * scale, err_msg=id)


def test_the_recursion_covers_the_factorising_estimators_and_the_rest_are_enumerated():
    assert set(FACTORS) < set(EXACT_IDS)
    assert {"seq_tis", "seq_mis", "geo_rs", "k3_rs"} <= set(EXACT_IDS) - set(FACTORS)


def test_rows_in_chunks_give_the_same_means(monkeypatch):
    toy = make_toy(5, 3, 1.0, 7)
    selection = {id: {} for id in EXACT_IDS}
    whole = train(toy, selection, "logged", TrainingConfig(5))
    monkeypatch.setattr(training, "ROWS_AT_ONCE", 1)            # one row per chunk
    chunked = train(toy, selection, "logged", TrainingConfig(5))
    for id in selection:
        np.testing.assert_allclose(chunked[id].theta, whole[id].theta, rtol=0, atol=1e-14)


def test_records_have_k_plus_one_values_and_undefined_cosines_are_nan():
    toy = make_toy(mismatch=1.0)
    trajectories = train(toy, {"on_policy": {}, "trm": {}}, "none", TrainingConfig(steps=7))
    for trajectory in trajectories.values():
        for name in ("J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "rel_bias"):
            assert getattr(trajectory, name).shape == (8,)
        assert trajectory.theta.shape == (8, 6, 4)
    trm = trajectories["trm"]                                   # ε = 0.5 masks every sequence at mismatch 1
    assert np.isnan(trm.cosine).all() and np.ptp(trm.J) == 0
    assert np.isfinite(trajectories["on_policy"].cosine).all()


def test_sampled_records_one_row_per_run_and_runs_do_not_depend_on_the_selection():
    toy = make_toy(4, 3, 0.7, 1)
    config = TrainingConfig(steps=6, mode="sampled", N=16, runs=3)
    alone = train(toy, {"tok_tis": {}}, "none", config)["tok_tis"]
    together = train(toy, {"naive": {}, "tok_tis": {}, "grpo": {}}, "none",
                     TrainingConfig(steps=6, mode="sampled", N=16, runs=5))["tok_tis"]
    assert alone.J.shape == (3, 7) and alone.cosine.shape == (3, 7) and alone.rel_bias is None
    np.testing.assert_array_equal(together.J[:3], alone.J)
    np.testing.assert_array_equal(together.theta[:3], alone.theta)


def test_sampled_cosine_is_the_cosine_of_the_step_taken():
    toy = make_toy(4, 3, 0.7, 1)
    trajectory = train(toy, {"tok_is": {}}, "none", TrainingConfig(steps=5, lr=0.3, optimizer="adam",
                                                                    mode="sampled", N=8, runs=2))["tok_is"]
    for run in range(2):
        for k in range(5):
            step = trajectory.theta[run, k + 1] - trajectory.theta[run, k]
            grad = dense_at(toy, trajectory.theta[run, k]).true_grad
            expected = np.sum(step * grad) / np.linalg.norm(step) / np.linalg.norm(grad)
            assert trajectory.cosine[run, k] == pytest.approx(expected, abs=1e-12)


SAMPLED_TOY = (4, 3, 0.4, 2)     # χ²_seq ≈ 2, largest W ≈ 12: sample standard errors are trustworthy here


def one_step(toy, selection, baseline, mode, runs=1, N=1):
    """{id: θ₁ − θ₀} with SGD at lr = 1: the expected update, or (runs, T, V) sampled ones."""
    config = TrainingConfig(steps=1, lr=1.0, mode=mode, N=N, runs=runs)
    return {id: t.theta[..., 1, :, :] - t.theta[..., 0, :, :] for id, t in train(toy, selection, baseline, config).items()}


def assert_mean_within(samples, expected, z=Z):
    se = samples.std(axis=0, ddof=1) / np.sqrt(len(samples))
    assert np.all(np.abs(samples.mean(axis=0) - expected) <= z * se + 1e-12), (samples.mean(axis=0) - expected) / se


@pytest.mark.parametrize("baseline", ["none", "logged"])
def test_sampled_mean_update_equals_the_expected_update(baseline):
    toy = make_toy(*SAMPLED_TOY)
    selection = {"naive": {}, "tok_mis": {"lo": 0.8, "hi": 1.5}, "prefix_is": {}, "seq_tis": {"C": 1.2},
                 "geo_rs": {"lo": 0.8, "hi": 1.1}, "on_policy": {}}
    expected = one_step(toy, selection, baseline, "expected")
    sampled = one_step(toy, selection, baseline, "sampled", runs=4000, N=4)
    for id in selection:
        assert_mean_within(sampled[id], expected[id])


def test_sequence_is_runs_average_to_the_on_policy_step():
    toy = make_toy(*SAMPLED_TOY)
    expected = one_step(toy, {"on_policy": {}}, "none", "expected")["on_policy"]
    sampled = one_step(toy, {"seq_is": {}}, "none", "sampled", runs=4000, N=4)["seq_is"]
    assert_mean_within(sampled, expected)


def test_rloo_trains_like_naive_with_the_logged_baseline():
    """E[(r_i − mean of the others)·s_i] = E_μ[r s] − E_μ[r]·E_μ[s]: naive's mean with b = E_μ[r], exactly."""
    toy = make_toy(*SAMPLED_TOY)
    expected = one_step(toy, {"naive": {}}, "logged", "expected")["naive"]
    sampled = one_step(toy, {"rloo": {}}, "none", "sampled", runs=4000, N=4)["rloo"]
    assert_mean_within(sampled, expected)


def test_batch_coupled_estimators_are_refused_in_expected_mode():
    with pytest.raises(ValueError, match="batch-coupled"):
        train(make_toy(), {"naive": {}, "seq_snis": {}}, "none", TrainingConfig())
    with pytest.raises(ValueError, match="N ≥ 2"):
        train(make_toy(), {"rloo": {}}, "none", TrainingConfig(mode="sampled", N=1))


@pytest.mark.parametrize("field, value, message", [
    ("steps", 0, "steps must be between"), ("steps", 2.5, "integer"), ("lr", 0.0, "lr must be between"),
    ("optimizer", "rmsprop", "optimizer must be"), ("mode", "exact", "mode must be"), ("runs", 10**6, "runs"),
])
def test_bad_configs_are_refused_with_the_rule(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**{field: value})


def test_batches_with_one_toy_per_replicate_equal_separate_batches():
    """montecarlo.Batches given (R, T, V) tables and R baselines equals R single-toy Batches."""
    rng = np.random.default_rng(2)
    base = make_toy(4, 3, 0.9, 3)
    toys = [Toy(base.theta + 0.5 * rng.normal(size=base.theta.shape), base.b, base.mismatch, 0) for _ in range(3)]
    rows = ToyRows(np.stack([t.theta for t in toys]), base.b, base.mismatch)
    tokens = np.stack([draw_tokens(rng, t.mu, (10,)) for t in toys])
    baselines = np.array([0.1, 0.5, 0.9])
    N = np.array([3, 10])
    for id in ("tok_mis", "prefix_is", "seq_tis", "k3_rs", "trm", "seq_snis", "grpo"):
        together = batch_estimates(Batches(rows, tokens, N, baselines), id, {"eps": 1.0} if id == "trm" else {})
        for r, toy in enumerate(toys):
            alone = batch_estimates(Batches(toy, tokens[r:r + 1], N, baselines[r]), id, {"eps": 1.0} if id == "trm" else {})
            np.testing.assert_allclose(together[r], alone[0], rtol=1e-12, atol=1e-15, err_msg=id)
