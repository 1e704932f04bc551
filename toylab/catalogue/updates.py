"""One update of a batch: the per-token surrogate sg(g(w))·L(r, A) of three policies, and an update as data.

Every token of a batch meets three policies: π_θ, the one being optimised; π_old, the anchor, frozen for the batch;
and μ, what the engine logged when it sampled the token. With

    r = π_θ/π_old   (the PPO ratio)              w = π_old/μ   (the engine correction's ratio)

an update ascends, per token, sg(g(w))·L(r, A): g the weight of a correction of the catalogue (any exact registry id,
presets included, evaluated with π := π_old, so that its ρ is w; none: g = 1), frozen with π_old for the batch
(stop-gradient; or, with ``weights_at="current"``, g(sg(π_θ)/μ) recomputed at each update), and L one of LOSSES, a function of log π_θ, log π_old, log μ and A. A framework's per-token loss is
the negative, −sg(g)·L, and its gradient in θ is −sg(g)·(∂L/∂log π_θ)·∇_θ log π_θ(y_t). The anchor (ANCHORS):

    recompute   π_old = π_{θ_k}: the trainer's recomputation of the batch's log-probs before its first update
    rollout     π_old = π_{θ_{k−s}}: the policy that generated the batch, s steps old (Miles' keep-old-actor)
    bypass      π_old = μ: the engine's logged log-probs; w ≡ 1, and r = π_θ/μ is the combined ratio

The losses, objectives to maximise (the frameworks minimise −L), each with ∂L/∂log π_θ as torch's autograd computes
it — at a tie of torch.maximum or torch.minimum each side gets half the gradient, and torch.clamp passes the gradient
at its bounds:

    ppo        min(r·A, clip(r, 1 − ε_l, 1 + ε_h)·A); with the dual clip c (A < 0 only) max(that, c·A); log r
               clamped to ±clamp before exp when clamp is set (verl: 20, its ratio's gradient then 0 beyond).
               ∂L/∂log π_θ = r·A where no clip holds, 0 where one does (verl compute_policy_loss_vanilla)
    reinforce  A·log π_θ: ∂L/∂log π_θ = A, no ratio (verl loss_type "reinforce" with the IS weight as g)
    cispo      sg(clip(r, 1 − ε_l, 1 + ε_h))·A·log π_θ: ∂L/∂log π_θ = clip(r)·A (verl compute_policy_loss_cispo;
               MiniMax-M1); log r clamped to ±clamp first when set
    dppo_kl    keep·A·r − τ·(log r)², keep = 1[π_θ − π_old ≤ δ_h] when A > 0, 1[π_θ − π_old ≥ −δ_l] when A ≤ 0
               (probabilities of the token, not ratios): prime-rl's default_loss_fn with adv_tau 1
    ipo_kl     keep·A·r − τ·(log r)², keep = 1[|π_θ − π_old| ≤ δ]: prime-rl's ipo_loss_fn with adv_tau 1

prime-rl's ratio is π_θ/μ: its update has the bypass anchor. ``clipped`` marks the tokens where a clip or mask holds
the gradient (verl's pg_clipfrac: the clipped branch strictly larger; prime-rl's is_masked), ``dual_clipped`` those
the dual clip holds (verl's pg_clipfrac_lower). At r = 1 every loss's ∂L/∂log π_θ is A (no clip binds there for
ε ≥ 0, c > 1, δ ≥ 0, and (log r)² has slope 0): an update from π_θ = π_old follows the correction's estimator.

An ``Update`` is the data of one framework's update rule: the anchor, the loss and its parameters, and how many
sequential updates a batch feeds, U = minibatches × epochs, with π_old and g frozen throughout. An
``UpdatePreset`` names a framework's update with its correction preset (a registry id) and its pipeline preset
(``pipelines``), the staleness it runs at by default, and where its code computes the loss.
"""

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from toylab.text import quoted

ANCHORS = ("recompute", "rollout", "bypass")
WEIGHTS_AT = ("anchor", "current")      # the correction's ratio: w = π_old/μ frozen, or sg(π_θ)/μ at each update
LAG_DRAWS = ("fixed", "uniform")        # the lag s fixed, or drawn uniformly from 0 … η per batch
UPDATES_AT_MOST = 64                    # minibatches × epochs


@dataclass(frozen=True)
class LossParam:
    """A loss parameter: its default and range; ``optional`` parameters may be None (off)."""
    default: float | None
    low: float
    high: float
    help: str
    optional: bool = False


@dataclass(frozen=True)
class TokenLoss:
    """Per token: the objective L (to maximise), ∂L/∂log π_θ, and the tokens a clip or mask holds."""
    objective: NDArray[np.float64]
    derivative: NDArray[np.float64]
    clipped: NDArray[np.bool_]
    dual_clipped: NDArray[np.bool_]


EPS_LOW = LossParam(0.2, 0.0, 1.0, "ε_low: the clip's lower bound is 1 − ε_low")
EPS_HIGH = LossParam(0.2, 0.0, 10.0, "ε_high: the clip's upper bound is 1 + ε_high")
CLAMP = LossParam(None, 1.0, 700.0, "log r clamped to ±clamp before exp (verl: 20); none: no clamp", optional=True)
KL_TAU = LossParam(1e-3, 0.0, 10.0, "τ: the weight of (log r)² (prime-rl kl_tau)")


