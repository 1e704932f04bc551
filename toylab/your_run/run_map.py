"""A run summarised step by step in this process, in local processes, or on a Dask cluster: a map over its steps, each
read and summarised where it runs, and the summaries gathered in step order.

    summaries, cut = run_summaries(files, selection)                              # this process (the page's way)
    summaries, cut = run_summaries(files, selection, workers=4)                   # 4 local processes
    summaries, cut = run_summaries(files, selection, workers=2, scheduler="local")   # a local Dask cluster of 2
    summaries, cut = run_summaries(files, selection, scheduler="tcp://host:8786")    # a running Dask cluster

A step's summary (``steps.step_summary``) depends on its own files only, so the steps are independent: a worker is
handed one step (its files' names and paths, never their contents; a zip's members are read from the zip's path),
reads it (``run.read_step``), summarises it and returns the summary, a few kilobytes. A worker holds one step at a
time whatever the run's length, and at most ``IN_FLIGHT`` steps per worker are handed out ahead, so the gathering
process holds summaries only. The summaries are the ones this process computes, number for number: the same code
on the same step. (The one thing a worker keeps across steps is the column choice of each Parquet schema it met,
``run.read_file``: a worker makes it from the first file of that schema it reads, this process from the run's
first; both are the same choice unless the files' first values differ in looking like probabilities.)

Local processes use ``concurrent.futures`` (no dependency), forked from a server process that imported this module;
like any multiprocessing pool they import the main module's file, so a script calling this with workers needs the
``if __name__ == "__main__":`` guard (``python -m toylab`` and notebooks need nothing). A cluster uses Dask
distributed, an optional extra (``requirements-distributed.txt``): its workers must import toylab and see the run's
files at the same paths. The
run's bounds (steps, seconds) hold as in one process: at most ``bounds.steps`` steps are handed out, and once
``bounds.run_seconds`` have passed no step is waited for.
"""

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from toylab.your_run.archives import open_archive
from toylab.your_run.bounds import CLI_BOUNDS, Bounds
from toylab.your_run.dask_cluster import cluster_client
from toylab.your_run.files import LogError
from toylab.your_run.run import RunFile, RunPlan, plan_run, read_step, step_logs_of
from toylab.your_run.run_progress import RunProgress
from toylab.your_run.steps import cut_notice, failed_step, step_summaries, step_summary

PARALLEL_BYTES = 64 << 20       # a run stored in at least this many bytes is read by every core (default_workers)
IN_FLIGHT = 2                   # steps handed to each worker ahead of the one it works on
WORKER_BYTES = 10**9            # what a worker may need: a step within the command line's bounds reads in under 1 GB


@dataclass(frozen=True)
class StepWork:
    """One step for a worker: the plan's part for it (its files, without open archives; its split logs), and how to
    read and summarise it."""
    step: int
    plan: RunPlan
    bounds: Bounds
    allow_torch: bool
    explicit: tuple[tuple[str, str | None], ...]
    selection: dict


def run_summaries(files: list[RunFile], selection: dict, bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False,
                  explicit: dict | None = None, workers: int = 1, scheduler: str | None = None,
                  progress: Callable[[RunProgress], object] | None = None) -> tuple[list[dict], str]:
    """(summaries, cut) of a run (``steps.step_summaries``), in this process (``workers`` 1, no ``scheduler``), in
    ``workers`` local processes, or on Dask (``scheduler``: "local" for a local cluster of ``workers`` processes,
    or a running cluster's address). ``progress(RunProgress)`` is called before the first step and after each."""
    explicit = explicit or {}
    steps = len({file.step for file in files if file.step is not None})
    plan = plan_run(files, bounds, allow_torch, **explicit)
    if scheduler is None and workers == 1:
        return step_summaries(step_logs_of(plan, bounds, allow_torch, **explicit), steps, selection, bounds, progress)
    works = [StepWork(step, _part(plan, step), bounds, allow_torch, tuple(explicit.items()), selection)
             for step in plan.steps]
    errors = [failed_step(None, (name,), message) for name, message in plan.errors]
    if scheduler is None:
        with _local_pool(workers) as pool:
            return _gathered(pool.submit, works, errors, steps, workers, bounds, progress)
    with cluster_client(scheduler, workers, _first_path(files)) as client:
        return _gathered(lambda function, work: client.submit(function, work, pure=False), works, errors, steps,
                         max(1, len(client.scheduler_info()["workers"])), bounds, progress)


def summarise(work: StepWork) -> dict:
    """A step's summary, or its failed_step, read and computed in this process."""
    plan = replace(work.plan, by_step={step: [_reopened(file) for file in files]
                                       for step, files in work.plan.by_step.items()})
    step_log = read_step(plan, work.step, work.bounds, work.allow_torch, _layouts(work.explicit),
                         **dict(work.explicit))
    if step_log.log is None:
        return failed_step(step_log.step, step_log.files, step_log.error)
    return step_summary(step_log.step, step_log.files, step_log.log, work.selection)


