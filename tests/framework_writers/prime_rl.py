"""prime-rl's token export, run as its trainer runs it: ``token_exports/step_N/rank_R.jsonl``
(PrimeIntellect-ai/prime-rl at 559b44772e471d1538537b8805cc77f3824a5e64). Needs torch.

Copied verbatim below: ``TokenExporter`` (src/prime_rl/trainer/rl/token_export.py 28–113) and its helpers
``_export_columns`` … ``_first_non_empty`` (128–260), ``compute_importance_ratio_and_mismatch_kl`` and
``shift_tensor_right`` (src/prime_rl/trainer/rl/loss.py 100–106, 76–91), ``pad_micro_batch`` and ``STREAM_FILL``
(src/prime_rl/trainer/batch.py 691–737, 14). ``DefaultLossConfig`` (packages/prime-rl-configs/src/prime_rl/configs/
trainer.py 494–500) is a plain class with its two fields and defaults here (it is a pydantic model there).

Stubbed: the model's forward pass (it needs a GPU): ``model_output`` holds the toy's own log π of each next token
and the entropy of π at that position, in the "predict next token" convention, then realigned with
``shift_tensor_right`` as train.py 452–457 does (pad log(1/V) and log V). The batch is prime-rl's: each sample's
``prepare_sample`` fields (batch.py 345–459: prompt and completion tokens, the loss mask false on the prompt, the
rollout's advantage on every token, the sampler's log-probs 0 on the prompt), samples packed into micro-batches of
``SEQ_LEN`` tokens (batch.py 540–606 concatenates their fields and their ``sequence_lengths``), each padded by
``pad_micro_batch`` and turned into tensors as ``_micro_batch_to_tensor`` does (rl/data.py 207–255: float32
log-probs and advantages, a bool loss mask, each with a batch dimension of 1). Each data-parallel rank runs its own
``TokenExporter`` over its micro-batches, step after step.
"""

import atexit
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor

SCHEMA_VERSION = 1
STREAM_FILL = {"rl_weights": 1.0, "ce_weights": 0.0, "ref_kl_weights": 0.0}


class DefaultLossConfig:
    dppo_mask_low: float = 0.2
    dppo_mask_high: float = 0.2


# -- src/prime_rl/trainer/rl/loss.py --------------------------------------------------------------------------------

def shift_tensor_right(t, pad_value: float | None = None):
    """Shifts the tensor one token to the right, prepending a padding value.

    Used to realign logprobs/entropy after computing with shifted labels.
    After shift: result[i] = t[i-1], result[0] = pad_value.
    This converts from "predict next token" convention to "probability of current token" convention.

    Args:
        t: Tensor to shift right
        pad_value: Value to use for position 0. If None, uses 0.0 for backward compatibility.
                   For logprobs, should be log(1/vocab_size) to represent uniform distribution.
                   For entropy, should be log(vocab_size) to represent maximum entropy.
    """
    if pad_value is None:
        pad_value = 0.0
    return torch.cat([torch.full((t.shape[0], 1), pad_value, device=t.device, dtype=t.dtype), t[:, :-1]], dim=1)