def _tie_share(a, b):
    """The share of the gradient of torch.maximum(a, b) that reaches a: 1 where a > b, ½ at a tie, 0 below."""
    return np.where(a > b, 1.0, np.where(a == b, 0.5, 0.0))


def _clamped(log_ratio, clamp):
    """(log r as the framework exponentiates it, 1 where its gradient passes): torch.clamp's gradient is 1 on
    [−clamp, clamp], bounds included."""
    if clamp is None:
        return log_ratio, np.ones(np.shape(log_ratio))
    return np.clip(log_ratio, -clamp, clamp), (np.abs(log_ratio) <= clamp).astype(float)


def ppo(log_pi, log_old, log_mu, advantage, eps_low, eps_high, dual_clip, clamp):
    log_ratio, passes = _clamped(log_pi - log_old, clamp)
    ratio = np.exp(log_ratio)
    advantage = np.broadcast_to(advantage, ratio.shape)
    low, high = 1 - eps_low, 1 + eps_high
    loss_1, loss_2 = -advantage * ratio, -advantage * np.clip(ratio, low, high)
    inside = ((ratio >= low) & (ratio <= high)).astype(float)
    loss = np.maximum(loss_1, loss_2)
    slope = -advantage * ratio * (_tie_share(loss_1, loss_2) + _tie_share(loss_2, loss_1) * inside)
    dual_clipped = np.zeros(ratio.shape, bool)
    if dual_clip is not None:
        loss_3 = -advantage * dual_clip
        negative = advantage < 0
        dual_clipped = negative & (loss > loss_3)
        slope = np.where(negative, slope * _tie_share(loss_3, loss), slope)      # min(l3, l) = −max(−l3, −l)
        loss = np.where(negative, np.minimum(loss_3, loss), loss)
    return TokenLoss(-loss, -slope * passes, loss_2 > loss_1, dual_clipped)


def reinforce(log_pi, log_old, log_mu, advantage):
    advantage = np.broadcast_to(advantage, np.shape(log_pi))
    nothing = np.zeros(np.shape(log_pi), bool)
    return TokenLoss(advantage * log_pi, advantage * 1.0, nothing, nothing)


def cispo(log_pi, log_old, log_mu, advantage, eps_low, eps_high, clamp):
    log_ratio, _ = _clamped(log_pi - log_old, clamp)
    ratio = np.exp(log_ratio)
    advantage = np.broadcast_to(advantage, ratio.shape)
    weight = np.clip(ratio, 1 - eps_low, 1 + eps_high)
    return TokenLoss(weight * advantage * log_pi, weight * advantage, ratio != weight, np.zeros(ratio.shape, bool))


def _masked_ratio_with_penalty(log_pi, log_old, advantage, keep, tau):
    log_ratio = log_pi - log_old
    ratio = np.exp(log_ratio)
    advantage = np.broadcast_to(advantage, ratio.shape)
    kept = np.where(keep, advantage * ratio, 0.0)
    return TokenLoss(kept - tau * log_ratio**2, kept - 2 * tau * log_ratio, ~keep, np.zeros(ratio.shape, bool))


def dppo_kl(log_pi, log_old, log_mu, advantage, delta_low, delta_high, tau):
    rise = np.exp(log_pi) - np.exp(log_old)
    keep = np.where(np.broadcast_to(advantage, rise.shape) > 0, rise <= delta_high, rise >= -delta_low)
    return _masked_ratio_with_penalty(log_pi, log_old, advantage, keep, tau)


def ipo_kl(log_pi, log_old, log_mu, advantage, delta, tau):
    keep = np.abs(np.exp(log_pi) - np.exp(log_old)) <= delta
    return _masked_ratio_with_penalty(log_pi, log_old, advantage, keep, tau)


@dataclass(frozen=True)
class Loss:
    id: str
    label: str
    function: Any
    params: dict = field(default_factory=dict)


LOSSES = {loss.id: loss for loss in (
    Loss("ppo", "PPO clip", ppo, {"eps_low": EPS_LOW, "eps_high": EPS_HIGH,
                                  "dual_clip": LossParam(None, 1.0, 100.0, "dual clip c > 1 for A < 0 (verl "
                                                                            "clip_ratio_c: 3); none: off", True),
                                  "clamp": CLAMP}),
    Loss("reinforce", "REINFORCE (A·log π)", reinforce),
    Loss("cispo", "CISPO", cispo, {"eps_low": EPS_LOW, "eps_high": EPS_HIGH, "clamp": CLAMP}),
    Loss("dppo_kl", "DPPO mask + (log r)² (prime-rl)", dppo_kl,
         {"delta_low": LossParam(0.2, 0.0, 1.0, "δ_l: A ≤ 0 drops a token whose probability fell by more"),
          "delta_high": LossParam(0.2, 0.0, 1.0, "δ_h: A > 0 drops a token whose probability rose by more"),
          "tau": KL_TAU}),
    Loss("ipo_kl", "IPO mask + (log r)² (prime-rl)", ipo_kl,
         {"delta": LossParam(0.1, 0.0, 1.0, "δ: drops a token whose probability moved by more"), "tau": KL_TAU}),
)}


