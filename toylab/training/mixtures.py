"""Training whose batches carry hidden variables: a mixture of experts' routing draws, or version switches.

Expected mode, the three policies' loop (``policies``) over an exact mixture (``engine.hidden``): at step k the engine
holds the parameters s steps old (s fixed, or drawn per batch from 0 … η; at most k); each estimator's batch is a
mixture of components; the anchor π_old and the correction g on w = π_old/μ are frozen for the batch (or read at each
update: ``weights_at`` current, and AReaL's log-linear π_prox, which interpolates towards π_θ); U = minibatches ×
epochs updates each step along the exact gradient of the expected surrogate,

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
under μ (``policies.token_spread``).
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.routing import (
    engine_draws,
    objective_gradient,
    on_policy_routed,
    routed,
    trainer_routing,
)
from toylab.analysis.versions import version_tables
from toylab.engine.counts import objective_and_gradient
from toylab.engine.experts import logits, moe_of, pullback, top_k_chosen
from toylab.engine.hidden import Mixture, by_route, correction_marginals, expected_reward_of
from toylab.engine.versions import loglinear_alpha, loglinear_anchor
from toylab.training.optimizers import make_optimizer
from toylab.training.policies import lags, token_spread


@dataclass
class Batch:
    """One estimator's batch, frozen for its U updates: the mixture (its log_anchor is π_old, or π_θk under a rule
    read at each update), each symbol's route, how π_θ is computed under the routes (``policy``: parameters → (routing
    (H, L, T, E) or None, π (H, T, V))) and the tokens' stamped lags (the log-linear anchor's α)."""
    mixture: Mixture
    routes: np.ndarray
    policy: object
    alpha: np.ndarray | None = None


class Dense:
    """The toy's θ (T, V) as the parameters (P = T·V), batches of version patterns."""

    def __init__(self, toy, versions):
        self.toy, self.versions = toy, versions
        self.T, self.V = toy.theta.shape
        self.start = toy.theta.ravel().copy()

    def log_pi(self, params):
        return self.toy.sampler.scored_log_probabilities(params.reshape(self.T, self.V), np.ones((self.T, self.V), bool))

    def objective(self, params):
        """(J, ∇J (P,), log π (T, V) of the trainer's own policy, its logits (T, V))."""
        log_pi = self.log_pi(params)
        J, grad = objective_and_gradient(np.exp(log_pi))
        return float(J), (grad * self.toy.sampler.score_scale).ravel(), log_pi, params.reshape(self.T, self.V)

    def policy(self, params):
        return None, np.exp(self.log_pi(params))[None]

    def batch(self, params, history, s, anchor, on_policy):
        T, V = self.T, self.V
        if on_policy:
            log_pi = self.log_pi(params)[None]
            return Batch(Mixture(np.ones(1), log_pi, log_pi, log_pi, np.arange(V)), np.zeros((1, V), np.int64),
                         self.policy)
        tables = version_tables(self.toy, lambda v: history(v).reshape(T, V), self.versions, s,
                                params.reshape(T, V))
        mixture = tables.mixture
        if anchor == "bypass":
            mixture = mixture.with_anchor(mixture.log_logged.copy())
        elif anchor == "rollout":
            stale = {int(v): self.log_pi(history(int(v))) for v in np.unique(tables.stamped)}
            mixture = mixture.with_anchor(np.array([[stale[int(v)][t] for t, v in enumerate(row)]
                                                    for row in tables.stamped]))
        alpha = loglinear_alpha(tables.stamped) if anchor == "loglinear" else None
        return Batch(mixture, np.zeros((mixture.shape[0], V), np.int64), self.policy, alpha)

    def gradient(self, params, chosen, u):
        """The parameters' gradient (P,) of Σ_h ⟨logits_h, u_h⟩ (u (H, T, V)): the logits are θ."""
        return u.sum(axis=0).ravel()

    def norms(self, params, chosen, pi):
        return (1 - 2 * pi + np.sum(pi**2, axis=-1, keepdims=True)) * self.toy.sampler.score_scale**2


