"""Training with a KL penalty to the reference: every record against the dense three-policy oracle (the penalty's
derivative by complex step, every sequence summed), β = 0 as today's run, sampled mode against expected mode and
against sums over a given batch's sequences, the centring of grpo and rloo, and the refusals."""

import numpy as np
import pytest
from dense import (
    DenseToy,
    dense_kl_derivative,
    dense_kl_values,
    dense_reference_gradients,
    dense_three_policies,
)
from tiers import fast_then_slow

from toylab import make_toy
from toylab.analysis.montecarlo import tokens_from_uniforms
from toylab.catalogue.estimators import resolve_params
from toylab.catalogue.kl import KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.catalogue.updates import Update
from toylab.engine.reference import Reference
from toylab.training.exact import Population
from toylab.training.loop import TrainingConfig, cosine, relative_error, train
from toylab.training.optimizers import make_optimizer
from toylab.training.policies import sampled_updates
from toylab.training.reference_term import ReferenceTerm
from toylab.training.toy_rows import ToyRows

Z = 5.0
SAMPLERS = {"plain": {}, "truncating": {"top_p": 0.9, "temperature": 0.7, "precision": "bf16"},
            "raw and keep_mask": {"top_k": 3, "logged": "raw", "scored": "keep_mask", "temperature": 0.8}}

ORACLE_CASES = [
    # toy, sampler, correction, baseline, update, lag, optimizer, penalty, distance
    ((4, 3, 0.7, 1), "plain", "naive", "none", Update(), 0, "sgd", KLPenalty(0.5, "k3"), 0.0),
    ((4, 3, 0.7, 1), "plain", "tok_tis", "logged", Update(), 0, "sgd", KLPenalty(0.5, "k1", "reward"), 1.0),
    ((4, 3, 0.7, 1), "plain", "seq_tis", "logged", Update("rollout", minibatches=2, epochs=2), 2, "adam",
     KLPenalty(0.3, "k3", ratio="anchor", log_ratio_clamp=0.5, value_clamp=0.2), 1.0),
    ((4, 3, 0.7, 1), "plain", "naive", "true", Update("bypass", params={"dual_clip": 3.0}), 1, "sgd",
     KLPenalty(0.5, "k1", "reward", "to_go", value_clamp=0.3), 1.5),
    ((5, 3, 1.0, 1), "truncating", "tok_mis", "logged", Update("recompute", "cispo", epochs=2), 3, "sgd",
     KLPenalty(0.4, "k3", "reward", "token", log_ratio_clamp=0.6), 0.8),
    ((4, 4, 0.5, 3), "raw and keep_mask", "ppo_clip", "logged", Update("rollout", epochs=3), 1, "adam",
     KLPenalty(0.5, "k3", ratio="current", log_ratio_clamp=0.4, value_clamp=0.3, ratio_held_by_clamp=True), 1.0),
    ((4, 3, 0.7, 1), "plain", "on_policy", "logged", Update("bypass", "dppo_kl", epochs=2), 2, "sgd",
     KLPenalty(0.5, "k2", ratio="engine"), 1.0),
    ((4, 3, 0.9, 1), "plain", "prefix_is", "logged", Update("recompute", "reinforce", epochs=2), 0, "sgd",
     KLPenalty(0.5, "full"), 1.2),
    ((4, 3, 0.9, 1), "plain", "geo_rs_tok_tis", "logged",
     Update("bypass", "ppo", {"dual_clip": 3.0, "clamp": 20.0}, epochs=2, weights_at="current"), 1, "sgd",
     KLPenalty(0.5, "k1", "reward"), 1.0),
    ((4, 3, 0.9, 1), "plain", "seq_mis", "none", Update("recompute", "ipo_kl"), 2, "sgd", KLPenalty(0.5, "k3+"), 1.0),
    ((5, 3, 1.0, 4), "truncating", "geo_rs", "logged", Update("bypass", "ppo", epochs=3, weights_at="current"), 2,
     "adam", KLPenalty(0.3, "abs", "reward", "sequence"), 1.0),
    ((4, 3, 1.2, 6), "plain", "tok_tis", "logged", Update("recompute", epochs=4), 4, "sgd",
     KL_PRESETS["nemo_rl:on_policy_kl_approximation"].with_beta(0.5), 1.0),
]
ORACLE_IDS = [f"{c[2]}-{c[4].anchor}-U{c[4].U}-lag{c[5]}-{c[7].estimator}-{c[7].placement}" for c in ORACLE_CASES]


