"""The reference policy π_ref, frozen, and the exact KL divergences between the trainer's π and it.

π_ref is a product over positions like π: π_ref,t = softmax(θ_ref,t·scale), scored as the trainer scores θ (scale
1/τ for a trainer that divides its logits by τ; over every token, as frameworks compute the reference's
log-probabilities without the sampler's filter). By default θ_ref = θ_0, the toy's initial θ (a run starts at its
reference); a ``Reference`` may move it a distance away along a direction drawn once per toy:

    θ_ref = θ_0 + distance·d,   d ~ N(0, 1)^(T×V) from default_rng([seed, REFERENCE_STREAM])

so ``distance`` is the standard deviation of the reference's logit offset. Both divergences factorise over
positions, and so do their gradients in θ (π_t = softmax(θ_t·scale), x = log π − log π_ref):

    KL(π‖π_ref) = Σ_t Σ_v π_t[v]·x_t[v]              ∇_θt KL(π‖π_ref) = scale·π_t·(x_t − Σ_v π_t[v]·x_t[v])
    KL(π_ref‖π) = −Σ_t Σ_v π_ref,t[v]·x_t[v]          ∇_θt KL(π_ref‖π) = scale·(π_t·Σ_{v: π>0} π_ref,t[v] − π_ref,t·1[π_t > 0])

KL(π_ref‖π) is +∞ where π_ref has mass π does not (a trainer that keeps the sampler's mask); its gradient is then
that of the finite part.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toylab.engine.sampler import log_softmax
from toylab.text import quoted

REFERENCE_STREAM = 2**32 - 3        # the second seed word of the reference's direction: no run number reaches it
DISTANCE_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class Reference:
    """Where π_ref sits: θ_ref = θ_0 + distance·d (distance 0: the toy's initial θ)."""
    distance: float = 0.0

    def __post_init__(self):
        value = self.distance
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                or not DISTANCE_RANGE[0] <= value <= DISTANCE_RANGE[1]:
            raise ValueError(f"the reference's distance must be a number in [{DISTANCE_RANGE[0]:g}, "
                             f"{DISTANCE_RANGE[1]:g}], got {quoted(value)}")
        object.__setattr__(self, "distance", float(value))

    def theta(self, theta0: NDArray[np.float64], seed: int) -> NDArray[np.float64]:
        """θ_ref for the toy of initial θ ``theta0`` (T, V) and seed ``seed``."""
        if self.distance == 0:
            return np.array(theta0, dtype=float)
        direction = np.random.default_rng([seed, REFERENCE_STREAM]).standard_normal(np.shape(theta0))
        return theta0 + self.distance * direction

    def log_probabilities(self, theta0: NDArray[np.float64], seed: int, sampler) -> NDArray[np.float64]:
        """log π_ref (T, V): softmax(θ_ref·scale) over every token."""
        return log_softmax(self.theta(theta0, seed) * sampler.score_scale)


INITIAL = Reference()


def kl_to_reference(log_pi: NDArray[np.float64], log_ref: NDArray[np.float64]) -> NDArray[np.float64]:
    """KL(π‖π_ref) per row: tables (…, T, V) → (…); 0·log 0 = 0."""
    with np.errstate(invalid="ignore"):
        terms = np.where(log_pi > -np.inf, np.exp(log_pi) * (log_pi - log_ref), 0.0)
    return terms.sum(axis=(-2, -1))


def kl_from_reference(log_pi: NDArray[np.float64], log_ref: NDArray[np.float64]) -> NDArray[np.float64]:
    """KL(π_ref‖π) per row: +∞ where π_ref has mass π has not."""
    with np.errstate(invalid="ignore"):
        terms = np.where(log_pi > -np.inf, np.exp(log_ref) * (log_ref - log_pi), np.inf)
    return terms.sum(axis=(-2, -1))


def kl_gradients(log_pi: NDArray[np.float64], log_ref: NDArray[np.float64],
                 scale: float = 1.0) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(∇_θ KL(π‖π_ref), ∇_θ KL(π_ref‖π)) tables (…, T, V), π = exp(log_pi) (0 outside a kept set)."""
    pi = np.exp(log_pi)
    inside = log_pi > -np.inf
    x = np.where(inside, log_pi - np.where(inside, log_ref, 0.0), 0.0)
    forward = pi * (x - (pi * x).sum(axis=-1, keepdims=True))
    ref = np.where(inside, np.exp(log_ref), 0.0)
    reverse = pi * ref.sum(axis=-1, keepdims=True) - ref
    return forward * scale, reverse * scale
