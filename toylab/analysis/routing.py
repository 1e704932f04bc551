"""Routing mismatch, exactly: each correction's bias and variance with and without routing replay.

The toy's mixture of experts (``engine.experts``): the trainer routes with its router S, the engine with S + σ·ε_j,
j one of D equally likely draws made per sequence or per token. A token the engine samples carries the draw as a hidden
variable; the engine logs its probability under the routing it drew, μ(y_t | j). The trainer computes π_old and π_θ

    off, R2   under its own routing R*: w_t = π(y_t)/μ(y_t | j_t)      (R2 differs from off only across the updates
                                                                      of a batch: ``training.mixtures``)
    R3        under the engine's routing of the token: w_t = π(y_t | j_t)/μ(y_t | j_t), the logit error b alone left

and its gradient flows through the routing it computed under: ∇_θ log π(y_t | R) by ``experts.pullback``. Everything
is an exact sum over the draws and the sequences (``engine.hidden``: D components of V symbols per position when the
draw is per sequence, one component of D·V symbols when it is per token), at θ₀ with the anchor recomputed and one
update (so each estimator's gradient is its plain one, A·c_t per token).

Three gradients to hold it against, all in the parameters (router and experts):

    ∇J      of J = E_π[r], the trainer's own policy (its routing): what the lab calls the objective everywhere
    ∇J_μ    of J_μ = E_μ[r], the policy the engine serves: its routing draws, gates, logit error and sampler, the draws'
            distribution held fixed (a top-k choice has no gradient), the sampler's rounding taken as the identity
            and its kept set as fixed. Per sequence J_μ = (1/D)·Σ_j J(μ(·|j)); per token J_μ = J(μ̄), μ̄_t the mean
            of μ_t(·|j) over the draws
    E ĝ     an estimator's mean: under R3 sequence IS is unbiased for (1/D)·Σ_j ∇J(π(·|j)) with the routings held,
            the trainer's numbers under the engine's routing — neither ∇J nor ∇J_μ (what replay costs)

A trainer that keeps the sampler's mask (scored keep_mask) restricts π to the engine's kept set, which the router
error changes draw by draw: not modelled here (refused).
"""

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.estimators import resolve_params
from toylab.catalogue.replay import REPLAYS
from toylab.engine.counts import (
    expected_reward,
    objective_and_gradient,
    reward_by_count,
    zero_count_distribution,
)
from toylab.engine.experts import (
    Experts,
    engine_routing,
    flip_rates,
    gates,
    logits,
    mixed_logits,
    moe_of,
    pullback,
    score_norms,
    top_k_chosen,
)
from toylab.engine.hidden import Mixture, by_route, correction_marginals, expected_reward_of, mean_log_ratio
from toylab.engine.toy import pipeline_tables


def routing_problem(sampler) -> str | None:
    """None, or why the routing model does not cover this pipeline."""
    if sampler.scored == "keep_mask":
        return ("a trainer that keeps the sampler's mask (scored keep_mask) restricts π to the engine's kept set, "
                "which the router error changes from draw to draw; use scored plain or temperature with routing")
    return None


@dataclass(frozen=True)
class Routed:
    """What the trainer reads at one θ for one replay mode: the ``mixture`` (the engine's draws and tokens, its logged
    μ, the trainer's π as the correction's π_old), and for each route h (one per draw) the routing the trainer
    differentiates under (``chosen`` (H, L, T, E)) and its π there (``pi`` (H, T, V)); ``routes`` (C, S) maps each
    symbol of each component to its route."""
    mixture: Mixture
    routes: NDArray[np.int64]
    chosen: NDArray[np.bool_]
    pi: NDArray[np.float64]
    scale: float


def engine_draws(moe, engine_params):
    """(chosen, scores (D, L, T, E), logits (D, T, V)): the engine's routing, gate scores and logits for each draw,
    from the parameters it holds."""
    router, experts = moe.layout.split(engine_params)
    chosen, scores = engine_routing(router, moe.errors, moe.experts.router_error, moe.experts.top_k)
    return chosen, scores, mixed_logits(experts, gates(scores, chosen))


