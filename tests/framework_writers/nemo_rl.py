"""NeMo-RL's dump writer, run as its GRPO loop runs it: ``train_data_step{N}.jsonl`` every step and
``val_data_step{N}.jsonl`` at each validation (NVIDIA-NeMo/RL at 7ea279abfbeb698b092856d0dab61e7cf39bc909).

Copied verbatim below: ``Logger.log_batched_dict_as_jsonl`` (nemo_rl/utils/logger.py 1071–1097), the parts of
``BatchedDataDict`` it calls (nemo_rl/distributed/batched_data_dict.py: ``__init__`` 134–139, ``slice`` 885–906,
``make_microbatch_iterator`` 1006–1016, ``size`` 1018–1027, ``SlicedDataDict`` 1067–1074), grpo.py's logging block
(nemo_rl/algorithms/grpo.py 3629–3653, inside ``grpo_train``) and ``validate()``'s (4014–4021).

Nothing is stubbed that reaches the file: every value grpo.py hands the writer is already a list (``.tolist()`` on
each tensor), so no tensor exists by then and ``torch.Tensor`` below is a type nothing is an instance of (torch is
not needed). The batch is NeMo's: right-padded (B, L) arrays of prompt then response tokens, float32 like NeMo's
tensors (numpy's ``tolist`` of a float32 array gives the same Python floats as torch's), ``generation_logprobs``
0 on the prompt (``add_grpo_token_loss_masks_and_generation_logprobs``), ``prev_logprobs`` the trainer's log-prob
of every token after the first (its prompt tokens too) and 0 past the sequence (``get_logprobs``' post-attention
mask), ``token_mask`` 1 on response tokens (int64, ``ones_like(token_ids)``), ``sample_mask`` the loss multiplier.
"""

import json
import os
from collections import UserDict
from types import SimpleNamespace
from typing import Any

import numpy as np

torch = SimpleNamespace(Tensor=type("Tensor", (), {}), is_tensor=lambda value: False)


class PackedTensor:
    """Stands for nemo_rl.data.multimodal_utils.PackedTensor: a text batch holds none."""


# -- nemo_rl/distributed/batched_data_dict.py ------------------------------------------------------------------

