"""SkyRL a956457: trainer.algorithm.off_policy_correction (token and sequence TIS, geometric and product sequence
masks, outlier-token and token masks) through ppo_policy_loss, dppo_policy_loss (binary_tv, binary_kl) and
rollout_is_policy_loss, run on the batches of harness.py; writes numbers.json beside this file.

Copied verbatim (blocks below): masked_mean and safe_exp_delta (skyrl/backends/skyrl_train/utils/torch_utils.py),
off_policy_correction_utils.py whole, ppo_policy_loss, rollout_is_policy_loss, dppo_policy_loss and reduce_loss
(ppo_utils.py, which imports ray; their registration decorators dropped), DPPOConfig and OffPolicyCorrectionConfig
(skyrl/train/config/config.py). Stubbed: omegaconf's DictConfig and the config's BaseConfig (type hints and a
base class only), and the torch_utils module off_policy_correction_utils imports, which holds the two functions
copied here.

reduce_loss is (loss·loss_mask).sum() with the loss mask the off-policy correction leaves, so c = −∂loss/∂log π
/ A_b directly; "kept" is that loss mask (compute_off_policy_correction's). The old log-probs are the trainer's
(detached: the PPO ratio is 1); DPPO and rollout_is take their ratio against the sampler. SkyRL exponentiates in
float32 (safe_exp_delta): the numbers carry float32 rounding. The thresholds the config leaves None (outlier and
token masks) are the docs' (10⁻⁴ and 100; 0.5 and 2).

Three policies (the "updates"): ppo_policy_loss (regular and dual_clip) and compute_policy_loss_cispo (copied
verbatim too, its decorator dropped; cispo_anchor "old" and "rollout") run on one-token rows with old_log_probs
(π_old, the trainer's recomputation), rollout_logprobs (μ) and the current log-probs (π_θ) apart.

    python tests/catalogue/reference/skyrl/generate.py
"""

import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402

_omegaconf = types.ModuleType("omegaconf")
_omegaconf.DictConfig = dict
sys.modules["omegaconf"] = _omegaconf

# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/torch_utils.py 180-192
def masked_mean(tensor: torch.Tensor, mask: torch.Tensor | None, dim: int | None = None) -> torch.Tensor:
    """Compute the mean of tensor elements, optionally masked and reduced along a dimension."""
    if mask is None:
        return tensor.mean(axis=dim)
    return (tensor * mask).sum(axis=dim) / mask.sum(axis=dim).clamp(min=1.0)


def safe_exp_delta(delta: torch.Tensor, clip: float = 20.0, out_dtype=None) -> torch.Tensor:
    """
    Clamp the delta before exponentiating to avoid potential overflow.
    """
    y = torch.clamp(delta.to(torch.float32), -clip, clip).exp()
    return y.to(out_dtype or delta.dtype)
# end verbatim

_torch_utils = types.ModuleType("skyrl.backends.skyrl_train.utils.torch_utils")
_torch_utils.masked_mean, _torch_utils.safe_exp_delta = masked_mean, safe_exp_delta
for _name in ("skyrl", "skyrl.backends", "skyrl.backends.skyrl_train", "skyrl.backends.skyrl_train.utils"):
    sys.modules.setdefault(_name, types.ModuleType(_name))
sys.modules["skyrl.backends.skyrl_train.utils.torch_utils"] = _torch_utils

# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py 1-385
from typing import Optional, Tuple

import torch
from omegaconf import DictConfig

from skyrl.backends.skyrl_train.utils.torch_utils import masked_mean, safe_exp_delta


def off_policy_correction_enabled(off_policy_correction: DictConfig) -> bool:
    """Whether any off-policy correction (TIS, sequence/outlier/token masking) is active."""
    apply_tis = off_policy_correction.tis_ratio_type is not None
    apply_sequence_mask = off_policy_correction.sequence_mask_metric is not None
    apply_outlier_token_mask = (
        off_policy_correction.outlier_token_is_threshold_low is not None
        or off_policy_correction.outlier_token_is_threshold_high is not None
    )
    apply_token_mask = (
        off_policy_correction.token_mask_is_threshold_low is not None
        and off_policy_correction.token_mask_is_threshold_high is not None
    )
    return apply_tis or apply_sequence_mask or apply_outlier_token_mask or apply_token_mask


def compute_tis_ratio(
    old_log_probs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    tis_ratio_type: str,
    off_policy_correction: DictConfig,
) -> Tuple[torch.Tensor, dict]:
    """
    Compute truncated importance sampling (TIS) ratio for off policy correction.

    Args:
        old_log_probs: Log probabilities from the old policy (before update).
        rollout_logprobs: Log probabilities from the rollout policy.
        loss_mask: Mask indicating valid tokens.
        tis_ratio_type: Type of TIS ratio ("token" or "sequence").
        off_policy_correction: Off-policy correction config containing cap values.

    Returns:
        Tuple of (tis_ratio, metrics):
        - tis_ratio: Tensor (float) to multiply with the loss
        - metrics: Dict with masking statistics

    Reference: https://github.com/szrlee/verl/blob/yingru/rollout_correction/docs/advance/rollout_corr_math.md
    """
    # Compute token-level importance ratio: pi_old / pi_rollout
    # In log space: old_log_probs - rollout_logprobs
    token_tis_log_ratio = old_log_probs - rollout_logprobs
    token_tis_ratio = safe_exp_delta(token_tis_log_ratio, clip=20.0, out_dtype=old_log_probs.dtype)

    metrics = {}
    if tis_ratio_type == "token":
        token_tis_ratio_cap = off_policy_correction.token_tis_ratio_clip_high
        # Compute proportion of tokens capped
        tokens_capped = (token_tis_ratio > token_tis_ratio_cap) & (loss_mask > 0)
        total_tokens = (loss_mask > 0).sum()
        metrics["tis_token_clip_high_ratio"] = (tokens_capped.sum() / total_tokens.clamp(min=1)).detach().item()
        return torch.clamp(token_tis_ratio, max=token_tis_ratio_cap).detach(), metrics
    elif tis_ratio_type == "sequence":
        # Compute sequence-level importance ratio as product of token ratios (sum of log ratios)
        seq_tis_log_ratio = (token_tis_log_ratio * loss_mask).sum(dim=-1, keepdim=True)
        seq_tis_ratio = safe_exp_delta(seq_tis_log_ratio, clip=20.0, out_dtype=old_log_probs.dtype)
        seq_tis_ratio_cap = off_policy_correction.sequence_tis_ratio_clip_high
        # Compute proportion of sequences capped
        num_sequences = seq_tis_ratio.shape[0]
        seqs_capped = (seq_tis_ratio > seq_tis_ratio_cap).sum()
        metrics["tis_seq_clip_high_ratio"] = (seqs_capped / num_sequences).detach().item()
        return torch.clamp(seq_tis_ratio, max=seq_tis_ratio_cap).detach(), metrics
    else:
        raise ValueError(f"Unknown tis_ratio_type: {tis_ratio_type}")


