"""M2PO, AReaL's second-moment trust region: batch-coupled, so Monte Carlo and given batches only.

Over the response tokens of a batch, with m2_t = (log ρ_t)², M2PO removes from the loss mask the tokens of
largest m2, as few as it can so that the mean m2 of the tokens left is below the threshold:

    sort m2 descending; mask the first k tokens, k the smallest index whose suffix mean is < m2_threshold
    (all but one token when no suffix qualifies)

and each kept token is weighted by the weight w_t of any exact estimator (AReaL's decoupled loss weights token t by
its behaviour importance weight ρ_t: tok_is, the default). Whether a token is kept depends on the whole batch,
so the estimator has no single-sample moments.

Source: AReaL 4aef98d areal/trainer/ppo/actor.py _apply_m2po_masking and _get_m2po_loss_mask (m2_threshold,
unset by default; examples/math/gsm8k_m2po.yaml sets 0.04 with use_decoupled_loss), m2 from the behaviour and
proximal log-probs (on the toy: μ and π). AReaL sorts with torch.sort, whose order among equal m2 is unspecified;
here equal values keep the batch order (a stable sort), so which of several tied tokens is masked is defined.
"""

import numpy as np


def second_moment_kept(m2, m2_threshold):
    """(..., n) bool: the tokens M2PO keeps among n tokens (last axis), one batch per leading index."""
    n = m2.shape[-1]
    if n == 0:
        return np.ones(m2.shape, bool)
    order = np.argsort(-m2, axis=-1, kind="stable")
    ranked = np.take_along_axis(m2, order, axis=-1)
    suffix_mean = np.cumsum(ranked[..., ::-1], axis=-1)[..., ::-1] / np.arange(n, 0, -1)
    below = suffix_mean < m2_threshold
    masked = np.where(below.any(axis=-1), below.argmax(axis=-1), n - 1)
    kept_ranked = np.arange(n) >= masked[..., None]
    kept = np.empty(m2.shape, bool)
    np.put_along_axis(kept, order, kept_ranked, axis=-1)
    return kept


def m2po_kept(sequences, m2_threshold):
    """(B, T) bool on a given batch: the response tokens M2PO leaves in the loss mask (padding: False)."""
    kept = np.zeros(sequences.mask.shape, bool)
    kept[sequences.mask] = second_moment_kept(sequences.log_rho[sequences.mask] ** 2, m2_threshold)
    return kept


def m2po_estimate(batch, m2_threshold, weight):
    """ĝ_N = Σ_{i<N} Σ_t k^N_{i,t}·(c_{i,t}·A_i + d_{i,t})·s_{i,t} / D_N, with k^N the tokens M2PO keeps in the first N
    sequences of the replicate and the batch's loss aggregation (its denominator counts the kept tokens)."""
    coefficient, kept, additive = batch.terms(weight)
    R, n, T = coefficient.shape
    m2 = batch.sequences.log_rho.reshape(R, n, T) ** 2
    gradient = coefficient * batch.advantage[..., None] + additive
    estimates = np.empty((R, len(batch.N), T, batch.toy.V))
    for k, N in enumerate(batch.N):
        m2_kept = np.zeros((R, n, T), bool)
        m2_kept[:, :N] = second_moment_kept(m2[:, :N].reshape(R, N * T), m2_threshold).reshape(R, N, T)
        scaled, denominator = batch.aggregated(gradient * m2_kept, kept & m2_kept)
        estimates[:, k] = batch.divided(batch.score_sum(scaled), denominator)[:, k]
    return estimates
