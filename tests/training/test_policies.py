"""Training with three policies (π_θ, the anchor π_old, the engine's stale μ): the reductions to today's Training and
to on-policy PPO, the surrogate at θ = θ_old against each estimator's mean, every record against the dense oracle's
brute force (tests/dense.py ``dense_three_policies``), sampled mode's arithmetic on a given batch against a sum over
its sequences, and sampled mode against expected mode by Monte Carlo (fixed seeds, 5 standard errors)."""

import numpy as np
import pytest
from dense import DenseToy, dense_three_policies, dense_token_derivative, dense_weight
from tiers import fast_then_slow
from today_loop import RECORDED, todays_training

from toylab import ESTIMATORS, EXACT_IDS, make_toy, resolve_params
from toylab.analysis.montecarlo import tokens_from_uniforms
from toylab.catalogue.updates import Update
from toylab.engine.split_grid import split_grid
from toylab.training.exact import Population, exact_means
from toylab.training.loop import TrainingConfig, cannot_train, cosine, relative_error, train, trained_ids
from toylab.training.optimizers import make_optimizer
from toylab.training.policies import ExpectedBatch, lags, refuses_as_weight, sampled_updates, sampled_w_spread
from toylab.training.toy_rows import ToyRows

Z = 5.0
SAMPLERS = {"plain": {}, "truncating": {"top_p": 0.9, "temperature": 0.7, "precision": "bf16"},
            "raw and keep_mask": {"logged": "raw", "scored": "keep_mask", "top_k": 3}}
ONE_UPDATE = [Update(), Update("recompute", "cispo", {"eps_high": 0.1}), Update("recompute", "reinforce"),
              Update("recompute", "dppo_kl"), Update("recompute", "ppo", {"dual_clip": 3.0, "clamp": 20.0}),
              Update("rollout", "ipo_kl")]


# -- today's Training is the U = 1, recompute, lag-0 case, bit for bit -----------------------------------------

@pytest.mark.parametrize("update", ONE_UPDATE, ids=[f"{u.anchor}-{u.loss}" for u in ONE_UPDATE])
@pytest.mark.parametrize("sampler", ["plain", "truncating"])
@pytest.mark.parametrize("config", [
    TrainingConfig(8, 1.0, "sgd", "expected"), TrainingConfig(8, 0.1, "adam", "expected", noise="redrawn"),
    TrainingConfig(5, 1.0, "sgd", "sampled", N=16, runs=3), TrainingConfig(5, 0.1, "adam", "sampled", N=8, runs=2,
                                                                          noise="redrawn")],
    ids=["expected-sgd", "expected-adam-redrawn", "sampled-sgd", "sampled-adam-redrawn"])
def test_todays_training_is_the_three_policy_loop_at_one_recomputed_update_bit_for_bit(config, sampler, update):
    toy = make_toy(5, 3, 0.8, 2, **SAMPLERS[sampler])
    selection = {"on_policy": {}, "naive": {}, "tok_tis": {}, "seq_mis": {}, "k3_rs": {"delta": 0.5}, "ppo_clip": {},
                 "prefix_is": {}, "k2_penalty": {}, "verl:decoupled_geo_rs": {"rs_threshold": "0.5_2.0"}}
    if config.mode == "sampled":
        selection |= {"grpo": {"weight": "tok_tis"}, "rloo": {}, "seq_snis": {}}
    config = TrainingConfig(**{**config.__dict__, "update": update})
    today = todays_training(toy, selection, "logged", config)
    now = train(toy, selection, "logged", config)
    for id in selection:
        for name in RECORDED:
            if today[id][name] is None:
                assert getattr(now[id], name) is None
            else:
                np.testing.assert_array_equal(getattr(now[id], name), today[id][name], err_msg=f"{id} {name}")
        assert not now[id].clip_share.any() and not now[id].ppo_kl.any() and not now[id].lag.any()