def trainer_routing(moe, params, replay, engine_chosen, recorded=None):
    """(D, L, T, E): the routing the trainer computes a token of draw j under: the engine's (R3), the one ``recorded``
    (R2, when given), or its own router's at ``params``."""
    if replay == "R3":
        return engine_chosen
    own = recorded if recorded is not None else top_k_chosen(moe.layout.split(params)[0], moe.experts.top_k)
    return np.broadcast_to(own, engine_chosen.shape)


def routed(toy, moe, params, chosen, engine_logits) -> Routed:
    """The trainer at ``params`` under the routing ``chosen`` (D, L, T, E) for each draw, against the engine's logits
    (D, T, V): the pipeline's tables (``toy.pipeline_tables``) arranged as a Mixture by the draw's kind."""
    router, experts = moe.layout.split(params)
    trainer_logits = logits(router, experts, chosen)
    log_pi, log_logged, log_mu, _, _, _ = pipeline_tables(trainer_logits, toy.b, toy.mismatch, toy.sampler,
                                                          engine_logits)
    D, T, V = log_pi.shape
    scale = toy.sampler.score_scale
    if moe.experts.draw == "sequence":
        mixture = Mixture(np.full(D, 1 / D), log_mu, log_logged, log_pi, np.arange(V))
        routes = np.repeat(np.arange(D)[:, None], V, axis=1)
    else:
        def flat(table):
            return np.moveaxis(table, 0, 1).reshape(1, T, D * V)
        hidden = np.full((1, T, D * V), -np.log(D))
        mixture = Mixture(np.ones(1), flat(log_mu) + hidden, flat(log_logged), flat(log_pi), np.tile(np.arange(V), D),
                          log_hidden=hidden)
        routes = np.repeat(np.arange(D), V)[None]
    return Routed(mixture, routes, chosen, np.exp(log_pi), scale)


def own_policy(toy, moe, params):
    """(own routing (L, T, E), the trainer's scored log π (T, V)) at ``params``."""
    router, experts = moe.layout.split(params)
    own = top_k_chosen(router, moe.experts.top_k)
    return own, toy.sampler.scored_log_probabilities(logits(router, experts, own), np.ones(toy.theta.shape, bool))


def on_policy_routed(toy, moe, params) -> Routed:
    """The trainer sampling its own π (no engine): one component, its own routing."""
    own, log_pi = own_policy(toy, moe, params)
    V = toy.V
    return Routed(Mixture(np.ones(1), log_pi[None], log_pi[None], log_pi[None], np.arange(V)),
                  np.zeros((1, V), np.int64), own[None], np.exp(log_pi)[None], toy.sampler.score_scale)


def objective_gradient(toy, moe, params):
    """(J, ∇J (P,)): the trainer's own policy's objective and its gradient in the parameters."""
    router, experts = moe.layout.split(params)
    own, log_pi = own_policy(toy, moe, params)
    J, grad = objective_and_gradient(np.exp(log_pi))
    return float(J), moe.layout.join(*pullback(router, experts, own, grad * toy.sampler.score_scale))


def count_slopes(q):
    """∂J/∂q_t = E[r(K₋ₜ + 1) − r(K₋ₜ)] for independent positions with P(token 0) = q (…, T): (…, T)."""
    T = q.shape[-1]
    left_out = np.repeat(q[..., None, :], T, axis=-2)
    left_out[..., np.arange(T), np.arange(T)] = 0.0
    return zero_count_distribution(left_out)[..., :-1] @ np.diff(reward_by_count(T))


def served_gradient(toy, moe, engine_params):
    """(J_μ, ∇J_μ (P,)): the served policy's objective and gradient (see the module docstring)."""
    chosen, scores, engine_logits = engine_draws(moe, engine_params)
    _, experts = moe.layout.split(engine_params)
    log_mu = pipeline_tables(engine_logits, toy.b, toy.mismatch, toy.sampler)[2]
    mu = np.exp(log_mu)                                                          # (D, T, V)
    D = mu.shape[0]
    if moe.experts.draw == "sequence":
        J = float(np.mean(expected_reward(mu)))
        slopes = count_slopes(mu[..., 0]) / D                                    # (D, T)
    else:
        mean = mu.mean(axis=0)
        J = float(expected_reward(mean))
        slopes = np.broadcast_to(count_slopes(mean[:, 0]), (D, toy.T)) / D
    u = slopes[..., None] * mu[..., :1] * (np.eye(toy.V)[0] - mu) / toy.sampler.temperature
    d_router, d_experts = pullback(scores, experts, chosen, u)
    return J, moe.layout.join(d_router.sum(axis=0), d_experts.sum(axis=0))


