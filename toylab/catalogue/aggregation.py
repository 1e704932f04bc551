"""How a batch's per-token losses become one gradient: the loss aggregations of verl and TRL.

A batch of B sequences with coefficients c_{b,t} (``toylab.coefficients``), advantages A_b, response mask m
(L_b = Σ_t m_{b,t} tokens) and the tokens left in the loss mask after rejection k (K_b = Σ_t k_{b,t})
gives the gradient estimate ĝ = Σ_b Σ_t g_{b,t}·A_b·s_{b,t} with

    seq-mean-token-sum    g = c / B                                 toylab's 1/N per sequence
    token-mean            g = c · T / Σ_{b,t} k_{b,t}               verl's default loss_agg_mode
    seq-mean-token-mean   g = c · T / ((K_b + ε) · #{b: K_b > 0})   verl's seq-mean-token-mean, ε = 10⁻⁸
    dapo                  g = c · T / Σ_b L_b                       TRL's default loss_type
    seq-mean-original-length
                          g = c · k · T / (max(L_b, 1) · B)         slime: each sequence by its original length

Normalisation: the three framework modes are multiplied by T, the batch's padded length (the toy's sequence
length), so that on a fixed-length batch with nothing rejected all four equal seq-mean-token-sum and every
error is measured against ∇J on one scale; the frameworks' own losses are these divided by T. A batch with no
kept token gives ĝ = 0 (verl computes 0/0 there).

Source: verl b178a3c, verl/trainer/ppo/core_algos.py agg_loss, as the default (legacy FSDP) worker calls it —
no global_batch_info, so token-mean divides by the tokens of the loss mask *after* rejection and the
seq-mean modes by the sequences with at least one kept token (seq-mean-token-mean divides each sequence by
K_b + 1e-8, and so does toylab). TRL f2cd577, trl/trainer/grpo_trainer.py _compute_loss: dapo divides
by num_items_in_batch, the completion tokens before any importance-sampling mask; on a fixed-length batch it
equals seq-mean-token-sum, and so do TRL's grpo, bnpo and dr_grpo up to a constant. slime 624b824,
slime/backends/megatron_utils/cp_utils.py get_sum_of_sample_mean with ``rollout_mask_sums`` (loss.py
policy_loss_function rebuilds it with the rejection's modified masks, slime/ray/rollout.py sums each rollout's
original loss masks): each sequence's kept tokens summed and divided by max(L_b, 1), L_b its loss-mask tokens
before rejection (a rollout of one sample), then loss_function scales by 1/step_global_batch_size — every
sequence, rejected or not, counts in B. On the fixed-length toy it is seq-mean-token-sum on the kept tokens.
"""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from toylab.text import quoted

AGGREGATIONS = ("seq-mean-token-sum", "token-mean", "seq-mean-token-mean", "dapo", "seq-mean-original-length")
DEFAULT_AGGREGATION = "seq-mean-token-sum"
VERL_EPSILON = 1e-8          # verl's masked_mean and seq-mean-token-mean add it to a token count


def check_aggregation(mode: str) -> str:
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {quoted(mode)}; choose {', '.join(AGGREGATIONS)}")
    return mode


def gradient_weights(coefficients: ArrayLike, kept: ArrayLike, mask: ArrayLike | None = None,
                     mode: str = DEFAULT_AGGREGATION) -> NDArray[np.float64]:
    """g (B, T) with ĝ = Σ_b Σ_t g_{b,t}·A_b·s_{b,t}, for one batch (formulas in the module docstring)."""
    check_aggregation(mode)
    c = np.asarray(coefficients, dtype=float)
    kept = np.asarray(kept, bool)
    B, T = c.shape
    mask = np.ones((B, T), bool) if mask is None else np.asarray(mask, bool)
    per_sequence_kept = kept.sum(axis=1)
    if mode == "seq-mean-token-sum":
        return c / B
    if mode == "token-mean":
        return _divided(c * T, kept.sum())
    if mode == "dapo":
        return _divided(c * T, mask.sum())
    if mode == "seq-mean-original-length":
        return c * kept * T / (np.maximum(mask.sum(axis=1), 1) * B)[:, None]
    scaled = c * T / (per_sequence_kept + VERL_EPSILON)[:, None]
    return _divided(scaled, np.count_nonzero(per_sequence_kept))


def aggregated(batches, coefficient, kept):
    """Monte Carlo: (scaled c, D) with ĝ_N = score_sum(scaled c·A)[N] / D_N for every nested batch size N.

    The same formulas as ``gradient_weights`` for the first N sequences of each replicate, with cumulative
    sums in place of batch sums: D_N = N, Σk/T, #{i: K_i > 0}, ΣL/T or N.
    """
    mode = check_aggregation(batches.aggregation)
    T = coefficient.shape[-1]
    if mode == "seq-mean-token-sum":
        return coefficient, np.broadcast_to(batches.N.astype(float), (len(coefficient), len(batches.N)))
    per_sequence_kept = kept.sum(axis=-1)
    if mode == "token-mean":
        return coefficient, batches.cumulative(per_sequence_kept) / T
    if mode == "dapo":
        return coefficient, batches.cumulative(np.full(per_sequence_kept.shape, T)) / T
    if mode == "seq-mean-original-length":                       # every sampled sequence has its T tokens
        return coefficient * kept, np.broadcast_to(batches.N.astype(float), (len(coefficient), len(batches.N)))
    return coefficient * (T / (per_sequence_kept + VERL_EPSILON))[..., None], batches.cumulative(per_sequence_kept > 0)


def _divided(x, denominator):
    return x / denominator if denominator > 0 else np.zeros_like(x)
