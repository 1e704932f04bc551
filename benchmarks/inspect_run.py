"""Time, tokens per second and peak memory per process of ``python -m toylab inspect RUN --json`` on generated runs,
today's path against the one before issue 38, in one run of this script:

    python benchmarks/inspect_run.py [--sizes 20000000:10,100000000:50] [--old 7eb0cc2] [--engines]

Each run is what the verl recipe of docs/your-run.md writes: per step, two ranks' Parquet files
(``step_N/rank_R.parquet``), a row per sequence with ``rollout_log_probs`` and ``old_log_probs`` (float64 lists; 200 to
1,800 tokens, 1,000 on average) and a reward; log μ = −Exponential(1) per token, log π = min(log μ + Normal(0, 0.01),
0) — a per-token KL near 5e-5, a bf16 sampler's size. ``--sizes`` gives tokens:steps per run (default 20 M tokens
in 10 steps and 100 M in 50, 1.6 GB of Parquet); each is written to a temporary directory and deleted at the end.

Each row is a fresh process (imports included) running the command line's ``main`` on the run:

    old          the code of ``--old`` (default 7eb0cc2, main before issue 38), extracted by ``git archive`` into a
                 temporary directory and imported from there: one process, as it was
    1 worker     this tree, ``--workers 1``: this process reads and summarises every step
    2 workers    ``--workers 2``: two local processes (concurrent.futures), steps handed out in turn
    Dask 2       ``--scheduler local --workers 2``: a local Dask cluster of two worker processes (skipped, with the
                 reason, when Dask distributed is not installed: ``requirements-distributed.txt``)

A thread of that process reads, every 50 ms, the peak resident memory (VmHWM, /proc) and the CPU time of the process
itself and of every process it started: "main" is its own peak, "worker" the largest of the others (a pool's workers,
Dask's nannies and workers), "CPU" the CPU seconds of them all (user and system; on a shared machine the wall time
grows with the load, the CPU time much less). Tokens per second are the run's response tokens over the wall time. Every row's JSON is compared
with the old one: the largest relative difference of any number (they differ only in the last bits of three
spreads: docs/your-run.md).

``--engines`` then reads the same run step by step with each engine installed — pyarrow (the one toylab uses),
DuckDB, Polars — each in its own process, computing the per-step k1 = Σ(log μ − log π)/n and its standard error
clustered by sequence (the reading and one reduction: what an engine could take over), and checks they agree.
"""

