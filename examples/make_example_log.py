"""Write the example rollout logs in examples/: generated from a toy, not from a real model.

    python examples/make_example_log.py

The "model" is the toy make_toy(T=6, V=4, mismatch=0.5, seed=0) made longer by repeating its positions:
token t of a sequence is drawn from the sampler μ at the toy's position t mod 6. Each of the 240 sequences
is 6·k tokens long, k uniform in 2 … 16 (12 to 96 tokens), so every toy position carries the same share of
the tokens and the per-token KL(μ‖π) the log estimates is exactly the toy's Σ_t KL_t / T. Each token
records its sampler log-probability log μ and trainer log-probability log π (rounded to 6 decimals, the
same numbers in every file), each sequence a reward: 1 when at least a fifth of its tokens are token 0
(the toy's rule with a lower bar, so that both rewards are common at these lengths).

Two shapes, three formats, plus gzip of the text ones:
    rollouts_per_sequence.*   a row per sequence, verl-like: uid, rollout_log_probs and old_log_probs
                              padded with 0 to 96 tokens, response_mask (1 = a real token), reward
    rollouts_per_token.*      a row per response token: sequence_id, position, sampler_logprobs,
                              trainer_logprobs, reward (repeated on every row of its sequence)
"""

import csv
import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toylab import make_toy  # noqa: E402
from toylab.analysis.montecarlo import draw_tokens  # noqa: E402

TOY = {"T": 6, "V": 4, "mismatch": 0.5, "seed": 0}     # the generating toy: matching should find mismatch 0.5
SEQUENCES = 240
REPEATS = (2, 16)                                        # a sequence has 6·k tokens, k in 2 … 16
SEED = 2025
DECIMALS = 6
REWARD_SHARE = 0.2                                       # reward 1 when at least this share of tokens is token 0
HERE = Path(__file__).resolve().parent


def generate(sequences=SEQUENCES, repeats=REPEATS, seed=SEED):
    """(lengths (B,), tokens (B, L), log μ (B, L), log π (B, L), rewards (B,)); cells beyond a sequence's
    length are padding (0 in both log-prob arrays)."""
    toy = make_toy(**TOY)
    rng = np.random.default_rng(seed)
    lengths = toy.T * rng.integers(repeats[0], repeats[1] + 1, size=sequences)
    longest = toy.T * repeats[1]
    position = np.arange(longest) % toy.T
    tokens = draw_tokens(rng, toy.mu[position], (sequences,))
    real = np.arange(longest) < lengths[:, None]
    sampler = np.where(real, np.round(toy.log_mu[position, tokens], DECIMALS), 0.0)
    trainer = np.where(real, np.round(toy.log_pi[position, tokens], DECIMALS), 0.0)
    zeros = ((tokens == 0) & real).sum(axis=1)
    rewards = (zeros >= REWARD_SHARE * lengths).astype(float)
    return lengths, tokens, sampler, trainer, rewards


def per_sequence_table(lengths, sampler, trainer, rewards):
    """A row per sequence, lists padded to the longest sequence, with the response mask."""
    mask = (np.arange(sampler.shape[1]) < lengths[:, None]).astype(np.int8)
    return pa.table({"uid": [f"seq-{b:04d}" for b in range(len(lengths))],
                     "rollout_log_probs": list(sampler), "old_log_probs": list(trainer),
                     "response_mask": list(mask), "reward": rewards})


def per_token_table(lengths, sampler, trainer, rewards):
    """A row per response token."""
    real = np.arange(sampler.shape[1]) < lengths[:, None]
    sequence, position = np.nonzero(real)
    return pa.table({"sequence_id": [f"seq-{b:04d}" for b in sequence], "position": position,
                     "sampler_logprobs": sampler[real], "trainer_logprobs": trainer[real],
                     "reward": rewards[sequence]})


def jsonl_bytes(table):
    return "".join(json.dumps(row) + "\n" for row in table.to_pylist()).encode()


def csv_bytes(table):
    """CSV with list cells written as JSON lists (quoted, since they hold commas)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow([json.dumps(value) if isinstance(value, list) else value for value in row.values()])
    return text.getvalue().encode()


def write(directory, stem, table):
    """stem.parquet, .jsonl, .jsonl.gz, .csv, .csv.gz in ``directory``; the gzip files are byte-reproducible."""
    pq.write_table(table, directory / f"{stem}.parquet")
    for extension, data in (("jsonl", jsonl_bytes(table)), ("csv", csv_bytes(table))):
        (directory / f"{stem}.{extension}").write_bytes(data)
        (directory / f"{stem}.{extension}.gz").write_bytes(gzip.compress(data, mtime=0))


def main(directory=HERE):
    lengths, _, sampler, trainer, rewards = generate()
    write(directory, "rollouts_per_sequence", per_sequence_table(lengths, sampler, trainer, rewards))
    write(directory, "rollouts_per_token", per_token_table(lengths, sampler, trainer, rewards))
    print(f"{len(lengths)} sequences, {lengths.sum():,} tokens (lengths {lengths.min()}–{lengths.max()}), "
          f"from make_toy({', '.join(f'{k}={v}' for k, v in TOY.items())}); written to {directory}")


if __name__ == "__main__":
    main()
