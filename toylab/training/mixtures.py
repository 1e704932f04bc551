"""Training whose batches carry hidden variables: a mixture of experts' routing draws, or version switches.

Expected mode, the three policies' loop (``policies``) over an exact mixture (``engine.hidden``), every estimator a
row: at step k the engine holds the parameters s steps old (s fixed, or drawn per batch from 0 … η; at most k); each
row's batch is a mixture of components; the anchor π_old and the correction g on w = π_old/μ are frozen for the batch
(or read at each update: ``weights_at`` current, and AReaL's log-linear π_prox, which interpolates towards π_θ); U =
minibatches × epochs updates each step along the exact gradient of the expected surrogate,

    Gᵘ = Σ_{c,ρ,t,s} first[c, ρ, t, s]·D[c, ρ, t, s]·J_hᵀ(onehot(token s) − π_θᵘ,h)·scale,   h = the symbol's route

first the correction's reward-class marginals, D = ∂L/∂log π_θ at (log π_θᵘ, log π_old, log μ, ρ − b), and J_h the
Jacobian of the logits in the parameters under the routing the symbol is differentiated under (the identity for the
dense toy). Two models:

    Dense     the toy's θ (T, V) itself; its batches are version patterns (``engine.versions``): each token's μ from
              its version, the rollout anchor at each token's stamped version, AReaL's log-linear π_prox
              (``Versions.prox``) from the stamps, the stale prefix out of the loss when masked
    Routed    the toy's mixture of experts (``engine.experts``); its batches are the engine's router-error draws (per
              sequence: D components; per token: D·V symbols). π_θᵘ routes with its own router at θᵘ (replay off), with
              the routing recorded at the anchor's recomputation (R2: its own at the anchor's parameters) or with the
              engine's (R3); π_old is the trainer at the anchor's parameters (θ_k recompute, θ_{k−s} rollout) under
              the routing the replay mode records, or the logged μ (bypass)

on_policy is the reference: it samples the trainer's own π at θ_k, so π_old = μ = π_θk; its updates route with their
own router (off) or with the routing at θ_k (R2 and R3: the engine it is, is the trainer at θ_k).

Every step records, exactly: J of the trainer's own policy, E_μ[r] (the served policy's reward), the mismatch
E[Σ_t log μ(y_t | hidden) − log π_θk(y_t)] of the engine's sampled μ (KL(μ‖π), averaged over the hidden values),
χ²_seq = E[W²]/E[W]² − 1 of W = ∏_t π_θk/μ_log, ‖∇J‖, the cosine of G⁰ to ∇J and its relative error, the step's
cosine, the clipped share and the PPO KL averaged over the U updates (over the positions in the loss) and w's spread
under μ (``policies.token_spread``). on_policy's records are its engine's at θ_k (lag 0), as in ``policies``.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.routing import routing_problem
from toylab.analysis.versions import versions_problem
from toylab.engine.counts import (
    expected_reward,
    factorised_marginals,
    objective_and_gradient,
    reward_by_count,
)
from toylab.engine.experts import engine_routing, gates, logits, mixed_logits, moe_of, pullback, top_k_chosen
from toylab.engine.hidden import Mixture, by_route, correction_marginals
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import pipeline_tables
from toylab.engine.versions import (
    loglinear_alpha,
    loglinear_anchor,
    loss_positions,
    patterns,
    stamped_lags,
    token_lags,
)
from toylab.training.exact import reward_marginals
from toylab.training.optimizers import make_optimizer
from toylab.training.policies import lags, token_spread
from toylab.training.toy_rows import ToyRows

RECORDED = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias",
            "clip_share", "ppo_kl", "w_std", "lag")


@dataclass
class Batch:
    """The rows' batches, frozen for their U updates: component probabilities (C,), the engine's tables and π_old
    (R, C, T, S) for R rows, the symbols' tokens (S,) and routes (C, S), the positions in the loss (C, T) or None,
    the hidden values' log-probabilities (C, T, S) or None, AReaL's α (C, T) when π_old is its log-linear π_prox, and
    ``policy``: parameters (R, P) → (routing (R, H, L, T, E) or None, π (R, H, T, V))."""
    probability: np.ndarray
    log_sampled: np.ndarray
    log_logged: np.ndarray
    log_anchor: np.ndarray
    tokens: np.ndarray
    routes: np.ndarray
    policy: object
    mask: np.ndarray | None = None
    log_hidden: np.ndarray | None = None
    alpha: np.ndarray | None = None

    def mixture(self, row, log_anchor=None):
        return Mixture(self.probability, self.log_sampled[row], self.log_logged[row],
                       self.log_anchor[row] if log_anchor is None else log_anchor[row], self.tokens, self.mask,
                       self.log_hidden)

    @property
    def kept(self):
        inside = np.ones(self.log_sampled.shape[1:3], bool) if self.mask is None else self.mask
        return np.isfinite(self.log_sampled) & inside[None, :, :, None]


def gather(tables, index):
    """(R, C, T, S) from per-version tables (n, R, T, S) and a version index (C, T) per position."""
    T = index.shape[1]
    return np.moveaxis(tables[index, :, np.arange(T)[None, :], :], 2, 0)


class Dense:
    """The toy's θ (T, V) as the parameters (P = T·V), batches of version patterns."""

    def __init__(self, toy, versions):
        self.toy, self.versions = toy, versions
        self.T, self.V = toy.theta.shape
        self.start = toy.theta.ravel().copy()

    def theta(self, params):
        return params.reshape(*params.shape[:-1], self.T, self.V)

    def log_pi(self, params):
        theta = self.theta(params)
        return self.toy.sampler.scored_log_probabilities(theta, np.ones(theta.shape, bool))

    def objective(self, params):
        """(J (R,), ∇J (R, P), log π (R, T, V) of the trainer's own policy, its logits (R, T, V))."""
        log_pi = self.log_pi(params)
        J, grad = objective_and_gradient(np.exp(log_pi))
        return J, (grad * self.toy.sampler.score_scale).reshape(params.shape), log_pi, self.theta(params)

    def policy(self, params):
        return None, np.exp(self.log_pi(params))[:, None]

    def on_policy(self, params):
        log_pi = self.log_pi(params)[:, None]
        return Batch(np.ones(1), log_pi, log_pi, log_pi, np.arange(self.V), np.zeros((1, self.V), np.int64),
                     self.policy)

    def batch(self, params, history, s, anchor):
        T, V, toy = self.T, self.V, self.toy
        chosen = patterns(self.versions, T, s)
        true = np.array([token_lags(pattern, T) for pattern in chosen])                  # (C, T)
        stamped = np.array([stamped_lags(pattern, T, self.versions.stamp) for pattern in chosen])
        used = sorted(set(true.ravel().tolist()))
        tables = [pipeline_tables(self.theta(params), toy.b, toy.mismatch, toy.sampler, self.theta(history(v)))
                  for v in used]
        index = np.searchsorted(used, true)
        log_logged = gather(np.stack([table[1] for table in tables]), index)
        log_sampled = gather(np.stack([table[2] for table in tables]), index)
        C = len(chosen)
        if anchor == "rollout":
            stale = sorted(set(stamped.ravel().tolist()))
            log_anchor = gather(np.stack([self.log_pi(history(v)) for v in stale]), np.searchsorted(stale, stamped))
        elif anchor == "bypass":
            log_anchor = log_logged.copy()
        else:
            log_anchor = np.broadcast_to(self.log_pi(params)[:, None], log_logged.shape).copy()
        mask = np.array([loss_positions(pattern, T, self.versions.mask_stale) for pattern in chosen])
        return Batch(np.array([pattern.probability for pattern in chosen]), log_sampled, log_logged, log_anchor,
                     np.arange(V), np.zeros((C, V), np.int64), self.policy, None if mask.all() else mask,
                     alpha=loglinear_alpha(stamped) if anchor == "loglinear" else None)

    def gradient(self, params, chosen, u):
        return u.sum(axis=1).reshape(params.shape)


