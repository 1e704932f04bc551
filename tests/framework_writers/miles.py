"""Miles' train-data dump, run as its trainer runs it: ``{dump_details}/train_data/{rollout_id}_{rank}.pt`` from every
rank, and beside it the rollout dump ``{dump_details}/rollout_data/{rollout_id}.pt`` (radixark/miles at
31f1ca961a94cb860cec3b2dea34ec332bfa8f76). Needs torch.

Copied verbatim below: the writer, miles/utils/train_dump_utils.py 11–44; the data-parallel split a rank's file
holds: ``split_train_data_by_dp_raw``, ``_package_shards`` and ``process_rollout_data_shard``
(miles/ray/rollout/train_data_conversion.py 330–411); the rollout log-probs' dtype (``_rollout_logprob_dtype``,
miles/backends/training_utils/data.py 25–31, and ``get_rollout_data``'s conversions, 50–55 and 93–116, with
``slice_log_prob_with_cp`` and ``get_logits_and_tokens_offset_with_cp``, miles/backends/training_utils/cp_utils.py
411–438 and 19–67); the rollout dump:
``save_debug_rollout_data`` with ``trajectory_rows``, ``save_dashboard_columns`` and
``save_debug_trajectory_data`` (miles/ray/rollout/debug_data.py 12–88, 102–117) and the ``Sample`` it saves
(miles/utils/types.py 9–158).

Stubbed: Ray and the object store (each rank gets its own copy of its shard), ``get_parallel_state`` and
``torch.distributed.get_rank`` (each rank's place in a (DP, TP, PP) layout, Megatron's order: tensor fastest, then
data, then pipeline; context parallelism 1), the GPU (``torch.cuda.current_device`` is the CPU) and the forward
pass: on the last pipeline stage ``log_probs`` are the toy's log π in float32 and ``advantages``/``returns`` the
GRPO advantage on every response token (``forward_only`` and ``compute_advantages_and_returns`` give the earlier
stages neither, model.py 401–405, loss.py 66–69). The batch is Miles' train_data (train_data_conversion.py 73–113:
tokens, response_lengths, rewards, raw_reward, truncated, sample_indices, rollout_ids, loss_masks,
rollout_mask_sums, rollout_log_probs), the samples' ``index`` a counter running across rollouts as the data source
numbers them (miles/rollout/data_source.py 111–115).
"""

import copy
import json
import logging
from argparse import Namespace
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy
import torch

logger = logging.getLogger(__name__)

_PLACE = {}                                        # the rank whose code runs now: its parallel state


def get_parallel_state():
    return _PLACE["state"]


# -- miles/utils/types.py 9–158 --------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdapterRef:
    """Which LoRA adapter a sample is bound to (training slot routing, inference lora_path); ``None`` = no adapter."""

    name: str
    slot: int


@dataclass(frozen=True)
class RewardSpec:
    """Per-sample spec of how the response is scored; intentionally decoupled from adapter routing."""

    rm_type: str | None = None
    custom_rm_path: str | None = None