def _first_path(files):
    """The path of the run's first file on disk (its zip's, for a member), which a cluster's workers must see; None
    for a run in memory."""
    return next((file.archive_path or file.path for file in files if file.archive_path or file.path), None)


def _part(plan, step):
    """The plan's part for one step, its files without their open archives (a worker reopens the zip's path)."""
    files = [_portable(file) for file in plan.by_step.get(step, [])]
    return RunPlan({step: files} if files else {}, {step: plan.split[step]} if step in plan.split else {}, [],
                   plan.ranks)


def _portable(file):
    if file.archive is None:
        return file
    if file.archive_path is None:
        raise LogError(f"{file.name}: a zip in memory cannot be read by other processes: give its path")
    return replace(file, archive=None)


_ARCHIVES: dict = {}            # a worker's open zips, by path
_LAYOUTS: dict = {}             # a worker's column choices by Parquet schema, by the column options given


def _reopened(file):
    if file.archive_path is None or file.archive is not None:
        return file
    if file.archive_path not in _ARCHIVES:
        _ARCHIVES.clear()                              # one run's zip at a time
        _ARCHIVES[file.archive_path] = open_archive(file.archive_path, file.archive_path)
    return replace(file, archive=_ARCHIVES[file.archive_path])


def _layouts(explicit):
    if explicit not in _LAYOUTS:
        _LAYOUTS.clear()
        _LAYOUTS[explicit] = {}
    return _LAYOUTS[explicit]


def _gathered(submit, works, errors, steps, workers, bounds, progress, clock=time.monotonic):
    """(summaries, cut) as ``steps.step_summaries`` gives them, the ``works`` handed out through ``submit(function,
    work)`` (a future) IN_FLIGHT per worker ahead and gathered in step order, then the ``errors``."""
    handed = works[: bounds.steps]
    pending = deque()
    summaries, start = [], clock()
    shown = RunProgress(steps)
    if progress is not None:
        progress(shown)
    try:
        for index in range(len(works) + len(errors)):
            left = bounds.run_seconds - (clock() - start)
            if index == bounds.steps or left < 0:
                return summaries, cut_notice(index, steps, bounds)
            if index < len(works):
                while len(pending) < workers * (1 + IN_FLIGHT) and index + len(pending) < len(handed):
                    pending.append(submit(summarise, handed[index + len(pending)]))
                try:
                    summaries.append(_result(pending.popleft(), works[index], left))
                except TimeoutError:                       # the run's seconds ran out while waiting for this step
                    return summaries, cut_notice(index, steps, bounds)
            else:
                summaries.append(errors[index - len(works)])
            shown.add(summaries[-1].get("tokens", 0))
            if progress is not None:
                progress(shown)
        return summaries, ""
    finally:
        for future in pending:
            future.cancel()


def _result(future, work, seconds):
    """A step's summary within ``seconds`` (TimeoutError past them: the run's seconds are over), or its failed_step
    naming what stopped the worker (a process that died, a task the cluster gave up on)."""
    try:
        return future.result(timeout=max(0.0, seconds))
    except TimeoutError:
        raise
    except Exception as error:
        files = [file.name for file in work.plan.by_step.get(work.step, [])]
        text = str(error).strip().splitlines()
        return failed_step(work.step, files, f"its worker stopped ({type(error).__name__}"
                                             f"{': ' + text[0][:160] if text else ''})")


def _local_pool(workers):
    """A pool of ``workers`` local processes, forked from a server process that has imported this module (not from
    this process, whose reader threads a fork would copy mid-lock)."""
    from concurrent.futures import ProcessPoolExecutor
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


def default_workers(files: list[RunFile]) -> int:
    """As many workers as the machine holds (``most_workers``) for a run of PARALLEL_BYTES or more stored in two steps
    or more, else 1 (a worker's start costs about a second)."""
    steps = {file.step for file in files if file.step is not None}
    if len(steps) < 2 or sum(file.stored_bytes() for file in files) < PARALLEL_BYTES:
        return 1
    return most_workers()


def most_workers() -> int:
    """The most local workers this machine holds: the cores this process may use, and one per WORKER_BYTES of the
    memory it has available (``available_bytes``); 1 at least."""
    cores, memory = machine()
    return max(1, min(cores, cores if memory is None else memory // WORKER_BYTES))


def machine() -> tuple[int, int | None]:
    """(the cores this process may use, the bytes of memory it has available or None)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores, available_bytes()


def available_bytes(meminfo="/proc/meminfo", cgroup="/sys/fs/cgroup"):
    """Bytes of memory this process may still take: the kernel's MemAvailable, or less under a cgroup's limit
    (memory.max less memory.current, cgroup v2); None where neither can be read (not Linux)."""
    found = []
    try:
        with open(meminfo) as lines:
            found += [int(line.split()[1]) * 1024 for line in lines if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(os.path.join(cgroup, "memory.max")) as limit, open(os.path.join(cgroup, "memory.current")) as used:
            found.append(int(limit.read()) - int(used.read()))
    except (OSError, ValueError):                        # no cgroup v2, or its limit is "max"
        pass
    return min(found) if found else None