def compute_outlier_token_mask(
    old_log_probs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    off_policy_correction: DictConfig,
) -> Tuple[torch.Tensor, dict]:
    """
    Compute outlier token mask that masks out sequences with any token having
    importance ratio outside acceptable bounds.

    This is applied independently of TIS ratio type or sequence mask type,
    whenever off policy correction is enabled.

    Args:
        old_log_probs: Log probabilities from the old policy (before update).
        rollout_logprobs: Log probabilities from the rollout policy.
        loss_mask: Mask indicating valid tokens.
        off_policy_correction: Off-policy correction config containing threshold values.

    Returns:
        Tuple of (outlier_mask, metrics):
        - outlier_mask: Tensor (bool) to mask out sequences with any token having importance ratio outside acceptable bounds
        - metrics: Dict with masking statistics
    """
    metrics = {}
    # Compute token-level importance ratio
    token_tis_log_ratio = old_log_probs - rollout_logprobs
    token_tis_ratio = safe_exp_delta(token_tis_log_ratio, clip=20.0, out_dtype=old_log_probs.dtype)

    # Check per-token bounds
    token_mask_low = off_policy_correction.outlier_token_is_threshold_low
    token_mask_high = off_policy_correction.outlier_token_is_threshold_high
    if token_mask_high is not None:
        token_over_high = (token_tis_ratio > token_mask_high) & (loss_mask > 0)
    else:
        # no high threshold; so nothing is "over high"
        token_over_high = torch.zeros_like(loss_mask, dtype=torch.bool)

    if token_mask_low is not None:
        token_under_low = (token_tis_ratio < token_mask_low) & (loss_mask > 0)
    else:
        # no low threshold; so nothing is "under low"
        token_under_low = torch.zeros_like(loss_mask, dtype=torch.bool)
    token_in_bounds = ~token_over_high & ~token_under_low

    # A sequence is valid if all tokens are in bounds (considering only masked positions)
    all_tokens_valid = (token_in_bounds | (loss_mask == 0)).all(dim=-1, keepdim=True)

    # Compute metrics
    num_sequences = float(all_tokens_valid.shape[0])
    # Sequence has any token over high threshold
    seq_has_over_high = token_over_high.any(dim=-1)
    # Sequence has any token under low threshold
    seq_has_under_low = token_under_low.any(dim=-1)

    metrics["outlier_seq_masked_ratio"] = ((~all_tokens_valid.squeeze(-1)).sum() / num_sequences).detach().item()
    metrics["outlier_seq_over_high_ratio"] = (seq_has_over_high.sum() / num_sequences).detach().item()
    metrics["outlier_seq_under_low_ratio"] = (seq_has_under_low.sum() / num_sequences).detach().item()

    return all_tokens_valid.float(), metrics


def compute_token_mask(
    old_log_probs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    off_policy_correction: DictConfig,
) -> Tuple[torch.Tensor, dict]:
    """
    Compute a per-token hard mask that zeros individual divergent tokens.

    Unlike ``compute_outlier_token_mask`` (which rejects *entire sequences*
    when any single token exceeds a threshold), this function masks
    only the specific tokens whose importance-sampling ratio
    ``pi_old / pi_rollout`` falls outside the interval
    ``[token_mask_is_threshold_low, token_mask_is_threshold_high]``.  Tokens that are already masked
    (``loss_mask == 0``) are left unchanged.

    For full IS-corrected masking, combine this with token-level TIS
    (``tis_ratio_type="token"``).

    Args:
        old_log_probs: Log probabilities from the current training policy.
        rollout_logprobs: Log probabilities from the rollout (inference) policy.
        loss_mask: Existing mask indicating valid tokens (1 = valid, 0 = pad).
        off_policy_correction: Config with ``token_mask_is_threshold_low`` and
            ``token_mask_is_threshold_high``.

    Returns:
        Tuple of (token_mask, metrics):
        - token_mask: Float tensor (same shape as loss_mask) with 0 for
          out-of-bounds tokens and 1 otherwise.
        - metrics: Dict containing ``token_mask_ratio`` -- the fraction of
          originally-valid tokens that were masked out by this filter.
    """
    token_mask_is_threshold_low = off_policy_correction.token_mask_is_threshold_low
    token_mask_is_threshold_high = off_policy_correction.token_mask_is_threshold_high

    token_is_log_ratio = old_log_probs - rollout_logprobs
    token_is_ratio = safe_exp_delta(token_is_log_ratio, clip=20.0, out_dtype=old_log_probs.dtype)

    in_bounds = (token_is_ratio >= token_mask_is_threshold_low) & (token_is_ratio <= token_mask_is_threshold_high)
    # Keep tokens that are already masked out (loss_mask == 0) so we don't
    # double-count them in the metric.
    token_mask = (in_bounds | (loss_mask == 0)).float()

    # Metric: fraction of valid tokens that got masked by this filter.
    valid_tokens = (loss_mask > 0).sum().clamp(min=1)
    masked_tokens = ((~in_bounds) & (loss_mask > 0)).sum()
    metrics = {
        "token_mask_ratio": (masked_tokens / valid_tokens).detach().item(),
    }

    return token_mask, metrics


