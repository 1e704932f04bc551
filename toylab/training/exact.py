"""The exact quantities of many θ at once (one per row of a ``ToyRows``): the population's J, E_μ[r], ∇J, KL(μ‖π)
and χ²_seq, each estimator's exact mean gradient, and the parts of it an update of three policies reads — its
marginals over the sequences of each reward, r(y) = 0 and r(y) = 1, with the advantage left out.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.diagnostics import chi2_terms, on_support
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.counts import (
    expected_reward,
    factorised_marginals,
    factorised_means,
    objective_and_gradient,
    reward_by_count,
)
from toylab.engine.moments import _carried_marginals
from toylab.engine.recursion import FACTORS, PositionFactors
from toylab.engine.recursion import on_support as factors_on_support
from toylab.engine.sequences import AllSequences
from toylab.engine.toy import mean_ratios, sampled_log_ratio

ROWS_AT_ONCE = 2**16          # M-vectors of at most this many numbers per array: rows go in chunks on large toys


@dataclass
class Population:
    """J, E_μ[r], ∇J, ‖∇J‖, KL(μ‖π) and χ²_seq of every row of a ToyRows, exact."""
    J: np.ndarray
    logged_reward: np.ndarray
    grad: np.ndarray
    grad_norm: np.ndarray
    kl_mu_pi: np.ndarray
    chi2_seq: np.ndarray

    @classmethod
    def of(cls, rows):
        """KL(μ‖π) = −Σ μ log(π/μ) and χ²_seq = ∏_t Σ_v μ (ρ/E_μ[ρ_t])² − 1 over each row's μ-support (μ the
        sampled μ_s, π the scored one, ρ = π/μ_log: ``analysis.diagnostics``); J and ∇J of the scored π."""
        J, grad = objective_and_gradient(rows.pi)
        grad = grad * rows.score_scale
        sampler = rows.sampler
        if sampler.is_default:                        # every token kept, log ρ bounded by mismatch·(max b − min b)
            second_moments = (rows.mu * rows.rho**2).sum(axis=-1)
        else:
            mean = None if sampler.logged == "processed" else \
                mean_ratios(rows.pi, rows.mu, rows.rho, rows.kept, sampler.logged)
            second_moments = 1 + chi2_terms(rows.pi, rows.mu, rows.rho, rows.kept, mean)
        with np.errstate(over="ignore"):
            chi2_seq = np.prod(second_moments, axis=-1) - 1
        log_ratio = sampled_log_ratio(rows.log_pi, rows.log_mu, rows.kept, rows.log_rho, sampler.logged)
        return cls(J, expected_reward(rows.mu), grad, np.linalg.norm(grad, axis=(-2, -1)),
                   -on_support(rows.mu, log_ratio, rows.kept).sum(axis=(-2, -1)), chi2_seq)

    def baseline(self, name):
        """b per row: none → 0, logged → E_μ[r], true → J."""
        return {"none": np.zeros_like(self.J), "logged": self.logged_reward, "true": self.J}[name]


def exact_means(rows, estimators, b, chunk=None):
    """E_p[ĝ] of estimator i = (id, params) at row i of a ToyRows with a grid, p = μ (π for on_policy): shape
    (rows, T, V). Estimators that factorise over positions (``recursion.FACTORS``) by the count recursion
    (``counts.factorised_means``), all rows at once; the others by enumeration, rows in chunks of ``chunk``
    (default ``chunk_rows(M)``)."""
    means = np.empty(rows.pi.shape)
    factorised = [index for index, (id, _) in enumerate(estimators) if id in FACTORS]
    enumerated = [index for index, (id, _) in enumerate(estimators) if id not in FACTORS]
    if factorised:
        means[factorised] = _factorised_means(rows, factorised, [estimators[i] for i in factorised], b[factorised])
    chunk = chunk or chunk_rows(rows.M)
    for start in range(0, len(enumerated), chunk):
        chosen = enumerated[start:start + chunk]
        means[chosen] = enumerated_means(rows.subset(chosen), [estimators[i] for i in chosen], b[chosen])
    return means


def chunk_rows(M):
    """Rows an enumerated step takes at once on a toy of M sequences: M-vectors of about ROWS_AT_ONCE numbers."""
    return max(1, ROWS_AT_ONCE // M)


def _factorised_means(rows, indices, estimators, b):
    probability, stacked = _position_factors(rows, indices, estimators)
    phi = reward_by_count(rows.T)[None, :] - b[:, None]
    return factorised_means(probability, stacked, phi, rows.pi[indices]) * rows.score_scale


def _factorised_marginals(rows, indices, estimators, phi):
    probability, stacked = _position_factors(rows, indices, estimators)
    return factorised_marginals(probability, stacked, phi)


def _position_factors(rows, indices, estimators):
    """(p, PositionFactors) of the rows ``indices``, one estimator each: p = μ (π for on_policy), the factors 0
    outside μ's support."""
    factors = [FACTORS[id](rows[index], **params) for index, (id, params) in zip(indices, estimators, strict=True)]
    factors = [f if ESTIMATORS[id].on_policy or not rows.truncates[index] else factors_on_support(f, rows.kept[index])
               for f, index, (id, _) in zip(factors, indices, estimators, strict=True)]
    stacked = PositionFactors(*(np.stack([getattr(f, name) for f in factors]) for name in ("token", "before", "after")))
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])[:, None, None]
    return np.where(on_policy, rows.pi[indices], rows.mu[indices]), stacked


