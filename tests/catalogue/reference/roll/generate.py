"""ROLL 8eb27cc: train_infer_correction (is_weight at weight_type token / geometric / sequence; filters at agg_type
token / geometric / sequence, ratio- and diff-based) and pg_variant topr, through the agentic ActorWorker's
loss_func, on both of ROLL's paths, run on the batches of harness.py; writes numbers.json beside this file.

Copied verbatim (blocks below): TrainInferISWeightConfig, TrainInferFilterConfig, TrainInferCorrectionConfig
(roll/configs/base_config.py), compute_approx_kl, agg_loss, masked_mean, masked_sum (roll/utils/functionals.py),
compute_segment_masked_mean (roll/pipeline/agentic/utils.py), roll/utils/train_infer_corrections.py from
_compute_all_granularity to apply_train_infer_correction_to_batch, get_old_log_probs_with_cache
(roll/pipeline/base_worker.py's ActorWorker) and the agentic ActorWorker from its __init__ to _compute_topr_loss
(roll/pipeline/agentic/agentic_actor_pg_worker.py). Stubbed: DataProto (a batch dict, non_tensor_batch, meta_info
and group_by over traj_id), the base worker's strategy (its op_compute_log_probs takes the trainer's log-probs as
output_tensor and, as the real one does, multiplies them by the response mask it is given), logger and _get_pg_metrics (metrics only), current_platform (cpu) and get_episode_scores
(the advantage of each sequence, one trajectory each: TOPR's split by score > 0).

Two paths. "worker": enable_old_logprobs_recompute false, loss_func computes the correction itself. "recompute":
ROLL's default, since PPOConfig sets enable_old_logprobs_recompute when init_kl_coef > 0 (its default 0.2,
base_config.py 817–819): the agentic pipeline calls apply_train_infer_correction_to_batch (agentic_pipeline.py
512–514, loss_mask_keys ["response_mask"]), which stores train_infer_is_weight and filters response_mask, and
loss_func then reads them. ROLL drops the first column of response_mask (the token before the response): a column
of ones is prepended. old_log_probs are the trainer's (the PPO ratio is 1), infer_logprobs the sampler's,
pg_variant vanilla (−log π·A) unless topr, loss_agg_mode seq-mean-token-sum with global_valid_samples 1:
c = −∂loss/∂log π / A_b × (1 + 1e-8); "kept" is the response mask after the filters. The findings run loss_agg_mode
token-mean, whose agg_loss never reads loss_mask: on the worker's path a filtered token keeps its coefficient; on the
recompute path the filtered response_mask already multiplied the log-probs (op_compute_log_probs), so it has none.

Three policies (the "updates"): loss_func on the recompute path with old_log_probs (π_old), infer_logprobs (μ) and
the current log-probs (π_θ) apart, on one-token rows, pg_variant ppo (pg_clip, the range, dual_clip_loss) and
vanilla, with and without the token IS weight: each token's loss and gradient × (1 + 1e-8).

    python tests/catalogue/reference/roll/generate.py
"""

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Literal, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class DataProto:
    """ROLL's DataProto as these functions use it: tensors in batch, arrays in non_tensor_batch, meta_info."""

    def __init__(self, batch, non_tensor_batch=None, meta_info=None):
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch or {}, meta_info or {}

    def group_by(self, keys):
        rows = self.non_tensor_batch[keys]
        return {key: DataProto({}, {name: values[rows == key] for name, values in self.non_tensor_batch.items()})
                for key in dict.fromkeys(rows.tolist())}


current_platform = SimpleNamespace(device_type="cpu")
logger = logging.getLogger("roll")
TrainInferCorrectionConfig = "TrainInferCorrectionConfig"
BaseConfig = object


def get_logger():
    return logger


def get_episode_scores(batch):
    """agentic_pipeline.get_episode_scores: each trajectory's episode_scores[0], in trajectory order."""
    return torch.tensor([traj.non_tensor_batch["episode_scores"][0] for traj in batch.group_by(keys="traj_id").values()],
                        dtype=torch.float32)


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/configs/base_config.py 424-479
@dataclass
class TrainInferISWeightConfig:
    enabled: bool = field(
        default=False,
        metadata={"help": "Whether to generate train-infer IS weight and store it into batch (train_infer_is_weight)."},
    )
    weight_type: Literal["token", "segment", "geometric", "sequence"] = field(
        default="token",
        metadata={"help": "Granularity for IS weight: token / segment / geometric / sequence."},
    )
    upper_bound: Optional[float] = field(
        default=1.2,
        metadata={"help": "Upper bound (clamp) for IS weight. Set to None to disable clamping."},
    )
    detach: bool = field(
        default=True,
        metadata={"help": "Detach IS weight tensor to prevent gradient flow (recommended)."},
    )


@dataclass
class TrainInferFilterConfig:
    enabled: bool = field(
        default=False,
        metadata={"help": "Whether to enable this filter rule (applied to response_mask)."},
    )
    agg_type: Literal["token", "segment", "geometric", "sequence"] = field(
        default="token",
        metadata={"help": "Aggregation level used for filtering: token / segment / geometric / sequence."},
    )

    ratio_enabled: bool = field(
        default=True,
        metadata={"help": "Whether to apply ratio-based filtering (exp(old_logp - infer_logp))."},
    )
    ratio_low: float = field(default=0.8, metadata={"help": "Lower threshold for ratio filtering."})
    ratio_high: float = field(default=1.2, metadata={"help": "Upper threshold for ratio filtering."})

    diff_enabled: bool = field(
        default=False,
        metadata={"help": "Whether to apply diff-based filtering (exp(old) - exp(infer))."},
    )
    diff_low: float = field(default=-0.2, metadata={"help": "Lower threshold for diff filtering."})
    diff_high: float = field(default=0.2, metadata={"help": "Upper threshold for diff filtering."})


