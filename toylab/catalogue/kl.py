"""A fourth policy, the reference π_ref: the KL penalty's per-token estimators and where a framework puts them.

At a sampled token y_t, with x = log π(y_t) − log π_ref(y_t), each estimator is a value k(x) and a slope k'(x) =
dk/dx = dk/dlog π (``KL_ESTIMATORS``):

    k1     x                        1                     on policy E_π[k1] = KL(π‖π_ref); E_π[∇k1] = E_π[s] = 0
    abs    |x|                      sign(x) (0 at 0)
    k2     x²/2                     x                     E_π[∇k2] = E_π[x·s] = ∇KL(π‖π_ref)
    k3     e^{−x} − 1 + x           1 − e^{−x}            E_π[k3] = KL(π‖π_ref); E_π[∇k3] = π − π_ref = ∇KL(π_ref‖π)
    k1+, abs+, k3+                  verl's straight-through: the value of k1, abs or k3, the slope of k2 (x)
    full   Σ_v π_t[v]·log(π_t[v]/π_ref_t[v]), the whole position's KL: no sample; its gradient is ∇KL_t itself

A ``KLPenalty`` is β and where the estimator goes:

    loss     each token's loss gains β·ℓ_t, ℓ_t = clamp_v(h_t·k(clamp_x(x_t))): its gradient flows through x (and h)
    reward   the advantage of token t loses β·K_t(y), k evaluated at the anchor π_old and detached (x = log π_old −
             log π_ref), summed over ``reward_sum``:
                 sequence   K_t = Σ_s k_s          (verl's and SkyRL's GRPO, TRL's RLOO: the outcome's reward)
                 to_go      K_t = Σ_{s ≥ t} k_s    (a return with γ = 1: OpenRLHF's REINFORCE family, REINFORCE++)
                 token      K_t = k_t              (REINFORCE++-baseline in slime and Miles, NeMo-RL's Reinforce++)

and, in the loss, the ratio h on the term (``RATIOS``): none (1); current, exp(log π_θ − sg(log π_θ)), 1 in value with
its gradient (NeMo-RL's default); anchor, π_θ/π_old (TRL's use_bias_correction_kl, slime's and Miles'
--use-unbiased-kl, open-instruct's kl_estimator 3); engine, π_θ/μ (NeMo-RL's use_on_policy_kl_approximation). A ratio
whose gradient flows makes ℓ's gradient that of E[h·k], so with h = π_θ/(what sampled the token) k1 and k3, unbiased
for KL(π‖π_ref) in value, become unbiased for its gradient.

The frameworks' clamps: ``log_ratio_clamp`` c_x clamps x to [−c_x, c_x] (no gradient beyond), ``value_clamp`` c_v
clamps ℓ = h·k to [−c_v, c_v] after the ratio (no gradient beyond), and ``ratio_held_by_clamp`` detaches h where x is
clamped (NeMo-RL); torch.clamp passes the gradient at its bounds. So, per token,

    ∂ℓ/∂log π_θ = 1[|h·k| ≤ c_v]·(h·k(x_c)·[h flows]·[|x| ≤ c_x if held] + h·k'(x_c)·1[|x| ≤ c_x])

and a straight-through estimator's is x itself (verl differentiates ½(log π − log π_ref)² unclamped).
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from toylab.text import quoted

PLACEMENTS = ("loss", "reward")
REWARD_SUMS = ("sequence", "to_go", "token")
RATIOS = ("none", "current", "anchor", "engine")
BETA_RANGE = (0.0, 100.0)
CLAMP_RANGE = (1e-3, 700.0)


def _k1(x):
    return x


def _k1_slope(x):
    return np.ones(np.shape(x))


def _abs(x):
    return np.abs(x)


def _abs_slope(x):
    return np.sign(x)


def _k2(x):
    return x * x / 2


def _k2_slope(x):
    return x


def _k3(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.expm1(-x) + x


def _k3_slope(x):
    with np.errstate(over="ignore"):
        return -np.expm1(-x)


@dataclass(frozen=True)
class KLEstimator:
    """A per-token KL estimator: its value k(x) and slope k'(x) at x = log π − log π_ref; ``straight_through``
    estimators take the slope of k2 whatever their value; ``exact`` (full) is the whole position's KL, no sample."""
    id: str
    label: str
    value: object = None
    slope: object = None
    straight_through: bool = False
    exact: bool = False


KL_ESTIMATORS = {estimator.id: estimator for estimator in (
    KLEstimator("k1", "k1 = log(π/π_ref)", _k1, _k1_slope),
    KLEstimator("abs", "|log(π/π_ref)|", _abs, _abs_slope),
    KLEstimator("k2", "k2 = ½ log²(π/π_ref)", _k2, _k2_slope),
    KLEstimator("k3", "k3 = π_ref/π − 1 − log(π_ref/π)", _k3, _k3_slope),
    KLEstimator("k1+", "k1, k2's gradient (verl k1+)", _k1, _k2_slope, straight_through=True),
    KLEstimator("abs+", "|log ratio|, k2's gradient (verl abs+)", _abs, _k2_slope, straight_through=True),
    KLEstimator("k3+", "k3, k2's gradient (verl k3+)", _k3, _k2_slope, straight_through=True),
    KLEstimator("full", "the position's whole KL (no sample)", exact=True),
)}