# -- bypass with mismatch 0 and lag 0 is on-policy PPO --------------------------------------------------------

@pytest.mark.parametrize("mode", ["expected", "sampled"])
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_bypass_has_no_spread_of_w_at_any_mismatch_and_lag(sampler, mode):
    """π_old = μ makes w = μ/μ = 1 on every token the engine draws: its spread is 0, not the 1e-16 of a mean taken
    over a mass that sums to T only up to rounding (drawn as noise on the page's chart of w's spread)."""
    toy = make_toy(5, 3, 0.7, 4, **SAMPLERS[sampler])
    config = TrainingConfig(6, 1.0, "sgd", mode, N=16, runs=2, update=Update("bypass", epochs=2), lag=3)
    for id, run in train(toy, {"naive": {}, "tok_tis": {}, "seq_mis": {}}, "logged", config).items():
        assert not run.w_std.any(), (id, run.w_std)


@pytest.mark.parametrize("mode", ["expected", "sampled"])
@pytest.mark.parametrize("update", [Update("bypass", epochs=3), Update("bypass", "ppo", {"dual_clip": 3.0},
                                                                          minibatches=2, epochs=2),
                                    Update("bypass", "cispo", {"eps_high": 0.02}, epochs=2)],
                         ids=["ppo-3", "dual-2x2", "cispo-2"])
def test_bypass_at_mismatch_0_and_lag_0_is_on_policy_ppo(update, mode):
    """At mismatch 0 the engine is the trainer: every correction's weight is 1 under bypass (w = μ/μ), and each
    batch's U updates are PPO's on the trainer's own samples, which on_policy runs under every anchor."""
    toy = make_toy(5, 3, 0.0, 4)
    config = TrainingConfig(12, 1.0, "sgd", mode, N=16, runs=3, update=update)
    runs = train(toy, {"on_policy": {}, "naive": {}, "tok_tis": {}, "seq_tis": {}}, "logged", config)
    reference = train(toy, {"on_policy": {}}, "logged",
                      TrainingConfig(**{**config.__dict__, "update": Update("recompute", update.loss, update.params,
                                                                             update.minibatches, update.epochs)}))
    for id in ("naive", "tok_tis", "seq_tis"):
        for name in ("theta", "J", "clip_share", "ppo_kl", "cosine"):
            np.testing.assert_allclose(getattr(runs[id], name), getattr(runs["on_policy"], name), rtol=0, atol=1e-12,
                                       err_msg=f"{id} {name}")
        assert not runs[id].w_std.any()                                          # w ≡ 1: no spread, not rounding's
    np.testing.assert_allclose(reference["on_policy"].theta, runs["on_policy"].theta, rtol=0, atol=1e-12)
    assert np.max(runs["naive"].clip_share) > 0          # the U updates move π_θ out of the clip's range


# -- at θ = θ_old the surrogate's gradient is the estimator's mean gradient ----------------------------------

def weight_corrections():
    return [id for id in EXACT_IDS if not refuses_as_weight(id, resolve_params(id))]


@pytest.mark.parametrize("loss", ["ppo", "cispo", "reinforce", "dppo_kl", "ipo_kl"])
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_the_surrogate_gradient_at_the_anchor_is_each_estimators_exact_mean(sampler, loss):
    toy = make_toy(4, 4, 0.9, 5, **SAMPLERS[sampler])
    ids = weight_corrections()
    estimators = [(id, resolve_params(id)) for id in ids]
    theta = np.repeat(toy.theta[None], len(ids), axis=0) + 0.05 * np.arange(len(ids))[:, None, None]
    rows = ToyRows(theta, toy.b, toy.mismatch, split_grid(4, 4), toy.sampler)
    b = Population.of(rows).baseline("logged")
    on_policy = np.array([ESTIMATORS[id].on_policy for id in ids])
    batch = ExpectedBatch(rows, rows.log_pi, on_policy, estimators, b, Update(loss=loss))
    surrogate = batch.gradient(rows.log_pi, rows.pi, batch.losses(rows.log_pi), None)
    means = exact_means(rows, estimators, b)
    for index, id in enumerate(ids):
        scale = max(np.abs(means[index]).max(), 1e-3)
        np.testing.assert_allclose(surrogate[index], means[index], rtol=0, atol=1e-12 * scale, err_msg=id)


