"""J(θ) = E_π[r] through the count K = #{t: y_t = 0}, with its exact gradient and Hessian, for many θ at once.

r looks at y only through K, and the positions are independent, so K is Poisson-binomial in
q_t = π_t(0): its distribution follows from a two-term recursion over positions (O(T²)), and
J = Σ_k P(K = k)·r(k). J is affine in each q_t, so its derivatives in q are exact:

    ∂J/∂q_t       = E[r(K₋ₜ + 1) − r(K₋ₜ)]                        K₋ₜ: the count without position t (q_t := 0)
    ∂²J/∂q_s∂q_t  = E[r(K₋ₛₜ + 2) − 2r(K₋ₛₜ + 1) + r(K₋ₛₜ)]  (s ≠ t),   ∂²J/∂q_t² = 0

and through q_t = softmax(θ_t)_0, with e = onehot(0) and g_t = ∂q_t/∂θ_t = q_t·(e − π_t):

    ∇J[t]          = (∂J/∂q_t)·g_t
    H[(s,·),(t,·)] = (∂²J/∂q_s∂q_t)·g_s g_tᵀ  (s ≠ t),   H[(t,·),(t,·)] = (∂J/∂q_t)·∂²q_t/∂θ_t²
    ∂²q_t/∂θ_t²   = g_t (e − π_t)ᵀ − q_t·(diag π_t − π_t π_tᵀ)

Every function takes tables with any leading axes (one θ per row) and works on the last one or two.
"""

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


def reward_by_count(T):
    """r(K) = 1[2K ≥ T] for K = 0 … T."""
    return (2 * np.arange(T + 1) >= T).astype(float)


def zero_count_distribution(q):
    """P(K = k), k = 0 … T, for independent positions with P(y_t = 0) = q[..., t]: shape (..., T + 1).

    P_{t+1}(k) = P_t(k)·(1 − q_t) + P_t(k − 1)·q_t, with P_t(−1) = 0 kept in a leading column.
    """
    T = q.shape[-1]
    padded = np.zeros(q.shape[:-1] + (T + 2,))
    padded[..., 1] = 1.0
    q, not_zero = q[..., None], 1 - q[..., None]
    for t in range(T):
        padded[..., 1:] = padded[..., 1:] * not_zero[..., t, :] + padded[..., :-1] * q[..., t, :]
    return padded[..., 1:]


def expected_reward(position_probability):
    """E[r] when position t draws token v with probability position_probability[..., t, v] (J for π, E_μ[r] for μ)."""
    q = position_probability[..., 0]
    return zero_count_distribution(q) @ reward_by_count(q.shape[-1])


def _without(q, left_out):
    """q repeated once per tuple of positions in ``left_out``, those positions' q set to 0: shape (..., len, T)."""
    removed = np.repeat(q[..., None, :], len(left_out), axis=-2)
    for index, positions in enumerate(left_out):
        removed[..., index, list(positions)] = 0.0
    return removed


def _dq_dtheta(pi):
    """g_t = ∂q_t/∂θ_t = q_t·(onehot(0) − π_t), shape (..., T, V)."""
    return pi[..., :1] * (np.eye(pi.shape[-1])[0] - pi)


def objective_and_gradient(pi):
    """(J, ∇J) for trainer tables pi (..., T, V): J of shape (...), ∇J of shape (..., T, V)."""
    q = pi[..., 0]
    T = q.shape[-1]
    reward = reward_by_count(T)
    counts = zero_count_distribution(np.concatenate([q[..., None, :], _without(q, [(t,) for t in range(T)])], axis=-2))
    J = counts[..., 0, :] @ reward
    slope = counts[..., 1:, :-1] @ np.diff(reward)                   # ∂J/∂q_t: K₋ₜ never reaches T
    return J, slope[..., None] * _dq_dtheta(pi)


@dataclass(frozen=True)
class Curvature:
    """The exact Hessian H of J at one trainer table π (T, V), kept in the pieces the formula above names."""
    slope: np.ndarray           # ∂J/∂q_t, (T,)
    cross: np.ndarray           # ∂²J/∂q_s∂q_t, (T, T), zero diagonal
    g: np.ndarray               # ∂q_t/∂θ_t, (T, V)
    q_curvature: np.ndarray     # ∂²q_t/∂θ_t², (T, V, V)

    def quadratic(self, x):
        """xᵀHx for directions x of shape (..., T, V): Σ_{s≠t} cross_st (g_s·x_s)(g_t·x_t) + Σ_t slope_t x_tᵀ(∂²q_t)x_t."""
        along_g = np.einsum("...tv,tv->...t", x, self.g)
        between = np.einsum("...s,st,...t->...", along_g, self.cross, along_g)
        within = np.einsum("...tu,tuv,...tv,t->...", x, self.q_curvature, x, self.slope)
        return between + within

    def score_quadratic(self, weight, tokens, pi):
        """ĝᵀHĝ for ĝ = Σ_t weight_t·(onehot(y_t) − π_t), one per sequence: weight and tokens of shape (..., T).

        Along g and through ∂²q_t each row of ĝ is a lookup in a (T, V) table by the token, so no (..., T, V)
        array is built: Σ_{s≠t} cross_st·w_s·w_t·(g_s·e_s)(g_t·e_t) + Σ_t slope_t·w_t²·e_tᵀ(∂²q_t)e_t, e_t = onehot − π_t.
        """
        T, V = pi.shape
        scores = np.eye(V)[None, :, :] - pi[:, None, :]                        # [t, v] = onehot(v) − π_t
        along = np.einsum("tvu,tu->tv", scores, self.g)
        within = np.einsum("tvu,tuw,tvw->tv", scores, self.q_curvature, scores)
        position = np.arange(T)
        weighted = weight * along[position, tokens]
        return np.einsum("...s,st,...t->...", weighted, self.cross, weighted) \
            + (weight**2 * within[position, tokens]) @ self.slope

    def matrix(self):
        """H as a (T·V, T·V) matrix, row and column t·V + v."""
        T, V = self.g.shape
        H = np.einsum("st,su,tv->sutv", self.cross, self.g, self.g)
        for t in range(T):
            H[t, :, t, :] = self.slope[t] * self.q_curvature[t]
        return H.reshape(T * V, T * V)


