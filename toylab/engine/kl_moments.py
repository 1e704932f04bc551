"""The exact mean and spread of a KL penalty's gradient estimate, on the tokens the engine samples, against ∇KL.

One update at the recomputed anchor (π_old = π, as in the first update of every batch): a sequence y ~ μ gives the
estimate of ∇KL(π‖π_ref) that a ``KLPenalty`` (``catalogue.kl``) contributes, per unit β,

    in the loss     ĝ(y) = Σ_t D[t, y_t]·s_t(y_t),              D = ∂ℓ/∂log π_θ per token (``KLPenalty.loss_terms``)
                    (full: ĝ = ∇KL(π‖π_ref) itself, whatever y)
    in the reward   ĝ(y) = Σ_t c_t(y)·K_t(y)·s_t(y_t),          c the advantage's correction, K_t the summed k

(the update ascends −β·ĝ), s_t(v) = scale·(onehot(v) − π_t). The correction of a reward penalty is one of
CORRECTIONS: naive (c = 1), tok_is (c_t = ρ_t) or seq_is (c_t = W = ∏_s ρ_s), ρ = π/μ_log. The positions are
independent under μ, so everything is closed-form in the (T, V) tables, O(T²·V):

    loss:    E ĝ_t = μ_t·D_t − π_t·Σ_v μ_t·D_t                 E‖ĝ‖² = Σ_t Σ_v μ_t[v]·D[t, v]²·q_t[v]
    reward:  with c_t = h_t(y_t)·∏_{s≠t} f_s(y_s) ((h, f) = (1, 1), (ρ, 1), (ρ, ρ)), a_s = E_μ[f_s], b_s = E_μ[f_s·k_s]
             and S(t) the positions K_t sums (all, s ≥ t, or t alone):
             m_t[v] = μ_t[v]·h_t[v]·∏_{s≠t} a_s·(k_t[v] + Σ_{s ∈ S(t), s≠t} b_s/a_s),   E ĝ_t = m_t − π_t·Σ_v m_t
             E‖ĝ‖² = Σ_t Σ_v μ_t[v]·h_t[v]²·q_t[v]·∏_{s≠t} a′_s·E′[(k_t[v] + Z_t)²]

with q_t[v] = scale²·(1 − 2π_t[v] + ‖π_t‖²), a′, b′, c′ = E_μ[f_s²·(1, k_s, k_s²)] and, under f²-tilted positions,
E′[Z_t] = Σ b′_s/a′_s, E′[Z_t²] = Σ (c′_s/a′_s − (b′_s/a′_s)²) + E′[Z_t]². ``on_policy`` evaluates the same
estimate with μ := π (the sampler equals the trainer): the identities hold there, and the difference is what the
engine's μ breaks.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.kl import KLPenalty
from toylab.engine.reference import kl_gradients

CORRECTIONS = ("naive", "tok_is", "seq_is")
UNDEFINED_BELOW = 1e-10          # a shorter ∇KL (π at π_ref) or mean: no cosine or relative bias


@dataclass(frozen=True)
class KLMoments:
    """E ĝ (T, V), E‖ĝ‖², and the two gradients it is read against: ∇KL(π‖π_ref) and ∇KL(π_ref‖π)."""
    mean: NDArray[np.float64]
    second_moment: float
    forward: NDArray[np.float64]
    reverse: NDArray[np.float64]

    @property
    def var(self) -> float:
        """E‖ĝ − E ĝ‖², clipped at 0 against rounding."""
        return max(self.second_moment - float((self.mean**2).sum()), 0.0)

    @property
    def scale(self) -> float:
        return float(np.linalg.norm(self.forward))

    def cosine(self, against: str = "forward") -> float | None:
        target = self.forward if against == "forward" else self.reverse
        norms = float(np.linalg.norm(self.mean)) * float(np.linalg.norm(target))
        if min(float(np.linalg.norm(self.mean)), float(np.linalg.norm(target))) < UNDEFINED_BELOW:
            return None
        return float((self.mean * target).sum()) / norms

    def rel_bias(self, against: str = "forward") -> float | None:
        target = self.forward if against == "forward" else self.reverse
        norm = float(np.linalg.norm(target))
        return None if norm < UNDEFINED_BELOW else float(np.linalg.norm(self.mean - target)) / norm

    def rel_std(self, N: int) -> float | None:
        return None if self.scale < UNDEFINED_BELOW else float(np.sqrt(self.var / N)) / self.scale

    def rel_rmse(self, N: int) -> float | None:
        if self.scale < UNDEFINED_BELOW:
            return None
        bias = float(np.linalg.norm(self.mean - self.forward))
        return float(np.sqrt(bias**2 + self.var / N)) / self.scale


@dataclass(frozen=True)
class Tables:
    """The (T, V) tables a KL estimate reads: the sampled μ (what draws), log μ_log (what the engine logged), the
    scored log π and log π_ref, the kept tokens and the score's scale."""
    mu: NDArray[np.float64]
    log_logged: NDArray[np.float64]
    log_pi: NDArray[np.float64]
    log_ref: NDArray[np.float64]
    kept: NDArray[np.bool_]
    scale: float

    @classmethod
    def of(cls, toy, log_ref, on_policy=False):
        """The toy's tables (``on_policy``: μ := π, logged and sampled, every token π reaches kept)."""
        if on_policy:
            return cls(toy.pi, toy.log_pi, toy.log_pi, log_ref, toy.pi > 0, toy.score_scale)
        return cls(toy.mu, toy.log_logged, toy.log_pi, log_ref, toy.kept, toy.score_scale)

    @property
    def pi(self):
        return np.exp(self.log_pi)

    def q(self):
        """q_t[v] = scale²·‖onehot(v) − π_t‖²."""
        pi = self.pi
        return (1 - 2 * pi + (pi**2).sum(axis=-1, keepdims=True)) * self.scale**2