def compute_importance_ratio_and_mismatch_kl(
    trainer_logprobs: Tensor, inference_logprobs: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    log_importance_ratio = trainer_logprobs - inference_logprobs
    importance_ratio = torch.exp(log_importance_ratio)
    mismatch_kl = importance_ratio - log_importance_ratio - 1
    return log_importance_ratio, importance_ratio, mismatch_kl


# -- src/prime_rl/trainer/batch.py -------------------------------------------------------------------------------

def _pad_routed_experts(micro_batch, padding_size):
    raise AssertionError("a text batch has no routed experts")



def pad_micro_batch(micro_batch, pad_to_multiple_of: int):
    """
    Pad a micro batch with the given padding size sample
    Return the padded micro batch.
    Args:
        micro_batch: The micro batch to pad.
        padding_size: The number of padding tokens to add.
    Returns:
        The padded micro batch.
    """

    padding_size = (pad_to_multiple_of - (len(micro_batch.input_ids) % pad_to_multiple_of)) % pad_to_multiple_of

    if len(micro_batch.env_names) != len(micro_batch.input_ids):
        raise ValueError(
            f"MicroBatch.env_names must match input_ids length before padding: "
            f"env_names={len(micro_batch.env_names)}, input_ids={len(micro_batch.input_ids)}"
        )

    if not (pad_to_multiple_of > 1 and padding_size > 0):
        return micro_batch

    micro_batch.input_ids.extend([1] * padding_size)
    micro_batch.advantages.extend([0.0] * padding_size)
    micro_batch.loss_mask.extend([False] * padding_size)
    micro_batch.position_ids.extend(list(range(padding_size)))
    micro_batch.sequence_lengths[-1] += padding_size
    micro_batch.seq_lens[-1] += padding_size
    micro_batch.inference_logprobs.extend([0.0] * padding_size)
    # Use temperature 1.0 for padding tokens (doesn't matter since loss_mask is False)
    micro_batch.temperatures.extend([1.0] * padding_size)
    if micro_batch.ref_logprobs is not None:
        micro_batch.ref_logprobs.extend([0.0] * padding_size)
    # Padding is loss-masked, so no component trains it; fill every stream
    # with 0.0 (not the pack-boundary defaults) so a padded pure-ce batch
    # still reads as rl-empty in token export, which keys off nonzero weights.
    for stream_name in STREAM_FILL:
        stream = getattr(micro_batch, stream_name)
        if stream is not None:
            stream.extend([0.0] * padding_size)
    if micro_batch.mm_token_type_ids is not None:
        micro_batch.mm_token_type_ids.extend([0] * padding_size)
    if micro_batch.routed_experts is not None:
        _pad_routed_experts(micro_batch, padding_size)
    micro_batch.env_names.extend([""] * padding_size)

    return micro_batch


# -- src/prime_rl/trainer/rl/token_export.py -----------------------------------------------------------------------

class TokenExporter:
    def __init__(
        self,
        output_dir: Path,
        rank: int,
    ) -> None:
        self.rank = rank
        self.output_dir = output_dir / "token_exports"
        self._closed = False
        self._initialized_files: set[tuple[int, int]] = set()
        self._sequences_by_file: dict[tuple[int, int], int] = {}
        self._pending_stable_dirs: set[Path] = set()
        atexit.register(self.close)

    def export(
        self,
        step: int,
        micro_step: int,
        micro_batch: Mapping[str, Any],
        model_output: Mapping[str, Tensor],
        sequence_lengths: list[int],
        loss_config: Any,
    ) -> None:
        columns = _export_columns(micro_batch, model_output, loss_config)
        _check_lengths(columns)
        file_key = (step, self.rank)

        start = 0
        for micro_sequence_idx, length in enumerate(sequence_lengths):
            raw_end = start + length
            end = _trim_padding(columns, start, raw_end)
            if end > start and any(columns["loss_mask"][start:end]):
                self._write(
                    {
                        "schema_version": SCHEMA_VERSION,
                        "step": step,
                        "rank": self.rank,
                        "micro_step": micro_step,
                        "micro_sequence_idx": micro_sequence_idx,
                        "export_sequence_idx": self._sequences_by_file.get(file_key, 0),
                        "env_name": _first_non_empty(columns["env_names"][start:end]),
                        **_slice_columns(columns, start, end),
                    },
                    step,
                )
                self._sequences_by_file[file_key] = self._sequences_by_file.get(file_key, 0) + 1
            start = raw_end

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

    def mark_stable(self) -> None:
        # The caller barriers first so a STABLE only lands after every rank flushed.
        while self._pending_stable_dirs:
            stable_dir = self._pending_stable_dirs.pop()
            (stable_dir / "STABLE").touch()

    def _export_dir(self, step: int) -> Path:
        return self.output_dir / f"step_{step}"

    def _export_file(self, step: int) -> Path:
        if self._closed:
            raise RuntimeError(f"Token exporter is closed for {self.output_dir}")

        step_dir = self._export_dir(step)
        try:
            step_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            if not step_dir.is_dir():
                raise
        return step_dir / f"rank_{self.rank}.jsonl"

    def _write(self, record: dict[str, Any], step: int) -> None:
        if self._closed:
            raise RuntimeError(f"Token exporter is closed for {self.output_dir}")

        file_key = (step, self.rank)
        mode = "a" if file_key in self._initialized_files else "w"
        export_file = self._export_file(step)
        with export_file.open(mode, encoding="utf-8") as file:
            file.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        self._initialized_files.add(file_key)
        self._pending_stable_dirs.add(export_file.parent)



def _export_columns(
    micro_batch: Mapping[str, Any], model_output: Mapping[str, Tensor], loss_config: Any
) -> dict[str, list[Any]]:
    token_ids = _tensor_to_ints(micro_batch["input_ids"])
    seq_len = len(token_ids)
    trainer_logprobs = model_output["logprobs"]
    export_tensors = _compute_export_tensors(micro_batch, trainer_logprobs, loss_config)

    return {
        "token_ids": token_ids,
        "position_ids": _tensor_to_ints(micro_batch["position_ids"]),
        "loss_mask": _tensor_to_bools(micro_batch["loss_mask"]),
        "advantages": _tensor_to_floats(micro_batch["advantages"]),
        "inference_logprobs": _tensor_to_floats(micro_batch["inference_logprobs"]),
        "trainer_logprobs": _tensor_to_floats(trainer_logprobs),
        "entropy": _tensor_to_floats(model_output["entropy"]),
        "mismatch_kl": _optional_tensor_to_floats(export_tensors["mismatch_kl"], seq_len),
        "log_importance_ratio": _optional_tensor_to_floats(export_tensors["log_importance_ratio"], seq_len),
        "importance_ratio": _optional_tensor_to_floats(export_tensors["importance_ratio"], seq_len),
        "prob_delta": _optional_tensor_to_floats(export_tensors["prob_delta"], seq_len),
        "is_masked": _optional_tensor_to_bools(export_tensors["is_masked"], seq_len),
        "is_masked_high": _optional_tensor_to_bools(export_tensors["is_masked_high"], seq_len),
        "is_masked_low": _optional_tensor_to_bools(export_tensors["is_masked_low"], seq_len),
        # Component weight streams; ``None`` columns mean the defaults (rl 1.0
        # on the loss mask, no ce/ref_kl component).
        "rl_weights": _optional_tensor_to_floats(micro_batch.get("rl_weights"), seq_len),
        "ce_weights": _optional_tensor_to_floats(micro_batch.get("ce_weights"), seq_len),
        "ref_kl_weights": _optional_tensor_to_floats(micro_batch.get("ref_kl_weights"), seq_len),
        "env_names": list(micro_batch["env_names"]),
    }


def _compute_export_tensors(
    micro_batch: Mapping[str, Any], trainer_logprobs: Tensor, loss_config: Any
) -> dict[str, Tensor | None]:
    fields: dict[str, Tensor | None] = {
        "log_importance_ratio": None,
        "importance_ratio": None,
        "mismatch_kl": None,
        "prob_delta": None,
        "is_masked": None,
        "is_masked_high": None,
        "is_masked_low": None,
    }
    # Ratio-based fields are meaningless when no token has sampling logprobs
    # (e.g. pure CE batches distilling frozen-model tokens): no rl member
    # (stream present but all-zero) and no ref_kl member.
    rl_weights = micro_batch.get("rl_weights")
    ref_kl_weights = micro_batch.get("ref_kl_weights")
    no_rl = rl_weights is not None and not bool((rl_weights != 0).any())
    no_ref_kl = ref_kl_weights is None or not bool((ref_kl_weights != 0).any())
    if no_rl and no_ref_kl:
        return fields

    inference_logprobs = micro_batch["inference_logprobs"].to(trainer_logprobs.device)
    loss_mask = micro_batch["loss_mask"].to(trainer_logprobs.device)
    advantages = micro_batch["advantages"].to(trainer_logprobs.device)
    with torch.no_grad():
        log_ratio, ratio, mismatch_kl = compute_importance_ratio_and_mismatch_kl(trainer_logprobs, inference_logprobs)
        prob_delta = torch.exp(trainer_logprobs) - torch.exp(inference_logprobs)
        fields["log_importance_ratio"] = log_ratio
        fields["importance_ratio"] = ratio
        fields["mismatch_kl"] = mismatch_kl
        fields["prob_delta"] = prob_delta
        if isinstance(loss_config, DefaultLossConfig):
            invalid_high = prob_delta > loss_config.dppo_mask_high
            invalid_low = prob_delta < -loss_config.dppo_mask_low
            positive_advantages = advantages > 0
            negative_advantages = advantages < 0
            invalid = torch.where(positive_advantages, invalid_high, invalid_low)
            fields["is_masked"] = loss_mask & invalid
            fields["is_masked_high"] = loss_mask & positive_advantages & invalid_high
            fields["is_masked_low"] = loss_mask & negative_advantages & invalid_low
    return fields


def _tensor_to_ints(tensor: Tensor) -> list[int]:
    return [int(value) for value in tensor.detach().cpu().reshape(-1).tolist()]


def _tensor_to_bools(tensor: Tensor) -> list[bool]:
    return [bool(value) for value in tensor.detach().cpu().reshape(-1).tolist()]


def _tensor_to_floats(tensor: Tensor) -> list[float | None]:
    values = tensor.detach().to(dtype=torch.float32, device="cpu").reshape(-1).tolist()
    return [_json_float(value) for value in values]


def _optional_tensor_to_floats(tensor: Tensor | None, seq_len: int) -> list[float | None]:
    if tensor is None:
        return [None] * seq_len
    return _tensor_to_floats(tensor)


def _optional_tensor_to_bools(tensor: Tensor | None, seq_len: int) -> list[bool | None]:
    if tensor is None:
        return [None] * seq_len
    return _tensor_to_bools(tensor)


def _check_lengths(columns: Mapping[str, Sequence[Any]]) -> None:
    lengths = {key: len(values) for key, values in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"Token export fields must have aligned lengths, got {lengths}")


def _slice_columns(columns: Mapping[str, Sequence[Any]], start: int, end: int) -> dict[str, list[Any]]:
    return {key: list(values[start:end]) for key, values in columns.items() if key != "env_names"}


def _trim_padding(columns: Mapping[str, Sequence[Any]], start: int, end: int) -> int:
    env_names = columns["env_names"]
    loss_mask = columns["loss_mask"]
    while end > start and env_names[end - 1] == "" and not loss_mask[end - 1]:
        end -= 1
    return end


def _json_float(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return value


def _first_non_empty(values: Sequence[str]) -> str | None:
    for value in values:
        if value:
            return value
    return None


# -- the harness: prime-rl's batch layout, fed to the exporter above --------------------------------------------

PROMPT = 3
SEQ_LEN = 64                        # tokens per micro-batch (config.model.seq_len)
PAD_TO = 8                          # pad_to_multiple_of
ENV = "math"


def _sample(mu, pi, entropy, advantage, rng, vocabulary):
    """One sample's prepare_sample fields, with the trainer's values of each token (log π and the entropy at it)."""
    n = PROMPT + len(mu)
    return SimpleNamespace(
        input_ids=rng.integers(0, vocabulary, n).tolist(), loss_mask=[False] * PROMPT + [True] * len(mu),
        advantages=[float(advantage)] * n, position_ids=list(range(n)), inference_logprobs=[0.0] * PROMPT + list(mu),
        temperatures=[1.0] * n, env_names=[ENV] * n, trainer=rng.uniform(-8, -0.1, PROMPT).tolist() + list(pi),
        entropy=rng.uniform(0.1, 1.3, PROMPT).tolist() + list(entropy))


def _packed(samples):
    """Samples concatenated into one micro-batch, each field in turn (batch.py 540–606), then padded."""
    fields = ("input_ids", "loss_mask", "advantages", "position_ids", "inference_logprobs", "temperatures",
              "env_names", "trainer", "entropy")
    micro_batch = SimpleNamespace(**{name: [value for sample in samples for value in getattr(sample, name)]
                                     for name in fields},
                                  sequence_lengths=[len(sample.input_ids) for sample in samples],
                                  seq_lens=[len(sample.input_ids) for sample in samples], ref_logprobs=None,
                                  rl_weights=None, ce_weights=None, ref_kl_weights=None, mm_token_type_ids=None,
                                  routed_experts=None)
    trainer, entropy = micro_batch.trainer, micro_batch.entropy
    micro_batch = pad_micro_batch(micro_batch, PAD_TO)
    padding = len(micro_batch.input_ids) - len(trainer)
    return micro_batch, trainer + [-1.0] * padding, entropy + [1.0] * padding


def _tensors(micro_batch):
    """The micro-batch as _micro_batch_to_tensor turns it into tensors (rl/data.py 207–255)."""
    return {"input_ids": torch.tensor(micro_batch.input_ids, dtype=torch.long).unsqueeze(0),
            "position_ids": torch.tensor(micro_batch.position_ids, dtype=torch.long).unsqueeze(0),
            "advantages": torch.tensor(micro_batch.advantages, dtype=torch.float).unsqueeze(0),
            "inference_logprobs": torch.tensor(micro_batch.inference_logprobs, dtype=torch.float).unsqueeze(0),
            "loss_mask": torch.tensor(micro_batch.loss_mask, dtype=torch.bool).unsqueeze(0),
            "temperatures": torch.tensor(micro_batch.temperatures, dtype=torch.float).unsqueeze(0),
            "env_names": micro_batch.env_names, "sequence_lengths": micro_batch.sequence_lengths,
            "rl_weights": None, "ce_weights": None, "ref_kl_weights": None}


def _model_output(trainer, entropy, vocabulary):
    """The forward pass's log-probs and entropy, "predict next token" (position i about token i + 1), realigned by
    shift_tensor_right as train.py 452–457 does."""
    next_logprobs = torch.tensor(trainer[1:] + [0.0], dtype=torch.float32).unsqueeze(0)
    next_entropy = torch.tensor(entropy[1:] + [0.0], dtype=torch.float32).unsqueeze(0)
    return {"logprobs": shift_tensor_right(next_logprobs, pad_value=torch.log(torch.tensor(1.0 / vocabulary)).item()),
            "entropy": shift_tensor_right(next_entropy, pad_value=torch.log(torch.tensor(float(vocabulary))).item())}


def micro_batches(batch, entropies, seed, vocabulary):
    """A rank's micro-batches: its samples packed first-fit, in order, into SEQ_LEN tokens each."""
    rng = np.random.default_rng(seed)
    samples = [_sample(mu, pi, h, a, rng, vocabulary) for mu, pi, h, a in
               zip(batch.sampler, batch.trainer, entropies, batch.advantages, strict=True)]
    bins, current = [], []
    for sample in samples:
        if current and sum(len(s.input_ids) for s in current) + len(sample.input_ids) > SEQ_LEN:
            bins.append(current)
            current = []
        current.append(sample)
    return [_packed(group) for group in [*bins, current]]


def export_run(output_dir, steps, vocabulary):
    """output_dir/token_exports/step_N/rank_R.jsonl for ``steps`` {step: {rank: (Batch, entropies)}}: one
    TokenExporter per rank, each exporting its micro-batches step after step, STABLE marked after each step."""
    exporters = {}
    for step in sorted(steps):
        for rank, (batch, entropies) in sorted(steps[step].items()):
            exporter = exporters.setdefault(rank, TokenExporter(Path(output_dir), rank))
            for micro_step, (micro_batch, trainer, entropy) in enumerate(
                    micro_batches(batch, entropies, seed=1000 * step + rank, vocabulary=vocabulary)):
                exporter.export(step, micro_step, _tensors(micro_batch), _model_output(trainer, entropy, vocabulary),
                                micro_batch.sequence_lengths, DefaultLossConfig())
        for exporter in exporters.values():
            exporter.mark_stable()
    return Path(output_dir) / "token_exports"
