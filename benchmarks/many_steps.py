"""A run of many tiny steps (issue 25's zip of 10,000 steps of two sequences, 1.8 MB): time and peak memory of
``python -m toylab inspect RUN`` and of the page's reading of its first 1,000 steps, for one or more trees.

    python benchmarks/many_steps.py [--tree PATH ...] [--steps 10000] [--repeat 1]

Each tree (default: this checkout; give a copy of an older commit, ``git archive COMMIT | tar -x -C DIR``, for the
"before" side) is measured in fresh processes, the trees back to back in turn, ``--repeat`` times: the command line
(``toylab.cli.main.main(["inspect", RUN])``, imports included, its output discarded) and the page's path
(``views.caches.run_cache.run_summaries`` on the zip as an upload, with the page's default estimators: it reads at
most ``PAGE_BOUNDS.steps`` = 1,000 steps, or 30 s of them). Each child reports its own wall time and peak resident
memory (VmHWM). The zip is built by tests/hostile_runs.py's ``many_steps``. The machine's load average is printed
before and after: the timings move with it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile_runs  # noqa: E402

CLI = """
import contextlib, io, sys, time
start = time.perf_counter()
from toylab.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["inspect", sys.argv[1]])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(time.perf_counter() - start, int(peak) / 1024, out.getvalue().count("\\n"))
"""
PAGE = """
import sys, time
from pathlib import Path
from toylab.cli.arguments import chosen_ids, selection_from_overrides
from toylab.state.settings import DEFAULT_ESTIMATORS
from views.caches.run_cache import run_summaries
from views.caches.your_run_cache import Source
source = Source.of(Path(sys.argv[1]).name, Path(sys.argv[1]).read_bytes())
selection = tuple((id, tuple(params.items())) for id, params in
                  selection_from_overrides([], chosen_ids(",".join(DEFAULT_ESTIMATORS))).items())
start = time.perf_counter()
summaries, departures, cut = run_summaries([source], selection, lambda share, text: None)
seconds = time.perf_counter() - start
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(seconds, int(peak) / 1024, len(summaries))
"""


def measure(tree, code, run):
    """(seconds, peak MB, count) a fresh process running ``code`` on ``run`` in ``tree`` reports."""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(run)], cwd=tree, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr.strip().splitlines()[-1]}")
    seconds, peak, count = done.stdout.split()
    return float(seconds), float(peak), int(float(count))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=None, help="a checkout to measure (repeatable)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    arguments = parser.parse_args()
    trees = [Path(tree).resolve() for tree in arguments.tree or [ROOT]]
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        run = Path(directory) / "many_steps.zip"
        run.write_bytes(hostile_runs.many_steps(arguments.steps)[1])
        print(f"{arguments.steps:,} steps of 2 sequences, {run.stat().st_size / 1e6:.2f} MB zipped")
        print(f"load average before: {' '.join(open('/proc/loadavg').read().split()[:3])}")
        for attempt in range(arguments.repeat):
            for tree in trees:
                for where, code, what in (("cli", CLI, "lines printed"), ("page", PAGE, "steps read")):
                    seconds, peak, count = measure(tree, code, run)
                    rows.append({"tree": str(tree), "where": where, "seconds": seconds, "peak_mb": peak,
                                 "count": count, "attempt": attempt})
                    print(f"{str(tree):<40} {where:<5} {seconds:7.1f} s {peak:7.0f} MB  ({count:,} {what})",
                          flush=True)
        print(f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
