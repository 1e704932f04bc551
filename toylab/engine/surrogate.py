"""An update's per-token surrogate on given sequences: sg(g(w))·L(r, A), its derivative and its clip marks.

    s = batch_surrogate(update, correction, log_pi, log_old, log_mu, advantages, mask=None, **correction_params)

``log_pi``, ``log_old`` and ``log_mu`` are (B, T) arrays of log π_θ(y_t), log π_old(y_t) and the engine's logged
log μ(y_t) for the sampled tokens (under the bypass anchor ``log_old`` is ``log_mu``); ``advantages`` (B,) are A_b;
``mask`` (B, T) is 1 on response tokens. The correction g (a registry id, or None for g = 1) is evaluated as the batch
interface evaluates any estimator (``coefficients``), on π := π_old and μ, so that its ratio is w = π_old/μ; then,
per token (0 at padding):

    s.weight      g_{b,t}, frozen for the batch (the correction's coefficient, 0 where it rejects or masks)
    s.kept        the tokens its rejections leave in the loss mask
    s.objective   g·L(r, A)                      the framework's per-token loss is −s.objective
    s.derivative  g·∂L/∂log π_θ                  sequence b's gradient is Σ_t s.derivative[b, t]·∇_θ log π_θ(y_t)
    s.clipped, s.dual_clipped                    where the loss's clip or mask holds the gradient (``updates``)

A batch-coupled correction (seq_snis, tis_bn, m2po, grpo, rloo) gives its coefficients on this batch; a correction
with an additive term (k2_penalty and the presets built on it) is a loss term, not a weight, and is refused.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.catalogue.updates import Update
from toylab.engine.coefficients import apply
from toylab.engine.sequences import GivenSequences


@dataclass(frozen=True)
class BatchSurrogate:
    weight: NDArray[np.float64]
    kept: NDArray[np.bool_]
    objective: NDArray[np.float64]
    derivative: NDArray[np.float64]
    clipped: NDArray[np.bool_]
    dual_clipped: NDArray[np.bool_]


def correction_weights(correction: str | None, sequences: GivenSequences,
                       params: dict[str, object]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """(g, kept) of a correction on a view whose ratio is w = π_old/μ: 1 and the mask for None; ValueError for a
    correction with an additive term."""
    if correction is None:
        return np.where(sequences.mask, 1.0, 0.0), sequences.mask
    if correction_has_additive_term(correction, params):
        raise ValueError(f"{correction} adds a penalty term to the gradient: it is a loss, not a correction weight "
                         "g(w); use the loss dppo_kl or ipo_kl for prime-rl's (log r)² term")
    weight, kept, _ = apply(correction, sequences, params)
    return np.broadcast_to(weight, sequences.mask.shape), kept


def correction_has_additive_term(correction: str, params: dict[str, object]) -> bool:
    """True if the correction's weights carry an additive term: read off one token, or, for a batch-coupled one
    (grpo, rloo, m2po), off the exact estimator its ``weight`` names."""
    estimator = ESTIMATORS[correction]
    if not estimator.exact:
        weight = params.get("weight")
        return isinstance(weight, str) and correction_has_additive_term(weight, resolve_params(weight))
    one = GivenSequences(np.zeros((1, 1)), np.full((1, 1), -0.5), advantages=np.zeros(1))
    return estimator.weights(one, **params).additive is not None


def batch_surrogate(update: Update, correction: str | None, log_pi: ArrayLike, log_old: ArrayLike,
                    log_mu: ArrayLike, advantages: ArrayLike, mask: ArrayLike | None = None,
                    **correction_params: object) -> BatchSurrogate:
    """The per-token surrogate of ``update`` with correction ``correction`` on a batch (see the module docstring)."""
    sequences = GivenSequences(log_old, log_mu, mask, advantages)
    params = {} if correction is None else resolve_params(correction, correction_params)
    weight, kept = correction_weights(correction, sequences, params)
    pi = np.asarray(log_pi, dtype=float)
    if pi.shape != sequences.mask.shape:
        raise ValueError(f"log_pi must have the shape {sequences.mask.shape} of log_old and log_mu, got {pi.shape}")
    response = sequences.mask
    pi, old, mu = (np.where(response, x, 0.0) for x in (pi, sequences.log_pi, sequences.log_mu))
    loss = update.token_loss(pi, old, mu, sequences.advantage[:, None])
    return BatchSurrogate(weight, kept, np.where(response, weight * loss.objective, 0.0),
                          np.where(response, weight * loss.derivative, 0.0), loss.clipped & response,
                          loss.dual_clipped & response)