@dataclass
class Sample:
    """The sample generated"""

    group_index: int | None = None
    index: int | None = None
    # Rollout execution id; None falls back to ``index``. Compact / subagent
    # siblings must share it so the rollout is counted once.
    rollout_id: int | None = None
    # prompt
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] = None  # raw multimodal data, e.g. images, videos, etc.
    multimodal_train_inputs: dict[str, Any] = None  # processed multimodal data, e.g. pixel_values, etc.
    # response
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None  # Log probabilities from rollout engine
    rollout_routed_experts: numpy.ndarray | None = (
        None  # Routed experts from rollout engine. shape: (num_tokens-1, num_layers, moe_router_topk), dtype=int32
    )
    rollout_indexer_topk: numpy.ndarray | None = (
        None  # Indexer topk from rollout engine. shape: (num_tokens-1, num_indexer_layers, index_topk), dtype=int32
    )
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None  # Log probabilities from teacher model for OPD
    opd_reverse_kl: list[float] | None = None  # Precomputed per-token OPD reverse-KL estimate

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        # Indicates a recoverable or non-critical failure during generation (e.g., tool call failure,
        # external API error, parsing error). Unlike ABORTED, FAILED samples may still contain partial
        # valid output and can be retried or handled gracefully.
        FAILED = "failed"

    status: Status = Status.PENDING

    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    # metadata used during training, e.g., what loss to use for this sample.
    train_metadata: dict | None = None

    # MultiLoRA: which adapter this sample trains/infers with
    adapter: AdapterRef | None = None
    # Per-sample reward dispatch override (e.g., per-adapter RM in multi-LoRA)
    reward_spec: RewardSpec | None = None

    # Per-sample routing key for the router's consistent_hashing policy (sent as X-SMG-Routing-Key)
    routing_key: str | None = None

    non_generation_time: float = 0.0  # time spent in non-generation steps

    @dataclass
    class SpecInfo:
        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

        @property
        def spec_accept_rate(self) -> float:
            return self.spec_accept_token_num / self.spec_draft_token_num if self.spec_draft_token_num > 0 else 0.0

        @property
        def spec_accept_length(self) -> float:
            return self.completion_token_num / self.spec_verify_ct if self.spec_verify_ct > 0 else 0.0

        def add(self, meta_info: dict):
            self.spec_accept_token_num += meta_info.get("spec_accept_token_num", 0)
            self.spec_draft_token_num += meta_info.get("spec_draft_token_num", 0)
            self.spec_verify_ct += meta_info.get("spec_verify_ct", 0)
            self.completion_token_num += meta_info.get("completion_tokens", 0)

        def to_dict(self):
            return {
                "spec_accept_token_num": self.spec_accept_token_num,
                "spec_draft_token_num": self.spec_draft_token_num,
                "spec_verify_ct": self.spec_verify_ct,
                "completion_token_num": self.completion_token_num,
            }

        @staticmethod
        def from_dict(data: dict):
            info = Sample.SpecInfo()
            info.spec_accept_token_num = data.get("spec_accept_token_num", 0)
            info.spec_draft_token_num = data.get("spec_draft_token_num", 0)
            info.spec_verify_ct = data.get("spec_verify_ct", 0)
            info.completion_token_num = data.get("completion_token_num", 0)
            return info

    spec_info: SpecInfo = field(default_factory=SpecInfo)

    @dataclass
    class PrefixCacheInfo:
        cached_tokens: int = 0
        total_prompt_tokens: int = 0

        @property
        def prefix_cache_hit_rate(self) -> float:
            return self.cached_tokens / self.total_prompt_tokens if self.total_prompt_tokens > 0 else 0.0

        def add(self, meta_info: dict):
            self.cached_tokens += meta_info.get("cached_tokens", 0)
            # new_tokens = input_tokens - cached_tokens
            self.total_prompt_tokens += meta_info.get("prompt_tokens", 0)

        def to_dict(self):
            return {
                "cached_tokens": self.cached_tokens,
                "total_prompt_tokens": self.total_prompt_tokens,
            }

        @staticmethod
        def from_dict(data: dict):
            info = Sample.PrefixCacheInfo()
            info.cached_tokens = data.get("cached_tokens", 0)
            info.total_prompt_tokens = data.get("total_prompt_tokens", 0)
            return info

    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def to_dict(self):
        value = self.__dict__.copy()
        value["status"] = self.status.value
        value["spec_info"] = self.spec_info.to_dict()
        value["prefix_cache_info"] = self.prefix_cache_info.to_dict()
        return value


# -- miles/ray/rollout/debug_data.py 12–88 ---------------------------------------------------------------------

def trajectory_rows(samples: list[Sample]) -> list[dict]:
    """One row per sample that recorded a raw conversation
    (``metadata["messages"]``, attached by the session / multi_turn paths)."""
    rows = []
    for sample in samples:
        messages = sample.metadata.get("messages") if sample.metadata else None
        if messages is None:
            continue
        rows.append(
            dict(
                sample_index=sample.index,
                group_index=sample.group_index,
                status=sample.status.value,
                reward=sample.reward if isinstance(sample.reward, (int, float)) else None,
                prompt=sample.prompt,
                messages=messages,
            )
        )
    return rows


_warned_no_polars = False


