"""Bounds on the ratio the catalogue lacked: weights at the geometric level, and sequences rejected by any one token.

    geo_tis     min(ρ_geo, C)                              ρ_geo = exp(mean_t log ρ_t) over the sequence's own tokens
    geo_clip    clamp(ρ_geo, C_min, C_max)
    outlier_rs  1[lo ≤ ρ_t ≤ hi for every t]              a sequence with one outlier token is rejected
    veto        1[ρ_t ≥ C_v for every t]                   a sequence with one catastrophic token is rejected

Sources, read at these commits:
- geo_tis, geo_clip: slime 624b824 examples/train_infer_mismatch_helper/mis.py compute_mis_weights with
  tis_level="geometric" (compute_log_ratio: masked_mean of the log ratios, clamped to ±20, then ``truncate``:
  clamp(0, upper) — geo_tis — or ``clip``: clamp(lower, upper) — geo_clip); ROLL 8eb27cc
  roll/utils/train_infer_corrections.py compute_train_infer_correction with is_weight.weight_type="geometric"
  (clamp(0, upper_bound): geo_tis); ms-swift 3602360 swift/megatron/trainers/grpo_trainer.py
  _apply_rollout_importance_sampling, mode "sequence_truncate" (the geometric mean, clamp(max=threshold): geo_tis,
  where TRL's mode of the same name truncates W); AReaL 4aef98d areal/utils/functional/functional.py
  apply_rejection_sampling with level="sequence", metric="ratio", action="clamp" (geo_clip).
- outlier_rs: SkyRL a956457 skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py
  compute_outlier_token_mask (outlier_token_is_threshold_low/_high: a sequence is kept when no response token's
  ratio is below low or above high; either bound may be unset, and low·high need not be 1).
- veto: slime 624b824 mis.py calculate_veto_mask (rs_veto_threshold: a sequence with any response token whose
  log ratio is below log C_v leaves the loss mask).

The frameworks clamp log ratios to ±20 first (slime's SAFETY_BOUND, SkyRL's safe_exp_delta): the families here
do not; a preset applies its framework's clamp, of each token or of the sequence's sum (``frameworks.preset.Rules``). Bounds compare log ratios:
log lo ≤ log ρ_t is lo ≤ ρ_t, exactly, with no rounding of exp.

Exact moments: geo_tis and geo_clip are sequence weights (the O(M) pass); outlier_rs and veto keep a sequence
when every one of its tokens is kept, a product over positions, so the count recursion covers them at any T.
"""

import numpy as np

from toylab.catalogue.weights import Weights


def geometric_log_ratio(stats):
    """log ρ_geo = mean_t log ρ_t over each sequence's own tokens."""
    return stats.sequence_statistic("log_ratio", "mean")


def geometric_tis(stats, C):
    log_geo = geometric_log_ratio(stats)
    return Weights(sequence=np.minimum(np.exp(log_geo), C), sequence_affected=log_geo > np.log(C))


def geometric_clip(stats, C_min, C_max, decided_by="mean"):
    """clamp(ρ_geo, C_min, C_max); ``decided_by`` sum or max clamps only the sequences whose W or max_t ρ_t is
    outside [C_min, C_max] and leaves the others' ρ_geo (AReaL's level sequence, action clamp, agg sum or max)."""
    geo = np.exp(geometric_log_ratio(stats))
    if decided_by == "mean":
        return Weights(sequence=np.clip(geo, C_min, C_max), sequence_affected=(geo < C_min) | (geo > C_max))
    with np.errstate(over="ignore"):
        decision = np.exp(stats.sequence_statistic("log_ratio", decided_by))
    out = (decision < C_min) | (decision > C_max)
    return Weights(sequence=np.where(out, np.clip(geo, C_min, C_max), geo), sequence_affected=out)


def outlier_kept(stats, lo, hi):
    """1[log lo ≤ log ρ_t ≤ log hi for every t]: max_t log ρ_t ≤ log hi and max_t(−log ρ_t) ≤ −log lo (lo = 0: no
    lower bound; an empty sequence is kept)."""
    with np.errstate(divide="ignore"):
        low, high = np.log(lo), np.log(hi)
    return (stats.sequence_statistic("log_ratio", "max") <= high) & (stats.sequence_statistic("k1", "max") <= -low)


def outlier_rejection(stats, lo, hi):
    kept = outlier_kept(stats, lo, hi)
    return Weights(sequence=kept.astype(float), sequence_affected=~kept, sequence_rejected=~kept)


def veto(stats, C_v):
    """outlier_rejection without an upper bound: slime rejects a sequence with log ρ_t < log C_v at any t."""
    return outlier_rejection(stats, C_v, np.inf)


def token_kept_table(log_rho, lo, hi):
    """(T, V) bool: the tokens outlier_rs keeps (for the count recursion, where a sequence is kept when all are)."""
    with np.errstate(divide="ignore"):
        return (log_rho >= np.log(lo)) & (log_rho <= np.log(hi))