def _clamp_parameter(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or not CLAMP_RANGE[0] <= value <= CLAMP_RANGE[1]:
        raise ValueError(f"{name} must be none or a number in [{CLAMP_RANGE[0]:g}, {CLAMP_RANGE[1]:g}], "
                         f"got {quoted(value)}")
    return float(value)


def _choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {quoted(value)}")


@dataclass(frozen=True)
class KLPenalty:
    """β and how the KL to π_ref enters an update (see the module docstring); β = 0 is no penalty."""
    beta: float = 0.0
    estimator: str = "k3"
    placement: str = "loss"
    reward_sum: str = "sequence"
    ratio: str = "none"
    log_ratio_clamp: float | None = None
    value_clamp: float | None = None
    ratio_held_by_clamp: bool = False

    def __post_init__(self):
        beta = self.beta
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not math.isfinite(beta) \
                or not BETA_RANGE[0] <= beta <= BETA_RANGE[1]:
            raise ValueError(f"β must be a number in [{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}], got {quoted(beta)}")
        object.__setattr__(self, "beta", float(beta))
        _choice("the KL estimator", self.estimator, KL_ESTIMATORS)
        _choice("the KL placement", self.placement, PLACEMENTS)
        _choice("the KL reward sum", self.reward_sum, REWARD_SUMS)
        _choice("the ratio on the KL term", self.ratio, RATIOS)
        for name in ("log_ratio_clamp", "value_clamp"):
            object.__setattr__(self, name, _clamp_parameter(name, getattr(self, name)))
        kind = KL_ESTIMATORS[self.estimator]
        if self.placement == "reward" and self.ratio != "none":
            raise ValueError("a KL in the reward takes no ratio of its own: the advantage's correction weighs it")
        if kind.exact and self.placement != "loss":
            raise ValueError("full (the whole position's KL) is a loss term only: in the reward it is a constant")
        if (kind.exact or kind.straight_through) and self.ratio != "none":
            raise ValueError(f"{self.estimator} takes no ratio (no framework weighs it)")

    @property
    def active(self) -> bool:
        return self.beta > 0

    @property
    def exact(self) -> bool:
        """True for full: the loss term is the position's whole KL, its gradient ∇KL_t with no sample."""
        return KL_ESTIMATORS[self.estimator].exact

    def describe(self) -> str:
        """A short text: 'k3 in the loss, ratio π/π_old, β = 0.001'."""
        where = "in the loss" if self.placement == "loss" else f"in the reward ({self.reward_sum.replace('_', '-')})"
        ratio = "" if self.ratio == "none" else f", ratio {RATIO_LABELS[self.ratio]}"
        clamps = "".join(f", {label} ±{value:g}" for label, value in (("log ratio clamped", self.log_ratio_clamp),
                                                                        ("value clamped", self.value_clamp))
                         if value is not None)
        return f"{self.estimator} {where}{ratio}{clamps}, β = {self.beta:g}"

    def values(self, log_policy: ArrayLike, log_ref: ArrayLike) -> NDArray[np.float64]:
        """The estimator's value per token at x = log_policy − log π_ref, through the clamps (no ratio): what a
        framework puts in the reward, with log_policy the anchor's log-probabilities."""
        x = np.asarray(log_policy, dtype=float) - np.asarray(log_ref, dtype=float)
        bound = self.log_ratio_clamp
        value = KL_ESTIMATORS[self.estimator].value(x if bound is None else np.clip(x, -bound, bound))
        return value if self.value_clamp is None else np.clip(value, -self.value_clamp, self.value_clamp)

    def loss_terms(self, log_pi: ArrayLike, log_old: ArrayLike, log_mu: ArrayLike,
                   log_ref: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(ℓ, ∂ℓ/∂log π_θ) per token (arrays broadcast together): the loss term before β, and its derivative, with
        the ratio h of ``ratio`` (π_old: log_old, μ: log_mu) and the clamps. Not for full."""
        log_pi, log_old, log_mu, log_ref = np.broadcast_arrays(
            *(np.asarray(a, dtype=float) for a in (log_pi, log_old, log_mu, log_ref)))
        kind = KL_ESTIMATORS[self.estimator]
        x = log_pi - log_ref
        if self.log_ratio_clamp is None:
            clamped, passes = x, np.ones(x.shape)
        else:
            clamped = np.clip(x, -self.log_ratio_clamp, self.log_ratio_clamp)
            passes = (np.abs(x) <= self.log_ratio_clamp).astype(float)
        value = kind.value(clamped)
        if kind.straight_through:                       # the value's clamps, k2's unclamped gradient
            return self._value_clamped(value, x)[0], x
        ratio, flows = self._ratio(log_pi, log_old, log_mu)
        if self.ratio_held_by_clamp:
            flows = flows * passes
        with np.errstate(over="ignore", invalid="ignore"):
            term = ratio * value
            derivative = ratio * value * flows + ratio * kind.slope(clamped) * passes
        return self._value_clamped(term, derivative)

    def _ratio(self, log_pi, log_old, log_mu):
        """(h, 1 where h's gradient flows) per token."""
        if self.ratio == "none":
            return np.ones(log_pi.shape), np.zeros(log_pi.shape)
        if self.ratio == "current":
            return np.ones(log_pi.shape), np.ones(log_pi.shape)
        with np.errstate(over="ignore"):
            return np.exp(log_pi - (log_old if self.ratio == "anchor" else log_mu)), np.ones(log_pi.shape)

    def _value_clamped(self, term, derivative):
        if self.value_clamp is None:
            return term, derivative
        passes = np.abs(term) <= self.value_clamp
        return np.clip(term, -self.value_clamp, self.value_clamp), np.where(passes, derivative, 0.0)


RATIO_LABELS = {"none": "none", "current": "π/sg(π)", "anchor": "π/π_old", "engine": "π/μ"}
NO_PENALTY = KLPenalty()