@dataclass
class TrainInferCorrectionConfig:
    is_weight: TrainInferISWeightConfig = field(
        default_factory=TrainInferISWeightConfig,
        metadata={"help": "Config for generating train-infer IS weight (stored in batch)."},
    )
    filters: List[TrainInferFilterConfig] = field(
        default_factory=list,
        metadata={"help": "A list of filter rules applied sequentially to response_mask."},
    )
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 181-211
def compute_approx_kl(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    action_mask: Optional[torch.Tensor] = None,
    kl_penalty: str = "kl",
) -> torch.Tensor:
    """
    ref: https://github.com/OpenRLHF/OpenRLHF/blob/494850f50342ed38d5ae76ef45a3207f3523b582/openrlhf/models/utils.py#L7
    Compute the approximate KL divergence between two distributions.
    Schulman blog: http://joschu.net/blog/kl-approx.html
    """
    if kl_penalty == "kl":
        log_ratio = log_probs - log_probs_base
    elif kl_penalty == "abs":
        log_ratio = (log_probs - log_probs_base).abs()
    elif kl_penalty == "mse":
        log_ratio = 0.5 * (log_probs - log_probs_base).square()
    elif kl_penalty == "k3":
        kl = log_probs_base - log_probs
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        log_ratio = torch.clamp(kld, min=-10, max=10)
    elif kl_penalty == "full":
        log_ratio = F.kl_div(log_probs_base, log_probs, log_target=True, reduction="none").sum(-1)
    else:
        raise NotImplementedError

    if action_mask is not None:
        return log_ratio * action_mask

    return log_ratio
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 229-297
def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str, batch_num_tokens: int = None,
             global_valid_samples: int = None, weights: Optional[torch.Tensor] = None):
    """
    ref: https://github.com/volcengine/verl/blob/78532923368aeb058f62201489546d013df47710/verl/trainer/ppo/core_algos.py#L370
    Aggregate the loss matrix into a scalar.
    Args:
        loss_mat: `(torch.Tensor)`
            shape: (bs, response_length)
        loss_mask: `(torch.Tensor)`
            shape: (bs, response_length)
        loss_agg_mode: (str) choices: "token-mean" /
                                      "seq-mean-token-sum" /
                                      "seq-mean-token-mean" /
                                      "seq-mean-token-sum-norm" /
            "seq-mean-token-sum" is the default behavior
        weights: `torch.Tensor`
    Returns:
        loss: `a scalar torch.Tensor`
            aggregated loss
    """
    if batch_num_tokens is None:
        batch_num_tokens = loss_mask.sum()
    if global_valid_samples is None:
        global_valid_samples = loss_mat.size(0)
    if loss_agg_mode == "token-mean":
        if weights is None:
            weights = torch.ones(loss_mask.shape[0], device=loss_mask.device)
        loss = (loss_mat * weights.unsqueeze(-1)).sum() / batch_num_tokens
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = masked_sum(loss_mat, loss_mask, dim=-1)  # token-sum
        valid_samples = torch.any(loss_mask > 0, dim=-1).float()
        if weights is None:
            weights = torch.ones(loss_mask.shape[0], device=loss_mask.device)
        loss = (seq_losses * weights * valid_samples).sum() / (global_valid_samples + 1e-8)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_losses = masked_mean(loss_mat, loss_mask, dim=-1)
        valid_samples = torch.any(loss_mask > 0, dim=-1).float()
        if weights is None:
            weights = torch.ones(loss_mask.shape[0], device=loss_mask.device)
        loss = (seq_losses * weights * valid_samples).sum() / (global_valid_samples + 1e-8)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-sum-norm":
        seq_losses = masked_sum(loss_mat, loss_mask, dim=-1)
        valid_samples = torch.any(loss_mask > 0, dim=-1).float()
        if weights is None:
            weights = torch.ones(loss_mask.shape[0], device=loss_mask.device)
        loss = (seq_losses * weights * valid_samples).sum() / loss_mask.shape[-1]  # The divisor
        # (loss_mask.shape[-1]) should ideally be constant
        # throughout training to well-replicate the DrGRPO paper.
        # TODO: Perhaps add user-defined normalizer argument to
        # agg_loss to ensure divisor stays constant throughout.
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")

    return loss


def masked_mean(tensor: torch.Tensor, mask: torch.Tensor, dim: int = None) -> torch.Tensor:
    if dim is not None:
        mask_sum = mask.sum(axis=dim)
        return torch.where(mask_sum > 0, (tensor * mask).sum(axis=dim) / (mask_sum + 1e-8), torch.zeros_like(mask_sum))
    else:
        return (tensor * mask).sum() / (mask.sum() + 1e-8)