def compute_sequence_mask(
    old_log_probs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    sequence_mask_metric: str,
    off_policy_correction: DictConfig,
) -> Tuple[torch.Tensor, dict]:
    """
    Compute sequence mask for off policy correction.

    This masks out sequences with importance ratios that fall outside acceptable bounds,
    helping to filter out off-policy samples that may destabilize training.

    Args:
        old_log_probs: Log probabilities from the old policy (before update).
        rollout_logprobs: Log probabilities from the rollout policy.
        loss_mask: Mask indicating valid tokens.
        sequence_mask_metric: Metric to use for sequence masking ("geometric" or "product").
        off_policy_correction: Off-policy correction config containing cap values.

    Returns:
        Tuple of (sequence_mask, metrics):
        - sequence_mask: Tensor (float) to multiply with the loss
        - metrics: Dict with masking statistics
    """
    # Compute token-level importance ratio
    token_tis_log_ratio = old_log_probs - rollout_logprobs
    metrics = {}

    if sequence_mask_metric == "geometric":
        # Compute geometric mean of importance ratios per sequence
        num_tokens = loss_mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
        seq_tis_log_ratio = (token_tis_log_ratio * loss_mask).sum(dim=-1, keepdim=True)
        geo_mean_ratio = safe_exp_delta(seq_tis_log_ratio / num_tokens, clip=20.0, out_dtype=old_log_probs.dtype)
        geo_cap_high = off_policy_correction.geo_mask_high
        geo_cap_low = off_policy_correction.geo_mask_low
        seq_over_high = geo_mean_ratio > geo_cap_high
        seq_under_low = geo_mean_ratio < geo_cap_low
        geo_sequence_mask = ~seq_over_high & ~seq_under_low

        num_sequences = float(geo_mean_ratio.shape[0])
        metrics["geo_sequence_mask_masked_ratio"] = ((~geo_sequence_mask).sum() / num_sequences).detach().item()
        metrics["geo_sequence_mask_over_high_ratio"] = (seq_over_high.sum() / num_sequences).detach().item()
        metrics["geo_sequence_mask_under_low_ratio"] = (seq_under_low.sum() / num_sequences).detach().item()

        return geo_sequence_mask.float(), metrics
    elif sequence_mask_metric == "product":
        # Mask out sequences with product of importance ratios outside the cap
        seq_tis_log_ratio = (token_tis_log_ratio * loss_mask).sum(dim=-1, keepdim=True)
        seq_tis_ratio = safe_exp_delta(seq_tis_log_ratio, clip=20.0, out_dtype=old_log_probs.dtype)
        seq_cap_high = off_policy_correction.product_mask_high
        seq_cap_low = off_policy_correction.product_mask_low
        seq_over_high = seq_tis_ratio > seq_cap_high
        seq_under_low = seq_tis_ratio < seq_cap_low
        seq_in_bounds = ~seq_over_high & ~seq_under_low

        num_sequences = float(seq_tis_ratio.shape[0])
        metrics["product_sequence_mask_masked_ratio"] = ((~seq_in_bounds).sum() / num_sequences).detach().item()
        metrics["product_sequence_mask_over_high_ratio"] = (seq_over_high.sum() / num_sequences).detach().item()
        metrics["product_sequence_mask_under_low_ratio"] = (seq_under_low.sum() / num_sequences).detach().item()

        return seq_in_bounds.float(), metrics
    else:
        raise ValueError(f"Unknown sequence_mask_metric: {sequence_mask_metric}")