def test_every_catalogue_estimator_but_the_penalties_can_be_a_weight():
    refused = {id for id in EXACT_IDS if refuses_as_weight(id, resolve_params(id))}
    assert refused == {"k2_penalty", "prime_rl:default", "prime_rl:ipo"}
    assert "loss, not a correction weight" in cannot_train("k2_penalty", "expected", 64, weights_only=True)
    assert "its weight k2_penalty adds a penalty" in cannot_train("grpo", "sampled", 64, True, {"weight": "k2_penalty"})
    assert cannot_train("grpo", "sampled", 64, True, {"weight": "tok_tis"}) is None
    chosen = {"grpo": {"weight": "k2_penalty"}, "rloo": {"weight": "tok_tis"}, "naive": {}}
    assert trained_ids(chosen, "sampled", 64, weights_only=True) == ("on_policy", "naive", "rloo")
    assert trained_ids(chosen, "sampled", 64) == ("on_policy", "naive", "grpo", "rloo")
    with pytest.raises(ValueError, match="k2_penalty: adds a penalty term"):
        train(make_toy(4, 3), {"k2_penalty": {}}, "none", TrainingConfig(2, update=Update(epochs=2)))


# -- every record against the dense oracle ------------------------------------------------------------------

ORACLE_CASES = [
    # toy, sampler, correction, params, baseline, update, lag, lag draw, optimizer
    ((4, 3, 0.7, 1), "plain", "naive", {}, "none", Update(), 0, "fixed", "sgd"),
    ((4, 3, 0.7, 1), "plain", "tok_tis", {}, "logged", Update("recompute", epochs=3), 0, "fixed", "sgd"),
    ((4, 3, 0.7, 1), "plain", "seq_tis", {}, "logged", Update("rollout", minibatches=2, epochs=2), 2, "fixed", "adam"),
    ((4, 3, 0.7, 1), "plain", "naive", {}, "true", Update("bypass", params={"dual_clip": 3.0}), 0, "fixed", "sgd"),
    ((5, 3, 1.0, 1), "truncating", "tok_mis", {}, "logged", Update("recompute", "cispo", epochs=2), 3, "uniform",
     "sgd"),
    ((4, 4, 0.5, 3), "raw and keep_mask", "ppo_clip", {}, "logged",
     Update("rollout", "ppo", {"clamp": 20.0, "dual_clip": 2.0}, epochs=3), 1, "fixed", "adam"),
    ((4, 3, 0.7, 1), "plain", "on_policy", {}, "logged", Update("bypass", "dppo_kl", epochs=2), 2, "fixed", "sgd"),
    ((4, 3, 0.7, 1), "plain", "verl:decoupled_geo_rs", {"rs_threshold": "0.5_2.0"}, "logged",
     Update("bypass", "ppo", {"dual_clip": 3.0, "clamp": 20.0}, epochs=2, weights_at="current"), 1, "fixed", "sgd"),
    ((4, 3, 0.9, 1), "plain", "prefix_is", {}, "logged", Update("recompute", "ipo_kl", epochs=2), 2, "fixed", "sgd"),
    ((4, 3, 0.9, 1), "plain", "seq_mis", {}, "none", Update("recompute", "reinforce", epochs=2), 2, "fixed", "sgd"),
    ((5, 3, 1.0, 4), "truncating", "geo_rs", {"lo": 0.2, "hi": 5.0}, "logged",
     Update("bypass", "ppo", epochs=4, weights_at="current"), 4, "uniform", "adam"),
    ((4, 4, 0.5, 3), "raw and keep_mask", "seq_tis", {}, "true", Update("rollout", "dppo_kl", minibatches=2), 3,
     "uniform", "sgd"),
    ((4, 3, 1.2, 6), "plain", "tok_tis", {}, "logged", Update("recompute", epochs=8), 16, "fixed", "sgd"),
    ((4, 3, 1.2, 6), "plain", "opsm", {"weight": "tok_is"}, "logged", Update("rollout", epochs=2), 4, "fixed", "sgd"),
]