class BatchedDataDict(UserDict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

        self.micro_batch_indices = None
        self.micro_batch_lengths = None
        self.elem_counts_per_gb = None

    def slice(self, start: int, end: int) -> "SlicedDataDict":
        """Slices the batch from start to end.

        Args:
            start: Starting index (inclusive)
            end: Ending index (exclusive)

        Returns:
            BatchedDataDict: A new BatchedDataDict containing the sliced data
        """
        sliced_batch = SlicedDataDict()
        for k in self.data:
            if isinstance(self.data[k], PackedTensor):
                sliced_batch[k] = self.data[k].slice(list(range(start, end)))
                continue

            if isinstance(self.data[k], torch.Tensor):
                assert end <= self.data[k].shape[0], (
                    f"end: {end} is greater than the shape of the tensor: {self.data[k].shape[0]} for key: {k}"
                )
            sliced_batch[k] = self.data[k][start:end]
        return sliced_batch

    def make_microbatch_iterator(
        self, microbatch_size: int
    ):
        """Make an iterator over the batch that yields microbatches of size microbatch_size."""
        bsize = self.size
        assert bsize % microbatch_size == 0, (
            f"Data dict size ({bsize}) is not a multiple of the provided microbatch size ({microbatch_size})"
        )
        for i in range(0, bsize, microbatch_size):
            yield self.slice(i, i + microbatch_size)

    @property
    def size(self) -> int:
        """Get the batch size of the batch."""
        # Get the first key and use its size as the batch size
        # This assumes all keys have the same batch size
        if not self.data:
            return 0
        key = next(iter(self.data))
        if not torch.is_tensor(self.data[key]):
            return len(self.data[key])
        return self.data[key].shape[0]  # type: ignore # it's a tensor here


class SlicedDataDict(BatchedDataDict):
    """A specialized subclass of BatchedDataDict that represents a slice or shard of a larger batch.

    This class provides a distinct type to differentiate between full batches and sliced/sharded batches, which can be helpful for
    type checking.
    """

    pass


# -- nemo_rl/utils/logger.py ---------------------------------------------------------------------------------------

class Logger:
    def __init__(self, log_dir):
        self.base_log_dir = log_dir                        # Logger.__init__ (logger.py 982), without its backends

    def log_batched_dict_as_jsonl(
        self, to_log: BatchedDataDict[Any] | dict[str, Any], filename: str
    ) -> None:
        """Log a list of dictionaries to a JSONL file.

        Args:
            to_log: BatchedDataDict to log
            filename: Filename to log to (within the log directory)
        """
        if not isinstance(to_log, BatchedDataDict):
            to_log = BatchedDataDict(to_log)

        # Create full path within log directory
        filepath = os.path.join(self.base_log_dir, filename)
        os.makedirs(os.path.dirname(filepath), exist_ok=True)

        # Write to JSONL file
        with open(filepath, "w") as f:
            for i, sample in enumerate(to_log.make_microbatch_iterator(1)):
                for key, value in sample.items():
                    if isinstance(value, torch.Tensor):
                        sample[key] = value.tolist()
                    elif isinstance(value, np.ndarray):
                        sample[key] = value.tolist()
                # default=str is a fallback for non-JSON-serializable types (e.g., datetime, custom objects)
                f.write(json.dumps({**sample, "idx": i}, default=str) + "\n")

        print(f"Logged data to {filepath}")


# -- nemo_rl/algorithms/grpo.py ------------------------------------------------------------------------------------

def _should_log_nemo_gym_responses(master_config) -> bool:
    return False                                           # grpo.py 2173: False unless NeMo Gym logs responses


class _MemoryTracker:
    def snapshot_start_of_stage(self, stage, names):
        pass


memory_tracker = _MemoryTracker()


def grpo_logging_block(master_config, repeated_batch, flat_messages, rewards, input_lengths, train_data, logger,
                       total_steps):
    """grpo.py 3629–3653 (inside grpo_train's step loop), its lines as written, de-indented."""
    # Logging
    # Log training data
    memory_tracker.snapshot_start_of_stage("Logging", dir())
    if not _should_log_nemo_gym_responses(master_config):
        log_data = {}
        if "agent_ref" in repeated_batch:
            log_data["agent_ref"] = repeated_batch["agent_ref"]
        log_data["content"] = flat_messages["content"]
        log_data["rewards"] = rewards.tolist()
        if master_config.grpo.use_dynamic_sampling:
            log_data["filtered_rewards"] = rewards.tolist()
            log_data["rewards"] = repeated_batch["total_reward"].tolist()
        log_data["input_lengths"] = input_lengths.tolist()
        log_data["token_ids"] = train_data["input_ids"].tolist()
        log_data["token_loss_mask"] = train_data["token_mask"].tolist()
        log_data["sample_loss_mask"] = train_data["sample_mask"].tolist()
        log_data["advantages"] = train_data["advantages"].tolist()
        log_data["generation_logprobs"] = train_data[
            "generation_logprobs"
        ].tolist()
        log_data["prev_logprobs"] = train_data["prev_logprobs"].tolist()

        logger.log_batched_dict_as_jsonl(
            log_data, f"train_data_step{total_steps + 1}.jsonl"
        )
        del log_data


def validate_logging_block(logger, all_message_logs, total_rewards, step):
    """grpo.py 4014–4021 (the end of validate()), as written, de-indented."""
    # Log validation data to JSONL file
    if logger is not None:
        val_log_data = {
            "content": all_message_logs,
            "rewards": total_rewards,
        }
        logger.log_batched_dict_as_jsonl(val_log_data, f"val_data_step{step}.jsonl")


# -- the harness: NeMo's batch layout, fed to the blocks above ----------------------------------------------------

PROMPT = 3
MASTER_CONFIG = SimpleNamespace(grpo=SimpleNamespace(use_dynamic_sampling=False))


def train_data(batch, prompt=PROMPT, seed=0):
    """(train_data, input_lengths, content) of a toy Batch in NeMo's right-padded layout (module docstring)."""
    rng = np.random.default_rng(seed)
    lengths = np.array([prompt + len(mu) for mu in batch.sampler])
    width = int(lengths.max())
    shape = (len(lengths), width)
    columns = {name: np.zeros(shape, np.float32) for name in ("generation_logprobs", "prev_logprobs", "advantages")}
    columns["token_mask"] = np.zeros(shape, np.int64)                     # ones_like(token_ids) (grpo.py 1935)
    input_ids = np.full(shape, 151643, np.int64)                          # the pad token past each sequence
    for b, (mu, pi) in enumerate(zip(batch.sampler, batch.trainer, strict=True)):
        n = lengths[b]
        input_ids[b, :n] = rng.integers(0, 4, n)
        columns["generation_logprobs"][b, prompt:n] = mu
        columns["prev_logprobs"][b, 1:prompt] = rng.uniform(-8, -0.1, prompt - 1)   # the prompt's own log-probs
        columns["prev_logprobs"][b, prompt:n] = pi
        columns["token_mask"][b, prompt:n] = 1
        columns["advantages"][b, :n] = batch.advantages[b]
    data = {"input_ids": input_ids, "input_lengths": lengths, "sample_mask": np.ones(len(lengths), np.float32),
            **columns}
    content = [[{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}] for _ in lengths]
    return data, lengths, content


def write_step(log_dir, step, batch):
    """log_dir/train_data_step{step}.jsonl, written by the blocks above; the path."""
    data, lengths, content = train_data(batch, seed=step)
    grpo_logging_block(MASTER_CONFIG, {}, {"content": content}, np.asarray(batch.rewards, np.float32), lengths,
                       data, Logger(str(log_dir)), step - 1)
    return os.path.join(log_dir, f"train_data_step{step}.jsonl")


def write_validation(log_dir, step, rewards):
    """log_dir/val_data_step{step}.jsonl as validate() writes it: the validation rollouts and their rewards."""
    messages = [[{"role": "user", "content": "1 + 1?"}, {"role": "assistant", "content": "2"}] for _ in rewards]
    validate_logging_block(Logger(str(log_dir)), messages, [float(reward) for reward in rewards], step)
    return os.path.join(log_dir, f"val_data_step{step}.jsonl")


def seen(batch):
    """The batch as the dump holds it: log-probs and rewards rounded to float32, as NeMo's tensors hold them."""
    rounded = [[float(np.float32(value)) for value in row] for row in batch.sampler]
    trainer = [[float(np.float32(value)) for value in row] for row in batch.trainer]
    return type(batch)(rounded, trainer, np.asarray(batch.rewards, np.float32).astype(float), batch.advantages)
