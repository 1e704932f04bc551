"""Training with the sampler model and the engine's error redrawn each step: every step against the dense oracle,
seeded and reproducible draws, the cosine of the step actually taken, and a clear stop where W would leave float64."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.engine.toy import Toy
from toylab.training.loop import NOISE_STREAM, TrainingConfig, engine_errors, train
from toylab.training.optimizers import make_optimizer
from toylab.training.sga import on_policy_state

SAMPLER = {"top_p": 0.9, "top_k": 3, "temperature": 0.7, "precision": "bf16"}


def test_redrawn_errors_are_seeded_student_t_draws_and_step_zero_is_the_toys():
    toy = make_toy(4, 3, 1.0, 7)
    errors = list(engine_errors(toy, "redrawn", 3))
    assert len(errors) == 4 and errors[0] is toy.b
    rng = np.random.default_rng([7, NOISE_STREAM])
    for b in errors[1:]:
        np.testing.assert_array_equal(b, rng.standard_t(3, size=toy.b.shape))
    assert all(b is toy.b for b in engine_errors(toy, "fixed", 3))


@pytest.mark.parametrize("noise", ["fixed", "redrawn"])
def test_every_step_with_the_sampler_equals_the_dense_oracle(noise):
    """Expected mode, a truncating sampler: θ_{k+1} = θ_k + lr·(the dense mean over μ_k's support at b_k), and every
    recorded number is the dense oracle's at (θ_k, b_k)."""
    toy = make_toy(3, 4, 0.8, 2, **SAMPLER)
    config = TrainingConfig(steps=4, lr=2.0, noise=noise)
    runs = train(toy, {"seq_tis": {}, "tok_mis": {}}, "logged", config)
    for id, run in runs.items():
        theta = toy.theta
        for k, b in enumerate(engine_errors(toy, noise, config.steps)):
            np.testing.assert_allclose(run.theta[k], theta, rtol=0, atol=1e-12)
            step_toy = Toy(theta, b, toy.mismatch, toy.seed, toy.sampler)
            dense = DenseToy(step_toy)
            mean = dense.moments(id, run.params, "logged")[0]
            population = diagnostics(step_toy)
            assert run.J[k] == pytest.approx(dense.p_train @ dense.R, abs=1e-12)
            assert run.logged_reward[k] == pytest.approx(dense.p_sampler @ dense.R, abs=1e-12)
            assert run.kl_mu_pi[k] == pytest.approx(population.kl_mu_pi, rel=1e-10, abs=1e-14)
            assert run.chi2_seq[k] == pytest.approx(population.chi2_seq, rel=1e-10, abs=1e-14)
            theta = theta + config.lr * mean


def test_the_redrawn_run_differs_from_the_fixed_one_after_step_zero_and_repeats_itself():
    toy = make_toy(mismatch=1.0)
    config = TrainingConfig(steps=5, noise="redrawn")
    redrawn, again = (train(toy, {"tok_mis": {}}, "none", config)["tok_mis"] for _ in range(2))
    fixed = train(toy, {"tok_mis": {}}, "none", TrainingConfig(steps=5))["tok_mis"]
    np.testing.assert_array_equal(redrawn.J, again.J)
    assert redrawn.logged_reward[0] == fixed.logged_reward[0] and redrawn.logged_reward[1] != fixed.logged_reward[1]
    sampled = [train(toy, {"naive": {}}, "none", TrainingConfig(steps=3, mode="sampled", runs=2, N=8,
                                                                noise="redrawn"))["naive"].J for _ in range(2)]
    np.testing.assert_array_equal(*sampled)


@pytest.mark.parametrize("optimizer, lr", [("sgd", 1.0), ("adam", 0.1)])
def test_the_step_cosine_is_the_cosine_of_the_step_actually_taken(optimizer, lr):
    toy = make_toy(mismatch=1.0)
    run = train(toy, {"tok_mis": {}}, "none", TrainingConfig(steps=6, lr=lr, optimizer=optimizer))["tok_mis"]
    for k in range(6):
        step = run.theta[k + 1] - run.theta[k]
        grad = Toy(run.theta[k], toy.b, toy.mismatch, 0).true_grad
        cosine = np.sum(step * grad) / np.linalg.norm(step) / np.linalg.norm(grad)
        assert run.step_cosine[k] == pytest.approx(cosine, abs=1e-9)
    if optimizer == "sgd":
        np.testing.assert_allclose(run.step_cosine, run.cosine, atol=1e-12)
    else:                                                     # Adam's step points elsewhere than the mean
        assert np.max(np.abs(run.step_cosine - run.cosine)) > 0.1
    assert train(make_toy(), {"naive": {}}, "none", TrainingConfig(steps=2, mode="sampled", runs=2, N=4))[
        "naive"].step_cosine is None


def test_adams_proposed_steps_are_the_steps_a_copy_would_take():
    rng = np.random.default_rng(0)
    adam = make_optimizer("adam", 0.1, (3, 2))
    for _ in range(4):
        adam.step(rng.normal(size=(3, 2)))
    candidates = rng.normal(size=(5, 3, 2))
    proposed = adam.proposed(candidates)
    for candidate, step in zip(candidates, proposed, strict=True):
        copy = make_optimizer("adam", 0.1, (3, 2))
        copy.m, copy.v, copy.k = adam.m.copy(), adam.v.copy(), adam.k
        np.testing.assert_array_equal(copy.step(candidate), step)
    assert adam.k == 4                                        # the state is left as it was


@pytest.mark.parametrize("optimizer, noise", [("sgd", "fixed"), ("adam", "redrawn")])
def test_the_sga_state_is_on_policys_run(optimizer, noise):
    toy = make_toy(mismatch=0.5, top_p=0.95)
    config = TrainingConfig(steps=7, lr=0.3, optimizer=optimizer, noise=noise)
    path = train(toy, {"on_policy": {}}, "logged", config)["on_policy"]
    theta, b, state = on_policy_state(toy, "logged", config, 7)
    np.testing.assert_array_equal(theta, path.theta[7])
    np.testing.assert_array_equal(b, list(engine_errors(toy, noise, 7))[7])
    assert optimizer == "sgd" or state.k == 7


def test_a_run_whose_ratios_leave_float64_stops_with_the_step():
    """T = 4, V = 4, mismatch 2, seed 3558 at temperature 0.25 (make_toy refuses it: W could reach e^803), built
    directly: an enumerated mean would overflow, so training stops at once and says where; the factorising
    estimators (the count recursion normalises each position) train."""
    base = make_toy(4, 4, 2.0, 3558, max_sequences=None, temperature=0.25)
    toy = Toy(base.theta, base.b, base.mismatch, base.seed, base.sampler)
    with pytest.raises(ValueError, match=r"training stopped: on step 0 of the run the sequence ratio W = π\(y\)/μ\(y\) reaches e\^803"):
        train(toy, {"seq_tis": {}}, "none", TrainingConfig(steps=3))
    assert np.isfinite(train(toy, {"seq_is": {}}, "none", TrainingConfig(steps=3))["seq_is"].J).all()