@pytest.mark.parametrize("shape, sampler, correction, params, baseline, update, lag, draw, optimizer",
                         fast_then_slow(ORACLE_CASES, ORACLE_CASES[:8]),
                         ids=[f"{c[2]}-{c[5].anchor}-{c[5].loss}-U{c[5].U}-lag{c[6]}{c[7][0]}" for c in ORACLE_CASES])
def test_every_record_equals_the_dense_three_policy_oracle(shape, sampler, correction, params, baseline, update, lag,
                                                           draw, optimizer):
    toy = make_toy(*shape, **SAMPLERS[sampler])
    lr, steps = (1.0 if optimizer == "sgd" else 0.1), 6
    trajectory = train(toy, {correction: params}, baseline,
                       TrainingConfig(steps, lr, optimizer, update=update, lag=lag, lag_draw=draw))[correction]
    dense = dense_three_policies(toy, correction, params, baseline, update, steps, lr, optimizer, lag, draw)
    for name, tolerance in (("theta", 1e-9), ("J", 1e-12), ("logged_reward", 1e-12), ("kl_mu_pi", 1e-10),
                            ("clip_share", 1e-12), ("ppo_kl", 1e-12), ("w_std", 1e-10), ("lag", 0)):
        np.testing.assert_allclose(getattr(trajectory, name), dense[name], rtol=0, atol=tolerance, err_msg=name)
    np.testing.assert_allclose(trajectory.cosine, cosine(dense["first"], dense["grad"]), rtol=0, atol=1e-9)
    np.testing.assert_allclose(trajectory.rel_bias, relative_error(dense["first"], dense["grad"]), rtol=0, atol=1e-9)
    np.testing.assert_allclose(trajectory.step_cosine, cosine(dense["step"], dense["grad"]), rtol=0, atol=1e-9)
    assert np.ptp(trajectory.J) > 1e-3                   # it trained


def test_drawn_lags_are_uniform_on_0_to_eta_from_the_seeded_stream_and_capped_by_the_step():
    drawn = list(lags(7, 4, "uniform", 2000))
    rng = np.random.default_rng([7, 2**32 - 2])
    assert drawn == [min(int(rng.integers(0, 5)), k) for k in range(2001)]
    counts = np.bincount(drawn[10:], minlength=5)
    assert counts.sum() == 1991 and np.all(np.abs(counts - 1991 / 5) < Z * np.sqrt(1991 * 0.2 * 0.8))
    assert list(lags(7, 3, "fixed", 5)) == [0, 1, 2, 3, 3, 3]


# -- sampled mode: its arithmetic on a given batch, and its expectation ---------------------------------------

@pytest.mark.parametrize("correction, params", [("tok_tis", {}), ("seq_tis", {}), ("ppo_clip", {}),
                                                ("geo_rs", {"lo": 0.3, "hi": 3.0})])
@pytest.mark.parametrize("update", [Update("rollout", "ppo", {"dual_clip": 3.0}, minibatches=3, epochs=2),
                                    Update("bypass", "dppo_kl", minibatches=2),
                                    Update("bypass", "cispo", minibatches=2, weights_at="current")],
                         ids=["rollout-ppo", "bypass-dppo", "bypass-cispo-current"])