def save_dashboard_columns(samples: list[Sample], path: Path) -> None:
    """Point-read mirror of the per-token rollout columns (parquet, one row
    per sample) so the dashboard token view never full-loads the .pt."""
    global _warned_no_polars
    try:
        import polars as pl
    except ImportError:
        if not _warned_no_polars:
            logger.warning("polars not installed; skipping dashboard_columns dump (pip install miles[dashboard])")
            _warned_no_polars = True
        return
    schema = dict(
        sample_index=pl.Int32,
        response_length=pl.Int32,
        total_length=pl.Int32,
        tokens=pl.List(pl.Int32),
        loss_mask=pl.List(pl.Int8),
        rollout_log_probs=pl.List(pl.Float32),
    )
    frame = pl.DataFrame(
        [
            dict(
                sample_index=sample.index,
                response_length=sample.response_length,
                total_length=len(sample.tokens),
                tokens=list(sample.tokens),
                loss_mask=sample.loss_mask,
                rollout_log_probs=sample.rollout_log_probs,
            )
            for sample in samples
        ],
        schema=schema,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame.write_parquet(tmp, row_group_size=8)
    tmp.replace(path)


def save_debug_trajectory_data(args, samples: list[Sample], rollout_id, evaluation: bool):
    if (path_template := args.save_debug_trajectory_data) is None:
        return
    rows = trajectory_rows(samples)
    if not rows:
        return  # no conversations: no file (the dashboard keys off its presence)
    path = Path(path_template.format(rollout_id=("eval_" if evaluation else "") + str(rollout_id)))
    logger.info(f"Save trajectory dump to {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    for sample in samples:
        if sample.metadata:
            sample.metadata.pop("messages", None)  # the sidecar is their home; keep the .pt lean


# -- miles/ray/rollout/debug_data.py 102–117 -------------------------------------------------------------------


def save_debug_rollout_data(args, data, rollout_id, evaluation: bool, metadata: dict | None = None) -> None:
    # TODO to be refactored (originally Buffer._set_data)
    if (path_template := args.save_debug_rollout_data) is not None:
        path = Path(path_template.format(rollout_id=("eval_" if evaluation else "") + str(rollout_id)))
        logger.info(f"Save debug rollout data to {path}")
        path.parent.mkdir(parents=True, exist_ok=True)

        samples = [sample for info in data.values() for sample in info["samples"]] if evaluation else list(data)
        save_debug_trajectory_data(args, samples, rollout_id, evaluation)
        stem = ("eval_" if evaluation else "") + str(rollout_id)
        save_dashboard_columns(samples, path.parent.parent / "dashboard_columns" / f"rollout_{stem}.parquet")

        # TODO may improve the format
        dump_data = dict(samples=[sample.to_dict() for sample in samples])
        torch.save(dict(rollout_id=rollout_id, metadata=metadata or {}, **dump_data), path)


# -- miles/ray/rollout/train_data_conversion.py 330–411 --------------------------------------------------------

def split_train_data_by_dp_raw(args, data: dict[str, Any], *, dp_size: int) -> list[dict[str, Any]]:
    """Split the train data by data parallel size."""
    total_lengths = [len(t) for t in data["tokens"]]
    data["total_lengths"] = total_lengths

    if args.balance_data:
        partitions = get_seqlen_balanced_partitions(total_lengths, dp_size, equal_size=True)
    else:
        partitions = [range(i, len(total_lengths), dp_size) for i in range(dp_size)]

    # Multi-LoRA: sort partitions by adapter slot so each microbatch is
    # contiguous-by-slot (required by the per-adapter token-count math).
    adapter_slots = data.get("adapter_slots")
    if adapter_slots is not None:
        partitions = [sorted(p, key=lambda i: adapter_slots[i]) for p in partitions]

    return _package_shards(args, data, partitions)


def _package_shards(args, data: dict[str, Any], partitions) -> list[dict[str, Any]]:
    """Package one rollout_data shard per DP rank from precomputed partitions."""
    shards = []

    for i in range(len(partitions)):
        rollout_data = {}
        partition = partitions[i]
        rollout_data["partition"] = partition
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
            "rollout_routed_experts",
            "rollout_indexer_topk",
            "prompt",
            "teacher_log_probs",
            "opd_reverse_kl",
            "seq_witness_ids",
            "weight_versions",
            "adapter_slots",
        ]:
            if key not in data:
                continue
            val = [data[key][j] for j in partition]
            rollout_data[key] = val
        # keys that need to be splited at train side
        for key in [
            "raw_reward",
            "total_lengths",
            "dynamic_global_batch_size",
            "step_slots",
            "step_adapter_names",
            "step_adapter_batch_sizes",
            "prompt_group_sizes",
        ]:
            if key not in data:
                continue
            rollout_data[key] = data[key]
        if "adapter_slots" in rollout_data:
            rollout_data["n_adapters"] = args.multi_lora_n_adapters
        shards.append(rollout_data)
    return shards


def process_rollout_data_shard(args, rollout_data):
    """Train-side completion of the DP split: drop the ``partition`` key and
    reorder the batch-global ``total_lengths`` into this shard's row order."""
    partition = rollout_data.pop("partition")
    total_lengths = rollout_data["total_lengths"]

    # save the seqlen of the whole rollout batch
    Timer().seq_lens = total_lengths
    rollout_data["total_lengths"] = [total_lengths[i] for i in partition]

    return rollout_data


# -- miles/backends/training_utils/cp_utils.py 19–67 -----------------------------------------------------------

def get_logits_and_tokens_offset_with_cp(
    total_length: int,
    response_length: int,
    qkv_format: str = "thd",
    max_seq_len: int | None = None,
    cp_rank: int | None = None,
    cp_size: int | None = None,
):
    """
    All offsets start from the begining of the prompt.

    ``cp_rank`` / ``cp_size`` default to this process's parallel state; pass them
    explicitly to compute another rank's offsets outside the process group.
    """
    if cp_rank is None or cp_size is None:
        parallel_state = get_parallel_state()
        cp_rank = parallel_state.cp.rank
        cp_size = parallel_state.cp.size
    assert cp_size > 1

    prompt_length = total_length - response_length
    if qkv_format == "thd":
        chunk_size = (total_length + 2 * cp_size - 1) // (2 * cp_size)
    else:
        assert max_seq_len is not None, "max_seq_len must be provided for qkv_format=bshd"
        chunk_size = (max_seq_len + 2 * cp_size - 1) // (2 * cp_size)

    # the offset of 2 chunks
    chunk_0 = (cp_rank * chunk_size, (cp_rank + 1) * chunk_size)
    chunk_1 = ((2 * cp_size - cp_rank - 1) * chunk_size, (2 * cp_size - cp_rank) * chunk_size)

    # the offset of 2 logits, note that the logits need a "-1".
    logits_0 = (max(chunk_0[0], prompt_length - 1), min(chunk_0[1], total_length - 1))
    logits_1 = (max(chunk_1[0], prompt_length - 1), min(chunk_1[1], total_length - 1))

    # when the sequence is empty, make an empty slice to continue the gradient flow.
    if logits_0[0] < logits_0[1]:
        token_0 = (logits_0[0] + 1, logits_0[1] + 1)
    else:
        logits_0 = (0, 0)
        token_0 = (0, 0)

    if logits_1[0] < logits_1[1]:
        token_1 = (logits_1[0] + 1, logits_1[1] + 1)
    else:
        logits_1 = (0, 0)
        token_1 = (0, 0)

    return chunk_size, (chunk_0, chunk_1), (logits_0, logits_1), (token_0, token_1)


# -- miles/backends/training_utils/cp_utils.py 411–438 ---------------------------------------------------------

def slice_log_prob_with_cp(
    log_prob: list[float] | torch.Tensor,
    total_length: int,
    response_length: int,
    qkv_format: str = "thd",
    max_token_len: int | None = None,
) -> list[float] | torch.Tensor:
    assert len(log_prob) == response_length

    parallel_state = get_parallel_state()
    cp_size = parallel_state.cp.size

    if cp_size == 1:
        return log_prob

    prompt_length = total_length - response_length
    _, _, logits_offset, _ = get_logits_and_tokens_offset_with_cp(
        total_length, response_length, qkv_format, max_token_len
    )

    chunk_1 = log_prob[logits_offset[0][0] - (prompt_length - 1) : logits_offset[0][1] - (prompt_length - 1)]
    chunk_2 = log_prob[logits_offset[1][0] - (prompt_length - 1) : logits_offset[1][1] - (prompt_length - 1)]

    if isinstance(log_prob, list):
        return chunk_1 + chunk_2
    else:
        return torch.cat([chunk_1, chunk_2], dim=0)



# -- miles/backends/training_utils/data.py 25–31 ---------------------------------------------------------------

def _rollout_logprob_dtype(args: Namespace) -> torch.dtype:
    if getattr(args, "true_on_policy_mode", False):
        if getattr(args, "bf16", False):
            return torch.bfloat16
        if getattr(args, "fp16", False):
            return torch.float16
    return torch.float32


# -- miles/backends/training_utils/data.py 50–55 and 93–116 (inside get_rollout_data) --------------------------

def get_rollout_data_conversions(args, rollout_data):
    rollout_data["tokens"] = [
        torch.tensor(t, dtype=torch.long, device=torch.cuda.current_device()) for t in rollout_data["tokens"]
    ]
    rollout_data["loss_masks"] = [
        torch.tensor(t, dtype=torch.int, device=torch.cuda.current_device()) for t in rollout_data["loss_masks"]
    ]
    for key in ("rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"):
        if key in rollout_data:
            dtype = _rollout_logprob_dtype(args) if key == "rollout_log_probs" else torch.float32
            rollout_data[key] = [
                torch.as_tensor(
                    slice_log_prob_with_cp(
                        value,
                        total_length,
                        response_length,
                        args.qkv_format,
                        rollout_data["max_seq_lens"][i] if args.qkv_format == "bshd" else None,
                    ),
                    device=torch.cuda.current_device(),
                    dtype=dtype,
                )
                for i, (value, total_length, response_length) in enumerate(
                    zip(
                        rollout_data[key],
                        rollout_data["total_lengths"],
                        rollout_data["response_lengths"],
                        strict=False,
                    )
                )
            ]


# -- miles/utils/train_dump_utils.py 11–44 ---------------------------------------------------------------------

def save_debug_train_data(args, *, rollout_id, rollout_data):
    if args.save_debug_train_data is not None:
        parallel_state = get_parallel_state()
        save_debug_train_data_for_rank(
            args,
            rollout_id=rollout_id,
            rollout_data=rollout_data,
            rank=torch.distributed.get_rank(),
            cp_rank=parallel_state.cp.rank,
            cp_size=parallel_state.cp.size,
        )


def save_debug_train_data_for_rank(args, *, rollout_id, rollout_data, rank, cp_rank=0, cp_size=1):
    """Write one rank's slice of a rollout.

    ``cp_rank`` / ``cp_size`` are passed in for the same reason ``rank`` is:
    this runs outside the process group in tests and offline tools.
    """
    if (path_template := args.save_debug_train_data) is not None:
        path = Path(path_template.format(rollout_id=rollout_id, rank=rank))
        logger.info(f"Save debug train data to {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            dict(
                rollout_id=rollout_id,
                rank=rank,
                rollout_data=rollout_data,
                cp_rank=cp_rank,
                cp_size=cp_size,
                qkv_format=args.qkv_format,
            ),
            path,
        )


