"""Population diagnostics of a toy: how far apart μ and π are, and the exact ratio distributions.

Three distributions (``engine.toy``): μ below is what the engine samples (μ_s), π what the trainer scores, and the
ratio ρ_t = π_t/μ_log,t the correction computes. KL and TV are those of μ_s and π themselves; χ² and the ESS those of
the weights the correction uses, ρ_t on draws from μ_s: χ²_t = Σ_v μ_s (ρ_t/E_μs[ρ_t] − 1)², so that
χ²_seq = ∏_t (1 + χ²_t) − 1 = E_μs[W²]/(E_μs W)² − 1 still; E_μs[W] = ∏_t E_μs[ρ_t] is the identity check
(``Toy.identity``). With the default pipeline (logged = sampled, scored = softmax(θ)) all of this is as below.

Per position (ρ_t = π_t/μ_t):
    KL_t(μ‖π) = −Σ_v μ_t log ρ_t,   KL_t(π‖μ) = Σ_v π_t log ρ_t,   χ²_t = Σ_v μ_t (ρ_t − 1)²,
    TV_t = ½ Σ_v |π_t − μ_t|.
Positions are independent, so KL adds over t, χ²_seq = ∏_t (1 + χ²_t) − 1 = E_μ[W²] − 1, and the
population effective-sample-size fraction is 1/(1 + χ²_seq).

Divergences are ≥ 0 and probabilities in [0, 1]: rounding that lands a hair outside is clipped back.
χ²_seq beyond float64's range (long sequences at large mismatch) is inf, and its ESS fraction 0.

Over μ's support. A sampler that truncates keeps tokens S_t (``toy.kept``); every sum over μ runs over them.
KL(μ‖π) stays finite (μ has no mass where π has none). χ² and the ESS are those of importance sampling onto
what the sampler can reach: χ²_t = χ²(π_t|S_t ‖ μ_t) = Σ_{v ∈ S_t} μ_t (ρ_t/π_t(S_t) − 1)², of π_t conditioned on
S_t, so that χ²_seq = ∏_t (1 + χ²_t) − 1 = E_μ[W²]/(E_μ W)² − 1 and the ESS fraction 1/(1 + χ²_seq) =
(E_μ W)²/E_μ[W²] — the population value of Kish's (Σ W)²/(n·Σ W²). Without truncation π_t(S_t) = 1 and these are
the usual ones. KL(π‖μ) is +∞ there (π has mass μ never draws), and the π-mass outside S, 1 − ∏_t π_t(S_t),
is ``unreachable_mass``.
"""

from dataclasses import dataclass

import numpy as np

from toylab.engine.grid import outer_any
from toylab.engine.toy import Toy, share


@dataclass(frozen=True)
class Diagnostics:
    M: int
    J: float                     # E_π[r]
    logged_reward: float         # E_μ[r]
    grad_norm: float             # ‖∇J‖
    kl_mu_pi_tokens: np.ndarray  # (T,)
    kl_pi_mu_tokens: np.ndarray  # (T,)
    chi2_tokens: np.ndarray      # (T,)
    max_tv: float
    unreachable_mass: float = 0.0    # π(y ∉ S): the sequences the sampler never draws
    identity_tokens: np.ndarray | None = None  # (T,) E_μs[ρ_t]; ∏_t of them is the identity check E_μs[W]
    plain_J: float | None = None     # E_softmax(θ)[r] when the trainer scores another π (None: J is it)
    objective_shift: float = 0.0     # ‖∇J − ∇J_plain‖/‖∇J_plain‖

    @property
    def identity(self):
        """E_μs[W] = ∏_t E_μs[ρ_t]: 1 when μ_log = μ_s and π keeps its mass where μ_s draws (necessary, not sufficient
        for an unbiased correction: see ``Toy.identity``)."""
        return float(np.prod(self.identity_tokens))

    @property
    def kl_mu_pi(self):
        return float(self.kl_mu_pi_tokens.sum())

    @property
    def kl_pi_mu(self):
        return float(self.kl_pi_mu_tokens.sum())

    @property
    def chi2_seq(self):
        """∏_t (1 + χ²_t) − 1."""
        return product_minus_one(self.chi2_tokens)

    @property
    def ess(self):
        return 1 / (1 + self.chi2_seq)


def on_support(mu, values, kept):
    """μ·values with 0 outside the support (where μ = 0 and the values may be ±∞): no 0·∞ is computed."""
    if kept.all():
        return mu * values
    return np.multiply(mu, values, out=np.zeros(np.broadcast_shapes(mu.shape, values.shape)), where=kept)


def reachable_ratio(pi, rho, kept, mean=None):
    """ρ_t/E_μs[ρ_t] on the support (1 outside). ``mean`` None: the logged μ is the sampled one, E_μs[ρ_t] = π_t(S_t),
    and this is the ratio of π_t conditioned on S_t to μ_t (ρ itself when every token is kept); else ``mean`` is
    E_μs[ρ_t] (..., T) (``toy.mean_ratios``). Tables (..., T, V)."""
    if mean is None and kept.all():
        return rho
    reachable = np.sum(pi, axis=-1, where=kept, keepdims=True) if mean is None else mean[..., None]
    return np.divide(rho, reachable, out=np.ones(rho.shape), where=kept)


