"""The estimator families the catalogue lacked: one weight function each, parameters instead of many ids.

    rs        rejection by a statistic: keep a token (scope token) or a whole sequence (seq_sum, seq_mean,
              seq_max of the per-token statistic over the sequence's own tokens) when lo ≤ statistic ≤ hi,
              with statistic k1 = −log ρ, k2 = ½(log ρ)², k3 = ρ − 1 − log ρ or log_ratio = log ρ (the
              "ratio" reading: lo ≤ log ρ_geo ≤ hi is C_low ≤ ρ_geo ≤ C_high with lo = log C_low), or
              k3_reverse = 1/ρ − 1 + log ρ (AReaL kl_k3 as coded, NeMo-RL policy_kl_error), mult_error = e^|log ρ|
              (NeMo-RL's seq_logprob_error_threshold: seq_mean, hi), prob_diff = π_t(y_t) − μ_t(y_t) (ROLL's
              diff_enabled filters), kpop or binary_kl (AReaL's KPop, clamped probabilities;
              ``statistics.STATISTICS``); times the weight of any exact
              estimator (the registry chains it), so rejections chain (all must pass)
    tok_clip  clamp(ρ_t, C_min, C_max)                      two-sided token truncation (TRL token_truncate)
    seq_clip  clamp(W, C_min, C_max)                        two-sided sequence truncation (TRL sequence_truncate)
    seq_band  W·1[C_min ≤ W ≤ C_max]                        two-sided sequence mask (TRL sequence_mask)
    ppo_clip  PPO's clipped surrogate against the sampler: the gradient of −min(r·A, clip(r, 1−ε_low,
              1+ε_high)·A), with verl's dual clip at C_dual for A < 0, is c_t = ρ_t·1[ρ_t ≤ 1 + ε_high] when
              A ≥ 0 and c_t = ρ_t·1[1 − ε_low ≤ ρ_t ≤ C_dual] when A < 0 (exact given A; ρ_t/2 at ρ_t = C_dual,
              where torch splits the gradient of a tied min)
    opsm      the off-policy sequence mask of DeepSeek-V3.2: drop a sequence when A < 0 and
              mean_t(log μ − log π) > δ; times any exact weight (the registry chains it)
    tis_bn    batch-normalised truncated IS (verl rollout_is_batch_normalize): min(ρ_t, C) or min(W, C), through
              verl's ±20 clamp, divided by its mean over the batch — batch-coupled, Monte Carlo and given batches

Exact moments: every exact family is a sequence weight times a token table, so the O(M) engine covers it;
ppo_clip's token table depends on the sign of A (a token class), and the engine sums over the classes
(``moments``); opsm's mask is a sequence weight that reads A. None of them factorises over positions
(the count recursion of ``recursion`` does not cover them) except tok_clip.
"""

import numpy as np

from toylab.catalogue.aggregation import VERL_EPSILON
from toylab.catalogue.corrections import rejection_kept, sequence_tis, token_tis
from toylab.catalogue.frameworks.verl import VERL_CLAMP
from toylab.catalogue.weights import TokenClass, Weights

REJECTION_STATISTICS = ("k1", "k2", "k3", "log_ratio", "k3_reverse", "mult_error", "prob_diff", "kpop", "binary_kl")
REJECTION_SCOPES = ("token", "seq_sum", "seq_mean", "seq_max")
IS_LEVELS = ("token", "sequence")
BATCH_MEAN_FLOOR = 1e-8          # verl leaves the weights unnormalised when their batch mean is below this


def rejection_mask(stats, statistic, scope, lo, hi):
    """Keep a token, or a whole sequence, whose statistic lies in [lo, hi]; the rest leave the loss mask."""
    kept = rejection_kept(stats, statistic, scope, lo, hi)
    if scope == "token":
        return Weights(token=kept.astype(float), token_affected=~kept, token_rejected=~kept)
    return Weights(sequence=kept.astype(float), sequence_affected=~kept, sequence_rejected=~kept)


def token_clip(stats, C_min, C_max):
    rho = stats.rho
    return Weights(token=np.clip(rho, C_min, C_max), token_affected=(rho < C_min) | (rho > C_max))


