"""Version switches, exactly: each way of logging a sequence's versions against the per-token truth.

At θ_k, the k-th step of on_policy's exact ascent (SGD at lr; θ_j = θ₀ for j < 0), the engine's versions are the
earlier steps θ_{k−v} (``engine.versions``). A batch is a mixture over the version patterns; the first update of it
(anchor π_old, loss L, correction g on w = π_old/μ, π_θ = π_{θ_k}) has the per-token gradient weight g_t·D_t, D_t =
∂L/∂log π_θ at (log π_θ, log π_old, log μ, A) — A·g_t itself when π_old = π_θ (the recomputed anchor). Its exact mean
and second moment are sums over every pattern and sequence (``engine.hidden``):

    mean     = Σ_{c,ρ,t,v} first·D·(onehot(v) − π_t)·scale          second = Σ second·D²·‖onehot(v) − π_t‖²·scale²

each against ∇J(θ_k). A **mode** is what the framework logs: the stamp (token, head, tail) and whether it masks the
stale prefix; the per-token truth is the stamp "token" without a mask (what every version-aware anchor should read).
Only the anchors built from versions (rollout: π_old recomputed at the stamped version; loglinear: AReaL's π_prox)
read the stamp; a mask changes every anchor's gradient.
"""

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.estimators import resolve_params
from toylab.catalogue.updates import Update
from toylab.engine.counts import objective_and_gradient
from toylab.engine.hidden import Mixture, correction_marginals_each, expected_reward_of, mean_log_ratio
from toylab.engine.toy import pipeline_tables
from toylab.engine.versions import (
    STAMPS,
    Versions,
    loglinear_alpha,
    loglinear_anchor,
    loss_positions,
    patterns,
    stamped_lags,
    token_lags,
)

ANCHORS = ("recompute", "rollout", "bypass", "loglinear")      # the version analysis's anchors: today's and AReaL's
MODES = tuple((stamp, False) for stamp in STAMPS) + (("token", True),)     # (stamp, stale prefix masked)


def versions_problem(sampler) -> str | None:
    """None, or why version switches are not modelled for this pipeline."""
    if sampler.scored == "keep_mask":
        return ("a trainer that keeps the sampler's mask (scored keep_mask) restricts π to each version's kept set, "
                "which differs within a switched sequence; use scored plain or temperature with version switches")
    return None


@dataclass(frozen=True)
class VersionTables:
    """A batch of version patterns at θ_k: the Mixture of the engine's tokens (log_anchor still to choose), and per
    pattern the stamped lag of each token."""
    mixture: Mixture
    stamped: NDArray[np.int64]          # (C, T)
    log_pi: NDArray[np.float64]         # the trainer's scored log π at θ_k (T, V)


def version_tables(toy, history, versions: Versions, lag: int, trainer_theta=None) -> VersionTables:
    """The batch's patterns: ``history(v)`` is θ_{k−v} (v = 0 … lag), the trainer at θ_k = history(0) unless
    ``trainer_theta`` is given (a later update's π_θ); μ per token from its version."""
    T, V = toy.T, toy.V
    chosen = patterns(versions, T, lag)
    theta = history(0) if trainer_theta is None else trainer_theta
    log_pi = toy.sampler.scored_log_probabilities(theta, np.ones((T, V), bool))
    versions_used = sorted({int(v) for pattern in chosen for v in token_lags(pattern, T)})
    engine = {v: pipeline_tables(theta, toy.b, toy.mismatch, toy.sampler, history(v)) for v in versions_used}
    positions = np.arange(T)
    sampled, logged, masks, stamps = [], [], [], []
    for pattern in chosen:
        lags = token_lags(pattern, T)
        sampled.append(np.array([engine[int(v)][2][t] for t, v in zip(positions, lags, strict=True)]))
        logged.append(np.array([engine[int(v)][1][t] for t, v in zip(positions, lags, strict=True)]))
        masks.append(loss_positions(pattern, T, versions.mask_stale))
        stamps.append(stamped_lags(pattern, T, versions.stamp))
    log_logged = np.array(logged)
    mixture = Mixture(np.array([pattern.probability for pattern in chosen]), np.array(sampled), log_logged,
                      np.broadcast_to(log_pi, log_logged.shape).copy(), np.arange(V), np.array(masks))
    return VersionTables(mixture, np.array(stamps), log_pi)


def anchor_tables(toy, tables: VersionTables, anchor, history, log_pi=None):
    """log π_old (C, T, V) for an anchor (``ANCHORS``): π at θ_k, at each token's stamped version (rollout), the logged
    μ (bypass), or AReaL's log-linear interpolation between the logged μ and π_θ (``log_pi``: the current update's,
    π at θ_k by default)."""
    mixture = tables.mixture
    log_pi = tables.log_pi if log_pi is None else log_pi
    C, T, V = mixture.shape
    if anchor == "recompute":
        return np.broadcast_to(log_pi, (C, T, V)).copy()
    if anchor == "bypass":
        return mixture.log_logged.copy()
    if anchor == "loglinear":
        return loglinear_anchor(mixture.log_logged, log_pi, loglinear_alpha(tables.stamped))
    everywhere = np.ones((T, V), bool)
    stale = {int(v): toy.sampler.scored_log_probabilities(history(int(v)), everywhere) for v in np.unique(tables.stamped)}
    return np.array([[stale[int(v)][t] for t, v in enumerate(row)] for row in tables.stamped])


