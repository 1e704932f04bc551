"""Helpers for the dump tests (not a test module): batches drawn from the toy, written in each framework's own
dump layout — field names, nesting and file paths as the framework's dump code writes them (toylab/your_run/dumps.py
cites the code and commit of each)."""

import json
import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toylab import make_toy
from toylab.analysis.montecarlo import draw_tokens

TOY = {"T": 6, "V": 4, "mismatch": 0.4, "seed": 3}
PROMPT = 3                                   # prompt tokens before every response (masked out in every dump)


@dataclass
class Batch:
    """B sequences drawn from the toy's sampler (token t from position t mod T): per sequence its response's
    log μ and log π (lists), its reward and its advantage (reward minus the batch mean)."""
    sampler: list
    trainer: list
    rewards: np.ndarray
    advantages: np.ndarray


def toy_batch(sequences, seed, repeats=(1, 4)):
    toy = make_toy(**TOY)
    rng = np.random.default_rng(seed)
    lengths = toy.T * rng.integers(repeats[0], repeats[1] + 1, size=sequences)
    position = np.arange(lengths.max()) % toy.T
    tokens = draw_tokens(rng, toy.mu[position], (sequences,))
    sampler = [toy.log_mu[position[:n], tokens[b, :n]].tolist() for b, n in enumerate(lengths)]
    trainer = [toy.log_pi[position[:n], tokens[b, :n]].tolist() for b, n in enumerate(lengths)]
    rewards = np.array([float((tokens[b, :n] == 0).mean() >= 0.25) for b, n in enumerate(lengths)])
    return Batch(sampler, trainer, rewards, rewards - rewards.mean())


def expected(batch):
    """The numbers a reader must find, computed here sequence by sequence: k1 and its clustered se."""
    sums = np.array([np.sum(np.subtract(mu, pi)) for mu, pi in zip(batch.sampler, batch.trainer, strict=True)])
    lengths = np.array([len(mu) for mu in batch.sampler])
    k1 = sums.sum() / lengths.sum()
    B = len(sums)
    se = math.sqrt(B / (B - 1) * np.sum((sums - k1 * lengths) ** 2)) / lengths.sum()
    return {"sequences": B, "tokens": int(lengths.sum()), "k1": k1, "k1_se": se}


def _padded(values, width, fill=0.0):
    return list(values) + [fill] * (width - len(values))