def masked_sum(tensor: torch.Tensor, mask: torch.Tensor, dim: int = None) -> torch.Tensor:
    if dim is not None:
        mask_sum = mask.sum(axis=dim)
        return torch.where(mask_sum > 0, (tensor * mask).sum(axis=dim), torch.zeros_like(mask_sum))
    else:
        return (tensor * mask).sum()
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/pipeline/agentic/utils.py 336-388
def compute_segment_masked_mean(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """
    对每段连续的1分别计算 masked_mean，不连续的段不相乘。

    Args:
        tensor: [batch_size, seq_len] 要计算的值
        mask: [batch_size, seq_len] mask，1表示有效位置，0表示无效位置

    Returns:
        [batch_size, seq_len] 结果，每段连续的1位置填充该段的 masked_mean
    """
    batch_size, seq_len = mask.shape
    device = mask.device
    result = torch.zeros_like(tensor)

    # 对每个样本分别处理
    for b in range(batch_size):
        sample_mask = mask[b]  # [seq_len]
        sample_tensor = tensor[b]  # [seq_len]

        # 找到所有连续的1的段
        # 使用 diff 找到边界：1->0 和 0->1 的位置
        diff = torch.diff(sample_mask, prepend=torch.tensor([0], device=device))
        # 找到段的开始位置（0->1）
        segment_starts = torch.where(diff == 1)[0]
        # 找到段的结束位置（1->0），diff[i]==-1 表示 mask[i-1]==1 且 mask[i]==0，所以段的结束位置是 i（不包括i）
        segment_ends = torch.where(diff == -1)[0]

        # 如果最后一个位置是1，需要添加结束位置
        if sample_mask[-1] == 1:
            segment_ends = torch.cat([segment_ends, torch.tensor([seq_len], device=device)])

        # 确保 segment_starts 和 segment_ends 长度匹配
        if len(segment_starts) != len(segment_ends):
            # 如果长度不匹配，只处理能匹配的部分
            min_len = min(len(segment_starts), len(segment_ends))
            segment_starts = segment_starts[:min_len]
            segment_ends = segment_ends[:min_len]

        # 对每段分别计算 masked_mean
        for start, end in zip(segment_starts, segment_ends):
            # 获取这段的索引
            segment_indices = torch.arange(start, end, device=device)
            segment_mask = sample_mask[segment_indices]  # 这段的mask
            segment_tensor = sample_tensor[segment_indices]  # 这段的值

            if segment_mask.sum() > 0:
                # 计算这段的 masked_mean（只考虑mask为1的位置）
                segment_mean = (segment_tensor * segment_mask).sum() / (segment_mask.sum() + 1e-8)
                # 将结果填充到这段内mask为1的位置
                result[b, segment_indices] = segment_mean * segment_mask

    return result
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/train_infer_corrections.py 14-255
def _compute_all_granularity(old_log_probs, infer_log_probs, response_mask) -> dict:
    """Compute importance ratios and probability differences at multiple granularities."""
    response_mask = response_mask.long()
    log_ratio = old_log_probs - infer_log_probs

    ratio_token = log_ratio.exp()
    diff_token = old_log_probs.exp() - infer_log_probs.exp()

    # Geometric mean (per sequence, then broadcast to token level)
    log_ratio_geo = masked_mean(log_ratio, response_mask, dim=-1)  # [B]
    ratio_geometric = log_ratio_geo.exp().unsqueeze(-1).expand_as(ratio_token)
    diff_geometric = masked_mean(diff_token, response_mask, dim=-1).unsqueeze(-1).expand_as(diff_token)

    # Sequence-level sum (then broadcast to token level)
    log_ratio_seq = masked_sum(log_ratio, response_mask, dim=-1)   # [B]
    ratio_sequence = log_ratio_seq.exp().unsqueeze(-1).expand_as(ratio_token)
    diff_sequence = masked_sum(diff_token, response_mask, dim=-1).unsqueeze(-1).expand_as(diff_token)

    # Segment-level mean (computed per segment within each sequence)
    log_ratio_segment = compute_segment_masked_mean(log_ratio, response_mask)  # [B, T]
    ratio_segment = log_ratio_segment.exp()
    diff_segment = compute_segment_masked_mean(diff_token, response_mask)

    return {
        "ratio": {
            "token": ratio_token,
            "geometric": ratio_geometric,
            "sequence": ratio_sequence,
            "segment": ratio_segment,
        },
        "diff": {
            "token": diff_token,
            "geometric": diff_geometric,
            "sequence": diff_sequence,
            "segment": diff_segment,
        },
    }


def _infer_global_valid_samples_from_mask(mask: torch.Tensor) -> float:
    """Count the number of samples that contain at least one valid token."""
    valid_samples = (mask.sum(dim=-1) > 0).float().sum().detach().item()
    return max(float(valid_samples), 1.0)


def _infer_global_valid_tokens_from_mask(mask: torch.Tensor) -> float:
    """Count the total number of valid tokens across all samples."""
    valid_tokens = mask.float().sum().detach().item()
    return max(float(valid_tokens), 1.0)


def compute_train_infer_correction(
    cfg: TrainInferCorrectionConfig,
    response_mask: torch.Tensor,          # [B, T]
    old_log_probs: torch.Tensor,          # [B, T]
    infer_log_probs: torch.Tensor,        # [B, T]
    global_valid_samples: Optional[int] = None,  # Number of valid sequences
    global_valid_tokens: Optional[int] = None,   # Total number of valid tokens
) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, float]]:
    """Compute importance sampling weights and filters based on train-infer divergence.

    Metrics are always recorded for monitoring. The `enabled` flags in config control
    whether the corrections are actually applied:
    - `is_weight.enabled`: controls whether IS weight is computed (vs. all ones)
    - `filters[i].enabled`: controls whether each filter is applied
    """
    metrics: Dict[str, float] = {}

    base_mask = response_mask.long()
    if global_valid_samples is None:
        global_valid_samples = _infer_global_valid_samples_from_mask(base_mask)
    if global_valid_tokens is None:
        global_valid_tokens = _infer_global_valid_tokens_from_mask(base_mask)

    stats = _compute_all_granularity(
        old_log_probs=old_log_probs,
        infer_log_probs=infer_log_probs,
        response_mask=base_mask,
    )
    ratio = stats["ratio"]
    diff = stats["diff"]

    # Always record ratio and diff metrics at all granularities for monitoring
    for agg in ["token", "geometric", "sequence", "segment"]:
        metrics[f"actor/train_infer_ratio_{agg}_mean@sum"] = agg_loss(
            loss_mat=ratio[agg],
            loss_mask=base_mask,
            loss_agg_mode="seq-mean-token-mean",
            global_valid_samples=global_valid_samples,
        ).detach().item()
        metrics[f"actor/train_infer_diff_{agg}_mean@sum"] = agg_loss(
            loss_mat=diff[agg],
            loss_mask=base_mask,
            loss_agg_mode="seq-mean-token-mean",
            global_valid_samples=global_valid_samples,
        ).detach().item()

    # 1) Importance Sampling (IS) Weight Handling
    if cfg.is_weight.enabled:
        is_weight = ratio[cfg.is_weight.weight_type]
        ub = cfg.is_weight.upper_bound
        if ub is not None:
            # Log the fraction of weights clipped due to upper bound
            metrics["actor/is_weight_clipfrac@sum"] = agg_loss(
                loss_mat=(is_weight > ub).float(),
                loss_mask=base_mask,
                loss_agg_mode='token-mean',
                batch_num_tokens=global_valid_tokens,
                global_valid_samples=global_valid_samples
            ).detach().item()
            is_weight = is_weight.clamp(min=0.0, max=ub)
        if cfg.is_weight.detach:
            is_weight = is_weight.detach()
    else:
        is_weight = torch.ones_like(ratio["token"]).detach()

    # 2) Apply Filters (if enabled)
    filter_mask = torch.ones_like(base_mask)

    for i, f in enumerate(cfg.filters):
        if not f.enabled:
            continue

        agg = f.agg_type

        # --- Ratio-based Filter ---
        if f.ratio_enabled:
            m_ratio = (ratio[agg] >= f.ratio_low).float() * (ratio[agg] <= f.ratio_high).float()

            # Log pass rate of this filter over currently active tokens
            metrics[f"actor/train_infer_{agg}_ratio_mask_mean@sum"] = agg_loss(
                loss_mat=m_ratio,
                loss_mask=base_mask,
                loss_agg_mode='token-mean',
                batch_num_tokens=global_valid_tokens,
            ).detach().item()

            filter_mask = filter_mask * m_ratio

        # --- Difference-based Filter ---
        if f.diff_enabled:
            m_diff = (diff[agg] >= f.diff_low).float() * (diff[agg] <= f.diff_high).float()

            # Log pass rate of this filter
            metrics[f"actor/train_infer_{agg}_diff_mask_mean@sum"] = agg_loss(
                loss_mat=m_diff,
                loss_mask=base_mask,
                loss_agg_mode='token-mean',
                batch_num_tokens=global_valid_tokens,
            ).detach().item()

            filter_mask = filter_mask * m_diff

    # 3) Final overall pass rate after all filters
    if cfg.filters:
        metrics["actor/train_infer_final_mask_mean"] = masked_mean(
            base_mask*filter_mask.float(), base_mask
        ).detach().item()

    return is_weight, filter_mask, metrics