def sequence_clip(stats, C_min, C_max):
    W = stats.W
    return Weights(sequence=np.clip(W, C_min, C_max), sequence_affected=(W < C_min) | (W > C_max))


def sequence_band(stats, C_min, C_max):
    W = stats.W
    kept = (W >= C_min) & (W <= C_max)
    return Weights(sequence=np.where(kept, W, 0.0), sequence_affected=~kept, sequence_rejected=~kept)


def ppo_clip(stats, eps_low, eps_high, C_dual):
    """Token weights of PPO-clip with ratio ρ_t = π/μ; a token outside verl's ±20 clamp has gradient 0. At ρ_t =
    C_dual exactly (A < 0) the dual clip's torch.min(−A·C_dual, −A·ρ) is a tie, and torch passes each side half the
    gradient: the weight is ρ_t/2 there (verl 1dda039 core_algos.py compute_policy_loss_vanilla, 1354–1355)."""
    rho, live = stats.rho, ~stats.clamped_out
    positive = (rho <= 1 + eps_high) & live
    negative = (rho >= 1 - eps_low) & (rho <= C_dual) & live
    negative_weight = np.where(negative, np.where(rho == C_dual, rho / 2, rho), 0.0)
    return Weights(token=np.where(positive, rho, 0.0), token_affected=~positive,
                   classes=(TokenClass(stats.advantage < 0, negative_weight, ~negative),))


def off_policy_mask(stats, delta):
    """1[A ≥ 0 or mean_t(log μ − log π) ≤ δ]: it zeroes the loss, not the loss mask."""
    kept = (stats.advantage >= 0) | rejection_kept(stats, "k1", "seq_mean", None, delta)
    return Weights(sequence=kept.astype(float), sequence_affected=~kept)


# -- batch-normalised truncated IS -------------------------------------------------------------------------

def truncated_weights(sequences, level, C):
    """(c, kept): min(ρ_t, C) or min(W, C) on given sequences, through verl's ±20 clamp as verl computes them."""
    view = sequences.clamped(VERL_CLAMP, VERL_EPSILON)
    truncated = {"token": token_tis, "sequence": sequence_tis}[level]
    return sequences.assemble(truncated(view, C))


def without_additive(coefficient, kept):
    """(c, kept, d) with d = 0: the batch interface's triple for a batch-coupled weight without a penalty."""
    return coefficient, kept, np.zeros(kept.shape)


def batch_normalised_coefficients(sequences, level, C):
    """(c, kept, d = 0) on a given batch: truncated weights divided by their batch mean (verl rollout_is_batch_normalize).

    The mean is over the response tokens (token level) or over the sequences with a response token
    (sequence level), with verl's masked_mean (a token count + 10⁻⁸ as denominator), as in verl's
    compute_rollout_correction_weights.
    """
    coefficient, kept = truncated_weights(sequences, level, C)
    if level == "token":
        mean = coefficient.sum() / (sequences.mask.sum() + VERL_EPSILON)
    else:
        present = sequences.length > 0
        per_sequence = coefficient.sum(axis=1) / (sequences.length + VERL_EPSILON)
        mean = per_sequence[present].mean() if present.any() else 0.0
    return without_additive(coefficient / mean if mean > BATCH_MEAN_FLOOR else coefficient, kept)


def batch_normalised_tis(batch, level, C):
    """ĝ_N = Σ_{i<N} (w_i/w̄_N)·A_i·Σ_t s_{i,t} / D_N with w̄_N the mean weight of the first N sequences."""
    weight = np.broadcast_to(truncated_weights(batch.sequences, level, C)[0], batch.sequences.mask.shape)
    weight = weight.reshape(batch.tokens.shape)
    if level == "token":
        mean = batch.cumulative(weight.sum(axis=2)) / (batch.N * batch.T + VERL_EPSILON)
    else:
        mean = batch.cumulative(weight.sum(axis=2) / (batch.T + VERL_EPSILON)) / batch.N
    mean = np.where(mean > BATCH_MEAN_FLOOR, mean, 1.0)
    coefficient, denominator = batch.aggregated(weight, np.ones(weight.shape, bool))
    return batch.score_sum(coefficient * batch.advantage[..., None]) / (denominator * mean)[..., None, None]