def test_sampled_updates_on_a_given_batch_equal_sums_over_its_sequences(update, correction, params):
    """One batch of N = 7 sequences in each of 2 runs, the engine 2 steps behind: the library's U minibatch updates
    (SGD) against the dense oracle's per-sequence g, ∂L/∂log π_θ and score, summed over each minibatch."""
    toy = make_toy(4, 3, 0.8, 9)
    stale = toy.theta + np.array([[0.3, -0.2, 0.1]])
    theta = np.stack([toy.theta, toy.theta - 0.2])                     # two runs
    stale = np.stack([stale, stale + 0.1])
    rows = ToyRows(theta, toy.b, toy.mismatch, engine_theta=stale)
    log_old = {"rollout": rows.sampler.scored_log_probabilities(stale, rows.kept), "bypass": rows.log_logged}[
        update.anchor]
    b = Population.of(rows).baseline("logged")
    tokens = tokens_from_uniforms(np.random.default_rng(3).random((2, 7, 4)), rows.mu)
    lr = 0.7
    total, clipped, kl = sampled_updates(correction, resolve_params(correction, params), rows, tokens, log_old, b,
                                         update, make_optimizer("sgd", lr, theta.shape), False)
    spread = sampled_w_spread(ToyRows(theta[None], toy.b, toy.mismatch, engine_theta=stale[None]), log_old[None],
                              np.array([False]), tokens[None])[0]
    index = (tokens * 3 ** np.arange(3, -1, -1)).sum(axis=-1)              # each sequence's row of the oracle
    for run in range(2):
        current, expected_step, held, drift = theta[run], 0.0, 0.0, 0.0
        tables = (rows.log_mu[run], rows.log_logged[run])
        old = DenseToy.of_tables(*tables, log_old[run])
        parts = np.array_split(np.arange(7), update.minibatches)
        for u in range(update.U):
            part = parts[u % update.minibatches]
            pi_u = np.log(np.exp(current) / np.exp(current).sum(axis=-1, keepdims=True))
            numerator = pi_u if update.weights_at == "current" else log_old[run]
            g = dense_weight(correction, params, "logged", b[run], (*tables, numerator, 1.0), False)[index[run][part]]
            advantage = (old.R[index[run][part]] - b[run])[:, None]
            tokens_u = pi_u[np.arange(4), tokens[run][part]]
            old_tokens = log_old[run][np.arange(4), tokens[run][part]]
            derivative, mask = dense_token_derivative(update.loss, tokens_u, old_tokens, advantage, update.loss_params)
            score = np.eye(3)[tokens[run][part]] - np.exp(pi_u)[None]
            step = lr * np.einsum("mt,mtv->tv", g * derivative, score) / len(part)
            held, drift = held + mask.mean() / update.U, drift + (old_tokens - tokens_u).mean() / update.U
            expected_step, current = expected_step + step, current + step
        np.testing.assert_allclose(total[run], expected_step, rtol=0, atol=1e-12)
        assert clipped[run] == pytest.approx(held, abs=1e-15) and kl[run] == pytest.approx(drift, abs=1e-14)
        w = np.exp(log_old[run][np.arange(4), tokens[run]] - rows.log_logged[run][np.arange(4), tokens[run]])
        assert spread[run] == pytest.approx(w.std(), rel=1e-12)


@pytest.mark.parametrize("update", [Update("bypass", params={"dual_clip": 3.0}), Update("bypass", "cispo", {"eps_high": 0.05}),
                                    Update("bypass", "dppo_kl", {"delta_high": 0.05, "delta_low": 0.05}),
                                    Update("bypass", "reinforce", weights_at="current"), Update("recompute", "ipo_kl")],
                         ids=["bypass-ppo", "bypass-cispo", "bypass-dppo", "bypass-reinforce-current", "recompute-ipo"])