@pytest.mark.parametrize("shape, sampler, correction, baseline, update, lag, optimizer, penalty, distance",
                         fast_then_slow(ORACLE_CASES, ORACLE_CASES[:6]), ids=ORACLE_IDS)
def test_every_record_equals_the_dense_oracle_with_a_reference(shape, sampler, correction, baseline, update, lag,
                                                                optimizer, penalty, distance):
    toy = make_toy(*shape, **SAMPLERS[sampler])
    reference = Reference(distance)
    lr, steps = (1.0 if optimizer == "sgd" else 0.1), 5
    config = TrainingConfig(steps, lr, optimizer, update=update, lag=lag, kl=penalty, reference=reference)
    trajectory = train(toy, {correction: {}}, baseline, config)[correction]
    log_ref = reference.log_probabilities(toy.theta, toy.seed, toy.sampler)
    dense = dense_three_policies(toy, correction, {}, baseline, update, steps, lr, optimizer, lag, "fixed", penalty,
                                 log_ref)
    for name, tolerance in (("theta", 1e-9), ("J", 1e-12), ("kl_ref", 1e-10), ("clip_share", 1e-12),
                            ("ppo_kl", 1e-12), ("lag", 0)):
        np.testing.assert_allclose(getattr(trajectory, name), dense[name], rtol=0, atol=tolerance, err_msg=name)
    np.testing.assert_allclose(trajectory.cosine, cosine(dense["first"], dense["grad"]), rtol=0, atol=1e-9)
    np.testing.assert_allclose(trajectory.rel_bias, relative_error(dense["first"], dense["grad"]), rtol=0, atol=1e-9)
    unpenalised = train(toy, {correction: {}}, baseline, TrainingConfig(steps, lr, optimizer, update=update, lag=lag,
                                                                        reference=reference))[correction]
    assert np.abs(trajectory.theta - unpenalised.theta).max() > 1e-4        # the penalty moved the run


@pytest.mark.parametrize("mode", ["expected", "sampled"])
def test_beta_0_is_todays_run_bit_for_bit(mode):
    toy = make_toy(4, 3, 0.8, 2)
    selection = {"naive": {}, "tok_tis": {}, "seq_is": {}}
    base = TrainingConfig(4, 0.5, mode=mode, N=16, runs=3, update=Update("rollout", epochs=2), lag=1)
    plain = train(toy, selection, "logged", base)
    for penalty in (KLPenalty(0.0, "k3"), KLPenalty(0.0, "k1", "reward", "to_go")):
        config = TrainingConfig(4, 0.5, mode=mode, N=16, runs=3, update=Update("rollout", epochs=2), lag=1,
                                kl=penalty, reference=Reference(2.0))
        for id, trajectory in train(toy, selection, "logged", config).items():
            np.testing.assert_array_equal(trajectory.theta, plain[id].theta)


def test_the_recorded_kl_is_zero_at_the_initial_reference_and_grows():
    toy = make_toy(4, 3, 0.3, 0)
    trajectory = train(toy, {"naive": {}}, "logged", TrainingConfig(30, 1.0))["naive"]
    assert trajectory.kl_ref[0] == pytest.approx(0, abs=1e-15) and trajectory.kl_ref[-1] > 0.05


# -- sampled mode -------------------------------------------------------------------------------------------

BATCH_CASES = [("tok_tis", KLPenalty(0.7, "k3", ratio="anchor", value_clamp=0.4)),
               ("seq_tis", KLPenalty(0.7, "k1", "reward", "to_go")), ("naive", KLPenalty(0.7, "full")),
               ("grpo", KLPenalty(0.7, "k1", "reward", "sequence")), ("rloo", KLPenalty(0.7, "k3", "reward", "token"))]


@pytest.mark.parametrize("correction, penalty", BATCH_CASES, ids=[f"{c}-{p.estimator}-{p.placement}"
                                                                   for c, p in BATCH_CASES])
