"""Time and peak memory of ``python -m toylab inspect RUN --json`` on a generated run of 100 M response tokens over
50 steps, and the reading engines measured on the same files.

    python benchmarks/inspect_run.py [--steps 50] [--tokens 100000000] [--engines]

The run is what the verl recipe of docs/your-run.md writes: per step, two ranks' Parquet files (``step_N/rank_R.parquet``),
a row per sequence with ``rollout_log_probs`` and ``old_log_probs`` (float64 lists; 200 to 1,800 tokens, 1,000
on average) and a reward; log μ = −Exponential(1) per token, log π = min(log μ + Normal(0, 0.01), 0) — a
per-token KL near 5e-5, a bf16 sampler's size. It is written to a temporary directory (1.6 GB at the default
size) and deleted at the end.

The inspection runs in a fresh process (imports included) that reports its own peak resident memory: VmHWM from
/proc/self/status. ``--engines`` then reads the same run step by step with each engine installed — pyarrow (the
one toylab uses), DuckDB, Polars — each in its own process, computing the same per-step k1 = Σ(log μ − log π)/n
and its standard error clustered by sequence (the reading and one reduction: what an engine could take over),
and checks they agree.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
RANKS = 2
LENGTHS = (200, 1800)
CHILD = """
import sys, time
start = time.perf_counter()
from toylab.cli.main import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["inspect", sys.argv[1], "--json"])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(time.perf_counter() - start, int(peak) / 1024, len(out.getvalue()), file=sys.stderr)
"""
ENGINE_CHILD = """
import math, sys, time, glob
import numpy as np
start = time.perf_counter()
engine, run = sys.argv[1], sys.argv[2]
steps = sorted({int(path.split("step_")[1].split("/")[0]) for path in glob.glob(f"{run}/step_*/*.parquet")})
def clustered(sums, lengths):
    k1 = sums.sum() / lengths.sum()
    B = len(sums)
    return k1, math.sqrt(B / (B - 1) * np.sum((sums - k1 * lengths) ** 2)) / lengths.sum()
results = []
if engine == "pyarrow":
    import pyarrow.compute as pc, pyarrow.parquet as pq
    for step in steps:
        sums, lengths = [], []
        for path in sorted(glob.glob(f"{run}/step_{step}/*.parquet")):
            table = pq.read_table(path, columns=["rollout_log_probs", "old_log_probs"])
            mu = table.column(0).combine_chunks()
            pi = table.column(1).combine_chunks()
            offsets = mu.offsets.to_numpy()
            gap = mu.flatten().to_numpy() - pi.flatten().to_numpy()
            sums.append(np.add.reduceat(gap, offsets[:-1]))
            lengths.append(np.diff(offsets))
        results.append(clustered(np.concatenate(sums), np.concatenate(lengths)))
elif engine == "duckdb":
    import duckdb
    connection = duckdb.connect()
    for step in steps:
        rows = connection.execute("SELECT list_sum(rollout_log_probs) - list_sum(old_log_probs) AS s, "
                                  "len(rollout_log_probs) AS n FROM read_parquet(?)",
                                  [f"{run}/step_{step}/*.parquet"]).fetchnumpy()
        results.append(clustered(rows["s"].astype(float), rows["n"].astype(float)))
elif engine == "polars":
    import polars as pl
    for step in steps:
        frame = (pl.scan_parquet(f"{run}/step_{step}/*.parquet")
                 .select((pl.col("rollout_log_probs").list.sum() - pl.col("old_log_probs").list.sum()).alias("s"),
                         pl.col("rollout_log_probs").list.len().alias("n")).collect())
        results.append(clustered(frame["s"].to_numpy(), frame["n"].to_numpy().astype(float)))
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(time.perf_counter() - start, int(peak) / 1024, repr(results), file=sys.stderr)
"""


def write_run(directory, steps, tokens):
    """The run: per step RANKS Parquet files of about tokens / (steps·RANKS) response tokens; (tokens, sequences)."""
    rng = np.random.default_rng(0)
    per_file = tokens // (steps * RANKS)
    total_tokens = total_sequences = 0
    for step in range(1, steps + 1):
        folder = directory / f"step_{step}"
        folder.mkdir()
        for rank in range(RANKS):
            lengths = rng.integers(*LENGTHS, size=int(per_file / np.mean(LENGTHS) * 1.2))
            lengths = lengths[np.cumsum(lengths) <= per_file]
            n = int(lengths.sum())
            sampler = -rng.exponential(1.0, n)
            trainer = np.minimum(sampler + rng.normal(0.0, 0.01, n), 0.0)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            pq.write_table(pa.table({"rollout_log_probs": pa.ListArray.from_arrays(offsets, pa.array(sampler)),
                                     "old_log_probs": pa.ListArray.from_arrays(offsets, pa.array(trainer)),
                                     "reward": rng.integers(0, 2, len(lengths)).astype(float)}),
                           folder / f"rank_{rank}.parquet")
            total_tokens += n
            total_sequences += len(lengths)
    return total_tokens, total_sequences


def measure(code, *arguments, extra_path=None):
    environment = None
    if extra_path:
        import os
        environment = {**os.environ, "PYTHONPATH": extra_path}
    done = subprocess.run([sys.executable, "-c", code, *arguments], cwd=ROOT, capture_output=True, text=True,
                          env=environment)
    if done.returncode:
        return None, done.stderr.strip().splitlines()[-1]
    return done.stderr.split(maxsplit=2), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=100_000_000)
    parser.add_argument("--engines", action="store_true", help="also time pyarrow, DuckDB and Polars alone")
    parser.add_argument("--engine-path", default=None, help="a site-packages holding duckdb and polars (PYTHONPATH)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        run = Path(directory)
        start = time.perf_counter()
        tokens, sequences = write_run(run, arguments.steps, arguments.tokens)
        size = sum(path.stat().st_size for path in run.rglob("*.parquet")) / 2**20
        print(f"{tokens:,} response tokens in {sequences:,} sequences, {arguments.steps} steps × {RANKS} ranks, "
              f"{size:,.0f} MB of Parquet, written in {time.perf_counter() - start:.0f} s")
        print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
        result, error = measure(CHILD, str(run))
        if error:
            print(f"inspect failed: {error}")
        else:
            seconds, peak, size_json = result
            print(f"python -m toylab inspect RUN --json: {float(seconds):.1f} s, peak {float(peak):,.0f} MB "
                  f"({int(size_json):,} bytes of JSON)")
        if arguments.engines:
            reference = None
            for engine in ("pyarrow", "duckdb", "polars"):
                result, error = measure(ENGINE_CHILD, engine, str(run), extra_path=arguments.engine_path)
                if error:
                    print(f"{engine:>8}: not measured ({error})")
                    continue
                seconds, peak, values = result
                values = np.array(eval(values))        # noqa: S307 — the child's own repr of (k1, se) floats
                agree = "" if reference is None else \
                    f", agrees with pyarrow to {np.max(np.abs(values - reference) / np.abs(reference)):.0e}"
                reference = values if reference is None else reference
                print(f"{engine:>8}: read + k1 and its se per step: {float(seconds):.1f} s, peak {float(peak):,.0f} MB"
                      f"{agree}")
        print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
