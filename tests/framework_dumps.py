"""Helpers for the dump tests (not a test module): batches drawn from the toy, and the frameworks' dumps of them as
the frameworks' own writers write them (tests/framework_writers/: NeMo-RL's runs anywhere; prime-rl's, slime's,
Miles' and SkyRL's need torch, so prime-rl's and SkyRL's are also recorded, by tests/framework_writers/record.py, for
the tests that run without it)."""

import contextlib
import io
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toylab import make_toy
from toylab.analysis.montecarlo import draw_tokens

TOY = {"T": 6, "V": 4, "mismatch": 0.4, "seed": 3}
PROMPT = 3                                   # prompt tokens before every response (masked out in every dump)
RECORDED = Path(__file__).parent / "framework_writers" / "recorded"
PRIME_STEPS = (1, 2, 3, 4)                   # the recorded prime-rl run: these steps, ranks 0 and 1
PRIME_RANKS = (0, 1)


@dataclass
class Batch:
    """B sequences drawn from the toy's sampler (token t from position t mod T): per sequence its response's
    log μ and log π (lists), its reward and its advantage (reward minus the batch mean). Every number is a float32
    value, as the frameworks' tensors hold them, so a dump written in float32 holds them exactly."""
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
    log_mu = toy.log_mu.astype(np.float32).astype(float)
    log_pi = toy.log_pi.astype(np.float32).astype(float)
    sampler = [log_mu[position[:n], tokens[b, :n]].tolist() for b, n in enumerate(lengths)]
    trainer = [log_pi[position[:n], tokens[b, :n]].tolist() for b, n in enumerate(lengths)]
    rewards = np.array([float((tokens[b, :n] == 0).mean() >= 0.25) for b, n in enumerate(lengths)])
    return Batch(sampler, trainer, rewards, (rewards - rewards.mean()).astype(np.float32).astype(float))


def entropies(batch):
    """The trainer's entropy H(π_t) at each response token of a toy batch (token t at position t mod T), in float32:
    what prime-rl's forward pass exports beside the log-probs."""
    toy = make_toy(**TOY)
    entropy = -(toy.pi * toy.log_pi).sum(axis=1).astype(np.float32).astype(float)
    return [entropy[np.arange(len(mu)) % toy.T].tolist() for mu in batch.sampler]


def joined(*batches):
    """One Batch of several (ranks of a step), in order."""
    return Batch([row for batch in batches for row in batch.sampler], [row for batch in batches for row in batch.trainer],
                 np.concatenate([batch.rewards for batch in batches]),
                 np.concatenate([batch.advantages for batch in batches]))


def expected(batch):
    """The numbers a reader must find, computed here sequence by sequence: k1 and its clustered se."""
    sums = np.array([np.sum(np.subtract(mu, pi)) for mu, pi in zip(batch.sampler, batch.trainer, strict=True)])
    lengths = np.array([len(mu) for mu in batch.sampler])
    k1 = sums.sum() / lengths.sum()
    B = len(sums)
    se = math.sqrt(B / (B - 1) * np.sum((sums - k1 * lengths) ** 2)) / lengths.sum()
    return {"sequences": B, "tokens": int(lengths.sum()), "k1": k1, "k1_se": se}


def write_nemo(directory, step, batch):
    """directory/train_data_step{step}.jsonl written by NeMo-RL's own logging code (framework_writers.nemo_rl), its
    "Logged data to …" line kept off the test's output."""
    from framework_writers import nemo_rl
    with contextlib.redirect_stdout(io.StringIO()):
        return Path(nemo_rl.write_step(directory, step, batch))


def prime_batches():
    """{(step, rank): Batch} of the recorded prime-rl run, as record.py fed them to prime-rl's TokenExporter."""
    recorded = json.loads((RECORDED / "prime_rl" / "batches.json").read_text())
    return {(step, rank): Batch(recorded[f"{step},{rank}"]["sampler"], recorded[f"{step},{rank}"]["trainer"],
                                np.array(recorded[f"{step},{rank}"]["rewards"]),
                                np.array(recorded[f"{step},{rank}"]["advantages"]))
            for step in PRIME_STEPS for rank in PRIME_RANKS}


def prime_run(directory, steps=PRIME_STEPS, ranks=PRIME_RANKS):
    """directory/token_exports/step_S/rank_R.jsonl (and each step's STABLE) as prime-rl's TokenExporter wrote them
    for the recorded batches; {(step, rank): Batch} of the files copied."""
    for step in steps:
        target = Path(directory) / "token_exports" / f"step_{step}"
        target.mkdir(parents=True, exist_ok=True)
        for rank in ranks:
            shutil.copy(RECORDED / "prime_rl" / "token_exports" / f"step_{step}" / f"rank_{rank}.jsonl", target)
        (target / "STABLE").touch()
    batches = prime_batches()
    return {(step, rank): batches[step, rank] for step in steps for rank in ranks}