def test_sampled_mode_first_update_agrees_with_expected_mode_by_monte_carlo(update):
    """Step 0 in 3,000 runs of N = 8 (SGD, lr 1): the mean over runs of the step, the clipped share and the PPO KL
    equal expected mode's G⁰, clipped share and PPO KL within 5 standard errors; the batch's w spread squared has
    mean σ² − (1/N)·mean_t σ_t²/T (σ² w's variance over the tokens, σ_t² at position t: the pooled sample variance
    of N·T independent tokens)."""
    toy = make_toy(4, 3, 0.9, 11)
    runs, N = 3000, 8
    sampled = train(toy, {"tok_tis": {}}, "logged", TrainingConfig(1, 1.0, "sgd", "sampled", N=N, runs=runs,
                                                                     update=update))["tok_tis"]
    exact = train(toy, {"tok_tis": {}}, "logged", TrainingConfig(1, 1.0, "sgd", update=update))["tok_tis"]
    step = sampled.theta[:, 1] - sampled.theta[:, 0]
    exact_step = exact.theta[1] - exact.theta[0]
    error = np.abs(step.mean(axis=0) - exact_step) / (step.std(axis=0) / np.sqrt(runs) + 1e-15)
    assert error.max() < Z
    for name in ("clip_share", "ppo_kl"):
        values = getattr(sampled, name)[:, 0]
        assert abs(values.mean() - getattr(exact, name)[0]) < Z * values.std() / np.sqrt(runs) + 1e-15, name
    rows = ToyRows(toy.theta[None], toy.b, toy.mismatch, sampler=toy.sampler)
    log_old = {"bypass": rows.log_logged, "recompute": rows.log_pi}[update.anchor][0]
    w = np.exp(log_old - rows.log_logged[0])
    mu = rows.mu[0]
    mean_t, second_t = (mu * w).sum(axis=1), (mu * w**2).sum(axis=1)
    pooled = second_t.mean() - mean_t.mean()**2
    expected = pooled - (second_t - mean_t**2).mean() / (N * toy.T)
    squares = sampled.w_std[:, 0]**2
    assert abs(squares.mean() - expected) < Z * squares.std() / np.sqrt(runs) + 1e-15
    assert exact.w_std[0] == pytest.approx(np.sqrt(pooled), rel=1e-12)


# -- configuration ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, message", [
    ({"lag": 17}, "lag must be between 0 and 16"), ({"lag": -1}, "lag must be between"),
    ({"lag": 1.5}, "lag must be an integer"), ({"lag_draw": "gauss"}, "lag_draw must be one of fixed, uniform"),
    ({"mode": "sampled", "N": 2, "update": Update(minibatches=3)}, "N = 2 sequences cannot make 3 minibatches"),
    ({"update": "ppo"}, "update must be an Update")])
def test_a_config_out_of_range_names_what_is_wrong(arguments, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**arguments)


@pytest.mark.parametrize("arguments, message", [
    ({"anchor": "stale"}, "anchor must be one of recompute, rollout, bypass"),
    ({"loss": "grpo"}, "unknown loss 'grpo'"), ({"params": {"eps": 0.2}}, "loss ppo has no parameter 'eps'"),
    ({"params": {"eps_low": 1.5}}, r"ppo.eps_low = 1.5 is outside \[0, 1\]"),
    ({"params": {"dual_clip": 1.0}}, "dual_clip must be above 1"), ({"minibatches": 0}, "minibatches must be"),
    ({"minibatches": 9, "epochs": 8}, "at most 64"), ({"weights_at": "now"}, "weights_at must be one of")])
def test_an_update_out_of_range_names_what_is_wrong(arguments, message):
    with pytest.raises(ValueError, match=message):
        Update(**arguments)