def compute_off_policy_correction(
    old_log_probs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    off_policy_correction: DictConfig,
) -> Tuple[Optional[torch.Tensor], dict, torch.Tensor]:
    """
    Compute TIS ratio, sequence mask, and outlier token mask for off policy correction.

    This is a convenience function that combines compute_tis_ratio, compute_sequence_mask,
    and compute_outlier_token_mask.

    Args:
        old_log_probs: Log probabilities from the old policy (before update).
        rollout_logprobs: Log probabilities from the rollout policy.
        loss_mask: Mask indicating valid tokens.
        off_policy_correction: Off-policy correction config.

    Returns:
        Tuple of (tis_ratio, metrics, loss_mask):
        - tis_ratio: Tensor (float) to multiply with the loss
        - metrics: Dict with masking statistics
        - loss_mask: Mask indicating valid tokens after applying off policy correction

    References:
    - https://github.com/szrlee/verl/blob/yingru/rollout_correction/docs/advance/rollout_corr_math.md
    - https://fengyao.notion.site/off-policy-rl
    """
    tis_ratio_type = off_policy_correction.tis_ratio_type
    sequence_mask_metric = off_policy_correction.sequence_mask_metric

    # Check if TIS ratio correction is enabled
    apply_tis = tis_ratio_type is not None
    # Check if sequence mask is enabled
    apply_sequence_mask = sequence_mask_metric is not None
    # check if outlier token mask is enabled
    apply_outlier_token_mask = (
        off_policy_correction.outlier_token_is_threshold_low is not None
        or off_policy_correction.outlier_token_is_threshold_high is not None
    )
    # check if token mask is enabled
    apply_token_mask = (
        off_policy_correction.token_mask_is_threshold_low is not None
        and off_policy_correction.token_mask_is_threshold_high is not None
    )

    # Early return if no correction needed
    if not off_policy_correction_enabled(off_policy_correction):
        return None, {}, loss_mask

    is_ratio = safe_exp_delta(old_log_probs - rollout_logprobs, clip=20.0, out_dtype=old_log_probs.dtype)
    metrics = {}
    metrics["is_ratio_mean"] = masked_mean(is_ratio, loss_mask).mean().detach().item()
    metrics["is_ratio_std"] = (is_ratio * loss_mask).std().detach().item()
    metrics["is_ratio_max"] = (is_ratio * loss_mask).max().detach().item()
    metrics["is_ratio_min"] = (is_ratio * loss_mask).min().detach().item()

    # Optionally apply outlier token mask if enabled
    if apply_outlier_token_mask:
        outlier_mask, outlier_metrics = compute_outlier_token_mask(
            old_log_probs, rollout_logprobs, loss_mask, off_policy_correction
        )
        loss_mask = loss_mask * outlier_mask
        metrics.update(outlier_metrics)

    # Apply per-token hard mask if configured
    if apply_token_mask:
        token_mask, token_mask_metrics = compute_token_mask(
            old_log_probs, rollout_logprobs, loss_mask, off_policy_correction
        )
        loss_mask = loss_mask * token_mask
        metrics.update(token_mask_metrics)

    # Initialize tis_ratio to None (only set if TIS is enabled)
    tis_ratio = None

    # Apply TIS ratio if enabled
    if apply_tis:
        tis_ratio, tis_metrics = compute_tis_ratio(
            old_log_probs, rollout_logprobs, loss_mask, tis_ratio_type, off_policy_correction
        )
        metrics.update(tis_metrics)

    # Apply sequence mask if enabled
    if apply_sequence_mask:
        sequence_mask, sequence_mask_metrics = compute_sequence_mask(
            old_log_probs, rollout_logprobs, loss_mask, sequence_mask_metric, off_policy_correction
        )
        loss_mask = loss_mask * sequence_mask
        metrics.update(sequence_mask_metrics)

    return tis_ratio, metrics, loss_mask


def apply_off_policy_correction(
    loss: torch.Tensor,
    old_log_probs: torch.Tensor,
    rollout_logprobs: Optional[torch.Tensor],
    loss_mask: torch.Tensor,
    off_policy_correction: DictConfig,
) -> Tuple[torch.Tensor, torch.Tensor, dict]:
    """
    Apply off-policy correction to the loss tensor.

    This is a convenience wrapper around compute_off_policy_correction that
    handles the common pattern of applying the TIS ratio and updating metrics.

    Args:
        loss: The policy loss tensor to correct.
        old_log_probs: Log probabilities from the old policy (before update).
        rollout_logprobs: Log probabilities from the rollout policy (None if not available).
        loss_mask: Mask indicating valid tokens per sequence.
        off_policy_correction: Off-policy correction config.

    Returns:
        Tuple of (corrected_loss, updated_loss_mask, metrics):
        - corrected_loss: Loss tensor after applying TIS ratio (if enabled)
        - updated_loss_mask: Loss mask after applying sequence/outlier masks
        - metrics: Dict with off-policy correction statistics
    """
    metrics = {}
    if rollout_logprobs is not None:
        tis_ratio, off_policy_metrics, loss_mask = compute_off_policy_correction(
            old_log_probs, rollout_logprobs, loss_mask, off_policy_correction
        )
        if tis_ratio is not None:
            loss = loss * tis_ratio
        metrics.update(off_policy_metrics)
    return loss, loss_mask, metrics
# end verbatim

AlgorithmConfig = SimpleNamespace


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 557-587
def ppo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    config: AlgorithmConfig,
    loss_mask: Optional[torch.Tensor] = None,
    rollout_logprobs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, dict[str, float]]:
    assert config.policy_loss_type in ["regular", "dual_clip"], "loss_type must be either 'regular' or 'dual_clip'"

    ratio = safe_exp_delta(log_probs - old_log_probs, clip=20.0, out_dtype=log_probs.dtype)
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - config.eps_clip_low, 1 + config.eps_clip_high) * advantages
    loss = -torch.min(surr1, surr2)
    clip_ratio = masked_mean((-surr2 > -surr1).float(), loss_mask).mean().detach().item()
    clip_pg_losses1 = loss
    if config.policy_loss_type == "dual_clip":
        pg_losses3 = -advantages * config.clip_ratio_c
        clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
        loss = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)

    loss_metrics = {"clip_ratio": clip_ratio}

    # apply off policy correction
    loss, loss_mask, off_policy_metrics = apply_off_policy_correction(
        loss, old_log_probs, rollout_logprobs, loss_mask, config.off_policy_correction
    )
    loss_metrics.update(off_policy_metrics)

    loss = reduce_loss(loss, loss_mask)
    return loss, loss_metrics