# -- the harness: Miles' batch layout, every rank of a (DP, TP, PP, CP) layout calling the writer ----------------

import contextlib  # noqa: E402 — the harness's own imports, after the verbatim copies
from unittest import mock  # noqa: E402

PROMPT = 3


class Timer:
    seq_lens = None


def get_seqlen_balanced_partitions(*args, **kwargs):
    raise AssertionError("balance_data is off in these runs")


def samples_of(batch, rollout_id, n_samples_per_prompt):
    """The rollout's Samples in rollout order: prompt groups of n, ``index`` counting on from earlier rollouts."""
    first = rollout_id * len(batch.sampler)
    return [Sample(group_index=(first + i) // n_samples_per_prompt, index=first + i,
                   tokens=list(range(7, 7 + PROMPT + len(mu))), response="…", response_length=len(mu),
                   reward=float(reward), loss_mask=[1] * len(mu), rollout_log_probs=list(mu),
                   status=Sample.Status.COMPLETED)
            for i, (mu, reward) in enumerate(zip(batch.sampler, batch.rewards, strict=True))]


def train_data(samples, n_samples_per_prompt):
    """Miles' train_data of the Samples (train_data_conversion.py 73–113): GRPO rewards (each raw reward minus its
    group's mean) beside the raw ones."""
    raw = [sample.reward for sample in samples]
    groups = numpy.asarray(raw).reshape(-1, n_samples_per_prompt)
    rewards = (groups - groups.mean(axis=1, keepdims=True)).reshape(-1).tolist()
    return {"tokens": [sample.tokens for sample in samples],
            "response_lengths": [sample.response_length for sample in samples], "rewards": rewards,
            "raw_reward": raw, "truncated": [0] * len(samples), "sample_indices": [sample.index for sample in samples],
            "rollout_ids": [sample.index for sample in samples], "loss_masks": [sample.loss_mask for sample in samples],
            "rollout_mask_sums": [sum(sample.loss_mask) for sample in samples],
            "rollout_log_probs": [sample.rollout_log_probs for sample in samples]}