def test_an_update_is_hashable_data_with_every_parameter_resolved():
    update = Update("bypass", "ppo", {"dual_clip": "3"}, 2, 2)
    assert update == Update("bypass", "ppo", (("dual_clip", 3.0),), 2, 2) and hash(update) == hash(
        Update("bypass", "ppo", {"dual_clip": 3.0, "eps_low": 0.2}, 2, 2))
    assert update.loss_params == {"clamp": None, "dual_clip": 3.0, "eps_high": 0.2, "eps_low": 0.2}
    assert update.U == 4 and Update(params={"clamp": "none"}).loss_params["clamp"] is None


@pytest.mark.parametrize("estimator, params", [("grpo", {"weight": "tok_tis"}), ("rloo", {}), ("seq_snis", {}),
                                               ("tis_bn", {}), ("m2po", {})])
def test_batch_coupled_corrections_take_the_general_path_as_their_own_estimate_at_r_1(estimator, params):
    """At mismatch 0 the bypass anchor is the trainer to the bit, so r = w = 1: the general sampled path (g from the
    whole batch, grpo's and rloo's centred rewards as A) steps where the estimator's own batch estimate does."""
    toy = make_toy(5, 3, 0.0, 4)
    config = TrainingConfig(6, 1.0, "sgd", "sampled", N=16, runs=3)
    general = train(toy, {estimator: params}, "logged", TrainingConfig(**{**config.__dict__,
                                                                           "update": Update("bypass")}))[estimator]
    own = train(toy, {estimator: params}, "logged", config)[estimator]
    np.testing.assert_allclose(general.theta, own.theta, rtol=0, atol=1e-12)


@pytest.mark.parametrize("weight", ["naive", "tok_tis"])
def test_rloo_with_one_sequence_per_minibatch_uses_the_batch_s_advantage(weight):
    """Issue 41, case 8: rloo at N = 7 in 7 minibatches, its weight at the current π_θ (verl's bypass), trains: each
    update's g is the weight's at π_θᵘ on its one sequence, and its advantage the whole batch's leave-one-out one,
    (r_i − mean of the other six), as the oracle sums it (the probe's small copy of such a run was refused with
    "advantages must be 1 finite numbers")."""
    toy = make_toy(4, 3, 0.8, 9)
    theta = toy.theta[None]
    rows = ToyRows(theta, toy.b, toy.mismatch)
    update = Update("bypass", "cispo", minibatches=7, weights_at="current")
    tokens = tokens_from_uniforms(np.random.default_rng(5).random((1, 7, 4)), rows.mu)
    lr, b = 0.7, np.zeros(1)
    params = resolve_params("rloo", {"weight": weight})
    total, _, _ = sampled_updates("rloo", params, rows, tokens, rows.log_logged, b, update,
                                  make_optimizer("sgd", lr, theta.shape), False)
    index = (tokens[0] * 3 ** np.arange(3, -1, -1)).sum(axis=-1)
    tables = (rows.log_mu[0], rows.log_logged[0])
    rewards = DenseToy.of_tables(*tables, rows.log_logged[0]).R[index]
    advantage = rewards - (rewards.sum() - rewards) / 6                          # leave-one-out over the batch
    current, expected_step = theta[0], 0.0
    for i in range(7):
        pi_u = np.log(np.exp(current) / np.exp(current).sum(axis=-1, keepdims=True))
        g = dense_weight(weight, {}, "none", 0.0, (*tables, pi_u, 1.0), False)[index[i]]
        tokens_u = pi_u[np.arange(4), tokens[0][i]]
        old_tokens = rows.log_logged[0][np.arange(4), tokens[0][i]]
        derivative, _ = dense_token_derivative("cispo", tokens_u[None], old_tokens[None],
                                               np.array([[advantage[i]]]), update.loss_params)
        score = np.eye(3)[tokens[0][i]] - np.exp(pi_u)
        step = lr * np.einsum("t,tv->tv", g * derivative[0], score)
        expected_step, current = expected_step + step, current + step
    assert np.all(np.isfinite(total))
    np.testing.assert_allclose(total[0], expected_step, rtol=0, atol=1e-12)
