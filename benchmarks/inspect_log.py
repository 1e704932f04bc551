"""Time and peak memory of ``python -m toylab inspect`` on a generated 1M-token rollout log.

    python benchmarks/inspect_log.py

The log comes from the example script's toy (examples/make_example_log.py) with longer sequences: 6·k
tokens, k uniform in 2 … 330, about 1,000 tokens on average, ~1,000 sequences. It is written in both
shapes (a row per sequence with ragged lists, a row per token) as Parquet, JSONL and CSV to a temporary
directory; each file is then inspected by a fresh process (imports included) that reports its own peak
resident memory: VmHWM from /proc/self/status, the high-water mark of the process's own address space
(ru_maxrss would not do: Linux carries it over from the parent through fork and exec). The first row is a
process that only imports, the floor of every other row.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.make_example_log import generate  # noqa: E402

TOKENS = 1_000_000
REPEATS = (2, 330)
CHILD = """
import sys, time
start = time.perf_counter()
from toylab.cli.main import main
import toylab.cli.inspect  # every module an inspection imports: the floor
if len(sys.argv) > 1:
    main(["inspect", sys.argv[1], "--json"])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(time.perf_counter() - start, int(peak) / 1024, file=sys.stderr)
"""


def write_logs(directory):
    """The generated log in both shapes and three formats; {name: path}."""
    sequences = int(TOKENS / (3 * (REPEATS[0] + REPEATS[1]))) + 1
    lengths, _, sampler, trainer, rewards = generate(sequences=sequences, repeats=REPEATS, seed=1)
    real = np.arange(sampler.shape[1]) < lengths[:, None]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    per_sequence = pa.table({"rollout_log_probs": pa.ListArray.from_arrays(offsets, pa.array(sampler[real])),
                             "old_log_probs": pa.ListArray.from_arrays(offsets, pa.array(trainer[real])),
                             "reward": rewards})
    sequence, position = np.nonzero(real)
    per_token = pd.DataFrame({"sequence_id": sequence, "position": position, "sampler_logprobs": sampler[real],
                              "trainer_logprobs": trainer[real], "reward": rewards[sequence]})
    paths = {}
    for shape, table in (("per sequence", per_sequence), ("per token", per_token)):
        stem = directory / shape.replace(" ", "_")
        arrow = table if isinstance(table, pa.Table) else pa.Table.from_pandas(table, preserve_index=False)
        pq.write_table(arrow, f"{stem}.parquet")
        paths[f"{shape}, Parquet"] = Path(f"{stem}.parquet")
        if isinstance(table, pa.Table):
            rows = table.to_pylist()
            Path(f"{stem}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
            lists = pd.DataFrame({name: [json.dumps(value) if isinstance(value, list) else value for value in
                                         (row[name] for row in rows)] for name in table.column_names})
            lists.to_csv(f"{stem}.csv", index=False)
        else:
            table.to_json(f"{stem}.jsonl", orient="records", lines=True, double_precision=15)
            table.to_csv(f"{stem}.csv", index=False)
        paths[f"{shape}, JSONL"] = Path(f"{stem}.jsonl")
        paths[f"{shape}, CSV"] = Path(f"{stem}.csv")
    return int(lengths.sum()), len(lengths), paths


def inspect(path=None):
    """(seconds, peak MB) of a fresh process inspecting ``path`` (only importing, without one)."""
    done = subprocess.run([sys.executable, "-c", CHILD, *([str(path)] if path else [])], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    seconds, megabytes = done.stderr.split()[-2:]
    return float(seconds), float(megabytes)


def main():
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        tokens, sequences, paths = write_logs(Path(directory))
        print(f"{tokens:,} tokens in {sequences:,} sequences, written in {time.perf_counter() - start:.1f} s\n")
        print(f"{'file':<24}{'size MB':>9}{'seconds':>9}{'peak MB':>9}")
        seconds, peak = inspect()
        print(f"{'(imports only)':<24}{'':>9}{seconds:9.2f}{peak:9.0f}")
        for name, path in paths.items():
            seconds, peak = inspect(path)
            print(f"{name:<24}{path.stat().st_size / 2**20:9.1f}{seconds:9.2f}{peak:9.0f}")


if __name__ == "__main__":
    main()