# end verbatim


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 825-863
def rollout_is_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    config: AlgorithmConfig,
    loss_mask: Optional[torch.Tensor] = None,
    rollout_logprobs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, dict[str, float]]:
    """Calibrated importance-weighted policy gradient using rollout log-probs.

    L(θ) = E_t[ stop_grad(f(r_t(θ), ε_l, ε_h)) · Â_t · log π_θ(a_t|s_t) ]

    where r_t(θ) = exp(log π_θ(a_t|s_t) - log π_rollout(a_t|s_t)) and the
    calibration function f zeroes out values outside (1 - ε_l, 1 + ε_h).

    This loss is the same as cispo, but uses the rollout log-probs instead of
    the old log-probs. This is important for async trainings where actual
    old_log_probs are not available.
    It further uses hard zero instead of clamping, but that does not change
    the gradient only the loss value.
    """
    assert rollout_logprobs is not None, "rollout_logprobs are required for rollout_is"

    ratio = safe_exp_delta(log_probs - rollout_logprobs, clip=20.0, out_dtype=log_probs.dtype)

    in_range = (ratio > 1 - config.eps_clip_low) & (ratio < 1 + config.eps_clip_high)
    calibrated_ratio = torch.where(in_range, ratio, torch.zeros_like(ratio))

    loss = -(calibrated_ratio.detach() * advantages * log_probs)
    clip_ratio = masked_mean((~in_range).float(), loss_mask).mean().detach().item()

    loss_metrics: dict[str, float] = {"clip_ratio": clip_ratio}
    loss, loss_mask, off_policy_metrics = apply_off_policy_correction(
        loss, old_log_probs, rollout_logprobs, loss_mask, config.off_policy_correction
    )
    loss_metrics.update(off_policy_metrics)

    loss = reduce_loss(loss, loss_mask)
    return loss, loss_metrics
# end verbatim


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 733-821
def compute_policy_loss_cispo(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    config: AlgorithmConfig,
    loss_mask: Optional[torch.Tensor] = None,
    rollout_logprobs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, dict[str, float]]:
    """Implementation of CISPO (Clipped IS-weight Policy Optimization) loss function,
    as proposed in https://arxiv.org/abs/2506.13585.

    Instead of clipping the importance sampling ratio in the loss directly, as done
    in PPO loss, CISPO clips the importance sampling ratio in the policy gradient
    update. This means the model can still learn from samples whose importance sampling
    ratio is clipped in CISPO, as opposed to PPO where these samples have zero
    gradient and are essentially ignored.

    The behavior policy the IS ratio is anchored on is selected by ``config.cispo.cispo_anchor``:

    * ``"old"`` (default, original CISPO): ``ratio = pi_theta / pi_old``, where ``pi_old`` is the
      recomputed log-probs of the current policy at experience-prep. Under a single gradient step
      this ratio is ~1, so the clamp only bites across multiple gradient passes over a frozen batch.
    * ``"rollout"``: ``ratio = pi_theta / pi_rollout``, anchored on the sampler/behavior policy. This
      makes the clamped objective engage under fully-async training, where the sampler lags the
      trainer by up to ``max_staleness_steps`` so the ratio genuinely differs from 1 even at a single
      gradient pass. Here the rollout-anchored ratio *is* the off-policy correction, so stacking TIS
      (``off_policy_correction.tis_ratio_type``) would double-count it and is rejected.

    The ``"rollout"`` anchor is the clamped (CISPO) counterpart of the hard-zero ``rollout_is`` loss:
    both anchor on ``pi_rollout``, but CISPO caps out-of-range tokens rather than zeroing them, so
    every token keeps a (bounded) gradient.

    Logs ``clip_ratio`` (cap-hit fraction) plus ``cispo/ratio_{mean,clamped_mean,max,min}`` so the
    actual gradient multiplier ``r = pi_theta / pi_behavior`` is observable, not just how often the
    cap fires (which is near-zero with a wide ``eps_clip_high``).
    """
    anchor = config.cispo.cispo_anchor
    if anchor == "rollout":
        assert rollout_logprobs is not None, "rollout_logprobs are required for cispo with cispo_anchor='rollout'"
        if config.off_policy_correction.tis_ratio_type is not None:
            raise ValueError(
                "cispo_anchor='rollout' is already rollout-anchored and performs the off-policy "
                f"correction; TIS (tis_ratio_type={config.off_policy_correction.tis_ratio_type!r}) "
                "would double-count it. Set off_policy_correction.tis_ratio_type=None."
            )
        behavior_log_probs = rollout_logprobs
    else:
        behavior_log_probs = old_log_probs

    ratio = safe_exp_delta(log_probs - behavior_log_probs, clip=20.0, out_dtype=log_probs.dtype)
    clamped_ratio = torch.clamp(ratio, 1 - config.cispo.cispo_eps_clip_low, 1 + config.cispo.cispo_eps_clip_high)
    loss = -advantages * clamped_ratio.detach() * log_probs

    is_clipped = (ratio < 1 - config.cispo.cispo_eps_clip_low) | (ratio > 1 + config.cispo.cispo_eps_clip_high)
    clip_ratio = masked_mean(is_clipped.float(), loss_mask).mean().detach().item()

    # IS-ratio diagnostics. clip_ratio above is only the cap-HIT fraction; these expose the actual
    # gradient multiplier r = pi_theta / pi_behavior. Under cispo_anchor="rollout", r drifts from 1
    # via the vLLM-vs-train numerical gap + async staleness even at a single gradient pass, so mean(r)
    # and the raw-vs-clamped gap quantify how much the off-policy correction (and the cap) actually
    # move the gradient -- not just how often the cap fires. For max/min we select only the active
    # (unmasked) ratios: `ratio` is strictly positive (safe_exp_delta), so multiplying by loss_mask
    # would zero masked tokens and force min to 0.0 whenever any token is masked. masked_mean excludes
    # them for the means.
    cispo_ratio_mean = masked_mean(ratio, loss_mask).mean().detach().item()
    cispo_ratio_clamped_mean = masked_mean(clamped_ratio, loss_mask).mean().detach().item()
    if loss_mask is not None and loss_mask.any():
        active_ratio = ratio[loss_mask.bool()]
        cispo_ratio_max = active_ratio.max().detach().item()
        cispo_ratio_min = active_ratio.min().detach().item()
    else:
        cispo_ratio_max = ratio.max().detach().item()
        cispo_ratio_min = ratio.min().detach().item()

    # apply off policy correction
    loss_metrics = {
        "clip_ratio": clip_ratio,
        "cispo/ratio_mean": cispo_ratio_mean,
        "cispo/ratio_clamped_mean": cispo_ratio_clamped_mean,
        "cispo/ratio_max": cispo_ratio_max,
        "cispo/ratio_min": cispo_ratio_min,
    }
    loss, loss_mask, off_policy_metrics = apply_off_policy_correction(
        loss, old_log_probs, rollout_logprobs, loss_mask, config.off_policy_correction
    )
    loss_metrics.update(off_policy_metrics)

    loss = reduce_loss(loss, loss_mask)
    return loss, loss_metrics
