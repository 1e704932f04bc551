"""One batch interface: the per-token coefficients of any estimator or framework preset on given sequences.

    c = toylab.coefficients(name, trainer_logprobs, sampler_logprobs, mask=None, advantages=None, **params)
    d = toylab.additive_terms(name, trainer_logprobs, sampler_logprobs, mask=None, advantages=None, **params)

``trainer_logprobs`` and ``sampler_logprobs`` are (B, T) arrays of log π(y_t) and log μ(y_t) for the sampled
tokens; ``mask`` (B, T) is 1 on response tokens (default: all); ``advantages`` (B,) are A_b, needed only by
estimators that read them (ppo_clip, opsm, dppo, topr, vespo, tv_mask and the presets built on them). The results
c and d (B, T) are 0 at padding, and sequence b's gradient contribution is Σ_t (c[b, t]·A_b + d[b, t])·∇log π(y_t);
d, the gradient of an additive penalty (k2_penalty), is 0 for every other estimator. ``name`` is any registry id
(``toylab.ESTIMATORS``), including the presets ``verl:<classmethod>`` and ``trl:<mode>``, and ``params`` its
thresholds under their registry names (a preset's are the framework's: ``rs_threshold="0.8_1.1"``). Per-sequence
statistics (log W, means, ρ_geo = W^(1/L_b), maxima) use only each sequence's own tokens.

A batch-coupled estimator's coefficients depend on the batch given: tis_bn and m2po on its tokens, seq_snis through
its normalisation Σ_b W_b; grpo and rloo are their ``weight``'s coefficients (their advantages are yours to pass).

Monte Carlo (``montecarlo.Batches``) and stratified Monte Carlo go through here; the exact engine evaluates the
same weight functions on every sequence of the toy, and the tests check the two agree sequence by sequence.
``kept_tokens`` gives the tokens left in the loss mask (what verl's token-mean divides by), ``affected_tokens``
the tokens whose weight the estimator masks or clips (what the exact table's shares count), and
``aggregation.gradient_weights`` turns both into a batch's gradient weights under any loss aggregation.
"""

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.sequences import GivenSequences


def coefficients(name: str, trainer_logprobs: ArrayLike, sampler_logprobs: ArrayLike, mask: ArrayLike | None = None,
                 advantages: ArrayLike | None = None, **params: object) -> NDArray[np.float64]:
    """c (B, T): Σ_t (c[b, t]·A_b + d[b, t])·∇log π(y_t) is sequence b's gradient contribution (see the module
    docstring)."""
    sequences = GivenSequences(trainer_logprobs, sampler_logprobs, mask, advantages)
    return apply(name, sequences, resolve_params(name, params))[0]


def additive_terms(name: str, trainer_logprobs: ArrayLike, sampler_logprobs: ArrayLike, mask: ArrayLike | None = None,
                   advantages: ArrayLike | None = None, **params: object) -> NDArray[np.float64]:
    """d (B, T): the part of each token's gradient weight that does not depend on the advantage (0 but for
    additive penalties)."""
    sequences = GivenSequences(trainer_logprobs, sampler_logprobs, mask, advantages)
    return apply(name, sequences, resolve_params(name, params))[2]


def kept_tokens(name: str, trainer_logprobs: ArrayLike, sampler_logprobs: ArrayLike, mask: ArrayLike | None = None,
                advantages: ArrayLike | None = None, **params: object) -> NDArray[np.bool_]:
    """(B, T) bool: response tokens the estimator leaves in the loss mask (its rejections removed)."""
    sequences = GivenSequences(trainer_logprobs, sampler_logprobs, mask, advantages)
    return apply(name, sequences, resolve_params(name, params))[1]


def affected_tokens(name: str, trainer_logprobs: ArrayLike, sampler_logprobs: ArrayLike, mask: ArrayLike | None = None,
                    advantages: ArrayLike | None = None, **params: object) -> NDArray[np.bool_]:
    """(B, T) bool: response tokens whose weight the estimator masks or clips (its own mark or its sequence's)."""
    sequences = GivenSequences(trainer_logprobs, sampler_logprobs, mask, advantages)
    return marks(name, sequences, resolve_params(name, params))[2]


def marks(estimator_id: str, sequences: GivenSequences, params: Mapping[str, object]) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    """(c, kept, affected) of an exact estimator on a ``GivenSequences`` view: its coefficients, the tokens left
    in the loss mask, and the tokens whose weight it masks or clips — from one evaluation of its weights."""
    estimator = ESTIMATORS[estimator_id]
    if not estimator.exact:
        raise ValueError(f"{estimator_id} is batch-coupled: its weight depends on the whole batch it is averaged in")
    with np.errstate(over="ignore"):
        weights = estimator.weights(sequences, **params)
        return (*sequences.assemble(weights), sequences.affected(weights))


def apply(estimator_id: str, sequences: GivenSequences, params: Mapping[str, object]) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    """(c, kept, d) of an estimator with resolved ``params`` on a ``GivenSequences`` view."""
    estimator = ESTIMATORS[estimator_id]
    with np.errstate(over="ignore"):            # a weight beyond float64 is +∞, as IEEE arithmetic gives it
        if not estimator.exact:
            return estimator.batch_weights(sequences, **params)
        weights = estimator.weights(sequences, **params)
        return (*sequences.assemble(weights), sequences.additive(weights))


def additive_table(estimator_id: str, log_pi: NDArray[np.float64], log_mu: NDArray[np.float64], params: Mapping[str, object]) -> NDArray[np.float64]:
    """d[t, v] (T, V) of an exact estimator from the (T, V) log-probability tables: the additive term depends on
    the position and the token only (``weights.Weights``), so it is read off V sequences, sequence v holding
    token v at every position (their sequence statistics, meaningless here, do not enter it). A token the sampler
    never draws (log μ = −∞) gets a placeholder log μ = 0 here: its d is never used."""
    drawn = np.isfinite(log_mu)
    sequences = GivenSequences(np.asarray(log_pi).T, np.where(drawn, log_mu, 0.0).T,
                               advantages=np.zeros(np.shape(log_pi)[1]))
    return apply(estimator_id, sequences, params)[2].T
