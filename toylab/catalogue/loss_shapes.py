"""Losses the catalogue lacked that are not a mask times the advantage: a penalty, and weights shaped by the sign of A.

    k2_penalty  ĝ = Σ_t (w_t·A − 2τ·log ρ_t)·s_t      the gradient ascent direction of −τ·Σ_t (log π_t − log μ_t)²,
                                                        an additive term that does not depend on A; times the weight
                                                        w of any exact estimator (the registry chains it)
    topr        c_t = w₊ when A > 0,  w₋·min(ρ_t, 1) when A ≤ 0      tapered off-policy REINFORCE
    vespo       c_t = φ(w) = e^λ·w^k·e^{−λw}, (k, λ) = (k_pos, λ_pos) when A ≥ 0, (k_neg, λ_neg) when A < 0,
                log w = clip(Σ_t clip(log r_t, log 10⁻⁸, 20), log 10⁻⁸, 20),
                r_t = clamp(ρ_t, clip_min, clip_max) (mode token_truncate) or ρ_t·1[clip_min ≤ ρ_t ≤ clip_max]
                (token_mask): a smooth sequence weight, 1 at w = 1, vanishing as w → 0 or ∞
    gspo_clip   c_t = ρ_geo·1[ρ_geo ≤ 1 + ε_high] when A ≥ 0,  ρ_geo·1[1 − ε_low ≤ ρ_geo ≤ C_dual] when A < 0
                PPO's clipped surrogate on the geometric sequence ratio against the sampler (GSPO)

Sources, read at these commits:
- k2_penalty: prime-rl 559b447 src/prime_rl/trainer/rl/loss.py default_loss_fn: per_token_loss = −pg_loss +
  kl_tau·loss_mask·(trainer_logprobs − inference_logprobs)², kl_tau = 1e-3 (Kimi-K2.5's KL loss). Its gradient
  is 2·kl_tau·log ρ_t·∇log π(y_t) per response token, whatever the advantage: ĝ gains −2τ·log ρ_t·s_t.
- topr: ROLL 8eb27cc roll/pipeline/agentic/agentic_actor_pg_worker.py _compute_topr_loss (topr_positive_weight,
  topr_negative_weight, default 1): −A·log π for an episode with score > 0, −clamp(ratio, 0, 1)·A·log π (the ratio
  detached) otherwise. ROLL splits by the episode's score; on the toy r = 1 exactly when A = 1 − b > 0 (0 ≤ b < 1),
  and where A = 0 the gradient is 0 either way. ROLL's ratio is against its old log-probs: the sampler's when they
  are not recomputed, as in the TOPR paper (arXiv 2503.14286, eq. 8).
- vespo: TRL f2cd577 trl/trainer/grpo_trainer.py GRPOTrainer.get_gamma_weights (vespo_k_pos 2, vespo_lambda_pos 3,
  vespo_k_neg 3, vespo_lambda_neg 2; λ clamped to ≥ 10⁻⁴; its ratio π/π_old is 1 on the toy's single step, so w is
  the product of the vLLM importance-sampling ratios r_t, which vespo requires in mode token_truncate or
  token_mask, from _generate_and_score_completions); the loss −φ(w)·A·log π with φ detached, divided by the
  completion tokens (dapo).

- gspo_clip: OpenRLHF 3c3be62 openrlhf/models/loss.py PolicyLoss.forward with policy_loss_type="gspo" and
  enable_vllm_is_correction (ratio = exp(mean_t(log π − log μ)) over the sequence's own tokens, the vLLM
  log-probs as the old policy; −min(ratio·A, clamp(ratio, 1 − clip_eps_low, 1 + clip_eps_high)·A), dual_clip for
  A < 0). The gradient of ρ_geo is ρ_geo·(1/L)·Σ_t ∇log π_t: OpenRLHF's per-sequence mean of the loss (GSPO sets
  token_level_loss False) is the 1/L; here, as for the other sequence weights, c_t leaves it to the aggregation.

Exact moments: every one is a sequence weight (vespo's reads log w, a sum over positions) times token tables by
the sign of A (topr), plus k2_penalty's additive term, whose moments ``engine.moments`` adds in closed form:
all in the O(M) pass.
"""

import math

import numpy as np

from toylab.catalogue.weights import TokenClass, Weights

VESPO_MODES = ("token_truncate", "token_mask")
VESPO_FLOOR = math.log(1e-8)             # TRL's lower clamp of each log ratio and of log w
VESPO_CEILING = 20.0


def squared_log_ratio_penalty(stats, tau):
    """The additive term −2τ·log ρ_t (0 at a token the sampler never draws, where log ρ = +∞)."""
    log_rho = stats.log_rho
    return Weights(additive=np.where(np.isfinite(log_rho), -2 * tau * log_rho, 0.0))


def topr(stats, positive_weight, negative_weight):
    rho = stats.rho
    return Weights(token=np.full(np.shape(rho), float(positive_weight)),
                   classes=(TokenClass(stats.advantage <= 0, negative_weight * np.minimum(rho, 1.0), rho > 1),))


def vespo(stats, k_pos, lambda_pos, k_neg, lambda_neg, mode, clip_min, clip_max):
    log_w = np.clip(stats.reduced(("vespo log r", mode, clip_min, clip_max, stats.clamp),
                                  vespo_log_ratios(stats.log_rho, mode, clip_min, clip_max), "sum"),
                    VESPO_FLOOR, VESPO_CEILING)
    nonnegative = stats.advantage >= 0
    k = np.where(nonnegative, k_pos, k_neg)
    lam = np.maximum(np.where(nonnegative, lambda_pos, lambda_neg), 1e-4)
    return Weights(sequence=np.exp(lam + k * log_w - lam * np.exp(log_w)))


def vespo_log_ratios(log_rho, mode, clip_min, clip_max):
    """clip(log r_t, log 10⁻⁸, 20) per token, r_t the vLLM importance-sampling ratio of TRL's mode."""
    with np.errstate(divide="ignore"):
        low, high = np.log(clip_min), np.log(clip_max)
    if mode == "token_truncate":
        log_r = np.clip(log_rho, low, high)
    else:
        log_r = np.where((log_rho >= low) & (log_rho <= high), log_rho, -np.inf)
    return np.clip(log_r, VESPO_FLOOR, VESPO_CEILING)


def gspo_clip(stats, eps_low, eps_high, C_dual):
    """PPO-clip's gradient weights on r = ρ_geo, the same for every token of the sequence, by the sign of A."""
    geo = np.exp(stats.sequence_statistic("log_ratio", "mean"))
    negative = stats.advantage < 0
    kept = np.where(negative, (geo >= 1 - eps_low) & (geo <= C_dual), geo <= 1 + eps_high)   # as PPO compares r
    return Weights(sequence=np.where(kept, geo, 0.0), sequence_affected=~kept)