def test_sampled_updates_with_a_penalty_equal_sums_over_the_batch(correction, penalty):
    """N = 7 sequences in each of 2 runs, the engine 2 steps behind, the rollout anchor, 2 minibatches × 2 epochs:
    the library's step against the oracle's per-sequence g·∂L/∂log π_θ(A_t) − β·∂ℓ/∂log π_θ summed over each
    minibatch; grpo's and rloo's advantage the batch-centred (penalised) reward."""
    toy = make_toy(4, 3, 0.8, 9)
    stale = toy.theta + np.array([[0.3, -0.2, 0.1]])
    theta = np.stack([toy.theta, toy.theta - 0.2])
    stale = np.stack([stale, stale + 0.1])
    rows = ToyRows(theta, toy.b, toy.mismatch, engine_theta=stale)
    log_old = rows.sampler.scored_log_probabilities(stale, rows.kept)
    b = Population.of(rows).baseline("logged")
    log_ref = Reference(1.0).log_probabilities(toy.theta, toy.seed, toy.sampler)
    tokens = tokens_from_uniforms(np.random.default_rng(3).random((2, 7, 4)), rows.mu)
    update, lr = Update("rollout", minibatches=2, epochs=2), 0.7
    params = resolve_params(correction, {"weight": "tok_is"} if correction in ("grpo", "rloo") else {})
    total = sampled_updates(correction, params, rows, tokens, log_old, b, update, make_optimizer("sgd", lr, theta.shape),
                            False, ReferenceTerm(penalty, log_ref))[0]
    positions = np.arange(4)
    for run in range(2):
        old_tokens = log_old[run][positions, tokens[run]]
        logged = rows.log_logged[run][positions, tokens[run]]
        ref_tokens = log_ref[positions, tokens[run]]
        reward = (2 * (tokens[run] == 0).sum(axis=1) >= 4).astype(float)
        rho = np.exp(old_tokens - logged)
        g = {"tok_tis": np.minimum(rho, 2.0), "seq_tis": np.minimum(rho.prod(axis=1, keepdims=True), 2.0) *
             np.ones((7, 4)), "naive": np.ones((7, 4)), "grpo": rho, "rloo": rho}[correction]
        advantage = (reward - b[run])[:, None] * np.ones((7, 4))
        if penalty.placement == "reward":
            values = dense_kl_values(penalty, old_tokens, ref_tokens)
            K = {"sequence": values.sum(axis=1, keepdims=True) * np.ones((7, 4)),
                 "to_go": np.cumsum(values[:, ::-1], axis=1)[:, ::-1], "token": values}[penalty.reward_sum]
            if correction in ("grpo", "rloo") and penalty.reward_sum == "sequence":
                penalised = reward - penalty.beta * K[:, 0]
                advantage = (penalised - penalised.mean())[:, None] * np.ones((7, 4))
            elif correction in ("grpo", "rloo"):
                advantage = (reward - reward.mean())[:, None] * 7 / 6 - penalty.beta * K
            else:
                advantage = advantage - penalty.beta * K
        current, expected = theta[run], 0.0
        parts = np.array_split(np.arange(7), 2)
        for u in range(update.U):
            part = parts[u % 2]
            log_pi_u = np.log(np.exp(current) / np.exp(current).sum(axis=-1, keepdims=True))
            tokens_u = log_pi_u[positions, tokens[run][part]]
            r = np.exp(tokens_u - old_tokens[part])
            A = advantage[part]
            keep = np.where(A > 0, r <= 1.2, np.where(A < 0, r >= 0.8, True))
            derivative = g[part] * r * A * keep
            score = np.eye(3)[tokens[run][part]] - np.exp(log_pi_u)[None]
            gradient = np.einsum("mt,mtv->tv", derivative, score) / len(part)
            if penalty.placement == "loss" and penalty.estimator == "full":
                dense = DenseToy.of_tables(rows.log_mu[run], rows.log_logged[run], log_pi_u)
                gradient = gradient - penalty.beta * dense_reference_gradients(dense, log_ref)[0]
            elif penalty.placement == "loss":
                kl_derivative = dense_kl_derivative(penalty, tokens_u.astype(complex), old_tokens[part],
                                                    logged[part], ref_tokens[part])
                gradient = gradient - penalty.beta * np.einsum("mt,mtv->tv", kl_derivative, score) / len(part)
            expected, current = expected + lr * gradient, current + lr * gradient
        np.testing.assert_allclose(total[run], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("penalty", [KLPenalty(0.8, "k3", ratio="engine"), KLPenalty(0.8, "k1", "reward", "to_go")],
                         ids=["k3-loss-engine", "k1-reward-to-go"])
def test_sampled_mode_first_update_agrees_with_expected_mode_by_monte_carlo(penalty):
    """Step 0 of 3,000 runs of N = 8 (SGD, lr 1, bypass, one update): the mean step equals expected mode's within 5
    standard errors."""
    toy = make_toy(4, 3, 0.9, 11)
    runs, N = 3000, 8
    common = dict(update=Update("bypass"), kl=penalty, reference=Reference(1.0))
    sampled = train(toy, {"tok_tis": {}}, "logged", TrainingConfig(1, 1.0, "sgd", "sampled", N=N, runs=runs,
                                                                     **common))["tok_tis"]
    exact = train(toy, {"tok_tis": {}}, "logged", TrainingConfig(1, 1.0, "sgd", **common))["tok_tis"]
    step = sampled.theta[:, 1] - sampled.theta[:, 0]
    exact_step = exact.theta[1] - exact.theta[0]
    error = np.abs(step.mean(axis=0) - exact_step) / (step.std(axis=0) / np.sqrt(runs) + 1e-15)
    assert error.max() < Z
    np.testing.assert_allclose(sampled.kl_ref[:, 0], exact.kl_ref[0], rtol=1e-12)


# -- refusals ------------------------------------------------------------------------------------------------

def test_a_penalty_term_cannot_weigh_an_advantage_a_reward_penalty_gives_each_token():
    with pytest.raises(ValueError, match="k2_penalty: adds a penalty term"):
        train(make_toy(4, 3), {"k2_penalty": {}}, "none", TrainingConfig(2, kl=KLPenalty(0.1, "k1", "reward")))


@pytest.mark.parametrize("arguments, message", [({"kl": "k3"}, "kl must be a KLPenalty"),
                                                ({"reference": 1.0}, "reference must be a Reference")])
def test_a_config_with_a_bad_reference_is_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**arguments)