class Routed:
    """The toy's mixture of experts as the parameters (P = L·T·E + L·E·T·V), batches of the engine's draws."""

    def __init__(self, toy, experts, replay):
        self.toy, self.replay = toy, replay
        self.moe = moe_of(toy, experts)
        self.start = self.moe.params.copy()
        self.k = experts.top_k

    def own(self, params):
        return top_k_chosen(self.moe.layout.split(params)[0], self.k)

    def scored(self, z):
        return self.toy.sampler.scored_log_probabilities(z, np.ones(z.shape, bool))

    def under(self, params, chosen):
        """The trainer's logits (R, H, T, V) at ``params`` (R, P) under routings ``chosen`` (R, H, L, T, E)."""
        router, tables = self.moe.layout.split(params)
        return logits(router[:, None], tables[:, None], chosen)

    def objective(self, params):
        router, tables = self.moe.layout.split(params)
        own = self.own(params)
        z = logits(router, tables, own)
        log_pi = self.scored(z)
        J, grad = objective_and_gradient(np.exp(log_pi))
        d_router, d_experts = pullback(router, tables, own, grad * self.toy.sampler.score_scale)
        return J, self.moe.layout.join(d_router, d_experts), log_pi, z

    def policy_of(self, recorded):
        """parameters → (routing, π): the routing recorded (R2, R3), or the router's own at the parameters (off)."""
        def policy(params):
            chosen = np.broadcast_to(self.own(params)[:, None], recorded.shape) if self.replay == "off" else recorded
            return chosen, np.exp(self.scored(self.under(params, chosen)))
        return policy

    def on_policy(self, params):
        own = self.own(params)[:, None]
        log_pi = self.scored(self.under(params, own))
        return Batch(np.ones(1), log_pi, log_pi, log_pi, np.arange(self.toy.V), np.zeros((1, self.toy.V), np.int64),
                     self.policy_of(own))

    def batch(self, params, history, s, anchor):
        toy, moe = self.toy, self.moe
        engine_router, engine_tables = moe.layout.split(history(s))
        engine_chosen, scores = engine_routing(engine_router, moe.errors, moe.experts.router_error, self.k)
        engine_logits = mixed_logits(engine_tables[:, None], gates(scores, engine_chosen))          # (R, D, T, V)
        anchor_params = history(s) if anchor == "rollout" else params
        recorded = engine_chosen if self.replay == "R3" else \
            np.broadcast_to(self.own(anchor_params)[:, None], engine_chosen.shape)
        log_pi, log_logged, log_mu, _, _, _ = pipeline_tables(self.under(anchor_params, recorded), toy.b,
                                                              toy.mismatch, toy.sampler, engine_logits)
        log_anchor = log_logged.copy() if anchor == "bypass" else log_pi
        R, D, T, V = log_mu.shape
        policy = self.policy_of(recorded)
        if moe.experts.draw == "sequence":
            return Batch(np.full(D, 1 / D), log_mu, log_logged, log_anchor, np.arange(V),
                         np.repeat(np.arange(D)[:, None], V, axis=1), policy)

        def flat(table):
            return np.moveaxis(table, 1, 2).reshape(R, 1, T, D * V)
        hidden = np.full((1, T, D * V), -np.log(D))
        return Batch(np.ones(1), flat(log_mu) + hidden, flat(log_logged), flat(log_anchor), np.tile(np.arange(V), D),
                     np.repeat(np.arange(D), V)[None], policy, log_hidden=hidden)

    def gradient(self, params, chosen, u):
        router, tables = self.moe.layout.split(params)
        d_router, d_experts = pullback(router[:, None], tables[:, None], chosen, u)
        return self.moe.layout.join(d_router.sum(axis=1), d_experts.sum(axis=1))


