"""AReaL cbff54d: ppo_actor_loss_fn with use_decoupled_loss and rejection_sampling (level token / sequence, action
mask / clamp, metric ratio / kl_k1 / kl_k2 / kl_k3 / binary_kl (KPop), agg sum / mean / max), and M2PO
(_apply_m2po_masking), run on the batches of harness.py; writes numbers.json beside this file.

Copied verbatim (blocks below), from github.com/areal-project/AReaL (the renamed inclusionAI/AReaL) at cbff54d:
RejectionSamplingConfig (areal/api/cli_args.py, which imports hydra and uvloop), KLEstimator (areal/utils/data.py),
RejectionSamplingResult, _check_bounds, apply_rejection_sampling, compute_binary_kl_divergence and
ppo_actor_loss_fn (areal/utils/functional/functional.py, which imports torch.distributed and the config), and
_apply_m2po_masking, _get_m2po_loss_mask (areal/trainer/ppo/actor.py). Nothing is stubbed, but KPop's
configuration: RejectionSamplingConfig.__post_init__ raises for metric binary_kl (its _VALID_METRICS, line 1608,
omits it, though the field's choices, the docs and gsm8k_kpop.yaml name it, and apply_rejection_sampling computes
it), so the config is built with metric kl_k2 (the same checks on upper) and its metric set to binary_kl after.

proximal_logprobs are the trainer's (decoupled loss, recomputed: the PPO ratio is 1), old_logprobs the sampler's.
The loss divides by the original loss-mask count, so c = −∂loss/∂log π / A_b × that count; "kept" is the loss
mask apply_rejection_sampling returns. AReaL takes the log ratio in float32 (.float()): the numbers carry float32
rounding. "m2_threshold" runs grpo_loss_fn's M2PO step (_apply_m2po_masking on old − proximal) and then
ppo_actor_loss_fn without rejection sampling, whose denominator is then the count M2PO kept: c is scaled by it.

    python tests/catalogue/reference/areal/generate.py
"""

import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402

# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/api/cli_args.py 1504-1668
@dataclass
class RejectionSamplingConfig:
    """Unified configuration for sample filtering based on policy divergence.

    Filters tokens/sequences where the divergence between proximal policy
    and behavior policy exceeds a threshold, via two action modes:
    - 'mask': zero out loss_mask (rejection, exclude from gradient)
    - 'clamp': clamp importance weight to bounds (truncation, bounded gradient)

    Supports direct ratio bounds and KL divergence estimators (K1/K2/K3),
    at both token-level and sequence-level granularity.

    Replaces the removed ``behave_imp_weight_cap`` and ``behave_imp_weight_mode``.

    Attributes:
        level: Filtering granularity ('token' or 'sequence'). When ``level='sequence'``
            and ``metric='ratio'``, both the filtering decision and the correction
            weight (behave_imp_weight) use the sequence-level geometric mean,
            matching the old ``sequence_mask``/``sequence_truncate`` semantics.
        action: Action mode ('mask' or 'clamp').
        metric: Divergence metric ('ratio', 'kl_k1', 'kl_k2', 'kl_k3').
        agg: Aggregation method for sequence-level ('sum', 'mean', 'max').
            For 'ratio' metric, aggregation is performed in log space (geometric
            mean/sum) to avoid the "length trap" and match GSPO semantics.
            For KL metrics, aggregation is arithmetic.
        upper: Upper bound for filtering.
        lower: Lower bound for filtering (optional).
    """

    level: str = field(
        default="token",
        metadata={
            "help": "Filtering granularity. "
            "'token': per-token filtering (each token judged independently). "
            "'sequence': per-sequence filtering (all tokens in a sequence share the same fate). "
            "When metric='ratio', both the filtering decision and the correction weight "
            "(behave_imp_weight) operate at sequence level using the geometric mean.",
            "choices": ["token", "sequence"],
        },
    )
    action: str = field(
        default="mask",
        metadata={
            "help": "Action to take when metric exceeds threshold. "
            "'mask': zero out loss_mask for filtered tokens/sequences (rejection, "
            "completely excludes from gradient computation). "
            "'clamp': clamp importance weight to [lower, upper] bounds (truncation, "
            "tokens still participate in gradient but with bounded weight).",
            "choices": ["mask", "clamp"],
        },
    )
    metric: str = field(
        default="ratio",
        metadata={
            "help": "Divergence metric for filtering. "
            "'ratio': direct importance ratio π_proximal/π_behave. "
            "'kl_k1': KL estimator k1 = log(r), forward KL unbiased estimator (can be negative). "
            "'kl_k2': KL estimator k2 = 0.5 * (log r)^2, non-negative quadratic approximation. "
            "'kl_k3': KL estimator k3 = r - log(r) - 1, non-negative exact forward KL estimator. "
            "'binary_kl': KPop (symmetric binary KL divergence) — masks tokens where either "
            "KL(proximal||behave) or KL(behave||proximal) exceeds the upper bound.",
            "choices": ["ratio", "kl_k1", "kl_k2", "kl_k3", "binary_kl"],
        },
    )
    agg: str = field(
        default="mean",
        metadata={
            "help": "Aggregation method for sequence-level filtering. "
            "Only used when level='sequence'. "
            "For 'ratio' metric, aggregation is in log space: "
            "'sum' = exp(sum(log(r_i))), 'mean' = exp(mean(log(r_i))) = geometric mean "
            "(length-invariant, consistent with GSPO). "
            "For KL metrics, aggregation is arithmetic: "
            "'sum' = sum(kl_i), 'mean' = mean(kl_i). "
            "'max': max of per-token metric values (most conservative).",
            "choices": ["sum", "mean", "max"],
        },
    )
    upper: float = field(
        default=5.0,
        metadata={
            "help": "Upper bound for filtering. "
            "Tokens/sequences with metric > upper are filtered out (loss_mask zeroed). "
            "For 'ratio' metric: must be > 1.0, typical values are 2.0 or 5.0. "
            "For 'kl_k2'/'kl_k3' metrics: typical values are 0.5-2.0."
        },
    )
    lower: float | None = field(
        default=None,
        metadata={
            "help": "Lower bound for filtering (optional). "
            "None means no lower bound. "
            "For 'ratio' metric: typical value is 0.5 (filter out tokens where policy "
            "probability dropped significantly). Must be > 0. "
            "For 'kl_k1' metric: can be used to filter negative KL estimates."
        },
    )

    def __post_init__(self):
        """Validate configuration."""
        import warnings

        _VALID_LEVELS = ("token", "sequence")
        _VALID_ACTIONS = ("mask", "clamp")
        _VALID_METRICS = ("ratio", "kl_k1", "kl_k2", "kl_k3")
        _VALID_AGGS = ("sum", "mean", "max")

        # Validate enum-like fields.
        if self.level not in _VALID_LEVELS:
            raise ValueError(
                f"level must be one of {_VALID_LEVELS}, got '{self.level}'"
            )
        if self.action not in _VALID_ACTIONS:
            raise ValueError(
                f"action must be one of {_VALID_ACTIONS}, got '{self.action}'"
            )
        if self.metric not in _VALID_METRICS:
            raise ValueError(
                f"metric must be one of {_VALID_METRICS}, got '{self.metric}'"
            )
        if self.agg not in _VALID_AGGS:
            raise ValueError(f"agg must be one of {_VALID_AGGS}, got '{self.agg}'")

        # Validate lower <= upper when both are set.
        if self.lower is not None and self.lower > self.upper:
            raise ValueError(
                f"lower ({self.lower}) cannot be greater than upper ({self.upper})"
            )

        # For ratio metric, upper must be > 1.0 (otherwise all non-identical policy tokens are filtered).
        if self.metric == "ratio":
            if self.upper <= 1.0:
                raise ValueError(
                    f"upper must be > 1.0 for 'ratio' metric (otherwise all non-identical "
                    f"policy tokens will be filtered), got {self.upper}"
                )
            if self.lower is not None and self.lower <= 0:
                raise ValueError(
                    f"lower must be positive for 'ratio' metric, got {self.lower}"
                )
        # For KL metrics, upper must be > 0.
        # Note: kl_k1 is excluded because it is a forward KL unbiased estimator that
        # can produce negative values, so requiring upper > 0 would be too restrictive.
        if self.metric in ("kl_k2", "kl_k3") and self.upper <= 0:
            raise ValueError(
                f"upper must be positive for '{self.metric}' metric, got {self.upper}"
            )
        # Clamp action only supports ratio metric (direct importance weight truncation).
        if self.action == "clamp" and self.metric != "ratio":
            raise ValueError(
                f"action='clamp' only supports metric='ratio' (direct importance weight "
                f"truncation). Got metric='{self.metric}'. "
                f"Use action='mask' for KL-based filtering."
            )
        # Clamp action defaults lower to 0.0 (consistent with old truncate behavior).
        if self.action == "clamp" and self.lower is None:
            self.lower = 0.0
        # Validate sequence-level aggregation.
        if self.level == "token" and self.agg != "mean":
            warnings.warn(
                f"agg='{self.agg}' is ignored when level='token'. "
                "Aggregation is only used for sequence-level filtering.",
                UserWarning,
                stacklevel=2,
            )
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/data.py 1640-1698
class KLEstimator:
    """
    KL divergence estimator, supports k1, k2 and k3.
    """

    def __init__(self, kl_estimator: str = "k1", apply_clamp: bool = True):
        self.kl_estimator = kl_estimator
        if kl_estimator not in ["k1", "k2", "k3"]:
            raise ValueError(
                f"Invalid KL estimator: {kl_estimator}. Valid choices: k1, k2, k3"
            )
        self.apply_clamp = apply_clamp

    def __call__(
        self, log_probs: torch.Tensor, log_probs_base: torch.Tensor
    ) -> torch.Tensor:
        return self._compute_approx_kl(
            log_probs, log_probs_base, self.kl_estimator, self.apply_clamp
        )

    # adapted from https://github.com/OpenRLHF/OpenRLHF/blob/main/openrlhf/models/utils.py#L7
    @staticmethod
    def _compute_approx_kl(
        log_probs: torch.Tensor,
        log_probs_base: torch.Tensor,
        kl_estimator: str = "k1",
        apply_clamp: bool = True,
    ) -> torch.Tensor:
        """
        Compute the approximate KL divergence between two distributions.
        Schulman blog: http://joschu.net/blog/kl-approx.html

        Args:
            log_probs: Log probabilities of the new distribution.
            log_probs_base: Log probabilities of the base distribution.
        """

        if kl_estimator == "k1":
            log_ratio = log_probs.float() - log_probs_base.float()

        # The k2 estimator is the non negative kl approximation in
        # http://joschu.net/blog/kl-approx.html
        # The k2_loss is approximately equivalent to the
        # one-step KL divergence penalty with the k1 estimator
        # used in https://arxiv.org/pdf/2310.10505.
        if kl_estimator == "k2":
            log_ratio = log_probs.float() - log_probs_base.float()
            log_ratio = log_ratio**2 / 2.0

        # The k3 estimator is the non negative kl approximation in
        # http://joschu.net/blog/kl-approx.html
        if kl_estimator == "k3":
            log_ratio = log_probs.float() - log_probs_base.float()
            log_ratio = -log_ratio
            log_ratio = log_ratio.exp() - 1 - log_ratio

        if apply_clamp:
            log_ratio = log_ratio.clamp(min=-10, max=10)
        return log_ratio
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/functional/functional.py 56-150
def _compute_sequence_level_ratio_and_advantages(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    cu_seqlens: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compute sequence-level geometric mean ratios and average advantages per sequence (GSPO).

    Args:
        log_ratio: Log of probability ratios (logprobs - proximal_logprobs)
        advantages: Per-token advantages
        loss_mask: Boolean mask indicating valid tokens
        cu_seqlens: Cumulative sequence lengths. Required for 1D tensors (packed format).
            Shape: [batch_size + 1], where cu_seqlens[i] marks the start of sequence i.
            For a single sequence, use cu_seqlens=torch.tensor([0, seq_len]).

    Returns:
        ratio: Sequence-level importance sampling ratios (broadcast to all tokens)
        advantages: Sequence-averaged advantages (broadcast to all tokens)
            Note: We use mean instead of sum to keep gradient magnitude independent
            of sequence length. When multiplied by ratio and summed over tokens,
            this gives the correct total gradient contribution per sequence.
    """
    # Handle both 1D (packed) and 2D (padded) tensor shapes
    if log_ratio.ndim == 1:
        # For 1D tensors (packed format), cu_seqlens is required
        if cu_seqlens is None:
            raise ValueError(
                "cu_seqlens is required for 1D tensors (packed format). "
                "In AReaL, 1D tensors are produced by pack_tensor_dict() and always have cu_seqlens. "
                "For a single sequence, use cu_seqlens=torch.tensor([0, seq_len], dtype=torch.int32)."
            )

        # Packed sequences: use cu_seqlens boundaries
        batch_size = cu_seqlens.shape[0] - 1
        seq_lengths = cu_seqlens[1:] - cu_seqlens[:-1]
        # Create sequence index for each token: [0,0,0,1,1,2,2,2,2,...]
        sequence_idx = torch.arange(
            batch_size, device=log_ratio.device
        ).repeat_interleave(seq_lengths)

        # Use scatter_add for vectorized summation per sequence (faster than Python loop)
        masked_log_ratio = torch.where(loss_mask, log_ratio, 0.0)
        log_ratio_sum_per_seq = torch.zeros(
            batch_size, device=log_ratio.device, dtype=log_ratio.dtype
        ).scatter_add_(0, sequence_idx, masked_log_ratio)

        masked_advantages = torch.where(loss_mask, advantages, 0.0)
        advantages_sum_per_seq = torch.zeros(
            batch_size, device=advantages.device, dtype=advantages.dtype
        ).scatter_add_(0, sequence_idx, masked_advantages)

        valid_count_per_seq = (
            torch.zeros(batch_size, device=loss_mask.device, dtype=torch.int32)
            .scatter_add_(0, sequence_idx, loss_mask.int())
            .clamp(min=1)
        )

        # Compute sequence-level means
        log_ratio_mean_per_seq = log_ratio_sum_per_seq / valid_count_per_seq.to(
            log_ratio.dtype
        )
        adv_mean_per_seq = advantages_sum_per_seq / valid_count_per_seq.to(
            advantages.dtype
        )

        # Broadcast sequence-level values back to token-level
        ratio = torch.exp(log_ratio_mean_per_seq)[sequence_idx]
        ratio = torch.where(loss_mask, ratio, 0.0)

        advantages = adv_mean_per_seq[sequence_idx]
        advantages = torch.where(loss_mask, advantages, 0.0)
    else:
        # For 2D tensors (padded sequences)
        # Input shape: [batch_size, seq_len]
        # Compute mean log ratio over sequence length for each sample
        seq_log_ratio_mean = torch.where(loss_mask, log_ratio, 0.0).sum(dim=1) / (
            loss_mask.sum(dim=1).clamp(min=1)
        )
        # Broadcast back to original shape: each sequence gets its own geometric mean ratio
        ratio = torch.exp(seq_log_ratio_mean.unsqueeze(1).expand_as(log_ratio))
        # Apply mask
        ratio = torch.where(loss_mask, ratio, 0.0)

        # Average token advantages per sequence
        # This ensures gradient magnitude is independent of sequence length
        seq_lengths = loss_mask.sum(dim=-1, keepdim=True).clamp(min=1)
        masked_advantages = torch.where(loss_mask, advantages, 0.0)
        advantages = (
            masked_advantages.sum(dim=-1, keepdim=True) / seq_lengths
        ).expand_as(log_ratio)
        advantages = torch.where(loss_mask, advantages, 0.0)

    return ratio, advantages

# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/functional/functional.py 152-450
@dataclass
class RejectionSamplingResult:
    """Result of rejection sampling, used by ppo_actor_loss_fn.

    Attributes:
        loss_mask: Updated loss mask (mask mode) or original loss mask (clamp mode).
        behave_imp_weight: Importance weight (clamped in clamp mode, raw in mask mode).
        filtered_fraction: Fraction of valid tokens that were filtered/clamped (for logging).
    """

    loss_mask: torch.Tensor
    behave_imp_weight: torch.Tensor
    filtered_fraction: float


def _check_bounds(
    metric: torch.Tensor, config: RejectionSamplingConfig
) -> torch.Tensor:
    """Check if metric values are within configured bounds.

    Args:
        metric: Per-token or per-sequence metric values.
        config: Rejection sampling configuration with upper and optional lower bounds.

    Returns:
        Boolean tensor, True where metric is within bounds.
    """
    if config.lower is not None:
        return (metric >= config.lower) & (metric <= config.upper)
    else:
        return metric <= config.upper


def apply_rejection_sampling(
    proximal_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    cu_seqlens: torch.Tensor | None,
    config: RejectionSamplingConfig,
) -> RejectionSamplingResult:
    """Apply rejection sampling based on divergence between proximal and behavior policy.

    Supports two action modes:
    - 'mask': zero out loss_mask for tokens/sequences exceeding threshold (rejection)
    - 'clamp': clamp importance weight to bounds for tokens/sequences exceeding
      threshold (truncation, tokens still participate in gradient)

    Args:
        proximal_logprobs: Proximal policy log-probabilities,
            shape [batch, seq_len] (2D padded) or [total_tokens] (1D packed).
        old_logprobs: Behavior policy log-probabilities from inference engine,
            same shape as proximal_logprobs.
        loss_mask: Original loss mask (1 for valid tokens), same shape as proximal_logprobs.
        cu_seqlens: Cumulative sequence lengths for 1D packed format. Shape: [batch_size + 1].
            Required when inputs are 1D. None for 2D padded inputs.
        config: Configuration for rejection sampling.

    Returns:
        RejectionSamplingResult with updated loss_mask, behave_imp_weight, and filtered_fraction.
    """
    # Step 0: Validate input shapes.
    if proximal_logprobs.shape != old_logprobs.shape:
        raise ValueError(
            f"proximal_logprobs shape {proximal_logprobs.shape} != "
            f"old_logprobs shape {old_logprobs.shape}"
        )
    if proximal_logprobs.shape != loss_mask.shape:
        raise ValueError(
            f"proximal_logprobs shape {proximal_logprobs.shape} != "
            f"loss_mask shape {loss_mask.shape}"
        )
    if proximal_logprobs.ndim not in (1, 2):
        raise ValueError(
            f"Expected 1D (packed) or 2D (padded) tensors, "
            f"got ndim={proximal_logprobs.ndim}"
        )

    # Step 1: Compute log ratio = log(π_proximal / π_behave)
    # Upcast operands to fp32 before subtraction to avoid precision loss in bf16/fp16.
    log_ratio = proximal_logprobs.detach().float() - old_logprobs.detach().float()
    # Sanitize non-finite values (e.g. -inf - (-inf) = NaN) to prevent NaN propagation.
    log_ratio = torch.where(torch.isfinite(log_ratio), log_ratio, 0.0)

    # Step 2: Compute metric value (reuse existing KLEstimator sign conventions)
    if config.metric == "ratio":
        # Direct ratio π_proximal / π_behave
        metric = torch.exp(log_ratio)
    elif config.metric in ("kl_k1", "kl_k2", "kl_k3"):
        # Use existing KLEstimator (note: _compute_approx_kl takes log_probs, log_probs_base)
        estimator_name = config.metric.replace("kl_", "")  # "k1", "k2", "k3"
        metric = KLEstimator._compute_approx_kl(
            log_probs=proximal_logprobs.detach(),
            log_probs_base=old_logprobs.detach(),
            kl_estimator=estimator_name,
            apply_clamp=False,  # Don't clamp; threshold check handles bounds
        )
    elif config.metric == "binary_kl":
        # Bidirectional binary KL divergence (KPop): mask tokens where
        # KL(proximal || behave) > upper OR KL(behave || proximal) > upper.
        kl_fwd = compute_binary_kl_divergence(
            proximal_logprobs.detach(), old_logprobs.detach()
        )
        kl_rev = compute_binary_kl_divergence(
            old_logprobs.detach(), proximal_logprobs.detach()
        )
        # Use max of forward and reverse as the metric; upper bound applies to both.
        metric = torch.maximum(kl_fwd, kl_rev)
    else:
        raise ValueError(f"Unknown metric: {config.metric}")

    # Step 3: Compute behave_imp_weight (needed for both modes)
    behave_imp_weight = torch.exp(log_ratio)
    # Save original weight before any clamping, to compute clamped fraction later.
    original_weight = behave_imp_weight

    # Step 4: Aggregate and filter
    #
    # For ratio metric, aggregate in log space (geometric mean) to match GSPO
    # semantics and avoid the "length trap" where arithmetic mean inflates
    # sequence-level ratios. For KL metrics, aggregate in metric space
    # (arithmetic) since KL divergence is additive.
    _use_log_agg = config.metric == "ratio"

    if config.level == "sequence":
        # Pre-compute sequence indexing (shared by filtering and weight broadcast).
        if loss_mask.ndim == 1:
            # 1D packed format: use cu_seqlens
            if cu_seqlens is None:
                raise ValueError(
                    "cu_seqlens is required for 1D packed tensors "
                    "in sequence-level filtering."
                )
            batch_size = cu_seqlens.shape[0] - 1
            seq_lengths = cu_seqlens[1:] - cu_seqlens[:-1]
            sequence_idx = torch.arange(
                batch_size, device=metric.device
            ).repeat_interleave(seq_lengths)

            # For ratio metric: aggregate log_ratio (geometric); else: aggregate metric (arithmetic).
            agg_values = log_ratio if _use_log_agg else metric
            masked_agg = torch.where(loss_mask.bool(), agg_values, 0.0)
            valid_count_per_seq = (
                torch.zeros(batch_size, device=loss_mask.device, dtype=torch.int32)
                .scatter_add_(0, sequence_idx, loss_mask.int())
                .clamp(min=1)
            )

            # Ratio metric + sequence level: use geometric mean as uniform weight
            # for all tokens (matches old sequence_mask/sequence_truncate semantics).
            if _use_log_agg:
                # masked_agg is already log_ratio masked by loss_mask (computed above).
                seq_log_sum = torch.zeros(
                    batch_size, device=log_ratio.device, dtype=log_ratio.dtype
                ).scatter_add_(0, sequence_idx, masked_agg)
                seq_log_mean = seq_log_sum / valid_count_per_seq.to(log_ratio.dtype)
                behave_imp_weight = torch.exp(seq_log_mean)[sequence_idx]
                original_weight = behave_imp_weight

            if config.agg == "sum":
                seq_agg = torch.zeros(
                    batch_size, device=metric.device, dtype=agg_values.dtype
                ).scatter_add_(0, sequence_idx, masked_agg)
            elif config.agg == "mean":
                seq_agg_sum = torch.zeros(
                    batch_size, device=metric.device, dtype=agg_values.dtype
                ).scatter_add_(0, sequence_idx, masked_agg)
                seq_agg = seq_agg_sum / valid_count_per_seq.to(agg_values.dtype)
            elif config.agg == "max":
                agg_for_max = agg_values.masked_fill(~loss_mask.bool(), float("-inf"))
                seq_agg = torch.full(
                    (batch_size,),
                    float("-inf"),
                    device=metric.device,
                    dtype=agg_values.dtype,
                ).scatter_reduce_(0, sequence_idx, agg_for_max, reduce="amax")
                # All-masked sequences stay -inf; treat them as in-bounds (no valid
                # tokens to filter, and their loss_mask is already all-zero).
                # Recompute from raw counts to detect true zero.
                raw_valid = torch.zeros(
                    batch_size, device=loss_mask.device, dtype=torch.int32
                ).scatter_add_(0, sequence_idx, loss_mask.int())
                all_masked = raw_valid == 0
                seq_agg = torch.where(all_masked, torch.zeros_like(seq_agg), seq_agg)
            else:
                raise ValueError(f"Unknown agg method: {config.agg}")

            # Convert back to metric space for threshold comparison.
            seq_metric = torch.exp(seq_agg) if _use_log_agg else seq_agg

            # Check each sequence against bounds
            in_bounds_per_seq = _check_bounds(seq_metric, config)

            if config.action == "mask":
                # Broadcast back to token level, filter entire sequence
                in_bounds = in_bounds_per_seq[sequence_idx]
            else:
                # clamp mode: clamp tokens in out-of-bounds sequences
                out_of_bounds = (~in_bounds_per_seq)[sequence_idx]
                behave_imp_weight = torch.where(
                    out_of_bounds,
                    behave_imp_weight.clamp(
                        min=config.lower if config.lower is not None else 0.0,
                        max=config.upper,
                    ),
                    behave_imp_weight,
                )
        else:
            # 2D padded format
            agg_values = log_ratio if _use_log_agg else metric
            masked_agg = torch.where(loss_mask.bool(), agg_values, 0.0)
            valid_count = loss_mask.sum(dim=-1, keepdim=True).clamp(min=1)

            # Ratio metric + sequence level: geometric mean as uniform weight.
            if _use_log_agg:
                seq_log_mean = masked_agg.sum(dim=-1, keepdim=True) / valid_count
                behave_imp_weight = torch.exp(seq_log_mean).expand_as(log_ratio)
                original_weight = behave_imp_weight

            if config.agg == "sum":
                seq_agg = masked_agg.sum(dim=-1, keepdim=True)
            elif config.agg == "mean":
                seq_agg = masked_agg.sum(dim=-1, keepdim=True) / valid_count
            elif config.agg == "max":
                agg_for_max = agg_values.masked_fill(~loss_mask.bool(), float("-inf"))
                seq_agg = agg_for_max.max(dim=-1, keepdim=True)[0]
                # All-masked sequences stay -inf; treat them as in-bounds (no valid
                # tokens to filter, and their loss_mask is already all-zero).
                all_masked = loss_mask.sum(dim=-1, keepdim=True) == 0
                seq_agg = torch.where(all_masked, torch.zeros_like(seq_agg), seq_agg)
            else:
                raise ValueError(f"Unknown agg method: {config.agg}")

            # Convert back to metric space for threshold comparison.
            seq_metric = torch.exp(seq_agg) if _use_log_agg else seq_agg

            if config.action == "mask":
                in_bounds = _check_bounds(seq_metric, config).expand_as(loss_mask)
            else:
                # clamp mode: clamp tokens in out-of-bounds sequences
                out_of_bounds = (~_check_bounds(seq_metric, config)).expand_as(
                    loss_mask
                )
                behave_imp_weight = torch.where(
                    out_of_bounds,
                    behave_imp_weight.clamp(
                        min=config.lower if config.lower is not None else 0.0,
                        max=config.upper,
                    ),
                    behave_imp_weight,
                )
    else:
        # Token level
        if config.action == "mask":
            in_bounds = _check_bounds(metric, config)
        else:
            # clamp mode: directly clamp importance weight
            behave_imp_weight = behave_imp_weight.clamp(
                min=config.lower if config.lower is not None else 0.0,
                max=config.upper,
            )

    # Step 5: Update loss_mask or keep it based on action mode
    if config.action == "mask":
        candidates = loss_mask.bool()
        updated_mask = (candidates & in_bounds).to(loss_mask.dtype)
        filtered_count = (candidates & ~in_bounds).sum().item()
        total_count = candidates.sum().item()
        filtered_fraction = filtered_count / max(total_count, 1)
    else:
        # clamp mode: loss_mask unchanged
        updated_mask = loss_mask
        # Report fraction of clamped tokens (for logging)
        clamped_count = (
            (loss_mask.bool() & (original_weight != behave_imp_weight)).sum().item()
        )
        total_count = loss_mask.bool().sum().item()
        filtered_fraction = clamped_count / max(total_count, 1)

    # Apply loss_mask to behave_imp_weight
    behave_imp_weight = torch.where(updated_mask.bool(), behave_imp_weight, 0.0)

    return RejectionSamplingResult(
        loss_mask=updated_mask,
        behave_imp_weight=behave_imp_weight,
        filtered_fraction=filtered_fraction,
    )


def compute_binary_kl_divergence(
    log_p: torch.Tensor, log_q: torch.Tensor, eps: float = 1e-8
) -> torch.Tensor:
    """KL(P||Q) for Bernoulli distributions parameterized by log-probabilities.
    Treats each element as a Bernoulli: P = [p, 1-p], Q = [q, 1-q].
    KL(P||Q) = p*log(p/q) + (1-p)*log((1-p)/(1-q))
    """
    p = torch.clamp(torch.exp(log_p), eps, 1.0 - eps)
    q = torch.clamp(torch.exp(log_q), eps, 1.0 - eps)
    return p * torch.log(p / q) + (1 - p) * torch.log((1 - p) / (1 - q))

# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/functional/functional.py 452-596
def ppo_actor_loss_fn(
    logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_clip: float,
    loss_mask: torch.Tensor,
    eps_clip_higher: float | None = None,
    c_clip: float | None = None,
    rejection_sampling: RejectionSamplingConfig | None = None,
    importance_sampling_level: str = "token",
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """PPO actor loss function with optional rejection sampling.

    The ``rejection_sampling`` parameter replaces the removed
    ``behave_imp_weight_cap`` / ``behave_imp_weight_mode``.

    - ``action='mask'``: modifies loss_mask before loss computation (rejection)
    - ``action='clamp'``: clamps importance weight to bounds (truncation)

    When decoupled loss is disabled:
    1. if recompute logp, both old_logprobs and proximal_logprobs are recomputed logp;
    2. if no recomputation, both old_logp and proximal_logprobs are produced by the inference backend.

    When decoupled loss is enabled, proximal_logprobs is the recomputed logp,
    old_logprobs is produced by the inference engine.

    Note: ``importance_sampling_level`` controls PPO ratio (π_θ/π_proximal)
    aggregation (GSPO), which is orthogonal to ``rejection_sampling.level``
    that controls staleness filtering (π_proximal/π_behave) granularity.

    Args:
        logprobs: Current policy log-probabilities (π_θ).
        proximal_logprobs: Proximal policy log-probabilities (π_proximal).
        old_logprobs: Behavior policy log-probabilities from inference (π_behave).
        advantages: Per-token advantage estimates.
        eps_clip: PPO clipping factor for policy ratio.
        loss_mask: Mask for valid tokens (1 = valid).
        eps_clip_higher: Upper clipping factor (decoupled clipping). None = use eps_clip.
        c_clip: Dual clipping factor, must be > 1.0. None disables dual clipping.
        rejection_sampling: Rejection sampling configuration. None disables filtering.
        importance_sampling_level: Level at which to compute importance sampling ratios.
            - 'token': Per-token ratios (standard PPO)
            - 'sequence': Sequence-level geometric mean of per-token ratios (GSPO)
        cu_seqlens: Cumulative sequence lengths for packed sequences (1D tensors).
            Required when inputs are 1D and importance_sampling_level='sequence'.
            Shape: [batch_size + 1], where cu_seqlens[i] marks the start of sequence i.
            Not needed for 2D padded inputs (sequences identified by batch dimension).
    """
    # Save original count BEFORE rejection sampling may modify loss_mask.
    # This keeps the denominator consistent with loss_weight_fn in actor.py,
    # which always uses the original loss_mask from input_data. Without this,
    # mask mode would inflate per-token gradients by N_original / N_kept.
    loss_mask_count = loss_mask.count_nonzero() or 1
    # Pre-filter mask kept for ratio/clip statistics: rejection sampling below
    # narrows loss_mask for the loss, but stats stay on the original mask so
    # importance_weight/avg reads 1.0 under proximal reuse instead of
    # 1 - filtered_fraction. Gradients are unaffected: the final loss still
    # zeroes filtered tokens through the narrowed mask.
    stat_loss_mask = loss_mask

    # === Apply rejection sampling (replaces old compute_behave_imp_weight) ===
    if rejection_sampling is not None:
        rs_result = apply_rejection_sampling(
            proximal_logprobs=proximal_logprobs,
            old_logprobs=old_logprobs,
            loss_mask=loss_mask,
            cu_seqlens=cu_seqlens,
            config=rejection_sampling,
        )
        # mask mode updates loss_mask; clamp mode keeps it unchanged
        loss_mask = rs_result.loss_mask
        behave_imp_weight = rs_result.behave_imp_weight
        filtered_fraction = rs_result.filtered_fraction
    else:
        filtered_fraction = 0.0

    if importance_sampling_level == "sequence":
        # GSPO: Compute sequence-level geometric mean of probability ratios
        log_ratio = logprobs - proximal_logprobs
        ratio, advantages = _compute_sequence_level_ratio_and_advantages(
            log_ratio, advantages, loss_mask, cu_seqlens
        )
    elif importance_sampling_level == "token":
        # Standard PPO: per-token ratio
        ratio = torch.where(stat_loss_mask, torch.exp(logprobs - proximal_logprobs), 0)
    else:
        raise ValueError(
            f"Invalid importance_sampling_level: {importance_sampling_level}. "
            "Must be 'token' or 'sequence'."
        )

    clipped_ratio = torch.clamp(
        ratio,
        1.0 - eps_clip,
        1.0 + (eps_clip if eps_clip_higher is None else eps_clip_higher),
    )

    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * clipped_ratio
    clip_mask = pg_loss1.detach() < pg_loss2.detach()
    pg_loss = torch.max(pg_loss1, pg_loss2)
    if c_clip is not None:
        assert c_clip > 1.0, c_clip
        pg_loss3 = torch.sign(advantages) * c_clip * advantages
        dual_clip_mask = pg_loss3.detach() < pg_loss.detach()
        pg_loss = torch.min(pg_loss, pg_loss3)
    else:
        dual_clip_mask = torch.zeros_like(clip_mask)

    # Apply behavioural importance weight from rejection sampling
    if rejection_sampling is not None:
        behave_approx_kl = proximal_logprobs.detach() - old_logprobs.detach()
        behave_mask = (behave_imp_weight > 0).logical_and(loss_mask.bool())
        behave_approx_kl = torch.where(behave_mask, behave_approx_kl, 0.0)
        pg_loss = pg_loss * behave_imp_weight

    logging_loss = pg_loss.detach()
    pg_loss = torch.where(loss_mask, pg_loss, 0).sum() / loss_mask_count
    clip_mask.logical_and_(stat_loss_mask)
    dual_clip_mask.logical_and_(stat_loss_mask)
    # One host sync per microbatch: the count feeds three derived stats.
    n_stat_total = stat_loss_mask.numel()
    n_stat_valid = stat_loss_mask.count_nonzero().item()
    stat = dict(
        loss=logging_loss,
        importance_weight=ratio.detach(),
        approx_kl=(logprobs - proximal_logprobs).detach(),
        clip_mask=clip_mask,
        dual_clip_mask=dual_clip_mask,
        n_total_tokens=float(n_stat_total),
        n_valid_tokens=float(n_stat_valid),
        n_masked_tokens=float(n_stat_total - n_stat_valid),
        masked_token_ratio=1.0 - n_stat_valid / max(n_stat_total, 1),
    )

    if rejection_sampling is not None:
        stat.update(
            behave_approx_kl=behave_approx_kl.detach(),
            behave_imp_weight=behave_imp_weight.detach(),
            behave_mask=behave_mask,
            filtered_fraction=filtered_fraction,
        )
    return pg_loss, stat
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/functional/functional.py 678-793
def cispo_loss_fn(
    logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_clip: float,
    loss_mask: torch.Tensor,
    eps_clip_higher: float | None = None,
    old_logprobs: torch.Tensor | None = None,
    rejection_sampling: RejectionSamplingConfig | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """CISPO (Clipped IS-weight Policy Optimization) loss from MiniMax-M1.

    PPO/GRPO-style clipping zeroes the gradient of any token whose
    importance-sampling ratio leaves the clip band: ``min(r*A, clip(r)*A)`` is
    constant in theta there. MiniMax-M1 (https://arxiv.org/abs/2506.13585,
    Eq. 4-5) observes those are disproportionately low-probability "fork" tokens
    (``However``, ``Wait``, ...) that steer reasoning, and instead clips the IS
    *weight* under stop-gradient while keeping the gradient on every token's
    ``log pi_theta`` (the choice ScaleRL, https://arxiv.org/abs/2510.13786 Eq. 4,
    also adopts). Per token::

        ratio         = exp(logprobs - proximal_logprobs)
        ratio_clipped = clip(ratio, 1 - eps_clip, 1 + eps_clip_higher)   # stop-grad
        pg_loss       = -sg(ratio_clipped) * advantages * logprobs

    Advantages are never clipped. The clip bounds reuse the same delta-from-1
    convention as :func:`ppo_actor_loss_fn`. CISPO is canonically single-sided:
    pass ``eps_clip=1.0`` (lower bound 0) with ``eps_clip_higher=4.0`` for the
    wide MiniMax-M1 range. Token level only -- the geometric-mean sequence ratio
    of GSPO is not part of the MiniMax-M1 surrogate.

    Decoupled loss: when ``rejection_sampling`` is set, the detached
    ``pi_proximal/pi_behave`` weight (from ``old_logprobs``) rescales each token's
    surrogate, mirroring :func:`ppo_actor_loss_fn`.

    Args:
        logprobs: Current policy log-probabilities (pi_theta), with autograd.
        proximal_logprobs: Proximal policy log-probabilities; enters only through
            the detached ratio path, so it carries no gradient.
        advantages: Per-token advantage estimates; detached on entry.
        eps_clip: Lower clipping delta from 1 (ratio lower bound ``1 - eps_clip``).
        loss_mask: Mask for valid tokens (1 = valid).
        eps_clip_higher: Upper clipping delta from 1 (ratio upper bound
            ``1 + eps_clip_higher``); must be positive -- the asymmetric upper
            clip is the defining knob of CISPO, so ``None`` is rejected.
        old_logprobs: Behavior policy log-probabilities (pi_behave) from inference.
            Required only when ``rejection_sampling`` is set (decoupled loss).
        rejection_sampling: Staleness filtering / off-policy correction config.
            None disables it (pure on-policy CISPO).
        cu_seqlens: Cumulative sequence lengths for 1D packed inputs; required when
            ``rejection_sampling.level == "sequence"``.

    Returns:
        ``(loss, stat)`` matching the PPO loss signature. ``stat['clip_mask']``
        flags tokens whose raw ratio left the band (CISPO never zeroes their
        loss, so band-exit -- not loss-affecting clip -- is the meaningful
        metric); ``stat['importance_weight']`` reports the unclipped ratio. When
        rejection sampling is active the ``behave_*`` keys are reported too.
    """
    if eps_clip_higher is None or eps_clip_higher <= 0:
        raise ValueError(
            "CISPO requires a positive eps_clip_higher; the asymmetric upper "
            f"clip is the defining knob (MiniMax-M1 Eq. 4-5). Got {eps_clip_higher!r}."
        )
    # Pre-rejection token count, so the denominator matches loss_weight_fn.
    loss_mask_count = loss_mask.count_nonzero() or 1

    # Decoupled off-policy correction: the pi_proximal/pi_behave weight.
    if rejection_sampling is not None:
        rs_result = apply_rejection_sampling(
            proximal_logprobs=proximal_logprobs,
            old_logprobs=old_logprobs,
            loss_mask=loss_mask,
            cu_seqlens=cu_seqlens,
            config=rejection_sampling,
        )
        loss_mask = rs_result.loss_mask
        behave_imp_weight = rs_result.behave_imp_weight
        filtered_fraction = rs_result.filtered_fraction

    advantages = advantages.detach()

    # Stop-gradient on the clipped IS weight; gradient flows through logprobs only.
    log_ratio = (logprobs - proximal_logprobs).detach()
    ratio = torch.exp(log_ratio)
    ratio_clipped = torch.clamp(ratio, 1.0 - eps_clip, 1.0 + eps_clip_higher).detach()
    pg_loss = -ratio_clipped * advantages * logprobs

    if rejection_sampling is not None:
        # behave_imp_weight is detached at source -> still a valid policy gradient.
        behave_approx_kl = proximal_logprobs.detach() - old_logprobs.detach()
        behave_mask = (behave_imp_weight > 0).logical_and(loss_mask.bool())
        behave_approx_kl = torch.where(behave_mask, behave_approx_kl, 0.0)
        pg_loss = pg_loss * behave_imp_weight

    logging_loss = pg_loss.detach()
    pg_loss = torch.where(loss_mask, pg_loss, 0).sum() / loss_mask_count

    clip_mask = (ratio_clipped != ratio).logical_and(loss_mask)
    stat = dict(
        loss=logging_loss,
        importance_weight=ratio.detach(),
        approx_kl=log_ratio,
        clip_mask=clip_mask,
        # CISPO has no dual clip; zeros keep the stat schema stable.
        dual_clip_mask=torch.zeros_like(loss_mask, dtype=torch.bool),
    )
    if rejection_sampling is not None:
        stat.update(
            behave_approx_kl=behave_approx_kl.detach(),
            behave_imp_weight=behave_imp_weight.detach(),
            behave_mask=behave_mask,
            filtered_fraction=filtered_fraction,
        )
    return pg_loss, stat
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/trainer/ppo/actor.py 933-1014
def _apply_m2po_masking(
    old_logp: torch.Tensor,
    prox_logp: torch.Tensor,
    loss_mask: torch.Tensor,
    m2_threshold: float,
) -> torch.Tensor:
    """
    Apply M2PO (Second-Momentum PPO) masking to filter high-variance tokens.

    M2PO filters out tokens with high second-momentum (squared difference between
    old and proximal log-probabilities) to reduce gradient variance.

    Args:
        old_logp: Behavior policy log-probabilities.
        prox_logp: Proximal policy log-probabilities.
        loss_mask: Original loss mask [batch, seq_len].
        m2_threshold: Threshold for second-momentum filtering.

    Returns:
        Updated loss mask with M2PO filtering applied.
    """
    delta = old_logp - prox_logp
    m2 = delta * delta
    mask_flat = loss_mask.view(-1)
    m2_selected = m2.view(-1)[mask_flat]

    if m2_selected.numel() == 0:
        return loss_mask

    sorted_m2, indices = torch.sort(m2_selected, descending=True)
    restored_indices = torch.argsort(indices)
    sorted_m2_loss_mask = _get_m2po_loss_mask(
        sorted_m2=sorted_m2, m2_threshold=m2_threshold
    )
    m2_selected_mask = sorted_m2_loss_mask[restored_indices]

    m2_full_flat = torch.zeros_like(
        mask_flat, dtype=torch.bool, device=loss_mask.device
    )
    m2_full_flat[mask_flat] = m2_selected_mask

    return m2_full_flat.view_as(loss_mask)


def _get_m2po_loss_mask(
    sorted_m2: torch.Tensor,
    m2_threshold: float,
) -> torch.Tensor:
    """
    Get the mask for M2PO loss based on the second-momentum threshold.
    Mask the tokens whose second-momentum is the largest, until the average second-momentum is below the threshold.
    """
    n = sorted_m2.numel()
    if n == 0:
        return torch.ones_like(sorted_m2, dtype=torch.bool)

    # Suffix sums: S[i] = sum(sorted_m2[i:])
    suffix_sums = sorted_m2.flip(0).cumsum(0).flip(0)

    # Number of elements in suffix: N[i] = n - i
    counts = torch.arange(n, 0, -1, device=sorted_m2.device, dtype=sorted_m2.dtype)

    # Average of suffix: A[i] = S[i] / N[i]
    avg_m2_suffix = suffix_sums / counts

    # Find the first index `k` where the average of the rest is below threshold.
    below_threshold_indices = torch.where(avg_m2_suffix < m2_threshold)[0]

    if len(below_threshold_indices) > 0:
        num_to_mask = below_threshold_indices[0].item()
    else:
        # All suffix averages are >= threshold. Mask all but one to satisfy assertion.
        num_to_mask = n - 1

    loss_mask = torch.ones_like(sorted_m2, dtype=torch.bool)
    if num_to_mask > 0:
        loss_mask[:num_to_mask] = False

    if loss_mask.sum() == 0:
        raise RuntimeError("All tokens are masked out when getting the m2po loss mask.")

    return loss_mask
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "areal", "areal-project/AReaL", "cbff54d645d2cd8ee1f1c358a82f3f473588433d"
FLOAT32 = True                       # apply_rejection_sampling's log ratio is float32
LEVELS = {"token_mask": ("token", "mask"), "kpop": ("token", "mask"), "token_clamp": ("token", "clamp"),
          "sequence_mask": ("sequence", "mask"), "sequence_clamp": ("sequence", "clamp")}
SETTINGS = {
    "token_mask": {"defaults": {}, "alternative": {"lower": "0.5", "upper": 2.0},
                   "kl_k1": {"metric": "kl_k1", "upper": 0.5}, "kl_k1_lower": {"metric": "kl_k1", "lower": "-0.3", "upper": 0.5},
                   "kl_k2": {"metric": "kl_k2", "upper": 0.3}, "kl_k3": {"metric": "kl_k3", "upper": 0.5},
                   "binary_kl": {"metric": "binary_kl", "upper": 0.5},
                   "binary_kl_lower": {"metric": "binary_kl", "lower": "0.01", "upper": 0.5}},
    "kpop": {"defaults": {}, "alternative": {"upper": 0.1}},
    "token_clamp": {"defaults": {}, "alternative": {"lower": "0.5", "upper": 2.0}},
    "sequence_mask": {"defaults": {}, "alternative": {"lower": "0.9", "upper": 1.2},
                      "sum": {"agg": "sum", "upper": 2.0}, "max": {"agg": "max", "upper": 2.5},
                      "kl_k1": {"metric": "kl_k1", "lower": "-0.1", "upper": 0.3},
                      "kl_k2_sum": {"metric": "kl_k2", "agg": "sum", "upper": 1.0},
                      "kl_k3": {"metric": "kl_k3", "upper": 0.2}, "kl_k3_max": {"metric": "kl_k3", "agg": "max", "upper": 0.5},
                      "binary_kl": {"metric": "binary_kl", "upper": 0.3},
                      "binary_kl_max": {"metric": "binary_kl", "agg": "max", "upper": 0.5}},
    "sequence_clamp": {"defaults": {}, "alternative": {"lower": "0.9", "upper": 1.05},
                       "sum": {"agg": "sum", "upper": 2.0}, "max": {"agg": "max", "lower": "0.5", "upper": 2.5}},
    "m2_threshold": {"defaults": {}, "alternative": {"m2_threshold": 0.5}},
}
# tokens whose probabilities are within 1e-8 of 0 or 1, where compute_binary_kl_divergence's clamp matters
EXTREMES = [[(1 - 1e-10, 1 - 1e-9), (1 - 1e-9, 0.9), (0.5, 1 - 1e-12), (1e-10, 1e-3), (1e-3, 1e-12)]]


def binary_kl(p, q):
    """max(KL_B(p‖q), KL_B(q‖p)), both probabilities clamped to [1e-8, 1 − 1e-8] (to build probes only)."""
    p, q = min(max(p, 1e-8), 1 - 1e-8), min(max(q, 1e-8), 1 - 1e-8)

    def kl(a, b):
        return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))
    return max(kl(p, q), kl(q, p))


STATISTICS = {"kl_k2": lambda x: x * x / 2, "kl_k3": lambda x: math.exp(-x) - 1 + x}


def rejection_config(option, params):
    """The RejectionSamplingConfig of a preset's parameters ("none" or a number for lower)."""
    level, action = LEVELS[option]
    lower = params.get("lower", "none")
    fields = {"level": level, "action": action, "upper": params.get("upper", 2.0 if option == "kpop" else 5.0),
              "lower": None if lower == "none" else float(lower), "agg": params.get("agg", "mean")}
    metric = "binary_kl" if option == "kpop" else params.get("metric", "ratio")
    if metric != "binary_kl":
        return RejectionSamplingConfig(**fields, metric=metric)
    config = RejectionSamplingConfig(**fields, metric="kl_k2")      # __post_init__ refuses binary_kl (its
    config.metric = "binary_kl"                                      # _VALID_METRICS omits it): set it after
    return config


def probes(config):
    """The thresholds of the configuration, as ratios or as rows at a statistic's bound."""
    bounds = [b for b in (config.upper, config.lower) if b is not None]
    metric = config.metric
    if metric == "ratio":
        return harness.probe_batch(bounds, float32=FLOAT32)
    if metric == "kl_k1":
        return harness.probe_batch([math.exp(b) for b in bounds], float32=FLOAT32)
    if metric == "binary_kl":
        rows = harness.probability_rows(EXTREMES)
        for bound in bounds:
            rows += harness.probability_statistic_rows(binary_kl, bound, (0.3, 0.6, 0.97, 1 - 1e-7))
        return harness.probe_batch(extra=rows, float32=FLOAT32)
    rows = [r for bound in bounds if bound > 0 for r in harness.statistic_rows(STATISTICS[metric], bound)]
    return harness.probe_batch(extra=rows, float32=FLOAT32)


def without_ties(batch):
    """The batch with every response token's trainer log-prob moved by its own multiple of 1e-9: M2PO sorts m2
    with torch.sort, whose order among equal values is unspecified, so a tie at its cut is the sort's choice."""
    trainer = [list(row) for row in batch["trainer"]]
    step = 0
    for b, row in enumerate(trainer):
        for t, included in enumerate(batch["mask"][b]):
            if included:
                step += 1
                row[t] -= step * 1e-9
    return {**batch, "trainer": trainer}


def run(config, batch, m2_threshold=None):
    """(c, kept): ppo_actor_loss_fn's coefficients, and the loss mask rejection sampling (or M2PO) leaves."""
    trainer, sampler, mask, advantages = harness.tensors(batch)
    loss_mask = mask.bool()
    proximal = trainer.detach()
    token_advantages = advantages[:, None].expand_as(trainer)
    if m2_threshold is not None:
        loss_mask = _apply_m2po_masking(sampler, proximal, loss_mask, m2_threshold)
        kept = loss_mask
    else:
        kept = apply_rejection_sampling(proximal, sampler, loss_mask, None, config).loss_mask
    loss, _ = ppo_actor_loss_fn(logprobs=trainer, proximal_logprobs=proximal, old_logprobs=sampler,
                                advantages=token_advantages, eps_clip=0.2, loss_mask=loss_mask,
                                rejection_sampling=config)
    count = float(loss_mask.count_nonzero())
    return harness.coefficients(loss, trainer, advantages, count), kept


# -- three policies: ppo_actor_loss_fn and cispo_loss_fn with π_θ, π_prox and μ apart ------------------------------

# (update preset, setting, PPOActorConfig's fields as run, the loss parameters in toylab's terms, the correction (a
# registry id) and its parameters). grpo_loss_fn passes logprobs (π_θ), proximal_logprobs (π_prox) and old_logprobs
# (the engine's μ): with use_decoupled_loss false and recompute_logprob false (the defaults) π_prox is μ itself
# (actor.py 239–242); with use_decoupled_loss it is the recomputed π_old.
EXAMPLE = {"use_decoupled_loss": True, "recompute_logprob": True, "eps_clip": 0.4,
           "rejection_sampling": {"level": "token", "action": "mask", "metric": "ratio", "upper": 5.0}}
UPDATE_SETTINGS = [
    ("areal:default", "defaults", {"use_decoupled_loss": False, "recompute_logprob": False, "eps_clip": 0.2}, {},
     None, {}),
    ("areal:default", "dual_clip", {"use_decoupled_loss": False, "eps_clip": 0.2, "eps_clip_higher": 0.28,
                                    "c_clip": 3.0}, {"eps_high": 0.28, "dual_clip": 3.0}, None, {}),
    ("areal:decoupled", "defaults", EXAMPLE, {}, "areal:token_mask", {}),
    ("areal:decoupled", "token_clamp", {**EXAMPLE, "rejection_sampling": {**EXAMPLE["rejection_sampling"],
                                                                         "action": "clamp", "upper": 2.0}},
     {}, "areal:token_clamp", {"upper": 2.0}),
    ("areal:decoupled", "no_rejection_sampling", {**EXAMPLE, "rejection_sampling": None}, {}, None, {}),
    ("areal:cispo", "defaults", {"use_cispo_loss": True, "use_decoupled_loss": False, "eps_clip": 1.0,
                                 "eps_clip_higher": 4.0}, {}, None, {}),
    ("areal:cispo_decoupled", "defaults", {**EXAMPLE, "use_cispo_loss": True, "eps_clip": 1.0,
                                           "eps_clip_higher": 4.0}, {}, "areal:token_mask", {}),
]


def update_loss(config):
    """loss_fn(b, trainer, old, sampler, mask, advantages) -> AReaL's loss of one token (its denominator, the
    loss-mask count before rejection, is 1)."""
    spec = config.get("rejection_sampling")
    rejection = None if spec is None else RejectionSamplingConfig(**spec)
    decoupled = config["use_decoupled_loss"]

    def loss_fn(b, trainer, old, sampler, mask, advantages):
        proximal = old if decoupled else sampler
        token_advantages = advantages[:, None].expand_as(trainer)
        if config.get("use_cispo_loss"):
            loss, _ = cispo_loss_fn(logprobs=trainer, proximal_logprobs=proximal, advantages=token_advantages,
                                    eps_clip=config["eps_clip"], loss_mask=mask.bool(),
                                    eps_clip_higher=config["eps_clip_higher"], old_logprobs=sampler,
                                    rejection_sampling=rejection)
            return loss
        loss, _ = ppo_actor_loss_fn(logprobs=trainer, proximal_logprobs=proximal, old_logprobs=sampler,
                                    advantages=token_advantages, eps_clip=config["eps_clip"], loss_mask=mask.bool(),
                                    eps_clip_higher=config.get("eps_clip_higher"), c_clip=config.get("c_clip"),
                                    rejection_sampling=rejection)
        return loss

    return loss_fn


def run_update(numbers, preset, setting, config, params, correction, correction_params):
    low = 1 - config["eps_clip"]
    high = 1 + config.get("eps_clip_higher", config["eps_clip"])
    ratios = [r for r in (low, high, config.get("c_clip")) if r]
    spec = config.get("rejection_sampling")
    weights = [] if spec is None else [spec["upper"]]
    combined = () if config["use_decoupled_loss"] else ratios
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights, combined))
    loss, gradient = harness.per_token(update_loss(config), numbers.batches[name])
    numbers.update(preset, setting, config, params, correction, correction_params, name, loss, gradient,
                   float32=spec is not None)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/areal/generate.py",
                              float32=FLOAT32)
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            if option == "m2_threshold":
                config, threshold = None, params.get("m2_threshold", 0.04)
                probe = without_ties(harness.probe_batch(extra=harness.statistic_rows(lambda x: x * x, threshold)))
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    config, threshold = rejection_config(option, params), None
                probe = probes(config)
            batch_name = numbers.batch(f"probes/{option}/{setting}", probe)
            for batch in (ragged, batch_name):
                c, kept = run(config, numbers.batches[batch], threshold)
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, c, kept, setting)
    for preset, setting, config, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, config, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