PRESET_RUNS = [(preset, update, lag) for preset in KL_PRESETS
               for update, lag in ((Update("rollout", epochs=2), 2), (Update("bypass", "cispo"), 1))]


@pytest.mark.parametrize("preset, update, lag", fast_then_slow(PRESET_RUNS, PRESET_RUNS[:2]),
                         ids=[f"{p}-{u.anchor}-lag{lag}" for p, u, lag in PRESET_RUNS])
def test_every_framework_preset_trains_as_the_dense_oracle(preset, update, lag):
    """Each preset at β = 0.5, π_ref at distance 1.5 (its clamps reached), two anchors, lags 1 and 2."""
    toy = make_toy(4, 3, 0.8, 2)
    penalty, reference = KL_PRESETS[preset].with_beta(0.5), Reference(1.5)
    config = TrainingConfig(4, 1.0, update=update, lag=lag, kl=penalty, reference=reference)
    trajectory = train(toy, {"tok_tis": {}}, "logged", config)["tok_tis"]
    dense = dense_three_policies(toy, "tok_tis", {}, "logged", update, 4, 1.0, "sgd", lag, "fixed", penalty,
                                 reference.log_probabilities(toy.theta, toy.seed, toy.sampler))
    for name, tolerance in (("theta", 1e-9), ("J", 1e-12), ("kl_ref", 1e-10), ("clip_share", 1e-12)):
        np.testing.assert_allclose(getattr(trajectory, name), dense[name], rtol=0, atol=tolerance, err_msg=name)


PRESET_RUNS_ELSEWHERE = list(KL_PRESETS)


@pytest.mark.parametrize("preset", fast_then_slow(PRESET_RUNS_ELSEWHERE, ["nemo_rl:on_policy_kl_approximation",
                                                                           "slime:kl_in_reward_reinforce_pp"]))
def test_every_framework_preset_trains_as_the_dense_oracle_on_another_toy_sampler_and_lag_draw(preset):
    """Each preset at β = 0.4 on a longer toy whose engine tempers, truncates (top-p) and rounds to bf16, the anchor
    recomputed through two epochs, the lag drawn from 0 … 2 per batch, π_ref at distance 0.8."""
    toy = make_toy(5, 3, 1.0, 4, **SAMPLERS["truncating"])
    penalty, reference = KL_PRESETS[preset].with_beta(0.4), Reference(0.8)
    update = Update("recompute", "ppo", {"dual_clip": 3.0}, epochs=2)
    config = TrainingConfig(4, 1.0, update=update, lag=2, lag_draw="uniform", kl=penalty, reference=reference)
    trajectory = train(toy, {"seq_tis": {}}, "logged", config)["seq_tis"]
    dense = dense_three_policies(toy, "seq_tis", {}, "logged", update, 4, 1.0, "sgd", 2, "uniform", penalty,
                                 reference.log_probabilities(toy.theta, toy.seed, toy.sampler))
    assert len(set(dense["lag"].tolist())) > 1                           # the draw took more than one lag
    for name, tolerance in (("theta", 1e-9), ("J", 1e-12), ("kl_ref", 1e-10), ("clip_share", 1e-12), ("lag", 0)):
        np.testing.assert_allclose(getattr(trajectory, name), dense[name], rtol=0, atol=tolerance, err_msg=name)