def first_marginals(batch, estimators, b, log_numerator):
    """The correction's first marginals (R, C, 2, T, S) of each row's estimator on π_numerator/μ_log at baselines b
    (R,): through the training engine (``exact.reward_marginals``: its count recursion, or its split grid over the
    sequences; every row and component a row of it) when the symbols are the tokens and every position is in the
    loss; else through ``hidden.correction_marginals``, row by row."""
    R, C, T, S = batch.log_sampled.shape
    if S != len(np.unique(batch.tokens)) or batch.mask is not None:
        return np.stack([correction_marginals(batch.mixture(row, log_numerator), [estimators[row]], b[row:row + 1],
                                              second=False)[0][0] for row in range(R)])
    rows = ToyRows.__new__(ToyRows)
    kept = np.isfinite(batch.log_sampled).reshape(R * C, T, S)
    log_pi = np.where(kept, log_numerator.reshape(R * C, T, S), -np.inf)
    log_logged = batch.log_logged.reshape(R * C, T, S)
    with np.errstate(invalid="ignore"):
        log_rho = np.where(kept, log_pi - log_logged, np.inf)
    rows.__dict__.update(T=T, V=S, M=S**T, grid=split_grid(T, S), log_pi=log_pi, pi=np.exp(log_pi),
                         log_logged=log_logged, log_mu=batch.log_sampled.reshape(R * C, T, S),
                         mu=np.exp(batch.log_sampled).reshape(R * C, T, S), kept=kept, log_rho=log_rho,
                         rho=np.exp(log_rho), truncates=~kept.all(axis=(-2, -1)), b=None, mismatch=None, sampler=None,
                         score_scale=1.0)
    chosen = [estimator for estimator in estimators for _ in range(C)]
    marginals = reward_marginals(rows, chosen, np.repeat(b, C))
    return marginals.reshape(R, C, 2, T, S) * batch.probability[None, :, None, None, None]