# end verbatim


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 867-935
def dppo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    config: AlgorithmConfig,
    loss_mask: Optional[torch.Tensor] = None,
    rollout_logprobs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, dict[str, float]]:
    """
    Divergence Proximal Policy Optimization (DPPO) policy loss.

    Replaces PPO's ratio-based clipping with a divergence-based binary mask.
    Supports Binary-TV and Binary-KL variants.
    The paper also proposes Top-K TV/KL variants (Equations 15-16), but in
    Section G.2 the authors find Top-K masking provides no significant benefit
    over the simpler binary approximation, so we only implement binary here.

    See: https://arxiv.org/abs/2602.04879
    Reference impl: https://github.com/sail-sg/Stable-RL/blob/main/verl/trainer/ppo/core_algos.py#L1241
    """
    # Use rollout logprobs as behavior policy for both ratio and mask
    # See Section 5.2 of paper
    mu_log_probs = rollout_logprobs if rollout_logprobs is not None else old_log_probs
    ratio = safe_exp_delta(log_probs - mu_log_probs, clip=20.0, out_dtype=log_probs.dtype)

    dppo_type = config.dppo.dppo_type
    delta_low = config.dppo.delta_low
    delta_high = config.dppo.delta_high

    # Compute DPPO mask
    with torch.no_grad():
        current_probs = torch.exp(log_probs)
        mu_probs = torch.exp(mu_log_probs)
        prob_diff = current_probs - mu_probs  # Use actual probabilities

        if dppo_type == "binary_tv":
            # Binary Total Variation (Equation 13)
            mask = torch.ones_like(advantages)
            mask[(advantages > 0) & (prob_diff > delta_high)] = 0.0
            mask[(advantages < 0) & (-prob_diff > delta_low)] = 0.0

        elif dppo_type == "binary_kl":
            # Binary KL (Equation 14)
            eps = 1e-8
            binary_kl = mu_probs * (mu_log_probs - log_probs) + (1 - mu_probs) * torch.log(
                (1 - mu_probs + eps) / (1 - current_probs + eps)
            )

            mask = torch.ones_like(advantages)
            mask[(advantages > 0) & (prob_diff > 0) & (binary_kl > delta_high)] = 0.0
            mask[(advantages < 0) & (prob_diff < 0) & (binary_kl > delta_low)] = 0.0

        else:
            raise ValueError(f"Unknown DPPO type: {dppo_type}. Must be 'binary_tv' or 'binary_kl'.")

    # Surrogate loss with divergence-based mask
    loss = -(ratio * advantages * mask)

    clip_ratio = masked_mean((mask == 0).float(), loss_mask).mean().detach().item()
    loss_metrics = {"clip_ratio": clip_ratio}

    # Apply off-policy correction
    loss, loss_mask, off_policy_metrics = apply_off_policy_correction(
        loss, old_log_probs, rollout_logprobs, loss_mask, config.off_policy_correction
    )
    loss_metrics.update(off_policy_metrics)

    loss = reduce_loss(loss, loss_mask)
    return loss, loss_metrics
# end verbatim


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 1145-1149
def reduce_loss(
    loss: torch.Tensor,
    loss_mask: Optional[torch.Tensor],
) -> torch.Tensor:
    return (loss * loss_mask).sum() if loss_mask is not None else loss.sum()
# end verbatim


BaseConfig = object

# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/train/config/config.py 777-818
@dataclass
class DPPOConfig(BaseConfig):
    dppo_type: str = "binary_tv"
    """DPPO divergence variant: ``"binary_tv"`` or ``"binary_kl"``. Used if ``policy_loss_type="dppo"``."""
    delta_low: float = 0.2
    """Divergence threshold for negative advantages (0.2 for TV, 0.05 for KL recommended)."""
    delta_high: float = 0.2
    """Divergence threshold for positive advantages (0.2 for TV, 0.05 for KL recommended)."""

    def __post_init__(self):
        if self.dppo_type not in ["binary_tv", "binary_kl"]:
            raise ValueError("Invalid DPPO type")


