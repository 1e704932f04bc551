"""Hold a server to a share of one core, as a slower or busier host would (used by reading_group.py).

    with held_to(0.5) as quota:                   # half of one core
        subprocess.Popen(command, preexec_fn=quota.join)
        ...
        print(quota.describe(), quota.throttled())

Three ways, the first this machine allows:

- a cgroup v2 ``cpu.max`` (``fraction × 100000`` µs of CPU per 100 ms period), in a new group under the unified
  hierarchy, where the cpu controller is enabled for it;
- a cgroup v1 ``cpu.cfs_quota_us`` with ``cpu.cfs_period_us`` = 100 ms, in a new group of the cpu controller;
- no cgroup (not root, no controller): the server pinned to one CPU with ``sched_setaffinity``, beside processes that
  spin on that CPU, pinned there too; the scheduler shares a busy CPU equally, so with n spinners the server gets at
  most 1/(n + 1) of it while it is busy (the fraction is rounded to such a share).

The group is made when the block starts and removed when it ends (its processes gone); the spinners are stopped. A
process joins with ``quota.join`` in the child (``preexec_fn``), before the server starts, so every thread and child
of the server is held from its first instruction.
"""

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")
V1_CPU = Path("/sys/fs/cgroup/cpu")


class Quota:
    """Where the held processes go (``join``), what holds them (``describe``) and how often it did (``throttled``)."""

    def __init__(self, fraction, group=None, kind=None, cpu=None):
        self.fraction, self.group, self.kind, self.cpu = fraction, group, kind, cpu

    def join(self):
        """In the child before exec: join the group, or pin to the spinners' CPU."""
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        elif self.cpu is not None:
            os.sched_setaffinity(0, {self.cpu})

    def describe(self):
        if self.kind == "v2":
            return f"cgroup v2 cpu.max {self.fraction * PERIOD_US:.0f} {PERIOD_US} ({self.group})"
        if self.kind == "v1":
            return f"cgroup v1 cpu.cfs_quota_us {self.fraction * PERIOD_US:.0f} per {PERIOD_US} µs ({self.group})"
        if self.kind == "spinners":
            return (f"pinned to CPU {self.cpu} beside {round(1 / self.fraction) - 1} spinning process(es): at most "
                    f"{self.fraction:.0%} of that CPU while busy")
        return "no quota"

    def throttled(self):
        """(periods throttled, periods, seconds throttled) so far, or None without a cgroup."""
        if self.group is None:
            return None
        stat = dict(line.split() for line in (self.group / "cpu.stat").read_text().splitlines() if " " in line)
        if self.kind == "v2":
            return int(stat.get("nr_throttled", 0)), int(stat.get("nr_periods", 0)), int(
                stat.get("throttled_usec", 0)) / 1e6
        return int(stat.get("nr_throttled", 0)), int(stat.get("nr_periods", 0)), int(stat.get("throttled_time", 0)) / 1e9


@contextlib.contextmanager
def held_to(fraction):
    """A Quota of ``fraction`` of one core (None or 0: no quota) for the block."""
    if not fraction:
        yield Quota(None)
        return
    made = None
    for make in (_v2_group, _v1_group):
        with contextlib.suppress(OSError):
            made = make(fraction)
            break
    if made is None:
        with _spinners(fraction) as (cpu, share):
            yield Quota(share, kind="spinners", cpu=cpu)
        return
    group, kind = made
    try:
        yield Quota(fraction, group, kind)
    finally:
        _remove(group)


def _name():
    return f"toylab-bench-{os.getpid()}-{time.monotonic_ns()}"


def _v2_group(fraction):
    controllers = (V2_ROOT / "cgroup.controllers").read_text().split()
    if "cpu" not in controllers:
        raise OSError("no cpu controller in cgroup v2")
    if "cpu" not in (V2_ROOT / "cgroup.subtree_control").read_text().split():
        (V2_ROOT / "cgroup.subtree_control").write_text("+cpu")
    group = V2_ROOT / _name()
    group.mkdir()
    (group / "cpu.max").write_text(f"{round(fraction * PERIOD_US)} {PERIOD_US}")
    return group, "v2"


def _v1_group(fraction):
    if not (V1_CPU / "cpu.cfs_quota_us").exists():
        raise OSError("no cgroup v1 cpu controller")
    group = V1_CPU / _name()
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(round(fraction * PERIOD_US)))
    return group, "v1"


def _remove(group):
    """Remove the group once its processes are gone (a killed server takes a moment to leave it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            group.rmdir()
            return
        time.sleep(0.1)


@contextlib.contextmanager
def _spinners(fraction):
    """(CPU, share): processes spinning on the last CPU, as many as make the server's share 1/(n + 1) ≈ fraction."""
    cpu = max(os.sched_getaffinity(0))
    count = max(1, round(1 / fraction) - 1)
    spin = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    processes = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]
    try:
        yield cpu, 1 / (count + 1)
    finally:
        for process in processes:
            process.kill()
            process.wait()


def cgroup_of(pid):
    """The cgroup lines of a process (what /proc says it is in)."""
    return re.findall(r"^\d+:[^:]*:(.*)$", Path(f"/proc/{pid}/cgroup").read_text(), re.M)