def first_update(toy, tables, log_old, update: Update, estimators, b, log_pi=None):
    """(weighted first, weighted second) (E, C, T, V): the correction's marginals on w = π_old/μ times the loss's
    derivative D at π_θ (``log_pi``, θ_k's by default) and D²."""
    return first_updates([(tables, log_old)], update, estimators, b, log_pi)[0]


def first_updates(modes, update: Update, estimators, b, log_pi=None):
    """``first_update`` of each (tables, log_old) in ``modes``, whose mixtures draw alike (one switch, its modes of
    logging): the enumerated sums visit the shared sequences once."""
    mixtures = [tables.mixture.with_anchor(log_old) for tables, log_old in modes]
    found = correction_marginals_each(mixtures, estimators, np.full(len(estimators), b))
    advantage = np.array([-b, 1 - b])[:, None, None]
    out = []
    for (tables, log_old), mixture, (first, second) in zip(modes, mixtures, found, strict=True):
        pi_table = tables.log_pi if log_pi is None else log_pi
        kept = mixture.kept
        pi = np.where(kept, np.broadcast_to(pi_table, kept.shape), 0.0)[:, None]
        old = np.where(kept, log_old, 0.0)[:, None]
        mu = np.where(kept, mixture.log_logged, 0.0)[:, None]
        derivative = np.where(kept[:, None], update.token_loss(pi, old, mu, advantage[None]).derivative, 0.0)
        out.append(((first * derivative).sum(axis=2), (second * derivative**2).sum(axis=2)))
    return out


def dense_moments(weighted_first, weighted_second, pi, scale):
    """(mean (E, T, V), second (E,)) in the logits θ: Σ first·(onehot − π)·scale and Σ second·‖onehot − π‖²·scale²."""
    x1, x2 = weighted_first.sum(axis=1), weighted_second.sum(axis=1)             # summed over the patterns
    mean = (x1 - pi * x1.sum(axis=-1, keepdims=True)) * scale
    norms = 1 - 2 * pi + np.sum(pi**2, axis=-1, keepdims=True)
    return mean, np.sum(x2 * norms, axis=(-2, -1)) * scale**2


@dataclass(frozen=True)
class VersionRow:
    estimator: str
    stamp: str
    masked: bool
    rel_bias: float
    rel_std: float
    cosine: float | None
    from_truth: float             # ‖E ĝ − E ĝ_truth‖/‖∇J‖: how far the mode's mean is from the per-token truth's


@dataclass(frozen=True)
class VersionsView:
    J: float
    grad_norm: float
    kl: float                     # E[Σ_t log μ_log − log π_{θ_k}] over the patterns: the batch's k1 estimate
    patterns: int
    rows: tuple


def versions_view(toy, versions: Versions, lag, anchor, update: Update, selection, history, baseline="none",
                  N=64) -> VersionsView:
    """Every estimator of ``selection`` under each mode of logging (``MODES``) for a switch like ``versions`` (its own
    stamp and mask ignored: every mode is shown), at θ_k = history(0) (see the module docstring)."""
    problem = versions_problem(toy.sampler)
    if problem:
        raise ValueError(problem)
    if anchor not in ANCHORS:
        raise ValueError(f"anchor must be one of {', '.join(ANCHORS)}, got {anchor!r}")
    estimators = [(id, resolve_params(id, given)) for id, given in selection.items() if id != "on_policy"]
    theta = history(0)
    pi = np.exp(toy.sampler.scored_log_probabilities(theta, np.ones(theta.shape, bool)))
    J, grad = objective_and_gradient(pi)
    grad = grad * toy.sampler.score_scale
    b = {"none": 0.0, "true": float(J)}.get(baseline)
    means, rows = {}, []
    modes = {mode: version_tables(toy, history, replace(versions, stamp=mode[0], mask_stale=mode[1]), lag)
             for mode in MODES}
    truth = modes[MODES[0]].mixture
    kl = mean_log_ratio(truth)
    if b is None:                                                                # logged: E_μ[r] of the batch
        b = expected_reward_of(truth, toy.V)
    if estimators:
        found = first_updates([(tables, anchor_tables(toy, tables, anchor, history)) for tables in modes.values()],
                              update, estimators, b)
        for mode, (first, second) in zip(modes, found, strict=True):
            means[mode] = dense_moments(first, second, pi, toy.sampler.score_scale)
    grad_norm = float(np.linalg.norm(grad))
    truth = means.get(MODES[0])
    for stamp, masked in MODES if estimators else ():
        mean, second = means[(stamp, masked)]
        for index, (estimator, _) in enumerate(estimators):
            m = mean[index]
            var = max(float(second[index]) - float(np.sum(m**2)), 0.0)
            norm = float(np.linalg.norm(m)) * grad_norm
            rows.append(VersionRow(estimator, stamp, masked, float(np.linalg.norm(m - grad)) / grad_norm,
                                   float(np.sqrt(var / N)) / grad_norm,
                                   None if norm < 1e-20 else float(np.sum(m * grad)) / norm,
                                   float(np.linalg.norm(m - truth[0][index])) / grad_norm))
    return VersionsView(float(J), grad_norm, kl, len(patterns(versions, toy.T, lag)), tuple(rows))