def resolve_loss_params(loss: str, overrides: Mapping[str, object] | None = None) -> dict[str, float | None]:
    """The loss's parameters: defaults updated by ``overrides``; ValueError names what is wrong."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {quoted(loss)}; choose {', '.join(LOSSES)}")
    spec = LOSSES[loss].params
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(spec))
    if unknown:
        raise ValueError(f"loss {loss} has no parameter {quoted(unknown[0])} (its parameters: "
                         f"{', '.join(spec) or 'none'})")
    return {name: _resolved(f"{loss}.{name}", param, overrides.get(name, param.default)) for name, param in spec.items()}


def _resolved(name: str, param: LossParam, value: object) -> float | None:
    """One parameter's value: None for an optional one given as None, "none" or "off"; else a number in its range
    (a dual clip above 1); ValueError naming ``name`` (loss.param) otherwise."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "off")):
        if not param.optional:
            raise ValueError(f"{name} must be a number, got {quoted(value)}")
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise ValueError(f"{name} must be a number, got {quoted(value)}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {quoted(value)}") from None
    if not math.isfinite(number) or not param.low <= number <= param.high:
        raise ValueError(f"{name} = {quoted(value)} is outside [{param.low:g}, {param.high:g}]")
    if name.endswith(".dual_clip") and number <= 1:
        raise ValueError(f"{name} must be above 1 (verl asserts clip_ratio_c > 1), got {number:g}")
    return number


def token_loss(loss: str, log_pi: ArrayLike, log_old: ArrayLike, log_mu: ArrayLike, advantage: ArrayLike,
               **params: object) -> TokenLoss:
    """L, ∂L/∂log π_θ and the clip marks per token (the four arrays broadcast together) for the loss ``loss``
    (LOSSES) with ``params`` (defaults for those not given): see the module docstring."""
    arrays = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (log_pi, log_old, log_mu, advantage)))
    with np.errstate(over="ignore"):
        return LOSSES[loss].function(*arrays, **resolve_loss_params(loss, params))


@dataclass(frozen=True)
class Update:
    """How a batch is used: its anchor (ANCHORS), its loss (LOSSES) with parameters (a mapping, or (name, value)
    pairs; every parameter of the loss resolved in ``params``), U = minibatches × epochs sequential updates, and
    where the correction reads its ratio (WEIGHTS_AT): w = π_old/μ, frozen for the batch (anchor), or sg(π_θ)/μ
    recomputed at each update (current: verl's bypass mode computes its IS weights and rejection masks from the
    current log-probs, detached)."""
    anchor: str = "recompute"
    loss: str = "ppo"
    params: Any = ()
    minibatches: int = 1
    epochs: int = 1
    weights_at: str = "anchor"

    def __post_init__(self):
        if self.anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {', '.join(ANCHORS)}, got {quoted(self.anchor)}")
        if self.weights_at not in WEIGHTS_AT:
            raise ValueError(f"weights_at must be one of {', '.join(WEIGHTS_AT)}, got {quoted(self.weights_at)}")
        given = dict(self.params.items() if isinstance(self.params, Mapping) else self.params)
        object.__setattr__(self, "params", tuple(sorted(resolve_loss_params(self.loss, given).items())))
        for name in ("minibatches", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1, got {quoted(value)}")
        if self.U > UPDATES_AT_MOST:
            raise ValueError(f"minibatches × epochs must be at most {UPDATES_AT_MOST}, got {self.U}")

    @property
    def U(self) -> int:
        return int(self.minibatches * self.epochs)

    @property
    def loss_params(self) -> dict[str, float | None]:
        return dict(self.params)

    def token_loss(self, log_pi: ArrayLike, log_old: ArrayLike, log_mu: ArrayLike, advantage: ArrayLike) -> TokenLoss:
        """``token_loss`` with this update's loss and parameters."""
        return token_loss(self.loss, log_pi, log_old, log_mu, advantage, **self.loss_params)


DEFAULT_UPDATE = Update()


@dataclass(frozen=True)
class UpdatePreset:
    """A framework's update as data: ``update`` (anchor, loss and parameters, minibatches × epochs at the framework's
    defaults), ``correction`` the registry id of its correction g (a catalogue estimator or a framework preset such
    as "verl:decoupled_token_is"; None: g = 1), ``pipeline`` a ``pipelines.PIPELINES`` id (None: the user's), its
    default staleness (``lag``, s or η by ``lag_draw``), and where its code computes the loss (``commit``, ``code``:
    file, function and lines), with ``note`` where its code and documentation disagree."""
    id: str
    option: str
    update: Update
    correction: str | None = None
    pipeline: str | None = None
    lag: int = 0
    lag_draw: str = "fixed"
    commit: str = ""
    code: str = ""
    note: str = ""

    @property
    def framework(self) -> str:
        return self.id.partition(":")[0]
