"""Speed and memory of the exact table against the dense approach, measured back to back in one run.

    python benchmarks/exact_table.py

1. Whole processes on T=10, V=4 (M = 1,048,576), imports included: ``python -m toylab --T 10 --V 4 --json``
   against the dense approach (enumerate every sequence, materialise each estimator's (M, T, V)
   estimate and reduce it), wall time and peak resident memory of each.
   Both compute the same estimators (the CLI's default set, ``toylab.cli.arguments.DEFAULT_IDS``).
2. In-process: the default toy's full table; Monte Carlo for every estimator (N = 1 … 4096, 200 replicates).
3. T=12, V=4 (M = 16,777,216) in-process: time and peak memory of the full table, which the exact pass
   walks in prefix chunks (the dense approach would need (M, T, V) float64 arrays of 6.4 GB each).
4. The largest toy whose full table (the command line's: DEFAULT_IDS plus the diagnostics) completes in 2 s.
"""

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toylab import ESTIMATORS, exact_table, make_toy  # noqa: E402
from toylab.analysis.diagnostics import diagnostics  # noqa: E402
from toylab.analysis.montecarlo import monte_carlo  # noqa: E402
from toylab.cli.arguments import DEFAULT_IDS  # noqa: E402

DENSE_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from dense import DenseToy
from toylab import make_toy, resolve_params
from toylab.cli.arguments import DEFAULT_IDS
dense = DenseToy(make_toy(T=10, V=4))
for estimator in DEFAULT_IDS:
    dense.moments(estimator, resolve_params(estimator), "none")
"""


def timed_process(command):
    """(wall seconds, peak RSS in MB of the largest child so far)."""
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def best_of(repeats, function):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def full_table(T, V):
    """What ``python -m toylab --T T --V V`` computes: the diagnostics and the table of DEFAULT_IDS."""
    toy = make_toy(T=T, V=V, max_sequences=None)
    diagnostics(toy)
    exact_table(toy, {id: {} for id in DEFAULT_IDS})


def largest_within(seconds, V):
    """The largest T (and its time) whose full table on V tokens finishes within ``seconds``."""
    best = None
    for T in range(4, 40):
        start = time.perf_counter()
        full_table(T, V)
        elapsed = time.perf_counter() - start
        if elapsed > seconds:
            return best
        best = (T, V**T, elapsed)
    return best


def main():
    toylab_runs = [timed_process([sys.executable, "-m", "toylab", "--T", "10", "--V", "4", "--json"])
                   for _ in range(3)]
    toylab_time = statistics.median(run[0] for run in toylab_runs)
    toylab_memory = toylab_runs[-1][1]
    dense_time, dense_memory = timed_process([sys.executable, "-c", DENSE_SCRIPT.format(tests=str(ROOT / "tests"))])
    print(f"T=10, V=4 (M = 1,048,576), whole process, the command line's table ({len(DEFAULT_IDS)} estimators) "
          "+ diagnostics")
    print(f"  toylab  {toylab_time:7.2f} s   peak {toylab_memory:7.0f} MB   (median of 3)")
    print(f"  dense   {dense_time:7.2f} s   peak {dense_memory:7.0f} MB")
    print(f"  ratio   {dense_time / toylab_time:7.1f}x faster")

    default_best, default_median = best_of(20, lambda: full_table(6, 4))
    print(f"default toy full table in-process: best {default_best * 1e3:.1f} ms, median {default_median * 1e3:.1f} ms")

    toy = make_toy()
    everything = {id: {} for id in ESTIMATORS}
    mc_best, _ = best_of(3, lambda: monte_carlo(toy, everything, "none", replicates=200))
    print(f"Monte Carlo, all {len(everything)} estimators, N = 1..4096, 200 replicates: {mc_best:.2f} s")

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    large_best, large_median = best_of(3, lambda: full_table(12, 4))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"T=12, V=4 (M = 16,777,216) full table in-process: best {large_best:.2f} s, median {large_median:.2f} s "
          f"of 3; peak RSS {after:.0f} MB (was {before:.0f} MB before it)")

    for V in (2, 4):
        T, M, elapsed = largest_within(2.0, V)
        print(f"largest toy within 2 s at V={V}: T={T} (M = {M:,}) in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
