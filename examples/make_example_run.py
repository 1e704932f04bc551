"""Write the example run in examples/: twelve steps of a generated "training run", not from a real model.

    python examples/make_example_run.py

Each step is a batch drawn like the example log (examples/make_example_log.py: the toy T = 6, V = 4, seed 0, its
positions repeated), at a mismatch of realistic size — per-token KL near 1e-4, a bf16 sampler's — that holds at
0.01 for eight steps and then grows (0.02, 0.04, 0.08, 0.16): a run whose sampler drifts from its trainer before
a collapse. Each step is written as the README's verl recipe writes it, two ranks of 60 sequences each
(``logprobs/step_N/rank_R.parquet``: rollout_log_probs, old_log_probs, response_mask, token_level_scores), and
the whole run as one zip, examples/example_run.zip, reproducible: the same files and numbers (with the same pyarrow,
the same bytes).
"""

import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.make_example_log import DECIMALS, REPEATS, REWARD_SHARE, TOY  # noqa: E402
from toylab import make_toy  # noqa: E402
from toylab.analysis.montecarlo import draw_tokens  # noqa: E402

MISMATCH = [0.01] * 8 + [0.02, 0.04, 0.08, 0.16]
RANKS = 2
SEQUENCES = 60                                          # per rank
SEED = 2026
HERE = Path(__file__).resolve().parent


def step_table(mismatch, rng):
    """One rank's batch at this mismatch, a row per sequence padded to its longest, in the verl recipe's columns."""
    toy = make_toy(T=TOY["T"], V=TOY["V"], mismatch=mismatch, seed=TOY["seed"])
    lengths = toy.T * rng.integers(REPEATS[0], REPEATS[1] + 1, size=SEQUENCES)
    width = lengths.max()
    position = np.arange(width) % toy.T
    tokens = draw_tokens(rng, toy.mu[position], (SEQUENCES,))
    real = np.arange(width) < lengths[:, None]
    sampler = np.where(real, np.round(toy.log_mu[position, tokens], DECIMALS), 0.0)
    trainer = np.where(real, np.round(toy.log_pi[position, tokens], DECIMALS), 0.0)
    rewards = (((tokens == 0) & real).sum(axis=1) >= REWARD_SHARE * lengths).astype(float)
    scores = np.zeros((SEQUENCES, width))
    scores[np.arange(SEQUENCES), lengths - 1] = rewards                  # verl puts the score on the last token
    return pa.table({"rollout_log_probs": list(sampler), "old_log_probs": list(trainer),
                     "response_mask": list(real.astype(np.int8)), "token_level_scores": list(scores)})


def run_zip():
    """The zip's bytes: logprobs/step_N/rank_R.parquet for every step and rank (fixed timestamps)."""
    rng = np.random.default_rng(SEED)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as writer:
        for step, mismatch in enumerate(MISMATCH, start=1):
            for rank in range(RANKS):
                sink = io.BytesIO()
                pq.write_table(step_table(mismatch, rng), sink)
                info = zipfile.ZipInfo(f"logprobs/step_{step}/rank_{rank}.parquet", date_time=(2026, 1, 1, 0, 0, 0))
                writer.writestr(info, sink.getvalue())
    return archive.getvalue()


def main(directory=HERE):
    data = run_zip()
    (directory / "example_run.zip").write_bytes(data)
    print(f"{len(MISMATCH)} steps × {RANKS} ranks × {SEQUENCES} sequences, mismatch {MISMATCH}; "
          f"{len(data) / 2**20:.1f} MB written to {directory / 'example_run.zip'}")


if __name__ == "__main__":
    main()