# see https://docs.skyrl.ai/docs/algorithms/off_policy_correction for more details
@dataclass
class OffPolicyCorrectionConfig(BaseConfig):
    tis_ratio_type: Optional[str] = None
    """Importance sampling ratio type for PPO loss correction: ``None``, ``"token"``, or ``"sequence"``.
    The ratio is ``exp(logprobs_policy_old - logprobs_rollout_policy)``."""
    token_tis_ratio_clip_high: float = 2.0
    """Used when ``tis_ratio_type="token"``. Recommended range: 1.5--5.0."""
    sequence_tis_ratio_clip_high: float = 5.0
    """Used when ``tis_ratio_type="sequence"``. Recommended range: 2.0--10.0."""
    sequence_mask_metric: Optional[str] = None
    """Method for masking sequences with cumulative IS ratios outside cap: ``None``, ``"product"``, or ``"geometric"``."""
    geo_mask_high: float = 1.01
    """Used when ``sequence_mask_metric="geometric"``. Recommended ~0.99--1.01; MoE models may need a wider range."""
    geo_mask_low: float = 0.99
    """Used when ``sequence_mask_metric="geometric"``."""
    product_mask_high: float = 2.0
    """Used when ``sequence_mask_metric="product"``. Recommended ~0.5--2.0."""
    product_mask_low: float = 0.5
    """Used when ``sequence_mask_metric="product"``."""
    outlier_token_is_threshold_low: Optional[float] = None
    """Set to mask sequences with any token IS ratio below this threshold. Suggested: 1e-4. ``None`` to disable."""
    outlier_token_is_threshold_high: Optional[float] = None
    """Set to mask sequences with any token IS ratio above this threshold. Suggested: 100. ``None`` to disable."""
    token_mask_is_threshold_low: Optional[float] = None
    """Set to mask per-token when IS ratio < `token_mask_is_threshold_low`. ``None`` to disable."""
    token_mask_is_threshold_high: Optional[float] = None
    """Set to mask per-token when IS ratio > `token_mask_is_threshold_high`. ``None`` to disable."""
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "skyrl", "NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265"
FLOAT32 = True                       # safe_exp_delta exponentiates in float32
OFF_POLICY = {
    "tis_ratio_type_token": {"tis_ratio_type": "token"},
    "tis_ratio_type_sequence": {"tis_ratio_type": "sequence"},
    "sequence_mask_metric_geometric": {"sequence_mask_metric": "geometric"},
    "sequence_mask_metric_product": {"sequence_mask_metric": "product"},
    "outlier_token_is_threshold": {"outlier_token_is_threshold_low": 1e-4, "outlier_token_is_threshold_high": 100.0},
    "token_mask_is_threshold": {"token_mask_is_threshold_low": 0.5, "token_mask_is_threshold_high": 2.0},
}
SETTINGS = {
    "tis_ratio_type_token": {"defaults": {}, "alternative": {"token_tis_ratio_clip_high": 1.5}},
    "tis_ratio_type_sequence": {"defaults": {}, "alternative": {"sequence_tis_ratio_clip_high": 1.2}},
    "sequence_mask_metric_geometric": {"defaults": {}, "alternative": {"geo_mask_low": 0.9, "geo_mask_high": 1.2}},
    "sequence_mask_metric_product": {"defaults": {}, "alternative": {"product_mask_low": 0.8, "product_mask_high": 1.6}},
    "outlier_token_is_threshold": {"defaults": {}, "alternative": {"outlier_token_is_threshold_low": 0.5,
                                                                   "outlier_token_is_threshold_high": 5.0}},
    "token_mask_is_threshold": {"defaults": {}, "alternative": {"token_mask_is_threshold_low": 0.8,
                                                                "token_mask_is_threshold_high": 1.5}},
    "dppo_binary_tv": {"defaults": {}, "alternative": {"delta_low": 0.1, "delta_high": 0.3}},
    "dppo_binary_kl": {"defaults": {}, "alternative": {"delta_low": 0.05, "delta_high": 0.05}},
    "rollout_is": {"defaults": {}, "alternative": {"eps_clip_low": 0.1, "eps_clip_high": 0.3},
                   "float32_bounds": {"eps_clip_low": 0.5, "eps_clip_high": 0.25}},
}
# probabilities within 10⁻⁸ of 1, where the 1e-8 inside binary_kl's second logarithm matters
NEAR_ONE = [[(1 - 1e-9, 1 - 2e-9), (1 - 1e-7, 0.999), (0.999, 1 - 1e-7), (1 - 3e-8, 1 - 1e-8), (0.5, 1 - 1e-10)]]


def config(option, params):
    """The AlgorithmConfig of a preset's parameters (the dataclasses' defaults otherwise)."""
    off = OffPolicyCorrectionConfig(**{**OFF_POLICY.get(option, {}),
                                       **{k: v for k, v in params.items() if k in OFF_POLICY_FIELDS}})
    dppo = DPPOConfig(dppo_type=option.removeprefix("dppo_") if option.startswith("dppo") else "binary_tv",
                      **{k: v for k, v in params.items() if k in ("delta_low", "delta_high")})
    loss_type = "dppo" if option.startswith("dppo") else "rollout_is" if option == "rollout_is" else "regular"
    return SimpleNamespace(policy_loss_type=loss_type, eps_clip_low=params.get("eps_clip_low", 0.2),
                           eps_clip_high=params.get("eps_clip_high", 0.2), clip_ratio_c=3.0, dppo=dppo,
                           off_policy_correction=off)


OFF_POLICY_FIELDS = set(OffPolicyCorrectionConfig.__dataclass_fields__)
LOSSES = {"regular": ppo_policy_loss, "dppo": dppo_policy_loss, "rollout_is": rollout_is_policy_loss}


def thresholds(option, cfg):
    off = cfg.off_policy_correction
    return {"tis_ratio_type_token": [off.token_tis_ratio_clip_high],
            "tis_ratio_type_sequence": [off.sequence_tis_ratio_clip_high],
            "sequence_mask_metric_geometric": [off.geo_mask_low, off.geo_mask_high],
            "sequence_mask_metric_product": [off.product_mask_low, off.product_mask_high],
            "outlier_token_is_threshold": [off.outlier_token_is_threshold_low, off.outlier_token_is_threshold_high],
            "token_mask_is_threshold": [off.token_mask_is_threshold_low, off.token_mask_is_threshold_high],
            "rollout_is": [1 - cfg.eps_clip_low, 1 + cfg.eps_clip_high]}.get(option, [])