@dataclass(frozen=True)
class HiddenMoments:
    """Each estimator's exact mean gradient (E, P) and second moment E‖ĝ‖² (E,)."""
    mean: NDArray[np.float64]
    second: NDArray[np.float64]


def plain_moments(toy, moe, params, routes: Routed, estimators, b) -> HiddenMoments:
    """The estimators' exact moments when each token's gradient weight is A·c_t (the anchor recomputed, one update)."""
    first, second = correction_marginals(routes.mixture, estimators, np.full(len(estimators), b))
    advantage = np.array([-b, 1 - b])[None, None, :, None, None]
    return moments_of((first * advantage).sum(axis=2), (second * advantage**2).sum(axis=2), moe, params, routes)


def moments_of(weighted_first, weighted_second, moe, params, routes: Routed) -> HiddenMoments:
    """Moments from the symbols' weighted marginals (E, C, T, S): Σ first·J_hᵀ(onehot − π_h) and Σ second·‖J_hᵀ(onehot
    − π_h)‖² over the routes h the symbols are differentiated under."""
    router, experts = moe.layout.split(params)
    H, T, V = routes.pi.shape
    x1 = by_route(weighted_first, routes.routes, routes.mixture.tokens, H, V)   # (E, H, T, V)
    x2 = by_route(weighted_second, routes.routes, routes.mixture.tokens, H, V)
    u = (x1 - routes.pi * x1.sum(axis=-1, keepdims=True)) * routes.scale
    d_router, d_experts = pullback(router, experts, routes.chosen, u)
    mean = moe.layout.join(d_router.sum(axis=1), d_experts.sum(axis=1))
    norms = score_norms(router, experts, routes.chosen, routes.pi, routes.scale)
    return HiddenMoments(mean, np.sum(x2 * norms, axis=(-3, -2, -1)))


@dataclass(frozen=True)
class ReplayRow:
    """One estimator under one replay mode: its relative bias, std at N, cosines to ∇J and ∇J_μ."""
    estimator: str
    replay: str
    rel_bias: float
    rel_std: float
    cosine: float | None
    served_cosine: float | None
    served_rel_bias: float | None         # None where ∇J_μ is below SMALLEST_SERVED (no relative bias to it)


@dataclass(frozen=True)
class RoutingView:
    """The routing analysis at θ₀: population numbers per replay mode and each estimator's row under each."""
    J: float
    served_J: float
    grad_norm: float
    served_grad_norm: float
    flips: NDArray[np.float64]              # per decision (L, T)
    token_flips: NDArray[np.float64]        # per token (T,): some layer flipped
    sequence_flips: float                   # P(some decision of the sequence flipped)
    kl: dict                                # replay → k1 estimate of KL(μ‖π_old), E[Σ_t log μ_log − log π_old]
    logged_reward: float
    rows: tuple


def cosine(a, b):
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return None if norm < 1e-20 else min(max(float(a @ b) / norm, -1.0), 1.0)


