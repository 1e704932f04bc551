"""slime's train-data dump, run as its trainer runs it: ``{dump_details}/train_data/{rollout_id}.pt`` with
``--dump-details`` (THUDM/slime at 624b824a898ab0ec1fcb4d373004c7f3852bf515). Needs torch.

Copied verbatim below: the whole writer, slime/observability/train_data_utils.py 11–242 (``save_debug_train_data``,
``_build_dump_payload``, ``restore_context_parallel_fields_to_cpu``, …); the data-parallel split it records:
``build_dp_schedule``, ``_pack_step_into_mbs`` and ``_calculate_workloads`` (slime/utils/dp_schedule.py 51–209),
``RolloutManager._split_train_data_by_dp`` (slime/ray/rollout.py 757–824), ``tensorize_rollout_data_for_training``
(slime/observability/rollout_data_utils.py 12–52) and ``process_rollout_data`` (slime/utils/data.py 304–330).

Stubbed: Ray (``ray.put``/``ray.get`` hand the object over; ``Box`` is slime/utils/misc.py 131–137), Megatron's
``mpu`` (each rank's data-parallel, tensor-parallel, pipeline and context-parallel place, from the ranks a run is
laid out on), ``torch.distributed`` (``get_rank``; ``gather_object`` collects the shards of the ranks that call it
before the data-parallel source rank, which is called last) and the training forward pass: the last pipeline
stage's ``log_probs`` are the toy's log π in float32 (``compute_log_prob``'s output, one tensor per sample over its
response), its ``advantages`` the GRPO advantage on every response token; ``all_gather_with_cp`` is the identity
(context parallelism 1). The batch is slime's train_data (rollout.py 657–697: tokens, response_lengths, rewards,
raw_reward, sample_indices, rollout_ids, loss_masks, rollout_mask_sums, rollout_log_probs), every rank of every
(DP, TP, PP) layout calling the writer as actor.py 545 does.
"""

import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)


class Box:
    def __init__(self, inner):
        self._inner = inner

    @property
    def inner(self):
        return self._inner


ray = SimpleNamespace(put=lambda value, **kwargs: value, get=lambda value: value)


class Timer:
    seq_lens = None


def calculate_fwd_flops(*args, **kwargs):
    raise AssertionError("balance_by_flops is off in these runs")


first_fit_pack = expand_bins_by_splitting = get_seqlen_balanced_partitions = calculate_fwd_flops


# -- slime/utils/dp_schedule.py 51–209 ------------------------------------------------------------------------------

def _calculate_workloads(step_lengths, args):
    return [calculate_fwd_flops([sl], args) for sl in step_lengths]