def extra_rows(option, cfg):
    """DPPO's probability probes: Δp at ±δ·e^∓10⁻⁴ (binary_tv) or the binary KL at δ·e^∓10⁻⁴ (binary_kl)."""
    if not option.startswith("dppo"):
        return []
    rows = harness.probability_rows(NEAR_ONE)
    for delta in {cfg.dppo.delta_low, cfg.dppo.delta_high}:
        if option == "dppo_binary_tv":
            rows += harness.probability_statistic_rows(lambda p, q: abs(p - q), delta, sums=False)
        else:
            rows += harness.probability_statistic_rows(
                lambda p, q: q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p)), delta, (0.3, 0.6, 0.97, 0.999),
                sums=False)
    return rows


def run(cfg, batch):
    """(c, kept): the policy loss of the configuration, and the loss mask its off-policy correction leaves."""
    trainer, sampler, mask, advantages = harness.tensors(batch)
    old = trainer.detach()
    token_advantages = advantages[:, None].expand_as(trainer)
    loss, _ = LOSSES[cfg.policy_loss_type](trainer, old, token_advantages, cfg, loss_mask=mask,
                                           rollout_logprobs=sampler)
    _, _, kept = compute_off_policy_correction(old, sampler, mask, cfg.off_policy_correction)
    return harness.coefficients(loss, trainer, advantages), kept


# -- three policies: the policy losses with π_θ, π_old and μ apart ------------------------------------------------

# (update preset, setting, trainer.algorithm's fields as run, the loss parameters in toylab's terms, the correction
# and its parameters)
UPDATE_SETTINGS = [
    ("skyrl:regular", "defaults", {"policy_loss_type": "regular"}, {}, None, {}),
    ("skyrl:regular", "alternative", {"policy_loss_type": "regular", "eps_clip_low": 0.1, "eps_clip_high": 0.28},
     {"eps_low": 0.1, "eps_high": 0.28}, None, {}),
    ("skyrl:regular", "tis_ratio_type_token", {"policy_loss_type": "regular", "tis_ratio_type": "token"}, {},
     "skyrl:tis_ratio_type_token", {}),
    ("skyrl:dual_clip", "defaults", {"policy_loss_type": "dual_clip"}, {}, None, {}),
    ("skyrl:cispo", "defaults", {"policy_loss_type": "cispo", "cispo_anchor": "old"}, {}, None, {}),
    ("skyrl:cispo", "tis_ratio_type_token", {"policy_loss_type": "cispo", "cispo_anchor": "old",
                                             "tis_ratio_type": "token"}, {}, "skyrl:tis_ratio_type_token", {}),
    ("skyrl:cispo_rollout", "defaults", {"policy_loss_type": "cispo", "cispo_anchor": "rollout"}, {}, None, {}),
]


def algorithm_config(fields):
    off = OffPolicyCorrectionConfig(**{k: v for k, v in fields.items() if k in OFF_POLICY_FIELDS})
    cispo = SimpleNamespace(cispo_eps_clip_low=1.0, cispo_eps_clip_high=4.0,
                            cispo_anchor=fields.get("cispo_anchor", "old"))
    return SimpleNamespace(policy_loss_type=fields["policy_loss_type"], eps_clip_low=fields.get("eps_clip_low", 0.2),
                           eps_clip_high=fields.get("eps_clip_high", 0.2), clip_ratio_c=3.0, cispo=cispo,
                           off_policy_correction=off)


def run_update(numbers, preset, setting, fields, params, correction, correction_params):
    cfg = algorithm_config(fields)
    if cfg.policy_loss_type == "cispo":
        ratios = [1 - cfg.cispo.cispo_eps_clip_low, 1 + cfg.cispo.cispo_eps_clip_high]
        loss_function = compute_policy_loss_cispo
    else:
        ratios = [1 - cfg.eps_clip_low, 1 + cfg.eps_clip_high] + ([3.0] if cfg.policy_loss_type == "dual_clip" else [])
        loss_function = ppo_policy_loss
    weights = [cfg.off_policy_correction.token_tis_ratio_clip_high] if fields.get("tis_ratio_type") else []
    combined = ratios if fields.get("cispo_anchor") == "rollout" else ()
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights, combined))

    def loss_fn(b, trainer, old, sampler, mask, advantages):
        loss, _ = loss_function(trainer, old, advantages[:, None].expand_as(trainer), cfg, loss_mask=mask,
                                rollout_logprobs=sampler)
        return loss

    loss, gradient = harness.per_token(loss_fn, numbers.batches[name])
    numbers.update(preset, setting, fields, params, correction, correction_params, name, loss, gradient,
                   float32=True)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/skyrl/generate.py",
                              float32=FLOAT32)
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            cfg = config(option, params)
            probe = harness.probe_batch(thresholds(option, cfg), extra_rows(option, cfg), float32=FLOAT32)
            probes = numbers.batch(f"probes/{option}/{setting}", probe)
            for batch in (ragged, probes):
                c, kept = run(cfg, numbers.batches[batch])
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, c, kept, setting)
    both = config("token_mask_is_threshold", {})
    both.off_policy_correction.tis_ratio_type = "sequence"
    numbers.finding("token_mask_then_sequence_tis", ragged, run(both, numbers.batches[ragged])[0],
                    "token_mask_is_threshold (0.5, 2) with tis_ratio_type sequence: W over the tokens the mask left")
    for preset, setting, fields, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