def routing_view(toy, experts: Experts, selection, baseline="none", N=64, replays=REPLAYS) -> RoutingView:
    """Every estimator of ``selection`` ({id: params}, exact and without an additive term) under each replay mode, at
    the toy's θ₀ (see the module docstring). The baseline: none, logged (E_μ[r], the served reward) or true (J)."""
    problem = routing_problem(toy.sampler)
    if problem:
        raise ValueError(problem)
    moe = moe_of(toy, experts)
    params = moe.params
    J, grad = objective_gradient(toy, moe, params)
    served_J, served = served_gradient(toy, moe, params)
    b = {"none": 0.0, "logged": served_J, "true": J}[baseline]
    engine_chosen, _, engine_logits = engine_draws(moe, params)
    rows, kl = [], {}
    grad_norm = float(np.linalg.norm(grad))
    estimators = [(id, resolve_params(id, given)) for id, given in selection.items() if id != "on_policy"]
    done = {}
    for replay in replays:
        same = "off" if replay == "R2" else replay           # at one update R2 records the trainer's own routing
        if same not in done:
            view = routed(toy, moe, params, trainer_routing(moe, params, same, engine_chosen), engine_logits)
            moments = plain_moments(toy, moe, params, view, estimators, b) if estimators else None
            done[same] = view, moments
        view, moments = done[same]
        kl[replay] = mean_log_ratio(view.mixture)
        if estimators:
            rows += [_row(id, replay, mean, second, grad, served, N)
                     for (id, _), mean, second in zip(estimators, moments.mean, moments.second, strict=True)]
    if "on_policy" in selection:
        moments = plain_moments(toy, moe, params, on_policy_routed(toy, moe, params), [("on_policy", {})], b)
        rows = [_row("on_policy", replay, moments.mean[0], moments.second[0], grad, served, N)
                for replay in replays] + rows
    per_decision, per_token = flip_rates(moe.layout.split(params)[0], moe.errors, experts.router_error,
                                         experts.top_k)
    return RoutingView(J, served_J, grad_norm, float(np.linalg.norm(served)), per_decision, per_token,
                       sequence_flips(moe, params), kl, expected_reward_of(view.mixture, toy.V), tuple(rows))


def _row(estimator, replay, mean, second, grad, served, N):
    grad_norm = float(np.linalg.norm(grad))
    var = max(float(second) - float(mean @ mean), 0.0)
    return ReplayRow(estimator, replay, float(np.linalg.norm(mean - grad)) / grad_norm, float(np.sqrt(var / N)) / grad_norm,
                     cosine(mean, grad), cosine(mean, served), relative_to(mean, served))


SMALLEST_SERVED = 1e-10         # a smaller ‖∇J_μ‖ (a sampler that almost never draws a reward) has no relative bias


def relative_to(mean, served):
    """‖E ĝ − ∇J_μ‖/‖∇J_μ‖, or None where ‖∇J_μ‖ < SMALLEST_SERVED (it read 7e298 at top_p 0.01, τ 0.25)."""
    norm = float(np.linalg.norm(served))
    return None if norm < SMALLEST_SERVED else float(np.linalg.norm(mean - served)) / norm


def sequence_flips(moe, params):
    """P(some routing decision of the sequence differs from the trainer's): over the draws of the sequence's one
    error (per sequence), or 1 − ∏_t (1 − P(token t flips)) (per token)."""
    router = moe.layout.split(params)[0]
    own = top_k_chosen(router, moe.experts.top_k)
    engine = engine_routing(router, moe.errors, moe.experts.router_error, moe.experts.top_k)[0]
    differs = np.any(engine != own, axis=-1)                                        # (D, L, T)
    if moe.experts.draw == "sequence":
        return float(differs.any(axis=(1, 2)).mean())
    return float(1 - np.prod(1 - differs.any(axis=1).mean(axis=0)))


def flip_curve(toy, experts: Experts, axis: str, values):
    """[(value, per-decision flip rate, P(a token flips at some layer), P(a sequence flips somewhere))] as the number
    of ``axis`` ("layers" or "experts") takes each of ``values``, the rest of ``experts`` held (top-k kept below E)."""
    rows = []
    for value in values:
        changed = replace(experts, **{axis: int(value)}, top_k=min(experts.top_k, int(value) - 1)) \
            if axis == "experts" else replace(experts, layers=int(value))
        moe = moe_of(toy, changed)
        per_decision, per_token = flip_rates(moe.layout.split(moe.params)[0], moe.errors, changed.router_error,
                                             changed.top_k)
        rows.append((int(value), float(per_decision.mean()), float(per_token.mean()),
                     sequence_flips(moe, moe.params)))
    return rows
