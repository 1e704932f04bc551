"""The memory of a process and every process it started, as the kernel counts what each holds (not a test module).

PSS (proportional set size, /proc/<pid>/smaps_rollup): each page a process maps, divided by the number of processes
that share it, so the sum over a tree counts a page once however many workers fork from one parent; resident set sizes
summed would count numpy's and pyarrow's libraries once per worker. Linux only.

    peak, seconds, done = tree_peak([python, "-m", "toylab", "inspect", RUN, "--workers", "2"], cwd=ROOT)
"""

import os
import signal
import subprocess
import threading
import time

SAMPLE_S = 0.05


def tree(root):
    """The pids of ``root`` and its descendants (their threads' children lists)."""
    pids, frontier = [root], [root]
    while frontier:
        pid = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    found = [int(child) for child in children.read().split()]
            except OSError:
                continue
            pids += found
            frontier += found
    return pids


def pss_bytes(pid):
    """The process's PSS in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_peak(command, cwd=None, env=None, timeout=120.0):
    """(peak PSS of the command's process tree in bytes, seconds, CompletedProcess with text stdout and stderr),
    sampled every SAMPLE_S; the tree is killed after ``timeout`` seconds (returncode None)."""
    start = time.monotonic()
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    output = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), child.communicate(), strict=True)))
    reader.start()
    peak = 0
    while reader.is_alive() and time.monotonic() - start < timeout:
        peak = max(peak, sum(pss_bytes(pid) for pid in tree(child.pid)))
        time.sleep(SAMPLE_S)
    if reader.is_alive():
        os.killpg(child.pid, signal.SIGKILL)
        reader.join()
        child.returncode = None
    seconds = time.monotonic() - start
    return peak, seconds, subprocess.CompletedProcess(command, child.returncode, output.get("out", ""),
                                                      output.get("err", ""))