def enumerated_means(rows, estimators, b):
    """``exact_means`` by enumerating the M sequences, for any exact estimator: ``moments``' formula, first
    moment only, with every row's M-vectors built at once on the grid,

        mean_t = m_t − π_t·Σ_v m_t[v],   m_t[v] = token[t, v]·E_p[(r − b)·sequence·∏_{s<t} carry[s, y_s]·1[y_t = v]]
                                                 + p_t[v]·additive[t, v]

    (a token class's sequences with its own token table, summed over the classes).
    """
    m = _enumerated_marginals(rows, estimators, b, by_reward=False)[0]
    return (m - rows.pi * m.sum(axis=-1, keepdims=True)) * rows.score_scale


def reward_marginals(rows, estimators, b, chunk=None):
    """m (rows, 2, T, V): m[i, ρ, t, v] = E_p[1[r(y) = ρ]·c_t(y)·1[y_t = v]], c estimator i's coefficient at row i
    without the advantage (sequence·token·carry: its weight, read with A = r − b_i where it depends on A), p = μ (π
    for on_policy), by the count recursion (φ = 1[r(k) = ρ]) or by enumeration as ``exact_means``. The estimator's
    mean is Σ_ρ (m_ρ·(ρ − b) − π·Σ_v m_ρ·(ρ − b))·score_scale; an update of three policies puts ∂L/∂log π_θ at the
    advantage ρ − b in place of ρ − b. ValueError for an estimator with an additive term (not a weight)."""
    marginals = np.empty((len(estimators), 2, *rows.pi.shape[1:]))
    factorised = [index for index, (id, _) in enumerate(estimators) if id in FACTORS]
    enumerated = [index for index, (id, _) in enumerate(estimators) if id not in FACTORS]
    if factorised:
        chosen = [estimators[i] for i in factorised]
        phi = reward_by_count(rows.T)
        for reward, indicator in enumerate((1 - phi, phi)):
            marginals[factorised, reward] = _factorised_marginals(rows, factorised, chosen,
                                                                  np.broadcast_to(indicator, (len(factorised), rows.T + 1)))
    chunk = chunk or chunk_rows(rows.M)
    for start in range(0, len(enumerated), chunk):
        chosen = enumerated[start:start + chunk]
        parts = _enumerated_marginals(rows.subset(chosen), [estimators[i] for i in chosen], b[chosen], by_reward=True)
        marginals[chosen] = np.moveaxis(parts, 0, 1)
    return marginals


def _enumerated_marginals(rows, estimators, b, by_reward):
    """m (parts, rows, T, V): one part, token·E_p[(r − b)·sequence·carry·1[y_t = v]] + p·additive (the mean's), or
    (by_reward) two, token·E_p[1[r = ρ]·sequence·carry·1[y_t = v]] for ρ = 0, 1."""
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])
    probability = rows.grid.outer_product(np.where(on_policy[:, None, None], rows.log_pi, rows.log_mu))
    parts = 2 if by_reward else 1
    m, tokens, additive = np.empty((parts, *rows.pi.shape)), np.ones(rows.pi.shape), np.zeros(rows.pi.shape)
    first = np.empty((parts, len(estimators), rows.M))
    carried = []
    for index, (estimator_id, params) in enumerate(estimators):
        row = rows[index]
        view = AllSequences(row, b[index])
        weights = ESTIMATORS[estimator_id].weights(view, **params)
        weights = weights if on_policy[index] else view.on_support(weights)
        np.multiply(probability[index], weights.sequence, out=first[0, index])
        if by_reward:                                    # p·sequence·r, and p·sequence·(1 − r) exactly (r is 0 or 1)
            np.multiply(first[0, index], row.R, out=first[1, index])
            first[0, index] -= first[1, index]
        else:
            first[0, index] *= row.R - b[index] if b[index] else row.R
        if weights.additive is not None:
            if by_reward:
                raise ValueError(f"{estimator_id} adds a penalty term to the gradient: it is a loss, not a weight")
            position = row.pi if on_policy[index] else row.mu
            additive[index] = position * np.where(position > 0, weights.additive, 0.0)
        if weights.classes:                              # the token factor differs by a class of sequences
            carried.append(index)
            for part in range(parts):
                m[part, index] = sum(rows.grid.marginals((first[part, index] * members)[None])[0]
                                     * (1.0 if token is None else token) for members, token, _ in weights.token_classes())
            continue
        if weights.token is not None:
            tokens[index] = weights.token
        if weights.carry is not None:
            carried.append(index)
            for part in range(parts):
                m[part, index] = _carried_marginals(first[part, index], row.T, row.V, weights.carry, 1)
    for part in range(parts):
        if not carried:
            m[part] = rows.grid.marginals(first[part])
        elif len(carried) < len(estimators):
            uncarried = np.setdiff1d(np.arange(len(estimators)), carried)
            m[part, uncarried] = rows.grid.marginals(first[part, uncarried])
        m[part] = m[part] * tokens + additive
    return m
