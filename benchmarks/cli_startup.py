"""Start-up of the command line: what a user waits for before the table appears, and its peak memory.

    python benchmarks/cli_startup.py [--repeats 5]

Whole processes, medians over the repeats (each process's peak resident memory from ``wait4``):
1. ``python -c pass`` — the interpreter alone;
2. the imports of the default command (``toylab.cli.main`` and ``toylab.cli.table``);
3. ``python -m toylab --T 10 --V 4`` — the exact table at M = 1,048,576, imports included;
4. the imports of ``inspect`` (the readers: pandas and pyarrow), for comparison.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "interpreter": ["-c", "pass"],
    "imports of the table command": ["-c", "import toylab.cli.main, toylab.cli.table"],
    "python -m toylab --T 10 --V 4": ["-m", "toylab", "--T", "10", "--V", "4"],
    "imports of inspect": ["-c", "import toylab.cli.inspect"],
}


def timed(argv):
    """(wall seconds, peak resident MB) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {repeats}")
    print(f"| {'process':32} | wall | peak memory |\n|---|---|---|")
    for name, argv in CASES.items():
        runs = [timed(argv) for _ in range(repeats)]
        wall, peak = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"| {name:32} | {wall:.2f} s | {peak:.0f} MB |")


if __name__ == "__main__":
    main()