def token_kl(toy):
    """KL_t(μ_s‖π) = −Σ_{v ∈ S_t} μ_s log(π/μ_s) per position, from the (T, V) tables alone (any T); ≥ 0, so
    rounding below 0 is clipped."""
    return np.maximum(-on_support(toy.mu, toy.sampled_log_ratio, toy.kept).sum(axis=1), 0.0)


def token_reverse_kl(toy):
    """KL_t(π‖μ_s) = Σ_v π log(π/μ_s) per position: +∞ where π has mass on a token μ_s never draws."""
    if toy.sampler.logged == "processed" and toy.sampler.scored != "keep_mask":
        return np.maximum((toy.pi * toy.log_rho).sum(axis=1), 0.0)
    inside = on_support(toy.pi, toy.sampled_log_ratio, toy.kept).sum(axis=1)
    outside = np.sum(toy.pi, axis=1, where=~toy.kept) > 0
    return np.where(outside, np.inf, np.maximum(inside, 0.0))


SQUARE_SAFE = 1e150          # a ratio below this squares without overflow


def chi2_terms(pi, mu, rho, kept, mean=None):
    """χ²_t = Σ_v μ_t (ρ'_t − 1)², ρ' = ρ_t/E_μs[ρ_t] (``reachable_ratio``; ``mean`` as there), per position of tables
    (..., T, V): a sum of squares, so ≥ 0 and exactly 0 when μ_t = π_t, whatever the rounding. A sampler with a low
    temperature can make ρ' too large to square (μ ~ e^-500); then it is Σ_v (μ_t(ρ'_t − 1))·(ρ'_t − 1), whose first
    factor is at most 1 when μ_log = μ_s (π_t/π_t(S_t) − μ_t)."""
    ratio = reachable_ratio(pi, rho, kept, mean)
    if np.max(ratio, where=kept, initial=0.0) < SQUARE_SAFE:
        return on_support(mu, (ratio - 1) ** 2, kept).sum(axis=-1)
    excess = np.where(kept, ratio - 1, 0.0)
    return (on_support(mu, excess, kept) * excess).sum(axis=-1)


def token_chi2(toy):
    """χ²_t = Σ_v μ_t (ρ_t/E_μs[ρ_t] − 1)² per position (ρ_t/π_t(S_t) when μ_log = μ_s; ρ_t − 1 without truncation
    too), from the (T, V) tables alone (any T): ``chi2_terms``."""
    mean = None if toy.sampler.logged == "processed" else toy.identity_tokens
    return chi2_terms(toy.pi, toy.mu, toy.rho, toy.kept, mean)


def product_minus_one(chi2_tokens):
    """∏_t (1 + χ²_t) − 1; inf (without a warning) when it overflows float64."""
    with np.errstate(over="ignore"):
        return float(np.prod(1 + chi2_tokens) - 1)


def sequence_chi2(toy):
    """χ²_seq = ∏_t (1 + χ²_t) − 1, from the (T, V) tables alone (any T)."""
    return product_minus_one(token_chi2(toy))


def diagnostics(toy: Toy) -> Diagnostics:
    """The toy's population numbers; J, E_μ[r] and ∇J come from the toy's M-vectors."""
    plain = toy.sampler.scored == "plain"
    return Diagnostics(
        M=toy.M, J=toy.J, logged_reward=toy.logged_reward,
        grad_norm=float(np.linalg.norm(toy.true_grad)),
        kl_mu_pi_tokens=token_kl(toy),
        kl_pi_mu_tokens=token_reverse_kl(toy),
        chi2_tokens=token_chi2(toy),
        max_tv=float(0.5 * np.abs(toy.pi - toy.mu).sum(axis=1).max()),
        unreachable_mass=toy.unreachable_mass, identity_tokens=toy.identity_tokens,
        plain_J=None if plain else toy.plain_J, objective_shift=toy.objective_shift)


def sequence_log_ratio(toy, kind="W"):
    """(values, μ-probabilities) of log W (kind "W") or log ρ_geo = log W / T (kind "geo"), over the M sequences,
    or over μ's support when the sampler truncates (the others have μ = 0 and log W = +∞)."""
    if kind not in ("W", "geo"):
        raise ValueError(f"kind must be 'W' or 'geo', got {kind!r}")
    log_W, probability = toy.log_W, toy.p_sampler
    if toy.truncates:
        supported = ~outer_any(~toy.kept)
        log_W, probability = log_W[supported], probability[supported]
    return (log_W if kind == "W" else np.divide(log_W, toy.T, out=log_W)), probability


def probability_beyond(values, probabilities, threshold, side="above"):
    """P(value > threshold) (side "above") or P(value < threshold) (side "below")."""
    beyond = values > threshold if side == "above" else values < threshold
    return share(np.sum(probabilities * beyond))


def weighted_quantile(values, probabilities, q):
    """The smallest value v with P(value ≤ v) ≥ q."""
    order = np.argsort(values)
    cumulative = np.cumsum(probabilities[order])
    return float(values[order[np.searchsorted(cumulative, q * cumulative[-1])]])


def weighted_histogram(values, probabilities, bins):
    """(bin edges, probability in each bin) of an exact distribution."""
    mass, edges = np.histogram(values, bins=bins, weights=probabilities)
    return edges, mass