def _pack_step_into_mbs(
    step_lengths: list[int],
    *,
    args: Any,
    use_dynamic_batch_size: bool,
    max_per_bin: int | None,
    micro_batch_size: int | None,
    balance_by_flops: bool = False,
) -> list[list[int]]:
    """Group a step's samples into mbs. Returns ``mbs[k]`` = local indices into ``step_lengths``."""
    if use_dynamic_batch_size:
        assert max_per_bin is not None
        if balance_by_flops:
            total_tokens = sum(step_lengths)
            num_mbs = max(1, (total_tokens + max_per_bin - 1) // max_per_bin)
            if num_mbs >= len(step_lengths):
                return [[i] for i in range(len(step_lengths))]
            workloads = _calculate_workloads(step_lengths, args)
            # FLOPs balancing does not enforce the token cap per mbs. A
            # partition can exceed max_per_bin and may OOM if the cap is tight.
            return get_seqlen_balanced_partitions(workloads, num_mbs, equal_size=False)
        return first_fit_pack(step_lengths, max_per_bin)
    assert micro_batch_size is not None
    n = len(step_lengths)
    return [list(range(i, min(i + micro_batch_size, n))) for i in range(0, n, micro_batch_size)]


def build_dp_schedule(
    args: Any,
    train_parallel_config: dict,
    total_lengths: list[int],
    *,
    global_batch_size: int,
    rollout_indices: list[int],
) -> tuple[list[list[int]], list[list[list[int]]], list[int], list[int]]:
    """Compute the per-rank DP partition and micro-batch schedule.

    See module docstring for the pack-first-distribute-second strategy.

    Args:
        args: Namespace with ``micro_batch_size``, ``use_dynamic_batch_size``,
            ``max_tokens_per_gpu``, ``balance_data``.
        train_parallel_config: ``{"dp_size", "cp_size", "vpp_size",
            "microbatch_group_size_per_vp_stage"}``.
        total_lengths: token count per sample, indexed globally.
        global_batch_size: number of rollouts (NOT training samples) per
            training step. Number of training steps =
            ``num_rollouts // global_batch_size``; trailing rollouts whose
            samples don't fit are dropped.
        rollout_indices: rollout id for each sample (``samples[i].index``).
            Samples sharing the same id are kept together in one step.

    Returns:
        ``(partitions, micro_batch_indices, num_microbatches, global_batch_sizes)``.
        ``global_batch_sizes[s]`` = rollout count for step s (constant
        ``global_batch_size`` for every step).
    """
    dp_size = train_parallel_config["dp_size"]
    cp_size = train_parallel_config["cp_size"]
    vpp_size = train_parallel_config["vpp_size"]
    mb_group = train_parallel_config["microbatch_group_size_per_vp_stage"]

    max_per_bin = None
    if args.use_dynamic_batch_size:
        assert args.max_tokens_per_gpu is not None
        max_per_bin = args.max_tokens_per_gpu * cp_size

    # mbs count per step must be divisible by (dp_size * mb_group_for_vpp) so
    # every rank ends up with the same num_mbs and (for VPP) the per-rank mbs
    # count is a multiple of mb_group.
    align_to = dp_size * (mb_group if vpp_size > 1 else 1)

    # Group samples by rollout id (preserve first-occurrence order). All
    # samples from one rollout stay in a single step so the per-rollout loss
    # reducer is well-defined.
    rollout_id_to_samples: dict[int, list[int]] = {}
    for sample_pos, rid in enumerate(rollout_indices):
        rollout_id_to_samples.setdefault(rid, []).append(sample_pos)
    rollout_ids = list(rollout_id_to_samples.keys())

    num_steps = len(rollout_ids) // global_batch_size
    assert num_steps >= 1, (
        f"num_rollouts ({len(rollout_ids)}) < global_batch_size ({global_batch_size}); "
        f"need at least one rollout per step."
    )

    partitions: list[list[int]] = [[] for _ in range(dp_size)]
    micro_batch_indices: list[list[list[int]]] = [[] for _ in range(dp_size)]
    num_microbatches: list[int] = []
    global_batch_sizes: list[int] = []

    for step_i in range(num_steps):
        step_rollouts = rollout_ids[step_i * global_batch_size : (step_i + 1) * global_batch_size]
        sample_indices = [pos for rid in step_rollouts for pos in rollout_id_to_samples[rid]]
        step_lengths = [total_lengths[i] for i in sample_indices]
        global_batch_sizes.append(global_batch_size)
        assert len(sample_indices) >= dp_size, (
            f"step {step_i}: {len(sample_indices)} samples < dp_size {dp_size}; "
            f"each step needs at least one sample per rank."
        )

        # 1. Pack samples in this step into mbs with one global pass.
        # ``step_mbs`` indices are LOCAL into ``sample_indices``.
        step_mbs = _pack_step_into_mbs(
            step_lengths,
            args=args,
            use_dynamic_batch_size=args.use_dynamic_batch_size,
            max_per_bin=max_per_bin,
            micro_batch_size=getattr(args, "micro_batch_size", None),
            balance_by_flops=args.balance_by_flops,
        )

        # 2. Align mbs count to a multiple of ``align_to``.
        target_K = max(((len(step_mbs) + align_to - 1) // align_to) * align_to, align_to)
        if target_K != len(step_mbs):
            if args.use_dynamic_batch_size:
                expand_bins_by_splitting(step_mbs, target_K, step_lengths)
                assert len(step_mbs) == target_K, (
                    f"dynamic path: could only produce {len(step_mbs)} mbs after maximal splitting; "
                    f"need {target_K}. step {step_i} has {len(sample_indices)} samples, below the "
                    f"alignment threshold ({align_to})."
                )
            else:
                raise AssertionError(
                    f"static path: num_mbs ({len(step_mbs)}) is not a multiple of "
                    f"dp_size * mb_group ({align_to}); got "
                    f"step_size={len(sample_indices)}, micro_batch_size={args.micro_batch_size}, "
                    f"dp_size={dp_size}, mb_group={mb_group if vpp_size > 1 else 1}. "
                    f"Splitting static mbs would break the fixed-size invariant; adjust the config "
                    f"so step_size % (dp_size * micro_batch_size * mb_group) == 0."
                )

        K = len(step_mbs)
        num_mbs_per_rank = K // dp_size
        num_microbatches.append(num_mbs_per_rank)

        # 3. Distribute mbs across ranks: KK on estimated FLOPs when rank
        # workload balancing is enabled, otherwise a strided round-robin.
        if args.balance_data:
            step_workloads = _calculate_workloads(step_lengths, args)
            mbs_weights = [sum(step_workloads[i] for i in bin_) for bin_ in step_mbs]
            rank_mbs_idx = get_seqlen_balanced_partitions(mbs_weights, dp_size, equal_size=True)
        else:
            rank_mbs_idx = [list(range(r, K, dp_size)) for r in range(dp_size)]

        # 4. Build per-rank partitions (global sample indices) and micro_batch_indices
        # (local indices into partitions[r]).
        for r in range(dp_size):
            for mbs_idx in rank_mbs_idx[r]:
                mbs_locals = step_mbs[mbs_idx]  # local indices into sample_indices
                local_start = len(partitions[r])
                partitions[r].extend(sample_indices[i] for i in mbs_locals)
                micro_batch_indices[r].append(list(range(local_start, local_start + len(mbs_locals))))

    return partitions, micro_batch_indices, num_microbatches, global_batch_sizes


# -- slime/observability/rollout_data_utils.py 12–52 --------------------------------------------------------------

_ROLLOUT_DATA_TENSOR_DTYPES = {
    "tokens": torch.long,
    "loss_masks": torch.int,
    "rollout_log_probs": torch.float32,
    "rollout_top_p_token_ids": torch.int32,
    "rollout_top_p_token_offsets": torch.int32,
    "teacher_log_probs": torch.float32,
    "rollout_routed_experts": None,
}


def _cpu_tensor(value, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = value.copy()
    tensor = torch.as_tensor(value, dtype=dtype) if dtype is not None else torch.as_tensor(value)
    return tensor.detach().cpu().contiguous()


def tensorize_rollout_data_for_training(rollout_data: dict[str, Any]) -> None:
    for key, dtype in _ROLLOUT_DATA_TENSOR_DTYPES.items():
        if key in rollout_data:
            rollout_data[key] = [_cpu_tensor(value, dtype=dtype) for value in rollout_data[key]]

    if "multimodal_train_inputs" in rollout_data:
        rollout_data["multimodal_train_inputs"] = [
            (
                {
                    key: _cpu_tensor(value) if isinstance(value, (np.ndarray, torch.Tensor)) else value
                    for key, value in mm_dict.items()
                }
                if mm_dict is not None
                else None
            )
            for mm_dict in rollout_data["multimodal_train_inputs"]
        ]

    if "rollout_mask_sums" in rollout_data:
        rollout_data["rollout_mask_sums"] = _cpu_tensor(
            rollout_data["rollout_mask_sums"],
            dtype=torch.float32,
        )


# -- slime/ray/rollout.py 757–824 (a RolloutManager method) -------------------------------------------------------

class RolloutManager:
    def __init__(self, args, train_parallel_config):
        self.args, self.train_parallel_config = args, train_parallel_config

    def _split_train_data_by_dp(self, data):
        """Compute the DP/mbs schedule and package each rank's rollout_data
        into a Ray Box. The schedule itself is computed by
        :func:`build_dp_schedule` so it stays unit-testable without Ray/sglang.

        Step split is by rollout id (``samples[i].rollout_id``, falling back
        to ``samples[i].index``); each step holds exactly
        ``args.global_batch_size`` rollouts so the training-step count per
        rollout is fixed at ``rollout_batch_size * n_samples_per_prompt //
        global_batch_size`` regardless of how many training samples each
        rollout produced.
        """
        dp_size = self.train_parallel_config["dp_size"]
        total_lengths = [len(t) for t in data["tokens"]]
        data["total_lengths"] = total_lengths

        partitions, micro_batch_indices, num_microbatches, global_batch_sizes = build_dp_schedule(
            self.args,
            self.train_parallel_config,
            total_lengths,
            global_batch_size=self.args.global_batch_size,
            rollout_indices=data["rollout_ids"],
        )

        # Package per-rank rollout_data
        rollout_data_refs = []
        for r in range(dp_size):
            partition = partitions[r]
            rollout_data = {"partition": partition}
            for key in [
                "tokens",
                "multimodal_train_inputs",
                "response_lengths",
                "rewards",
                "truncated",
                "loss_masks",
                "round_number",
                "sample_indices",
                "rollout_ids",
                "rollout_mask_sums",
                "rollout_log_probs",
                "rollout_top_p_token_ids",
                "rollout_top_p_token_offsets",
                "rollout_routed_experts",
                "source_names",
                "prompt",
                "teacher_log_probs",
            ]:
                if key not in data:
                    continue
                rollout_data[key] = [data[key][j] for j in partition]
            # keys that need to be splited at train side
            for key in ["raw_reward", "total_lengths"]:
                if key not in data:
                    continue
                rollout_data[key] = data[key]
            rollout_data["global_batch_sizes"] = global_batch_sizes
            rollout_data["num_microbatches"] = num_microbatches
            rollout_data["micro_batch_indices"] = micro_batch_indices[r]
            tensorize_rollout_data_for_training(rollout_data)
            transport = getattr(self.args, "rollout_data_transport", "object-store")
            if transport == "nixl":
                rollout_data_refs.append(Box(ray.put(rollout_data, _tensor_transport="nixl")))
            elif transport == "object-store":
                rollout_data_refs.append(Box(ray.put(rollout_data)))
            else:
                raise ValueError(f"Unsupported rollout data transport: {transport!r}")
        return rollout_data_refs


# -- slime/utils/data.py 304–330 ----------------------------------------------------------------------------------

def process_rollout_data(args, rollout_data_ref, dp_rank, dp_size):
    assert len(rollout_data_ref) == dp_size
    rollout_data = ray.get(rollout_data_ref[dp_rank].inner)

    # Keep `partition` in rollout_data: each local sample's position in the
    # flattened rollout batch (== its index in the rollout debug dump's
    # `samples`). It's a small list of ints, only read by the train debug dump /
    # log-prob capture, and ignored by training (the data iterator only fetches
    # requested keys), so there's no need to drop it.
    partition = rollout_data["partition"]
    total_lengths = rollout_data["total_lengths"]

    # save the seqlen of the whole rollout batch
    Timer().seq_lens = total_lengths
    rollout_data["total_lengths"] = [total_lengths[i] for i in partition]

    # `raw_reward` is shipped whole on purpose: log_passrate reshapes it into
    # [rollout_batch_size, n_samples_per_prompt] groups, which only works on the
    # full rollout batch. Metrics that pair a reward with this rank's per-sample
    # lists (response_lengths, loss_masks, log_probs, ...) need the DP-local
    # view instead, otherwise sample i's reward is matched against another
    # sample's data.
    if "raw_reward" in rollout_data:
        rollout_data["local_raw_reward"] = [rollout_data["raw_reward"][i] for i in partition]

    return rollout_data



# -- slime/observability/train_data_utils.py 11–242 ----------------------------------------------------------------

_CONTEXT_PARALLEL_FIELDS = (
    "rollout_log_probs",
    "teacher_log_probs",
    "log_probs",
    "ref_log_probs",
    "values",
    "advantages",
    "returns",
    "kl",
    "entropy",
    "opd_reverse_kl",
)


def _to_cpu(value):
    if torch.is_tensor(value):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_to_cpu(item) for item in value)
    return value


@torch.no_grad()
def restore_context_parallel_fields_to_cpu(
    rollout_data: dict[str, Any],
    gather_tensor: Callable[[torch.Tensor, int, int], torch.Tensor],
    *,
    keep_restored: bool,
) -> dict[str, Any] | None:
    """Restore CP fields one tensor at a time, retaining CPU values only on the writer."""
    total_lengths = rollout_data["total_lengths"]
    response_lengths = rollout_data["response_lengths"]
    num_samples = len(response_lengths)
    if len(total_lengths) != num_samples:
        raise ValueError(
            "total_lengths and response_lengths must contain the same number of samples, "
            f"got {len(total_lengths)} and {num_samples}."
        )

    restored = (
        {key: _to_cpu(value) for key, value in rollout_data.items() if key not in _CONTEXT_PARALLEL_FIELDS}
        if keep_restored
        else None
    )
    for key in _CONTEXT_PARALLEL_FIELDS:
        values = rollout_data.get(key)
        if values is None:
            continue
        if not isinstance(values, (list, tuple)) or len(values) != num_samples:
            value_count = len(values) if isinstance(values, (list, tuple)) else "not a list or tuple"
            raise ValueError(
                f"CP-sharded field {key!r} must contain one tensor per sample, "
                f"got {value_count}; expected {num_samples}."
            )

        full_values = [] if keep_restored else None
        for sample_id, (value, total_length, response_length) in enumerate(
            zip(values, total_lengths, response_lengths, strict=True)
        ):
            if not torch.is_tensor(value):
                raise TypeError(
                    f"CP-sharded field {key!r} sample {sample_id} must be a tensor, got {type(value).__name__}."
                )
            full_value = gather_tensor(value, int(total_length), int(response_length)).detach()
            if full_value.size(0) != response_length:
                raise ValueError(
                    f"Restored field {key!r} sample {sample_id} has length {full_value.size(0)}, "
                    f"expected {response_length}."
                )
            if keep_restored:
                assert full_values is not None
                full_values.append(full_value.detach().cpu())
            # Drop the full GPU tensor before the next collective allocates its
            # output, keeping peak extra device memory to one response tensor.
            del full_value
        if keep_restored:
            assert restored is not None
            restored[key] = full_values

    return restored


# Per-rank scheduling arrangement (not per-sample); stored under `dp_shards` so
# the flat `samples` view can stay aligned with the rollout debug dump.
_LAYOUT_FIELDS = ("micro_batch_indices", "num_microbatches", "global_batch_sizes")
# Whole-batch fields that are identical on every DP shard; stored once at the top.
_WHOLE_BATCH_FIELDS = ("raw_reward",)


def _is_per_sample(value, num_samples: int) -> bool:
    if torch.is_tensor(value):
        return value.dim() >= 1 and value.size(0) == num_samples
    if isinstance(value, (list, tuple)):
        return len(value) == num_samples
    return False


def _build_dump_payload(dp_shards, *, rollout_id, writer_rank):
    """Turn the gathered per-rank shards into a rollout-dump-aligned payload.

    Mirrors the rollout debug dump: a ``samples`` list (one dict per training
    sample, sorted so it lines up with the rollout dump's ``samples``), plus a
    parallel ``dp_shards`` key that keeps the DP/mbs layout (``sample_indices``,
    ``partition`` + ``micro_batch_indices`` / ``num_microbatches`` /
    ``global_batch_sizes``) without duplicating any per-sample tensor.

    Ordering key preference: ``partition`` (each sample's index in the rollout
    debug dump, always available when dumping) restores exact rollout order
    regardless of ``sample.index``; ``sample_indices`` (``sample.index``, may be
    ``None``) is the fallback; failing both, DP-gather order is kept.
    """
    samples = []
    layout = []
    whole_batch = {}
    # Per-sample id columns handled specially: pulled out of the generic
    # transpose and surfaced as scalar keys on each sample dict.
    id_columns = {"sample_indices": "sample_index", "partition": "rollout_position"}
    for shard in dp_shards:
        rollout_data = shard["rollout_data"]
        dp_rank = shard["data_parallel_rank"]
        num_local = len(rollout_data["response_lengths"])

        shard_layout = {"rank": shard["rank"], "data_parallel_rank": dp_rank}
        for column in id_columns:
            value = rollout_data.get(column)
            shard_layout[column] = list(value) if value is not None else None
        per_sample_columns = {}
        for key, value in rollout_data.items():
            if key in id_columns:
                continue
            if key in _WHOLE_BATCH_FIELDS:
                whole_batch.setdefault(key, value)
            elif key in _LAYOUT_FIELDS or not _is_per_sample(value, num_local):
                # Scheduling / non-per-sample fields stay in the layout so the
                # flat sample view holds only what pairs with a single sample.
                shard_layout[key] = value
            else:
                per_sample_columns[key] = value

        for i in range(num_local):
            sample = {"data_parallel_rank": dp_rank}
            for column, scalar_key in id_columns.items():
                values = rollout_data.get(column)
                if values is not None:
                    sample[scalar_key] = values[i]
            for key, column in per_sample_columns.items():
                sample[key] = column[i]
            samples.append(sample)
        layout.append(shard_layout)

    order_key = next(
        (
            scalar_key
            for scalar_key in ("rollout_position", "sample_index")
            if samples and all(sample.get(scalar_key) is not None for sample in samples)
        ),
        None,
    )
    if order_key is not None:
        samples.sort(key=lambda sample: sample[order_key])
    else:
        logger.warning(
            "Cannot restore global sample order for the train debug dump: samples carry neither "
            "partition nor sample_index. Saving samples in DP-gather order instead."
        )

    return {
        "format_version": 2,
        "rollout_id": rollout_id,
        "rank": writer_rank,
        "samples": samples,
        "dp_shards": layout,
        **whole_batch,
    }


def save_debug_train_data(args, *, rollout_id, rollout_data):
    path_template = args.save_debug_train_data
    if path_template is None:
        return

    from megatron.core import mpu

    # The last PP stage owns the computed train fields. TP ranks hold the same
    # token values after TP reduction, so only TP0 needs to participate below.
    if not mpu.is_pipeline_last_stage(ignore_virtual=True) or mpu.get_tensor_model_parallel_rank() != 0:
        return

    from slime.backends.megatron_utils.cp_utils import all_gather_with_cp

    # All CP ranks in the selected PP/TP group must enter these collectives.
    # CP=1 follows the same normalization path but all_gather_with_cp is an identity.
    cp_rank = mpu.get_context_parallel_rank()
    rollout_data = restore_context_parallel_fields_to_cpu(
        rollout_data,
        all_gather_with_cp,
        keep_restored=cp_rank == 0,
    )
    if cp_rank != 0:
        return
    assert rollout_data is not None

    rank = torch.distributed.get_rank()
    local_shard = {
        "rank": rank,
        "data_parallel_rank": mpu.get_data_parallel_rank(with_context_parallel=False),
        "rollout_data": rollout_data,
    }
    dp_size = mpu.get_data_parallel_world_size(with_context_parallel=False)
    dp_src_rank = mpu.get_data_parallel_src_rank(with_context_parallel=False)
    if dp_size == 1:
        dp_shards = [local_shard]
    else:
        dp_shards = [None] * dp_size if rank == dp_src_rank else None
        torch.distributed.gather_object(
            local_shard,
            dp_shards,
            dst=dp_src_rank,
            group=mpu.get_data_parallel_group_gloo(with_context_parallel=False),
        )

    if rank != dp_src_rank:
        return

    path = Path(path_template.format(rollout_id=rollout_id, rank=rank))
    logger.info(f"Save debug train data from {dp_size} DP shard(s) to {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(_build_dump_payload(dp_shards, rollout_id=rollout_id, writer_rank=rank), path)


# -- the harness: slime's batch layout, every rank of a (DP, TP, PP) layout calling the writer --------------------

import contextlib  # noqa: E402 — the harness's own imports, after the verbatim copies
import copy  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402
from unittest import mock  # noqa: E402

PROMPT = 3


def train_data(batch, n_samples_per_prompt):
    """slime's train_data of a toy Batch (rollout.py 657–697): GRPO rewards (each raw reward minus its prompt
    group's mean) beside the raw ones, one rollout id per sample."""
    raw = [float(reward) for reward in batch.rewards]
    groups = np.asarray(raw).reshape(-1, n_samples_per_prompt)
    rewards = (groups - groups.mean(axis=1, keepdims=True)).reshape(-1).tolist()
    lengths = [len(mu) for mu in batch.sampler]
    return {"tokens": [list(range(7, 7 + PROMPT + n)) for n in lengths], "response_lengths": lengths,
            "rewards": rewards, "raw_reward": raw, "truncated": [0] * len(raw),
            "sample_indices": list(range(len(raw))), "rollout_ids": list(range(len(raw))),
            "loss_masks": [[1] * n for n in lengths], "rollout_mask_sums": lengths,
            "rollout_log_probs": [list(mu) for mu in batch.sampler]}


def _place(rank, dp, tp, pp):
    """(tp rank, dp rank, pp rank) of a global rank in Megatron's default order (tensor fastest, then data, then
    pipeline; context parallelism 1)."""
    return rank % tp, rank // tp % dp, rank // (tp * dp)


class _Parallel:
    """Megatron's mpu and torch.distributed for one rank of a (dp, tp, pp) layout; ``mailbox`` holds the shards
    gathered so far in each data-parallel group."""

    def __init__(self, rank, dp, tp, pp, mailbox):
        self.rank, self.dp, self.tp, self.pp, self.mailbox = rank, dp, tp, pp, mailbox
        self.tp_rank, self.dp_rank, self.pp_rank = _place(rank, dp, tp, pp)

    def is_pipeline_last_stage(self, ignore_virtual=False):
        return self.pp_rank == self.pp - 1

    def get_tensor_model_parallel_rank(self):
        return self.tp_rank

    def get_context_parallel_rank(self):
        return 0

    def get_data_parallel_rank(self, with_context_parallel=False):
        return self.dp_rank

    def get_data_parallel_world_size(self, with_context_parallel=False):
        return self.dp

    def get_data_parallel_src_rank(self, with_context_parallel=False):
        return self.tp_rank + self.tp * self.dp * self.pp_rank

    def get_data_parallel_group_gloo(self, with_context_parallel=False):
        return (self.tp_rank, self.pp_rank)

    def get_rank(self):
        return self.rank

    def gather_object(self, obj, object_gather_list, dst, group):
        self.mailbox.setdefault(group, []).append(obj)
        if object_gather_list is not None:
            for shard in self.mailbox.pop(group):
                object_gather_list[shard["data_parallel_rank"]] = shard


@contextlib.contextmanager
def _as_rank(parallel):
    """slime's imports inside save_debug_train_data (megatron.core.mpu, all_gather_with_cp) and torch.distributed's
    calls answered for one rank."""
    megatron, core = types.ModuleType("megatron"), types.ModuleType("megatron.core")
    core.mpu, megatron.core = parallel, core
    cp_utils = types.ModuleType("slime.backends.megatron_utils.cp_utils")
    cp_utils.all_gather_with_cp = lambda tensor, total_length, response_length: tensor
    modules = {"megatron": megatron, "megatron.core": core, "slime": types.ModuleType("slime"),
               "slime.backends": types.ModuleType("slime.backends"),
               "slime.backends.megatron_utils": types.ModuleType("slime.backends.megatron_utils"),
               "slime.backends.megatron_utils.cp_utils": cp_utils}
    with mock.patch.dict(sys.modules, modules), mock.patch.object(torch.distributed, "get_rank", parallel.get_rank), \
            mock.patch.object(torch.distributed, "gather_object", parallel.gather_object):
        yield


def write_rollout(dump_details, rollout_id, batch, dp=1, tp=1, pp=1, n_samples_per_prompt=2, log_dtype=None):
    """{dump_details}/train_data/{rollout_id}.pt as slime writes it with ``dp × tp × pp`` ranks; the path.
    ``log_dtype`` (default float32) is the dtype of the trainer's log-probs."""
    args = SimpleNamespace(micro_batch_size=1, use_dynamic_batch_size=False, max_tokens_per_gpu=None,
                           balance_by_flops=False, balance_data=False, global_batch_size=len(batch.sampler),
                           save_debug_train_data=f"{dump_details}/train_data/{{rollout_id}}.pt")
    config = {"dp_size": dp, "cp_size": 1, "vpp_size": 1, "microbatch_group_size_per_vp_stage": 1}
    refs = RolloutManager(args, config)._split_train_data_by_dp(train_data(batch, n_samples_per_prompt))
    mailbox, ranks = {}, range(dp * tp * pp)
    for rank in sorted(ranks, key=lambda rank: (_place(rank, dp, tp, pp)[1] == 0, rank)):   # each group's source last
        parallel = _Parallel(rank, dp, tp, pp, mailbox)
        rollout_data = process_rollout_data(args, [copy.deepcopy(ref) for ref in refs], parallel.dp_rank, dp)
        if parallel.is_pipeline_last_stage():                 # compute_log_prob and the advantages: the last stage's
            order = rollout_data["partition"]
            rollout_data["log_probs"] = [torch.tensor(batch.trainer[j], dtype=log_dtype or torch.float32)
                                         for j in order]
            rollout_data["advantages"] = [torch.full((len(batch.trainer[j]),), float(batch.advantages[j]))
                                          for j in order]
        with _as_rank(parallel):
            save_debug_train_data(args, rollout_id=rollout_id, rollout_data=rollout_data)
    return Path(dump_details) / "train_data" / f"{rollout_id}.pt"


def seen(batch, log_dtype=None):
    """The batch as the dump holds it: the sampler's log-probs in float32 (rollout_data_utils.py 15), the trainer's
    in ``log_dtype`` (float32 by default), both widened to float64."""
    def rounded(rows, dtype):
        return [torch.tensor(row, dtype=dtype).double().tolist() for row in rows]
    return type(batch)(rounded(batch.sampler, torch.float32), rounded(batch.trainer, log_dtype or torch.float32),
                       batch.rewards, batch.advantages)
