"""Helpers for the rollout-log tests (not a test module): the example files and small logs written on the fly."""

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from toylab.analysis.montecarlo import draw_tokens
from toylab.your_run.log import RolloutLog

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_FILES = sorted(path for path in EXAMPLES.glob("rollouts_*") if path.suffix != ".py")
FORMATS = ("parquet", "jsonl", "csv", "jsonl.gz", "csv.gz")

SEQUENCES = [  # a row per sequence: the third token of the first is masked (its values are padding)
    {"uid": "a", "rollout_log_probs": [-0.5, -1.0, 0.0], "old_log_probs": [-0.7, -0.9, 0.0],
     "response_mask": [1, 1, 0], "reward": 1.0},
    {"uid": "b", "rollout_log_probs": [-2.0, -0.1, -0.3], "old_log_probs": [-1.5, -0.2, -0.3],
     "response_mask": [1, 1, 1], "reward": 0.0},
    {"uid": "c", "rollout_log_probs": [-0.4, -0.6, -0.8], "old_log_probs": [-0.4, -0.5, -0.9],
     "response_mask": [0, 1, 1], "reward": 1.0},
]
TOKENS = [  # the same log, a row per token (masked tokens included, with mask 0)
    {"sequence_id": s["uid"], "position": t, "sampler_logprobs": s["rollout_log_probs"][t],
     "trainer_logprobs": s["old_log_probs"][t], "mask": s["response_mask"][t], "reward": s["reward"]}
    for s in SEQUENCES for t in range(3)]


def log_bytes(records, format):
    """``records`` (a list of dicts) as the bytes of a Parquet, JSONL or CSV file (".gz": gzip of the text)."""
    if format == "parquet":
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(records), sink)
        return sink.getvalue()
    if format.endswith(".gz"):
        return gzip.compress(log_bytes(records, format[:-3]), mtime=0)
    if format == "jsonl":
        return "".join(json.dumps(record) + "\n" for record in records).encode()
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(list(records[0]))
    for record in records:
        writer.writerow(["" if value is None else json.dumps(value) if isinstance(value, list) else value
                         for value in record.values()])
    return text.getvalue().encode()


def write_log(directory, stem, records, format):
    path = Path(directory) / f"{stem}.{format}"
    path.write_bytes(log_bytes(records, format))
    return path


def pipeline_log(toy, sequences, seed, repeats=8):
    """``sequences`` sequences of T·repeats tokens (token t from position t mod T) drawn from the toy's μ_s, with the
    pipeline's logged log μ and scored log π of each token."""
    position = np.arange(toy.T * repeats) % toy.T
    tokens = draw_tokens(np.random.default_rng(seed), toy.mu[position], (sequences,))
    offsets = np.arange(sequences + 1) * toy.T * repeats
    return RolloutLog("toy", None, toy.log_logged[position, tokens].ravel(), toy.log_pi[position, tokens].ravel(),
                      offsets, None, np.arange(1, sequences + 1), 0)


def log_records(log):
    """The log as a file's rows, one per sequence (its logged and its scored log-probabilities)."""
    return [{"uid": str(i), "rollout_log_probs": log.sampler_logprobs[start:end].tolist(),
             "old_log_probs": log.trainer_logprobs[start:end].tolist()}
            for i, (start, end) in enumerate(zip(log.offsets[:-1], log.offsets[1:], strict=True))]