def token_shares(batch):
    """q_c·P_c(r = ρ, x_t = s) on the positions in the loss: (R, C, 2, T, S), by the count recursion."""
    R, C, T, S = batch.log_sampled.shape
    ones = np.ones((R, C, T, S))
    inside = np.ones((C, T)) if batch.mask is None else batch.mask.astype(float)
    factors = type("Factors", (), {})()
    factors.token, factors.before, factors.after = ones * inside[None, :, :, None], ones, ones
    phi = reward_by_count(T)
    zeros = batch.tokens == 0
    shares = np.stack([factorised_marginals(np.exp(batch.log_sampled), factors,
                                            np.broadcast_to(part, (R, C, T + 1)), zeros)
                       for part in (1 - phi, phi)], axis=2)
    return shares * batch.probability[None, :, None, None, None]


def per_symbol(route_tables, routes, tokens):
    """(R, C, T, S): each symbol's entry of its route's table (R, H, T, V) at its token."""
    picked = route_tables[:, routes]                                             # (R, C, S, T, V)
    index = np.broadcast_to(tokens[None, None, :, None, None], (*picked.shape[:4], 1))
    return np.moveaxis(np.take_along_axis(picked, index, axis=-1)[..., 0], -1, -2)


def run_updates(model, batch, estimators, b, update, optimizer, params):
    """Every row's U updates of its batch: (G⁰ (R, P), the total step (R, P), clipped share (R,), PPO KL (R,)), the two
    records averaged over the U updates (see the module docstring)."""
    kept = batch.kept
    shares = token_shares(batch)
    positions = shares.sum(axis=(1, 2, 3, 4))
    advantages = np.stack([-b, 1 - b], axis=1)[:, None, :, None, None]             # (R, 1, 2, 1, 1)
    logged = np.where(kept, batch.log_logged, 0.0)[:, :, None]
    current = update.weights_at == "current" or batch.alpha is not None
    first_gradient, total, clipped, drift, first = None, 0.0, 0.0, 0.0, None
    for u in range(update.U):
        chosen, pi = batch.policy(params)
        log_pi = per_symbol(np.log(np.where(pi > 0, pi, 1.0)), batch.routes, batch.tokens)
        log_old = batch.log_anchor if batch.alpha is None else \
            loglinear_anchor(batch.log_logged, log_pi, batch.alpha[None])
        if first is None or current:
            first = first_marginals(batch, estimators, b, log_pi if update.weights_at == "current" else log_old)
        losses = update.token_loss(np.where(kept, log_pi, 0.0)[:, :, None], np.where(kept, log_old, 0.0)[:, :, None],
                                   logged, advantages)
        derivative = np.where(kept[:, :, None], losses.derivative, 0.0)
        held = (losses.clipped | losses.dual_clipped) & kept[:, :, None]
        clipped = clipped + np.sum(shares * held, axis=(1, 2, 3, 4)) / positions / update.U
        gap = np.subtract(log_old, log_pi, out=np.zeros(kept.shape), where=kept)
        drift = drift + np.sum(shares.sum(axis=2) * gap, axis=(1, 2, 3)) / positions / update.U
        x = by_route((first * derivative).sum(axis=2), batch.routes, batch.tokens, pi.shape[1], pi.shape[-1])
        gradient = model.gradient(params, chosen, (x - pi * x.sum(axis=-1, keepdims=True))
                                  * model.toy.sampler.score_scale)
        first_gradient = gradient if u == 0 else first_gradient
        step = optimizer.step(gradient)
        total = step if u == 0 else total + step
        params = params + step
    return first_gradient, total, clipped, drift