def apply_train_infer_correction_to_batch(
    pipeline_config,
    batch,
    stat_mask_key='response_mask',
    update_mask_keys: Optional[list] = None,
):
    """Apply train-infer correction to a batch at the pipeline level.

    This function is designed for pipeline-level usage where masks are in their
    original shape [B, T]. It handles slicing internally and updates the original
    masks with the computed filter mask.

    Metrics are always recorded for monitoring. The `enabled` flags in config control
    whether corrections are applied:
    - `is_weight.enabled`: controls whether IS weight is computed (vs. all ones)
    - `filters[i].enabled`: controls whether each filter is applied

    Args:
        pipeline_config: Pipeline configuration containing train_infer_correction config
        batch: DataProto batch to modify
        stat_mask_key: Key of mask used for computing train-infer statistics (diff, ratio)
        update_mask_keys: List of mask keys to update with computed filter mask.
                          If None, defaults to ['response_mask'].

    Note:
        For worker-level usage, use compute_train_infer_correction() directly,
        as it works with already-sliced tensors [B, T-1] and provides more flexibility.
    """
    # Check if required fields are present
    if "old_log_probs" not in batch.batch or "infer_logprobs" not in batch.batch:
        missing_fields = []
        if "old_log_probs" not in batch.batch:
            missing_fields.append("'old_log_probs'")
        if "infer_logprobs" not in batch.batch:
            missing_fields.append("'infer_logprobs'")
        logger.warning(f"Skipping train-infer correction: {', '.join(missing_fields)} not found in batch.")
        stat_mask = batch.batch[stat_mask_key][:, 1:].long()  # [B, T-1]
        batch.batch["train_infer_is_weight"] = torch.ones_like(stat_mask, dtype=torch.float32)
        return batch, {}

    # Default: update response_mask if not specified
    if update_mask_keys is None:
        update_mask_keys = [stat_mask_key]

    # Get the mask for computing train-infer statistics (always sliced to [B, T-1])
    stat_mask = batch.batch[stat_mask_key][:, 1:].long()  # [B, T-1]
    old_lp = batch.batch["old_log_probs"]                # [B, T-1]
    infer_lp = batch.batch["infer_logprobs"]             # [B, T-1]

    cfg = pipeline_config.train_infer_correction

    # Compute IS weights and filter mask
    is_w, filter_mask, corr_metrics = compute_train_infer_correction(
        cfg=cfg,
        response_mask=stat_mask,
        old_log_probs=old_lp,
        infer_log_probs=infer_lp,
        global_valid_samples=None,   # Will be inferred from stat_mask
        global_valid_tokens=None,    # Will be inferred from stat_mask
    )

    # Set train_infer_is_weight
    batch.batch["train_infer_is_weight"] = is_w

    # Apply filter mask to all specified masks
    for key in update_mask_keys:
        if key in batch.batch:
            mask_tensor = batch.batch[key]
            # Check if mask is already sliced (shape [B, T-1]) or full (shape [B, T])
            # final_response_mask is already [:, 1:] sliced in get_sample_level_mask
            if mask_tensor.shape[-1] == filter_mask.shape[-1]:
                # Mask is already sliced (e.g., final_response_mask)
                batch.batch[key] = mask_tensor.long() * filter_mask.long()
            else:
                # Mask is full shape (e.g., response_mask), apply to [:, 1:] part
                batch.batch[key][:, 1:] = mask_tensor[:, 1:].long() * filter_mask.long()
        else:
            logger.warning(f"Mask key '{key}' not found in batch, skipping update.")

    return batch, corr_metrics
# end verbatim


def masked_log_probs(logits, input_ids, attention_mask):
    """Strategy.op_compute_log_probs (roll/distributed/strategy/strategy.py 158–168) given the log-probs themselves
    as logits: its last step, log_probs * attention_mask[:, 1:], zeroes them outside the response mask it is
    given."""
    return logits * attention_mask[:, 1:]


class BaseActorWorker:
    """The base worker's strategy, logger and metrics, stubbed; get_old_log_probs_with_cache verbatim."""

    def __init__(self, pipeline_config):
        self.pipeline_config = pipeline_config
        self.strategy = SimpleNamespace(op_compute_log_probs=masked_log_probs)
        self.logger = logger
        self._logprobs_cache = {}

    def _get_pg_metrics(self, data, batch_num_tokens, global_valid_samples):
        return {}

# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/pipeline/base_worker.py 173-211
    def get_old_log_probs_with_cache(self, data: DataProto, log_probs: torch.Tensor) -> torch.Tensor:
        """
        Get old_log_probs with intra-step caching when enable_old_logprobs_recompute == False.
        When caching is enabled, the first forward pass log_probs can be reused as old_log_probs
        since they are mathematically equivalent in on-policy settings.
        This method can be overridden by subclasses for custom caching behavior.

        Args:
            data: DataProto containing input data and sample_uuids
            log_probs: Current forward pass log_probs tensor

        Returns:
            old_log_probs tensor (detached, no gradients)
        """
        # Original computation path when caching is disabled
        if self.pipeline_config.enable_old_logprobs_recompute or "sample_uuid" not in data.non_tensor_batch:
            # When enable_old_logprobs_recompute=True, use the pre-computed old_log_probs from batch
            return data.batch["old_log_probs"]

        sample_uuids = data.non_tensor_batch["sample_uuid"]

        # Check first sample_uuid for efficiency - if it exists, all likely exist
        first_uuid = sample_uuids[0]
        if first_uuid in self._logprobs_cache:
            # All samples likely cached, retrieve all from cache
            cached_old_log_probs = []

            for sample_uuid in sample_uuids:
                cached_old_log_probs.append(self._logprobs_cache[sample_uuid])

            old_log_probs = torch.cat(cached_old_log_probs, dim=0).to(current_platform.device_type)
        else:
            # Cache miss - use current log_probs as old_log_probs (mathematically equivalent in on-policy)
            old_log_probs = log_probs.detach()
            if self.pipeline_config.ppo_epochs > 1:
                for i, sample_uuid in enumerate(sample_uuids):
                    self._logprobs_cache[sample_uuid] = old_log_probs[i : i + 1].cpu()

        return old_log_probs
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/pipeline/agentic/agentic_actor_pg_worker.py 13-349
class ActorWorker(BaseActorWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # 缓存PG变体的配置参数
        self._pg_config_cache = {}
        self._pg_variant_logged = True
        self._topr_sample_logged = False
        self._cispo_config_logged = False
        self._kimi15_config_logged = False

    def _get_or_cache_config(self, key, default_value):
        """获取或缓存配置值"""
        if key not in self._pg_config_cache:
            self._pg_config_cache[key] = getattr(self.pipeline_config.actor_train, key, default_value)
        return self._pg_config_cache[key]

    def loss_func(self, data: DataProto, output_tensor: torch.Tensor):
        """
        loss func接口定义:
            data: DataProto, 由train_step透传
            output_tensor: torch.Tensor, model.forward()的输出Tensor
        """
        response_mask = data.batch["response_mask"][:, 1:].long()
        ref_log_probs = data.batch["ref_log_probs"]
        advantages = data.batch["advantages"]

        batch_num_tokens = data.meta_info['batch_num_tokens']
        global_valid_samples = data.meta_info['global_valid_samples']

        log_probs = self.strategy.op_compute_log_probs(
            logits=output_tensor, input_ids=data.batch["input_ids"], attention_mask=data.batch["response_mask"]
        )
        old_log_probs = self.get_old_log_probs_with_cache(data, log_probs)
        infer_log_probs = data.batch.get("infer_logprobs", old_log_probs)
        infer_log_probs = infer_log_probs if len(infer_log_probs) > 0 else old_log_probs

        train_infer_metric = {}
        if not self.pipeline_config.enable_old_logprobs_recompute:
            train_infer_is_weight, filter_mask, train_infer_metric = compute_train_infer_correction(
                cfg=self.pipeline_config.train_infer_correction,
                response_mask=response_mask,
                old_log_probs=old_log_probs,
                infer_log_probs=infer_log_probs,
                global_valid_samples=global_valid_samples['response_mask'],
                global_valid_tokens=batch_num_tokens['response_mask'],
            )

            # Apply filter mask to response_mask
            response_mask = response_mask.long() * filter_mask.long()
        else:
            train_infer_is_weight = data.batch['train_infer_is_weight']

        if self.pipeline_config.ratio_type == "segment":
            # 计算序列级别的 ratio：对每段连续的1分别计算 masked_mean，不连续的段不相乘
            log_ratio = log_probs - old_log_probs
            masked_log_ratio = compute_segment_masked_mean(log_ratio, response_mask)
            ratio = masked_log_ratio.exp()
        else:
            ratio = (log_probs - old_log_probs).exp()

        pg_variant = self._get_or_cache_config("pg_variant", "vanilla")
        self._cached_metrics = {
            "pg_variant": pg_variant,
            "ratio": ratio,
            "response_mask": response_mask,
        }

        if pg_variant == "vanilla":  # Basic Policy Gradient
            pg_loss = self._compute_vanilla_pg_loss(ratio, log_probs, advantages)
        elif pg_variant == "ppo":  # Proximal Policy Optimization
            pg_loss = self._compute_ppo_loss(ratio, advantages, response_mask, batch_num_tokens=batch_num_tokens,
                                             global_valid_samples=global_valid_samples)
        elif pg_variant == "tis":  # Truncated Importance Sampling
            pg_loss = self._compute_tis_loss(ratio, log_probs, old_log_probs, response_mask, advantages, data,
                                             batch_num_tokens=batch_num_tokens, global_valid_samples=global_valid_samples)
        elif pg_variant == "topr":  # Tapered off-policy REINFORCE
            pg_loss = self._compute_topr_loss(ratio, log_probs, old_log_probs, advantages, data)
        elif pg_variant == "cispo":  # Clipped Importance Sampling Policy Optimization    Minimax-M1
            pg_loss = self._compute_cispo_loss(ratio, log_probs, advantages)
        elif pg_variant == "kimi15":  # Kimi15
            pg_loss = self._compute_kimi15_loss(ratio, log_probs, old_log_probs, advantages)
        else:
            raise ValueError(f"Unsupported pg_variant: {pg_variant}")

        if self.pipeline_config.train_infer_correction.is_weight.enabled:
            pg_loss = pg_loss * train_infer_is_weight

        pg_loss = agg_loss(loss_mat=pg_loss, loss_mask=response_mask, loss_agg_mode=self.pipeline_config.loss_agg_mode,
                           batch_num_tokens=batch_num_tokens['response_mask'], global_valid_samples=global_valid_samples['response_mask'])
        # 缓存损失相关指标
        self._cached_metrics.update({"original_pg_loss": pg_loss})

        kl_loss = compute_approx_kl(
            log_probs=log_probs, log_probs_base=ref_log_probs, action_mask=response_mask, kl_penalty="k3"
        )
        kl_loss = agg_loss(loss_mat=kl_loss, loss_mask=response_mask, loss_agg_mode=self.pipeline_config.loss_agg_mode,
                           batch_num_tokens=batch_num_tokens['response_mask'], global_valid_samples=global_valid_samples['response_mask'])

        approxkl = compute_approx_kl(
            log_probs=log_probs, log_probs_base=old_log_probs, action_mask=response_mask, kl_penalty="mse"
        )
        policykl = compute_approx_kl(
            log_probs=log_probs, log_probs_base=old_log_probs, action_mask=response_mask, kl_penalty="kl"
        )

        if self.pipeline_config.use_kl_loss:
            total_loss = pg_loss + kl_loss * self.pipeline_config.kl_loss_coef
        else:
            total_loss = pg_loss
        if self.pipeline_config.entropy_loss_coef > 0:
            entropy = self.strategy.op_compute_entropy(
                logits=output_tensor, attention_mask=data.batch["response_mask"]
            )
            entropy_loss = agg_loss(
                loss_mat=entropy,
                loss_mask=response_mask,
                loss_agg_mode=self.pipeline_config.loss_agg_mode,
                batch_num_tokens=batch_num_tokens['response_mask'],
                global_valid_samples=global_valid_samples['response_mask'],
            )
            total_loss = total_loss - entropy_loss * self.pipeline_config.entropy_loss_coef

        self._cached_metrics.update(
            {
                "kl_loss": kl_loss,
                "approxkl": approxkl,
                "policykl": policykl,
            }
        )

        self._cached_metrics["total_loss"] = total_loss

        # 使用缓存的指标
        pg_metrics = self._get_pg_metrics(data, batch_num_tokens=batch_num_tokens, global_valid_samples=global_valid_samples,)
        pg_metrics.update(train_infer_metric)
        return total_loss, pg_metrics

    def _compute_ppo_loss(self, ratio: torch.Tensor, advantages: torch.Tensor, response_mask: torch.Tensor,
                          batch_num_tokens: dict, global_valid_samples: dict):
        """
        计算PPO损失
        """
        pg_clip = self.pipeline_config.pg_clip
        pg_clip_low = (
            self.pipeline_config.pg_clip_low
            if self.pipeline_config.use_pg_clip_range
            else self.pipeline_config.pg_clip
        )
        pg_clip_high = (
            self.pipeline_config.pg_clip_high
            if self.pipeline_config.use_pg_clip_range
            else self.pipeline_config.pg_clip
        )
        surr1 = ratio * advantages
        surr2 = ratio.clamp(1 - pg_clip_low, 1 + pg_clip_high) * advantages
        loss = -torch.min(surr1, surr2)
        if self.pipeline_config.dual_clip_loss:
            dual_clip_loss = -torch.max(-loss, (1 + pg_clip * 2) * advantages)
            loss = torch.where(advantages < 0, dual_clip_loss, loss)

        # 缓存PPO相关指标
        clipped_low = (ratio < 1 - pg_clip_low).float()
        clipped_high = (ratio > 1 + pg_clip_high).float()
        clipped = (clipped_low + clipped_high).float()

        self._cached_metrics.update(
            {
                "ppo_ratio_high_clipfrac": agg_loss(loss_mat=clipped_high, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "ppo_ratio_low_clipfrac": agg_loss(loss_mat=clipped_low, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "ppo_ratio_clipfrac": agg_loss(loss_mat=clipped, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "clipfrac": agg_loss(
                    loss_mat=torch.lt(surr2, surr1).float(),
                    loss_mask=response_mask,
                    loss_agg_mode=self.pipeline_config.loss_agg_mode,
                    batch_num_tokens=batch_num_tokens['response_mask'],
                    global_valid_samples=global_valid_samples['response_mask'],
                )
                .detach()
                .item(),
            }
        )

        return loss

    def _compute_vanilla_pg_loss(self, ratio: torch.Tensor, log_probs: torch.Tensor, advantages: torch.Tensor):
        """
        计算原始Policy Gradient损失

        Args:
            ratio: 重要性采样比率 π(a|s) / π_old(a|s)
            advantages: 优势函数值

        Returns:
            pg_loss: Policy Gradient损失
        """

        return -log_probs * advantages

    def _compute_tis_loss(
        self,
        ratio: torch.Tensor,
        log_probs: torch.Tensor,
        old_log_probs: torch.Tensor,
        response_mask: torch.Tensor,
        advantages: torch.Tensor,
        data: DataProto,
        batch_num_tokens: dict,
        global_valid_samples: dict
    ):
        """
        计算Truncated Importance Sampling (TIS) 损失
        根据论文: Truncated Importance Sampling for Value-based Reinforcement Learning
        TIS将重要性采样比率截断在[0, 1]范围内
        """
        # 缓存TIS配置
        tis_lower_bound = self._get_or_cache_config("tis_lower_bound", 0.0)
        tis_upper_bound = self._get_or_cache_config("tis_upper_bound", 1.0)

        # 截断重要性采样比率
        clipped_ratio = torch.clamp(ratio, min=tis_lower_bound, max=tis_upper_bound)

        TIS_loss = -clipped_ratio.detach() * advantages * log_probs

        # 缓存TIS相关指标
        lower_clipped = (ratio < tis_lower_bound).float()
        upper_clipped = (ratio > tis_upper_bound).float()
        total_clipped = (lower_clipped + upper_clipped).float()

        self._cached_metrics.update(
            {
                "tis_lower_bound": tis_lower_bound,
                "tis_upper_bound": tis_upper_bound,
                "tis_lower_clipfrac": agg_loss(loss_mat=lower_clipped, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "tis_upper_clipfrac": agg_loss(loss_mat=upper_clipped, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "tis_total_clipfrac": agg_loss(loss_mat=total_clipped, loss_mask=response_mask, loss_agg_mode='token-mean',
                                                batch_num_tokens=batch_num_tokens['response_mask'],).detach().item(),
                "tis_clipped_ratio": clipped_ratio.detach(),
            }
        )

        return TIS_loss

    def _compute_topr_loss(
        self,
        ratio: torch.Tensor,
        log_probs: torch.Tensor,
        old_log_probs: torch.Tensor,
        advantages: torch.Tensor,
        data: DataProto,
    ):
        """
        计算TOPR (Tapered off-policy REINFORCE) 损失. https://arxiv.org/abs/2503.14286

        根据论文公式(8):
        ∇J_TOPR(π) = Σ_{τ∈T^+} μ(τ)R(τ)∇log π(τ) + Σ_{τ∈T^-} μ(τ)[π(τ)/μ(τ)]_0^1 R(τ)∇log π(τ)

        - 正样本(T^+): SFT更新, 直接对log π(τ)求导, 不使用importance sampling
        - 负样本(T^-): TIS更新, 使用clipped importance sampling ratio [0,1]

        Args:
            ratio: 重要性采样比率 π(a|s) / π_old(a|s) [batch_size, seq_len]
            log_probs: 当前策略的log概率 [batch_size, seq_len]
            old_log_probs: 旧策略的log概率 [batch_size, seq_len]
            advantages: 优势函数值 [batch_size, seq_len]
            data: 数据，包含奖励/分数信息

        Returns:
            topr_loss: TOPR损失 [batch_size, seq_len]
        """
        # 缓存TOPR配置
        positive_weight = self._get_or_cache_config("topr_positive_weight", 1.0)
        negative_weight = self._get_or_cache_config("topr_negative_weight", 1.0)

        # scores = data.batch['scores']dim=@).to(current_platform.device_type)
        scores = get_episode_scores(data).to(current_platform.device_type)
        positive_mask = (scores > 0).float()
        negative_mask = (scores <= 0).float()

        if not self._topr_sample_logged:
            total_samples = len(scores)
            positive_count = positive_mask.sum().item()
            negative_count = negative_mask.sum().item()
            self.logger.info(
                f"TOPR样本分布 - 总样本: {total_samples}, 正样本: {positive_count} ({positive_count/total_samples*100:.1f}%), 负样本: {negative_count} ({negative_count/total_samples*100:.1f}%)"
            )
            self.logger.info(
                f"TOPR奖励统计 - 平均: {scores.mean().item():.4f}, 标准差: {scores.std().item():.4f}, 最大: {scores.max().item():.4f}, 最小: {scores.min().item():.4f}"
            )
            self.logger.info(f"TOPR权重配置 - 正样本权重: {positive_weight}, 负样本权重: {negative_weight}")
            self._topr_sample_logged = True

        # 计算损失组件
        positive_token_mask = positive_mask.unsqueeze(-1).expand_as(log_probs)
        negative_token_mask = negative_mask.unsqueeze(-1).expand_as(log_probs)

        positive_loss = -advantages * log_probs * positive_token_mask

        # 负样本: TIS更新，使用clipped importance sampling ratio
        # 梯度是: -[π(τ)/μ(τ)]_0^1 * R(τ) * ∇log π(τ)
        clipped_ratio = torch.clamp(ratio, min=0.0, max=1.0).detach()
        negative_loss = -clipped_ratio * advantages * log_probs * negative_token_mask

        weighted_positive_loss = positive_weight * positive_loss
        weighted_negative_loss = negative_weight * negative_loss

        topr_loss = weighted_positive_loss + weighted_negative_loss

        # 缓存TOPR相关指标
        negative_lower_clipped = ((ratio < 0.0) & (negative_token_mask > 0)).float()
        negative_upper_clipped = ((ratio > 1.0) & (negative_token_mask > 0)).float()
        negative_total_clipped = negative_lower_clipped + negative_upper_clipped
        self._cached_metrics.update(
            {
                "topr_positive_loss": positive_loss,
                "topr_negative_loss": negative_loss,
                "topr_weighted_positive_loss": weighted_positive_loss,
                "topr_weighted_negative_loss": weighted_negative_loss,
                "topr_positive_weight": positive_weight,
                "topr_negative_weight": negative_weight,
                "topr_positive_samples": positive_mask.sum().detach().item(),
                "topr_negative_samples": negative_mask.sum().detach().item(),
                "topr_positive_ratio": (positive_mask.sum() / (positive_mask.size(0) + 1e-8)).detach().item(),
                "topr_negative_ratio": (negative_mask.sum() / (negative_mask.size(0) + 1e-8)).detach().item(),
                "topr_negative_lower_clipfrac": negative_lower_clipped.mean().detach().item(),
                "topr_negative_upper_clipfrac": negative_upper_clipped.mean().detach().item(),
                "topr_negative_total_clipfrac": negative_total_clipped.mean().detach().item(),
                "topr_scores_mean": scores.mean().detach().item(),
                "topr_scores_std": scores.std().detach().item(),
            }
        )

        return topr_loss
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "roll", "alibaba/ROLL", "8eb27cc2dc34c4d1310b169d9b86d339004d811a"
LEVELS = ("token", "geometric", "sequence")
SETTINGS = {
    **{f"is_weight_{level}": {"defaults": {}, "alternative": {"upper_bound": 2.5}} for level in LEVELS},
    **{f"ratio_filter_{level}": {"defaults": {}, "alternative": {"ratio_low": 0.5, "ratio_high": 2.0}} for level in LEVELS},
    **{f"diff_filter_{level}": {"defaults": {}, "alternative": {"diff_low": -0.1, "diff_high": 0.35}} for level in LEVELS},
    "topr": {"defaults": {}},
}


def correction(option, params):
    """The TrainInferCorrectionConfig (and pg_variant) of a preset's parameters (the dataclasses' defaults)."""
    if option.startswith("is_weight"):
        weight = TrainInferISWeightConfig(enabled=True, weight_type=option.rpartition("_")[2], **params)
        return TrainInferCorrectionConfig(is_weight=weight), "vanilla"
    if option.startswith("ratio_filter"):
        rule = TrainInferFilterConfig(enabled=True, agg_type=option.rpartition("_")[2], **params)
        return TrainInferCorrectionConfig(filters=[rule]), "vanilla"
    if option.startswith("diff_filter"):
        rule = TrainInferFilterConfig(enabled=True, agg_type=option.rpartition("_")[2], ratio_enabled=False,
                                      diff_enabled=True, **params)
        return TrainInferCorrectionConfig(filters=[rule]), "vanilla"
    return TrainInferCorrectionConfig(), "topr"


def probes(config):
    """Ratio thresholds as ratios; the difference filters' bounds as probability rows (Δp per token, its mean
    and its sum)."""
    ratios = [config.is_weight.upper_bound] if config.is_weight.enabled else []
    rows = []
    for rule in config.filters:
        if rule.ratio_enabled:
            ratios += [rule.ratio_low, rule.ratio_high]
        if rule.diff_enabled:
            for bound in (rule.diff_low, rule.diff_high):
                if bound:
                    rows += harness.probability_statistic_rows(lambda p, q, s=bound: (p - q) / s, 1.0)
    return harness.probe_batch(ratios, rows)


def run(config, pg_variant, batch, recompute, loss_agg_mode="seq-mean-token-sum"):
    """(c, kept) of the agentic ActorWorker's loss_func, the correction computed in loss_func (recompute False) or
    by apply_train_infer_correction_to_batch first (recompute True)."""
    trainer, sampler, mask, advantages = harness.tensors(batch)
    B, T = trainer.shape
    pipeline_config = SimpleNamespace(
        train_infer_correction=config, enable_old_logprobs_recompute=recompute, ratio_type="token",
        loss_agg_mode=loss_agg_mode, use_kl_loss=False, kl_loss_coef=0.0, entropy_loss_coef=0.0,
        actor_train=SimpleNamespace(pg_variant=pg_variant))
    data = DataProto(
        {"response_mask": torch.cat([torch.ones(B, 1, dtype=torch.int64), mask.long()], dim=1),
         "old_log_probs": trainer.detach(), "infer_logprobs": sampler, "ref_log_probs": trainer.detach(),
         "advantages": advantages[:, None].expand(B, T), "input_ids": torch.zeros(B, T + 1, dtype=torch.int64)},
        {"traj_id": np.arange(B), "episode_scores": advantages.numpy()},
        {"batch_num_tokens": {"response_mask": float(mask.sum())}, "global_valid_samples": {"response_mask": 1.0},
         "loss_mask_keys": ["response_mask"]})
    if recompute:
        data, _ = apply_train_infer_correction_to_batch(pipeline_config, data,
                                                        update_mask_keys=data.meta_info["loss_mask_keys"])
    worker = ActorWorker(pipeline_config)
    loss, _ = worker.loss_func(data, trainer)
    kept = data.batch["response_mask"][:, 1:] if recompute else None
    return harness.coefficients(loss, trainer, advantages, 1 + 1e-8), kept


# -- three policies: loss_func with π_θ, π_old and μ apart ---------------------------------------------------------

# (update preset, setting, the pipeline config's fields as run, the loss parameters in toylab's terms, the correction
# and its parameters); the default recompute path (enable_old_logprobs_recompute: old_log_probs are the trainer's
# recomputation, the correction computed by apply_train_infer_correction_to_batch)
PPO = {"pg_variant": "ppo", "pg_clip": 0.2, "dual_clip_loss": False}
UPDATE_SETTINGS = [
    ("roll:ppo", "defaults", PPO, {}, None, {}),
    ("roll:ppo", "dual_clip_loss", {**PPO, "dual_clip_loss": True}, {"dual_clip": 1 + 0.2 * 2}, None, {}),
    ("roll:ppo", "pg_clip_range", {**PPO, "use_pg_clip_range": True, "pg_clip_low": 0.1, "pg_clip_high": 0.28},
     {"eps_low": 0.1, "eps_high": 0.28}, None, {}),
    ("roll:ppo", "is_weight_token", {**PPO, "is_weight": "token"}, {}, "roll:is_weight_token", {}),
    ("roll:vanilla", "defaults", {"pg_variant": "vanilla"}, {}, None, {}),
    ("roll:vanilla", "is_weight_token", {"pg_variant": "vanilla", "is_weight": "token"}, {}, "roll:is_weight_token",
     {}),
]


def run_update(numbers, preset, setting, fields, params, correction_id, correction_params):
    weight = fields.get("is_weight")
    config = (TrainInferCorrectionConfig(is_weight=TrainInferISWeightConfig(enabled=True, weight_type=weight))
              if weight else TrainInferCorrectionConfig())
    clip = fields.get("pg_clip", 0.2)
    low, high = (fields["pg_clip_low"], fields["pg_clip_high"]) if fields.get("use_pg_clip_range") else (clip, clip)
    ratios = ([1 - low, 1 + high] + ([1 + clip * 2] if fields.get("dual_clip_loss") else [])
              if fields["pg_variant"] == "ppo" else [])
    weights = [config.is_weight.upper_bound] if weight else []
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights))
    pipeline_config = SimpleNamespace(
        train_infer_correction=config, enable_old_logprobs_recompute=True, ratio_type="token",
        loss_agg_mode="seq-mean-token-sum", use_kl_loss=False, kl_loss_coef=0.0, entropy_loss_coef=0.0,
        pg_clip=clip, use_pg_clip_range=fields.get("use_pg_clip_range", False), pg_clip_low=low, pg_clip_high=high,
        dual_clip_loss=fields.get("dual_clip_loss", False), actor_train=SimpleNamespace(pg_variant=fields["pg_variant"]))

    def token_loss(b, trainer, old, sampler, mask, advantages):
        data = DataProto(
            {"response_mask": torch.cat([torch.ones(1, 1, dtype=torch.int64), mask.long()], dim=1),
             "old_log_probs": old, "infer_logprobs": sampler, "ref_log_probs": old, "advantages": advantages[:, None],
             "input_ids": torch.zeros(1, 2, dtype=torch.int64)},
            {"traj_id": np.arange(1), "episode_scores": advantages.numpy()},
            {"batch_num_tokens": {"response_mask": 1.0}, "global_valid_samples": {"response_mask": 1.0},
             "loss_mask_keys": ["response_mask"]})
        data, _ = apply_train_infer_correction_to_batch(pipeline_config, data,
                                                        update_mask_keys=data.meta_info["loss_mask_keys"])
        loss, _ = ActorWorker(pipeline_config).loss_func(data, trainer)
        return loss * (1 + 1e-8)

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, fields, params, correction_id, correction_params, name, loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/roll/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            config, pg_variant = correction(option, params)
            probe = numbers.batch(f"probes/{option}/{setting}", probes(config))
            for batch in (ragged, probe):
                worker, _ = run(config, pg_variant, numbers.batches[batch], recompute=False)
                c, kept = run(config, pg_variant, numbers.batches[batch], recompute=True)
                assert torch.equal(worker, c), (option, setting, batch)
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, c, kept, setting,
                            "the worker's path and the default recompute path give the same coefficients")
    config, _ = correction("ratio_filter_token", {})
    scale = harness_tokens(ragged, numbers)
    numbers.finding("token_mean_ignores_the_filter", ragged,
                    run(config, "vanilla", numbers.batches[ragged], False, "token-mean")[0] * scale,
                    "loss_agg_mode token-mean, ratio filter token, the worker's path: agg_loss's token-mean never "
                    "reads loss_mask")
    numbers.finding("token_mean_on_the_recompute_path", ragged,
                    run(config, "vanilla", numbers.batches[ragged], True, "token-mean")[0] * scale,
                    "the same on the default recompute path: the filtered response_mask zeroes the log-probs")
    for preset, setting, fields, params, correction_id, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction_id, correction_params)
    numbers.write(HERE / "numbers.json")


def harness_tokens(name, numbers):
    """token-mean divides by batch_num_tokens, the response tokens: multiplied back."""
    return float(np.sum(numbers.batches[name]["mask"])) / (1 + 1e-8)


if __name__ == "__main__":
    main()