class Routed:
    """The toy's mixture of experts as the parameters (P = L·T·E + L·E·T·V), batches of the engine's draws."""

    def __init__(self, toy, experts, replay):
        self.toy, self.replay = toy, replay
        self.moe = moe_of(toy, experts)
        self.start = self.moe.params.copy()

    def objective(self, params):
        J, grad = objective_gradient(self.toy, self.moe, params)
        router, tables = self.moe.layout.split(params)
        z = logits(router, tables, top_k_chosen(router, self.moe.experts.top_k))
        return J, grad, self.toy.sampler.scored_log_probabilities(z, np.ones(z.shape, bool)), z

    def batch(self, params, history, s, anchor, on_policy):
        moe, toy = self.moe, self.toy
        if on_policy:
            view = on_policy_routed(toy, moe, params)
            return Batch(view.mixture, view.routes, self._policy(view.chosen, own=self.replay == "off"))
        engine_chosen, _, engine_logits = engine_draws(moe, history(s))
        anchor_params = history(s) if anchor == "rollout" else params
        recorded = trainer_routing(moe, anchor_params, self.replay, engine_chosen)
        view = routed(toy, moe, anchor_params, recorded, engine_logits)
        mixture = view.mixture.with_anchor(view.mixture.log_logged.copy()) if anchor == "bypass" else view.mixture
        return Batch(mixture, view.routes, self._policy(recorded, own=self.replay == "off"))

    def _policy(self, recorded, own):
        """parameters → (routing (H, L, T, E), π (H, T, V)): the routing recorded (R2, R3), or the router's own at
        the parameters given (off)."""
        moe, sampler = self.moe, self.toy.sampler

        def policy(params):
            router, tables = moe.layout.split(params)
            chosen = np.broadcast_to(top_k_chosen(router, moe.experts.top_k), recorded.shape) if own else recorded
            z = logits(router, tables, chosen)
            return chosen, np.exp(sampler.scored_log_probabilities(z, np.ones(z.shape, bool)))
        return policy

    def gradient(self, params, chosen, u):
        router, tables = self.moe.layout.split(params)
        d_router, d_experts = pullback(router, tables, chosen, u)
        return self.moe.layout.join(d_router.sum(axis=0), d_experts.sum(axis=0))


def per_symbol(route_tables, routes, tokens):
    """(C, T, S): each symbol's entry of its route's table (H, T, V) at its token."""
    picked = route_tables[routes]                                              # (C, S, T, V)
    index = np.broadcast_to(tokens[None, :, None, None], (*picked.shape[:3], 1))
    return np.moveaxis(np.take_along_axis(picked, index, axis=-1)[..., 0], -1, -2)


class Updates:
    """One estimator's U updates of its batch (see the module docstring)."""

    def __init__(self, model, batch, estimator, b, update, optimizer):
        self.model, self.batch, self.update, self.b, self.optimizer = model, batch, update, b, optimizer
        self.estimator = estimator
        mixture = batch.mixture
        self.kept = mixture.kept & mixture.loss_mask[..., None]
        self.advantages = np.array([-b, 1 - b])[None, :, None, None]
        self.frozen = None
        self.tokens = correction_marginals(mixture, [("naive", {})], np.array([b]))[0][0]    # q·P(r = ρ, x_t = s)

    def anchor(self, log_pi_symbols):
        """log π_old (C, T, S): the batch's, or the log-linear π_prox at the current π_θ."""
        mixture = self.batch.mixture
        if self.batch.alpha is None:
            return mixture.log_anchor
        return loglinear_anchor(mixture.log_logged, log_pi_symbols, self.batch.alpha)

    def marginals(self, log_old, log_pi_symbols):
        """The correction's first marginals (C, 2, T, S) on its ratio: π_old/μ frozen, or read at this update."""
        current = self.update.weights_at == "current" or self.batch.alpha is not None
        if self.frozen is not None and not current:
            return self.frozen
        numerator = log_pi_symbols if self.update.weights_at == "current" else log_old
        on_policy = self.estimator[0] == "on_policy"
        first = correction_marginals(self.batch.mixture.with_anchor(numerator), [("naive", {}) if on_policy else
                                                                                 self.estimator], np.array([self.b]))[0][0]
        self.frozen = first
        return first

    def run(self, params):
        """(G⁰ (P,), the total step (P,), clipped share, PPO KL), the records averaged over the U updates."""
        update, batch, mixture = self.update, self.batch, self.batch.mixture
        first_gradient, total, clipped, drift = None, 0.0, 0.0, 0.0
        positions = self.tokens.sum()
        logged = np.where(self.kept, mixture.log_logged, 0.0)[:, None]
        for u in range(update.U):
            chosen, pi = batch.policy(params)
            log_pi_symbols = per_symbol(np.log(np.where(pi > 0, pi, 1.0)), batch.routes, mixture.tokens)
            log_old = self.anchor(log_pi_symbols)
            first = self.marginals(log_old, log_pi_symbols)
            losses = update.token_loss(np.where(self.kept, log_pi_symbols, 0.0)[:, None],
                                       np.where(self.kept, log_old, 0.0)[:, None], logged, self.advantages)
            derivative = np.where(self.kept[:, None], losses.derivative, 0.0)
            held = (losses.clipped | losses.dual_clipped) & self.kept[:, None]
            clipped += float(np.sum(self.tokens * held)) / positions / update.U
            drift += float(np.sum(self.tokens.sum(axis=1) * np.where(self.kept, log_old - log_pi_symbols, 0.0))) \
                / positions / update.U
            x = by_route((first * derivative).sum(axis=1), batch.routes, mixture.tokens, pi.shape[0], pi.shape[-1])
            u_vectors = (x - pi * x.sum(axis=-1, keepdims=True)) * self.model.toy.sampler.score_scale
            gradient = self.model.gradient(params, chosen, u_vectors)
            first_gradient = gradient if u == 0 else first_gradient
            step = self.optimizer.step(gradient)
            total = step if u == 0 else total + step
            params = params + step
        return first_gradient, total, clipped, drift