def population(batch, log_pi_own):
    """(E_μ[r], the mismatch KL, χ²_seq) per row (R,) of its batch against the trainer's own log π (R, T, V)."""
    R, C, T, S = batch.log_sampled.shape
    kept = np.isfinite(batch.log_sampled)
    sampled = np.exp(batch.log_sampled)
    log_pi = log_pi_own[:, None][..., batch.tokens]                               # (R, 1, T, S)
    V = log_pi_own.shape[-1]
    marginals = np.zeros((R, C, T, V))
    np.add.at(np.moveaxis(marginals, -1, 0), batch.tokens, np.moveaxis(sampled, -1, 0))
    reward = expected_reward(marginals) @ batch.probability
    conditional = batch.log_sampled if batch.log_hidden is None else batch.log_sampled - batch.log_hidden
    with np.errstate(over="ignore", invalid="ignore"):
        kl_terms = np.subtract(conditional, log_pi, out=np.zeros(kept.shape), where=kept)
        kl = np.sum(sampled * kl_terms, axis=(-2, -1)) @ batch.probability
        w = np.where(kept, np.exp(np.subtract(log_pi, batch.log_logged, out=np.zeros(kept.shape), where=kept)), 0.0)
        mean = np.prod(np.sum(sampled * w, axis=-1), axis=-1) @ batch.probability
        second = np.prod(np.sum(sampled * w**2, axis=-1), axis=-1) @ batch.probability
        chi2 = second / mean**2 - 1
    return reward, kl, chi2


def w_spread(batch, log_old):
    """Each row's standard deviation of w = π_old/μ_log over its batch's tokens in the loss, under μ."""
    kept = batch.kept
    with np.errstate(over="ignore"):
        w = np.where(kept, np.exp(np.subtract(log_old, batch.log_logged, out=np.zeros(kept.shape), where=kept)), 0.0)
    probability = batch.probability[None, :, None, None] * np.where(kept, np.exp(batch.log_sampled), 0.0)
    R, C, T, S = probability.shape
    return token_spread(np.moveaxis(probability, 1, 2).reshape(R, T, C * S), np.moveaxis(w, 1, 2).reshape(R, T, C * S))