def loss_derivative(penalty: KLPenalty, tables: Tables, log_old=None) -> NDArray[np.float64]:
    """D = ∂ℓ/∂log π_θ per (t, v), 0 outside the kept tokens; π_old = π unless ``log_old`` is given."""
    log_old = tables.log_pi if log_old is None else log_old
    inside = tables.kept
    pick = [np.where(inside, a, 0.0) for a in (tables.log_pi, log_old, tables.log_logged, tables.log_ref)]
    derivative = penalty.loss_terms(*pick)[1]
    return np.where(inside, derivative, 0.0)


def expected_loss_gradient(mu, pi, derivative, scale):
    """E_μ[Σ_t D[t, y_t]·s_t] = scale·(μ·D − π·Σ_v μ·D), tables with any leading axes."""
    m = mu * derivative
    return (m - pi * m.sum(axis=-1, keepdims=True)) * scale


def kl_moments(penalty: KLPenalty, tables: Tables, correction: str = "naive") -> KLMoments:
    """The moments of the penalty's estimate of ∇KL on ``tables`` (see the module docstring); ``correction`` weighs
    a reward penalty (CORRECTIONS)."""
    forward, reverse = kl_gradients(tables.log_pi, tables.log_ref, tables.scale)
    if penalty.placement == "loss":
        if penalty.exact:
            return KLMoments(forward, float((forward**2).sum()), forward, reverse)
        derivative = loss_derivative(penalty, tables)
        mean = expected_loss_gradient(tables.mu, tables.pi, derivative, tables.scale)
        second = float((tables.mu * derivative**2 * tables.q()).sum())
        return KLMoments(mean, second, forward, reverse)
    return _reward_moments(penalty, tables, correction, forward, reverse)


def summed_positions(T, reward_sum):
    """S[t, s] = 1 when K_t sums k_s for s ≠ t (sequence: every s; to_go: s > t; token: none)."""
    others = ~np.eye(T, dtype=bool)
    if reward_sum == "sequence":
        return others
    if reward_sum == "to_go":
        return np.triu(others)
    return np.zeros((T, T), bool)


def _reward_moments(penalty, tables, correction, forward, reverse):
    if correction not in CORRECTIONS:
        raise ValueError(f"a reward penalty's correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    inside = tables.kept
    mu, pi = tables.mu, tables.pi
    k = np.where(inside, penalty.values(np.where(inside, tables.log_pi, 0.0), tables.log_ref), 0.0)
    log_rho = np.where(inside, tables.log_pi, 0.0) - np.where(inside, tables.log_logged, 0.0)
    rho = np.where(inside, np.exp(log_rho), 0.0)
    h = np.ones_like(mu) if correction == "naive" else rho
    f = rho if correction == "seq_is" else np.ones_like(mu)
    summed = summed_positions(mu.shape[0], penalty.reward_sum)
    mean_part, a = _tilted(mu * f, k)
    m = mu * h * _others_product(a)[:, None] * (k + (summed * mean_part[None, :]).sum(axis=1)[:, None])
    mean = (m - pi * m.sum(axis=-1, keepdims=True)) * tables.scale
    square_part, a2 = _tilted(mu * f**2, k)
    spread = _tilted_square(mu * f**2, k)
    first = (summed * square_part[None, :]).sum(axis=1)[:, None]
    z_square = (summed * spread[None, :]).sum(axis=1)[:, None] + first**2
    second = mu * h**2 * tables.q() * _others_product(a2)[:, None] * (k**2 + 2 * k * first + z_square)
    return KLMoments(mean, float(second.sum()), forward, reverse)


def _tilted(weight, k):
    """(E′[k_s], a_s) per position under the measure ``weight`` (T, V): a_s = Σ_v weight, E′[k_s] = Σ weight·k / a_s."""
    a = weight.sum(axis=-1)
    return (weight * k).sum(axis=-1) / a, a


def _tilted_square(weight, k):
    """Var′[k_s] per position under the measure ``weight``."""
    a = weight.sum(axis=-1)
    mean = (weight * k).sum(axis=-1) / a
    return (weight * (k - mean[:, None])**2).sum(axis=-1) / a


def _others_product(a):
    """∏_{s≠t} a_s for each t, without dividing (a_s may be 0)."""
    T = len(a)
    return np.prod(np.where(np.eye(T, dtype=bool), 1.0, a[None, :]), axis=1)