def w_spread(mixture, log_old):
    """w = π_old/μ_log's standard deviation over the batch's tokens under μ (positions in the loss)."""
    kept = mixture.kept & mixture.loss_mask[..., None]
    with np.errstate(over="ignore"):
        w = np.where(kept, np.exp(np.subtract(log_old, mixture.log_logged, out=np.zeros(kept.shape), where=kept)), 0.0)
    probability = mixture.probability[:, None, None] * np.where(kept, mixture.sampled, 0.0)
    C, T, S = probability.shape
    return float(token_spread(probability.transpose(1, 0, 2).reshape(1, T, C * S),
                              w.transpose(1, 0, 2).reshape(1, T, C * S))[0])


def population(mixture, log_pi_own):
    """(E_μ[r], the mismatch KL, χ²_seq) of a batch against the trainer's own log π (T, V) (see the module
    docstring)."""
    kept = mixture.kept
    log_pi = log_pi_own[:, mixture.tokens][None]                                  # (1, T, S)
    sampled = mixture.sampled
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        kl_terms = np.subtract(mixture.log_conditional, log_pi, out=np.zeros(kept.shape), where=kept)
        kl = float(mixture.probability @ np.sum(sampled * kl_terms, axis=(-2, -1)))
        w = np.where(kept, np.exp(np.subtract(log_pi, mixture.log_logged, out=np.zeros(kept.shape), where=kept)), 0.0)
        mean = mixture.probability @ np.prod(np.sum(sampled * w, axis=-1), axis=-1)
        second = mixture.probability @ np.prod(np.sum(sampled * w**2, axis=-1), axis=-1)
        chi2 = float(second / mean**2 - 1)
    return expected_reward_of(mixture, log_pi_own.shape[-1]), kl, chi2


def train_mixture(toy, selection, baseline, config, model, versions_prox="recompute", progress=lambda k: None):
    """{estimator id: records} for the selection ({id: resolved parameters}) under ``config`` (expected mode) with
    ``model`` (Dense or Routed): each record an array over k = 0 … K (see the module docstring). ``versions_prox``
    "loglinear" replaces the recomputed anchor by AReaL's log-linear π_prox."""
    records = {id: {name: [] for name in RECORDED} for id in selection}
    params = {id: model.start.copy() for id in selection}
    histories = {id: [model.start.copy()] for id in selection}
    optimizers = {id: make_optimizer(config.optimizer, config.lr, model.start.shape) for id in selection}
    anchor = "loglinear" if versions_prox == "loglinear" else config.update.anchor
    for k, s in enumerate(lags(toy.seed, config.lag, config.lag_draw, config.steps)):
        for id, given in selection.items():
            on_policy = id == "on_policy"
            theta, past = params[id], histories[id]
            J, grad, log_pi_own, z = model.objective(theta)

            def history(v, past=past):
                return past[max(len(past) - 1 - v, 0)]
            engine = model.batch(theta, history, 0 if on_policy else s, anchor, False)
            logged_reward, kl, chi2 = population(engine.mixture, log_pi_own)
            b = {"none": 0.0, "logged": logged_reward, "true": J}[baseline]
            batch = model.batch(theta, history, 0, anchor, True) if on_policy else engine
            first, total, clipped, drift = Updates(model, batch, (id, given), b, config.update,
                                                   optimizers[id]).run(theta)
            grad_norm = float(np.linalg.norm(grad))
            values = {"theta": z, "params": theta, "J": J, "logged_reward": logged_reward, "grad_norm": grad_norm, "kl_mu_pi": kl,
                      "chi2_seq": chi2, "cosine": _cosine(first, grad), "step_cosine": _cosine(total, grad),
                      "rel_bias": float(np.linalg.norm(first - grad)) / grad_norm if grad_norm >= 1e-10 else np.nan,
                      "clip_share": clipped, "ppo_kl": drift,
                      "w_std": 0.0 if on_policy else w_spread(batch.mixture, _anchor_at(batch, log_pi_own)),
                      "lag": 0 if on_policy else s}
            for name in RECORDED:
                records[id][name].append(values[name])
            if k < config.steps:
                params[id] = theta + total
                past.append(params[id])
                del past[:-(config.lag + 1)]
        progress(k)
    return {id: {name: np.array(values) for name, values in record.items()} for id, record in records.items()}


RECORDED = ("theta", "params", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias",
            "clip_share", "ppo_kl", "w_std", "lag")


def _anchor_at(batch, log_pi_own):
    """The batch's π_old at θ_k: its own, or the log-linear π_prox at π_θk."""
    mixture = batch.mixture
    if batch.alpha is None:
        return mixture.log_anchor
    return loglinear_anchor(mixture.log_logged, np.broadcast_to(log_pi_own[:, mixture.tokens], mixture.shape),
                            batch.alpha)


def _cosine(a, b):
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if norm_a < 1e-10 or norm_b < 1e-10:
        return np.nan
    return float(a @ b) / (norm_a * norm_b)