def write_nemo(directory, step, batch):
    """logs/train_data_step{step}.jsonl as NeMo-RL's GRPO loop writes it: log_batched_dict_as_jsonl slices the batch
    one sample at a time, so every value is a 1-element list ([x], or [[...]] for a padded tensor row), plus "idx"."""
    width = PROMPT + max(len(mu) for mu in batch.sampler)
    path = Path(directory) / f"train_data_step{step}.jsonl"
    with path.open("w") as stream:
        for i, (mu, pi) in enumerate(zip(batch.sampler, batch.trainer, strict=True)):
            n = len(mu)
            record = {
                "content": [[{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]],
                "rewards": [float(batch.rewards[i])], "input_lengths": [PROMPT + n],
                "token_ids": [_padded(list(range(PROMPT + n)), width, 0)],
                "token_loss_mask": [_padded([0] * PROMPT + [1] * n, width, 0)], "sample_loss_mask": [1.0],
                "advantages": [_padded([float(batch.advantages[i])] * (PROMPT + n), width)],
                "generation_logprobs": [_padded([0.0] * PROMPT + mu, width)],
                "prev_logprobs": [_padded([0.0] * PROMPT + pi, width)],
            }
            stream.write(json.dumps({**record, "idx": i}) + "\n")
    return path


def write_prime(run, step, rank, batch, V=TOY["V"]):
    """token_exports/step_{step}/rank_{rank}.jsonl as prime-rl's TokenExporter writes it: one record per sequence,
    prompt and response tokens aligned; trainer log-probs shifted right (position 0 holds log(1/V)); non-finite and
    absent fields as null; true/false loss mask; per-token advantages and no reward."""
    folder = Path(run) / "token_exports" / f"step_{step}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank_{rank}.jsonl"
    with path.open("w") as stream:
        for i, (mu, pi) in enumerate(zip(batch.sampler, batch.trainer, strict=True)):
            n = PROMPT + len(mu)
            record = {"schema_version": 1, "step": step, "rank": rank, "micro_step": 0, "micro_sequence_idx": i,
                      "export_sequence_idx": i, "env_name": "math", "token_ids": list(range(n)),
                      "position_ids": list(range(n)), "loss_mask": [False] * PROMPT + [True] * len(mu),
                      "advantages": [float(batch.advantages[i])] * n,
                      "inference_logprobs": [0.0] * PROMPT + mu,
                      "trainer_logprobs": [math.log(1 / V), -2.0, -1.5] + pi, "entropy": [1.0] * n,
                      "mismatch_kl": [None] * n, "log_importance_ratio": [None] * n, "importance_ratio": [None] * n,
                      "prob_delta": [None] * n, "is_masked": [None] * n, "is_masked_high": [None] * n,
                      "is_masked_low": [None] * n, "rl_weights": [None] * n, "ce_weights": [None] * n,
                      "ref_kl_weights": [None] * n}
            stream.write(json.dumps(record, separators=(",", ":")) + "\n")
    (folder / "STABLE").touch()
    return path


def write_slime(dump_details, rollout_id, batch, torch):
    """{dump_details}/train_data/{rollout_id}.pt as slime's save_debug_train_data writes it (format_version 2): a
    ``samples`` list (per-token fields cover the response only; float32 tensors as in training) and the whole
    batch's ``raw_reward`` at the top. Returns the float32-rounded batch a reader sees."""
    folder = Path(dump_details) / "train_data"
    folder.mkdir(parents=True, exist_ok=True)
    samples, seen = [], Batch([], [], batch.rewards, batch.advantages)
    for i, (mu, pi) in enumerate(zip(batch.sampler, batch.trainer, strict=True)):
        mu32, pi32 = torch.tensor(mu, dtype=torch.float32), torch.tensor(pi, dtype=torch.float32)
        samples.append({"data_parallel_rank": 0, "rollout_position": i, "sample_index": i,
                        "tokens": torch.arange(PROMPT + len(mu)), "response_lengths": len(mu),
                        "total_lengths": PROMPT + len(mu), "loss_masks": torch.ones(len(mu), dtype=torch.int),
                        "rewards": float(batch.advantages[i]), "rollout_log_probs": mu32, "log_probs": pi32,
                        "advantages": torch.full((len(mu),), float(batch.advantages[i]))})
        seen.sampler.append(mu32.double().tolist())
        seen.trainer.append(pi32.double().tolist())
    payload = {"format_version": 2, "rollout_id": rollout_id, "rank": 0, "samples": samples,
               "dp_shards": [{"rank": 0, "data_parallel_rank": 0, "sample_indices": list(range(len(samples)))}],
               "raw_reward": batch.rewards.tolist()}
    path = folder / f"{rollout_id}.pt"
    torch.save(payload, path)
    return path, seen


def write_miles(dump_details, rollout_id, rank, batch, torch, cp_size=1):
    """{dump_details}/train_data/{rollout_id}_{rank}.pt as Miles' save_debug_train_data_for_rank writes it: the
    rank's ``rollout_data``, a dict of per-sample lists."""
    folder = Path(dump_details) / "train_data"
    folder.mkdir(parents=True, exist_ok=True)
    rollout_data = {
        "tokens": [torch.arange(PROMPT + len(mu)) for mu in batch.sampler],
        "response_lengths": [len(mu) for mu in batch.sampler],
        "total_lengths": [PROMPT + len(mu) for mu in batch.sampler],
        "loss_masks": [torch.ones(len(mu), dtype=torch.int) for mu in batch.sampler],
        "rewards": batch.rewards.tolist(), "raw_reward": batch.rewards.tolist(),
        "rollout_log_probs": [torch.tensor(mu, dtype=torch.float64) for mu in batch.sampler],
        "log_probs": [torch.tensor(pi, dtype=torch.float64) for pi in batch.trainer],
        "advantages": [torch.full((len(mu),), float(a)) for mu, a in zip(batch.sampler, batch.advantages, strict=True)],
    }
    path = folder / f"{rollout_id}_{rank}.pt"
    torch.save({"rollout_id": rollout_id, "rank": rank, "rollout_data": rollout_data, "cp_rank": 0,
                "cp_size": cp_size, "qkv_format": "thd"}, path)
    return path


class TrainingInputBatch(dict):
    """Stands in for SkyRL's class: its dump is a pickle of a dict subclass (never opened by toylab)."""


def write_skyrl(export_path, step, batch):
    """{export_path}/dumped_data/global_step_{step}_training_input.pkl as SkyRL's dump_data writes it."""
    folder = Path(export_path) / "dumped_data"
    folder.mkdir(parents=True, exist_ok=True)
    width = max(len(mu) for mu in batch.sampler)
    data = TrainingInputBatch(rollout_logprobs=[_padded(mu, width) for mu in batch.sampler],
                              action_log_probs=[_padded(pi, width) for pi in batch.trainer],
                              loss_mask=[_padded([1.0] * len(mu), width) for mu in batch.sampler])
    path = folder / f"global_step_{step}_training_input.pkl"
    path.write_bytes(pickle.dumps(data))
    return path