def curvature(pi, scale=1.0):
    """The Curvature of J at trainer table pi (T, V): leave-one-out and leave-two-out count distributions. π =
    softmax(θ·scale) (a trainer that divides by τ: scale 1/τ; over a fixed kept set alike) has ∂q/∂θ and ∂²q/∂θ²
    those of softmax times scale and scale²."""
    T, V = pi.shape
    q = pi[:, 0]
    reward = reward_by_count(T)
    slope = zero_count_distribution(_without(q, [(t,) for t in range(T)]))[:, :-1] @ np.diff(reward)
    cross = np.zeros((T, T))
    pairs = [(s, t) for s in range(T) for t in range(s + 1, T)]
    if pairs:
        rows, columns = np.array(pairs).T
        cross[rows, columns] = cross[columns, rows] = \
            zero_count_distribution(_without(q, pairs))[:, :-2] @ np.diff(reward, 2)
    g = _dq_dtheta(pi)
    e = np.eye(V)[0]
    q_curvature = np.einsum("tu,tv->tuv", g, e - pi) \
        - q[:, None, None] * (np.einsum("tu,uv->tuv", pi, np.eye(V)) - np.einsum("tu,tv->tuv", pi, pi))
    return Curvature(slope, cross, g * scale, q_curvature * scale**2)


def factorised_means(position_probability, factors, phi, pi):
    """Exact E_p[ĝ] of estimators whose coefficient factorises over positions, many rows at once:
    mean_t = m_t − π_t·Σ_v m_t[v], m = ``factorised_marginals``, π of shape (..., T, V)."""
    m = factorised_marginals(position_probability, factors, phi)
    return m - pi * m.sum(axis=-1, keepdims=True)


def factorised_marginals(position_probability, factors, phi, zeros=None):
    """m_t[v] = E_p[c_t(y)·φ(K)·1[y_t = v]] of coefficients that factorise over positions, many rows at once, O(T³)
    per row:

        c_t(y) = token[t, y_t]·∏_{s<t} before[s, y_s]·∏_{s>t} after[s, y_s]   (``recursion.PositionFactors``)
        m_t[v] = p_t[v]·token[t, v]·Σ_k D_t(k)·φ(k + 1[v = 0]),   mean_t = m_t − π_t·Σ_v m_t[v]

    D_t(k) = Σ over the other positions' tokens with k zeros of ∏_{s≠t} p_s·(before_s if s < t else after_s):
    the count distribution of the weights with position t left out, each position divided by its total weight
    (the log of their product carried alongside). Arguments: p, token, before, after of shape (..., T, V)
    (``factors`` a PositionFactors of such tables), φ(k) of shape (..., T + 1): r(k) − b for an estimator's mean,
    1[r(k) = ρ] for the part of the sequences with reward ρ. ``zeros`` (V,) bool marks the symbols K counts (default:
    token 0 alone): a position's symbol may carry a hidden variable beside its token (``hidden``), several of them
    token 0.
    """
    p = position_probability
    T = p.shape[-2]
    position = np.arange(T)
    earlier = (position[None, :] < position[:, None])[..., None]            # [t, s]: s < t
    weight = p[..., None, :, :] * np.where(earlier, factors.before[..., None, :, :], factors.after[..., None, :, :])
    if zeros is None:
        zero, other = weight[..., 0], weight[..., 1:].sum(axis=-1)          # (..., t, s)
    else:
        zero, other = weight[..., zeros].sum(axis=-1), weight[..., ~zeros].sum(axis=-1)
    zero[..., position, position], other[..., position, position] = 0.0, 1.0  # position t left out
    total = zero + other
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(total > 0, zero / total, 0.0)
        scale = np.exp(np.log(total).sum(axis=-1))                           # (..., t)
    counts = zero_count_distribution(q)[..., :-1]                            # K₋ₜ ≤ T − 1
    phi = phi[..., None, :]
    h = np.repeat(np.sum(counts * phi[..., :-1], axis=-1)[..., None], p.shape[-1], axis=-1)
    with_zero = np.sum(counts * phi[..., 1:], axis=-1)                     # the position's own symbol is a zero
    if zeros is None:
        h[..., 0] = with_zero
    else:
        h[..., zeros] = with_zero[..., None]
    return p * factors.token * h * scale[..., None]


def reachable_gradient(pi, kept, b):
    """∇J_S = Σ_{y ∈ S} π(y)·(r(y) − b)·s(y), S = ∏_t {v: kept[t, v]}: ``factorised_means`` with p = π·1[kept] and
    every factor 1. It is ∇J = E_π[(r − b)·s] without the sequences outside S (those a truncating sampler never
    draws): sequence IS on μ, whose weights give π back on S, has mean ∇J_S."""
    ones = np.ones_like(pi)
    phi = reward_by_count(pi.shape[-2]) - b
    return factorised_means(pi * kept, SimpleNamespace(token=ones, before=ones, after=ones), phi, pi)