def _place(rank, dp, tp, pp, cp):
    """(tp, cp, dp, pp) ranks of a global rank in Megatron's default order tp-cp-dp-pp (tensor fastest)."""
    return rank % tp, rank // tp % cp, rank // (tp * cp) % dp, rank // (tp * cp * dp)


@contextlib.contextmanager
def _as_rank(rank, dp, tp, pp, cp):
    tp_rank, cp_rank, dp_rank, pp_rank = _place(rank, dp, tp, pp, cp)
    _PLACE["state"] = SimpleNamespace(cp=SimpleNamespace(rank=cp_rank, size=cp), tp=SimpleNamespace(size=tp),
                                      effective_dp=SimpleNamespace(rank=dp_rank, size=dp),
                                      is_pp_last_stage=pp_rank == pp - 1)
    with mock.patch.object(torch.distributed, "get_rank", lambda: rank), \
            mock.patch.object(torch.cuda, "current_device", lambda: "cpu"):
        yield _PLACE["state"]


def _trainer_fields(rollout_data, by_index, advantages, log_dtype):
    """What the last stage's forward pass and compute_advantages_and_returns add: each sample's log π (this
    context-parallel rank's slice of it) and its advantage and return on every token of the slice."""
    lengths = zip(rollout_data["total_lengths"], rollout_data["response_lengths"], strict=True)
    log_probs, advantage = [], []
    for index, (total, response) in zip(rollout_data["sample_indices"], lengths, strict=True):
        log_probs.append(torch.as_tensor(slice_log_prob_with_cp(by_index[index], total, response),
                                         dtype=log_dtype or torch.float32))
        advantage.append(torch.full((len(log_probs[-1]),), float(advantages[index])))
    rollout_data.update(log_probs=log_probs, advantages=advantage, returns=[value.clone() for value in advantage])