import argparse
import json
import os
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
OLD = "7eb0cc2"                     # main before issue 38
CHILD = """
import json, os, sys, threading, time
start = time.perf_counter()
peaks, done = {}, threading.Event()

def descendants():
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [os.getpid()]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found

cpu, tick = {}, os.sysconf("SC_CLK_TCK")

def watch():
    while not done.is_set():
        for pid in descendants():
            try:
                line = next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmHWM"))
                peaks[pid] = max(peaks.get(pid, 0), int(line.split()[1]) / 1024)
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, StopIteration, IndexError):
                pass
        done.wait(0.05)

threading.Thread(target=watch, daemon=True).start()
from toylab.cli.main import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["inspect", *sys.argv[2:]])
seconds = time.perf_counter() - start
done.set()
own = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
others = [peak for pid, peak in peaks.items() if pid != os.getpid()]
times = os.times()
cpu[os.getpid()] = times.user + times.system
open(sys.argv[1], "w").write(out.getvalue())
print(json.dumps({"seconds": seconds, "main": int(own) / 1024, "worker": max(others, default=None),
                  "cpu": sum(cpu.values())}), file=sys.stderr)
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


def old_tree(revision, directory):
    """The toylab package of ``revision``, extracted into ``directory`` (git archive): the old path's code."""
    archive = subprocess.run(["git", "archive", revision, "toylab"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return directory


def inspect(tree, run, *options):
    """(measurement dict, JSON text) of ``inspect RUN --json OPTIONS`` in a fresh process importing ``tree``."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        done = subprocess.run([sys.executable, "-c", CHILD, out.name, str(run), "--json", *options], cwd=tree,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
        if done.returncode:
            return None, done.stderr.strip().splitlines()[-1]
        return json.loads(done.stderr.strip().splitlines()[-1]), out.read()


def largest_difference(old, new):
    """The largest relative difference between two JSON documents' numbers (ValueError if their shape differs)."""
    worst = 0.0
    stack = [(json.loads(old), json.loads(new))]
    while stack:
        a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
            stack += [(a[key], b[key]) for key in a]
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            stack += list(zip(a, b, strict=True))
        elif isinstance(a, float) and isinstance(b, float):
            worst = max(worst, 0.0 if a == b else abs(a - b) / max(abs(a), abs(b)))
        elif a != b:
            raise ValueError(f"{a!r} != {b!r}")
    return worst


def distributed_installed():
    return subprocess.run([sys.executable, "-c", "import distributed"], capture_output=True).returncode == 0


def measure_run(run, tokens, old):
    """Every path on one run: a table row each."""
    paths = [("old (one process)", old, ()), ("1 worker", ROOT, ("--workers", "1")),
             ("2 workers", ROOT, ("--workers", "2"))]
    if distributed_installed():
        paths.append(("Dask, local cluster of 2", ROOT, ("--scheduler", "local", "--workers", "2")))
    else:
        print("Dask, local cluster of 2: not measured (Dask distributed is not installed: "
              "pip install -r requirements-distributed.txt)")
    reference = None
    for label, tree, options in paths:
        load = os.getloadavg()[0]
        result, text = inspect(tree, run, *options)
        if result is None:
            print(f"{label}: failed: {text}")
            continue
        reference = text if reference is None else reference
        row = {"tokens": tokens, "path": label, "seconds": result["seconds"], "rate": tokens / result["seconds"],
               "cpu": result["cpu"], "main": result["main"], "worker": result["worker"],
               "load": (load, os.getloadavg()[0]),
               "difference": largest_difference(reference, text)}
        print(_line(row), flush=True)


def _line(row):
    worker = "—" if row["worker"] is None else f"{row['worker']:,.0f} MB"
    return (f"| {row['tokens'] / 1e6:,.0f} M | {row['path']} | {row['seconds']:.1f} s | {row['rate'] / 1e6:.2f} M/s | "
            f"{row['cpu']:.1f} s | {row['main']:,.0f} MB | {worker} | {row['difference']:.0e} | "
            f"{row['load'][0]:.1f}–{row['load'][1]:.1f} |")


def engines(run, engine_path):
    reference = None
    for engine in ("pyarrow", "duckdb", "polars"):
        environment = {**os.environ, "PYTHONPATH": engine_path} if engine_path else None
        done = subprocess.run([sys.executable, "-c", ENGINE_CHILD, engine, str(run)], cwd=ROOT, capture_output=True,
                              text=True, env=environment)
        if done.returncode:
            print(f"{engine:>8}: not measured ({done.stderr.strip().splitlines()[-1]})")
            continue
        seconds, peak, values = done.stderr.split(maxsplit=2)
        values = np.array(eval(values))        # noqa: S307 — the child's own repr of (k1, se) floats
        agree = "" if reference is None else \
            f", agrees with pyarrow to {np.max(np.abs(values - reference) / np.abs(reference)):.0e}"
        reference = values if reference is None else reference
        print(f"{engine:>8}: read + k1 and its se per step: {float(seconds):.1f} s, peak {float(peak):,.0f} MB{agree}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000000:10,100000000:50", help="tokens:steps of each run, comma-separated")
    parser.add_argument("--old", default=OLD, help="the revision whose code is the old path (git archive)")
    parser.add_argument("--engines", action="store_true", help="also time pyarrow, DuckDB and Polars alone")
    parser.add_argument("--engine-path", default=None, help="a site-packages holding duckdb and polars (PYTHONPATH)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        old = old_tree(arguments.old, Path(scratch))
        print(f"old path: {arguments.old} (git archive); load average before: {os.getloadavg()}")
        print("| tokens | path | time | tokens/s | CPU, all processes | peak, main | peak, largest worker | largest "
              "relative difference from old | load |\n|---|---|---|---|---|---|---|---|---|")
        for size in arguments.sizes.split(","):
            tokens, steps = map(int, size.split(":"))
            with tempfile.TemporaryDirectory() as directory:
                run = Path(directory)
                start = time.perf_counter()
                written, sequences = write_run(run, steps, tokens)
                megabytes = sum(path.stat().st_size for path in run.rglob("*.parquet")) / 2**20
                print(f"({written:,} response tokens in {sequences:,} sequences, {steps} steps × {RANKS} ranks, "
                      f"{megabytes:,.0f} MB of Parquet, written in {time.perf_counter() - start:.0f} s)", flush=True)
                measure_run(run, written, old)
                if arguments.engines:
                    engines(run, arguments.engine_path)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