def train_mixture(toy, selection, baseline, config, model, versions_prox="recompute", progress=lambda k: None):
    """{record: array (R, K + 1, …)} for the rows of ``selection`` ({id: resolved parameters}) under ``config``
    (expected mode) with ``model`` (Dense or Routed), "params" among them (see the module docstring).
    ``versions_prox`` "loglinear" replaces the recomputed anchor by AReaL's log-linear π_prox."""
    ids = list(selection)
    on_policy = np.array([id == "on_policy" for id in ids])
    estimators = [("naive", {}) if id == "on_policy" else (id, selection[id]) for id in ids]
    anchor = "loglinear" if versions_prox == "loglinear" else config.update.anchor
    params = np.repeat(model.start[None], len(ids), axis=0)
    groups = {"engine": ~on_policy, "own": on_policy}      # on_policy samples its own π: a batch of its own
    optimizers = {group: make_optimizer(config.optimizer, config.lr, (int(members.sum()), model.start.size))
                  for group, members in groups.items()}    # each steps once per update, as one optimizer of every row
    past = [params]
    out = {name: [] for name in (*RECORDED, "params")}
    for k, s in enumerate(lags(toy.seed, config.lag, config.lag_draw, config.steps)):
        def history(v):
            return past[max(len(past) - 1 - v, 0)]
        J, grad, log_pi_own, z = model.objective(params)
        step, first = np.zeros_like(params), np.zeros_like(params)
        values = {name: np.zeros(len(ids)) for name in ("logged_reward", "kl_mu_pi", "chi2_seq", "clip_share",
                                                        "ppo_kl", "w_std")}
        b_all = np.zeros(len(ids))
        for group, members in groups.items():
            if not members.any():
                continue
            index = np.flatnonzero(members)
            here = params[index]
            lag = 0 if group == "own" else s

            def group_history(v, index=index):
                return history(v)[index]
            engine = model.batch(here, group_history, lag, anchor)
            reward, kl, chi2 = population(engine, log_pi_own[index])
            b = {"none": np.zeros(len(index)), "logged": reward, "true": J[index]}[baseline]
            batch = model.on_policy(here) if group == "own" else engine
            chosen = [estimators[i] for i in index]
            first[index], step[index], clipped, drift = run_updates(model, batch, chosen, b, config.update,
                                                                    optimizers[group], here)
            spread = np.zeros(len(index)) if group == "own" else w_spread(batch, _anchor_at(batch, log_pi_own[index]))
            for name, value in (("logged_reward", reward), ("kl_mu_pi", kl), ("chi2_seq", chi2),
                                ("clip_share", clipped), ("ppo_kl", drift), ("w_std", spread)):
                values[name][index] = value
            b_all[index] = b
        grad_norm = np.linalg.norm(grad, axis=-1)
        record = values | {"theta": z, "params": params, "J": J, "grad_norm": grad_norm,
                           "cosine": _cosine(first, grad), "step_cosine": _cosine(step, grad),
                           "rel_bias": np.where(grad_norm >= 1e-10, np.linalg.norm(first - grad, axis=-1)
                                                / np.where(grad_norm > 0, grad_norm, 1.0), np.nan),
                           "lag": np.where(on_policy, 0, s)}
        for name in out:
            out[name].append(record[name])
        progress(k)
        if k < config.steps:
            params = params + step
            past.append(params)
            del past[:-(config.lag + 1)]
    return {name: np.stack(values, axis=1) for name, values in out.items()}


def _anchor_at(batch, log_pi_own):
    """The batch's π_old at θ_k: its own, or the log-linear π_prox at π_θk."""
    if batch.alpha is None:
        return batch.log_anchor
    log_pi = log_pi_own[:, None][..., batch.tokens]
    return loglinear_anchor(batch.log_logged, np.broadcast_to(log_pi, batch.log_logged.shape), batch.alpha[None])


def _cosine(a, b):
    norm = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.sum(a * b, axis=-1) / norm
    small = (np.linalg.norm(a, axis=-1) < 1e-10) | (np.linalg.norm(b, axis=-1) < 1e-10)
    return np.where(small, np.nan, value)


def train_hidden(toy, selection, baseline, config, progress=lambda k: None):
    """``train``'s records (RECORDED) for a run with hidden variables: the model is the toy's mixture of experts
    (``config.experts``, replayed as ``config.replay``) or its θ with ``config.versions``; ValueError for a pipeline
    the model does not cover, or a switch that does not fit T."""
    problem = (routing_problem if config.experts is not None else versions_problem)(toy.sampler)
    if problem:
        raise ValueError(problem)
    config.versions.check(toy.T)
    model = Routed(toy, config.experts, config.replay) if config.experts is not None else Dense(toy, config.versions)
    records = train_mixture(toy, selection, baseline, config, model, config.versions.prox, progress)
    return {name: records[name] for name in RECORDED}