def write_rollout(dump_details, rollout_id, batch, dp=1, tp=1, pp=1, cp=1, n_samples_per_prompt=2,
                  rollout_dtype=None, log_dtype=None, conversations=False):
    """The rollout dump and every rank's train dump of one rollout (module docstring); the train dumps' paths.
    ``rollout_dtype``: "bf16" or "fp16" runs Miles with ``--true-on-policy-mode`` and that flag (the sampler's
    log-probs kept in that dtype); ``log_dtype`` the trainer's log-probs' dtype (float32 by default);
    ``conversations``: the samples carry their messages (the session and multi-turn paths), which Miles writes to
    ``{dump_details}/trajectory/{rollout_id}.jsonl`` (arguments.py 3186)."""
    args = Namespace(save_debug_rollout_data=f"{dump_details}/rollout_data/{{rollout_id}}.pt",
                     save_debug_train_data=f"{dump_details}/train_data/{{rollout_id}}_{{rank}}.pt",
                     save_debug_trajectory_data=f"{dump_details}/trajectory/{{rollout_id}}.jsonl",
                     balance_data=False, qkv_format="thd",
                     true_on_policy_mode=rollout_dtype is not None, bf16=rollout_dtype == "bf16",
                     fp16=rollout_dtype == "fp16")
    samples = samples_of(batch, rollout_id, n_samples_per_prompt)
    for sample in samples if conversations else ():
        sample.metadata["messages"] = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]
    save_debug_rollout_data(args, samples, rollout_id, evaluation=False)
    shards = split_train_data_by_dp_raw(args, train_data(samples, n_samples_per_prompt), dp_size=dp)
    by_index = {sample.index: trainer for sample, trainer in zip(samples, batch.trainer, strict=True)}
    advantages = {sample.index: a for sample, a in zip(samples, batch.advantages, strict=True)}
    paths = []
    for rank in range(dp * tp * pp * cp):
        with _as_rank(rank, dp, tp, pp, cp) as state:
            rollout_data = process_rollout_data_shard(args, copy.deepcopy(shards[state.effective_dp.rank]))
            get_rollout_data_conversions(args, rollout_data)
            if state.is_pp_last_stage:
                _trainer_fields(rollout_data, by_index, advantages, log_dtype)
            save_debug_train_data(args, rollout_id=rollout_id, rollout_data=rollout_data)
        paths.append(Path(dump_details) / "train_data" / f"{rollout_id}_{rank}.pt")
    return paths


def seen(batch, rollout_dtype=None, log_dtype=None):
    """The batch as the dumps hold it: each log-prob in its dtype, widened to float64."""
    dtypes = {None: torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    def rounded(rows, dtype):
        return [torch.tensor(row, dtype=dtype).double().tolist() for row in rows]
    return type(batch)(rounded(batch.sampler, dtypes[rollout_dtype]), rounded(batch.trainer, log_dtype or torch.float32),
                       batch.rewards, batch.advantages)
