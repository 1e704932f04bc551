"""``python -m toylab inspect DIR``: a run — a directory, a zip of one, or several files — read step by step (the
parser, shared with one log file's form, is ``cli.inspect``'s).

Every step is a sample: its numbers are estimates with standard errors, printed to their significant digits. A
step whose file is malformed is reported on its own line and the other steps are still read; a bad argument, or
a run with no readable step, prints one line, ``toylab: error: ...``, and exits with status 2. The steps are
summarised in ``--workers`` local processes (at most what the machine holds: a core and 1 GB of memory a worker; by
default that many for a run of 64 MB or more) or on a Dask
cluster (``--scheduler``, an optional extra): the numbers are the same (``your_run.run_map``). On a terminal, a
progress line on stderr gives the steps read, tokens per second and the time left.
"""

import argparse
import importlib.util
import os
import sys

from toylab.cli.arguments import chosen_ids, number_in, selection_from_overrides
from toylab.cli.progress import ProgressBar
from toylab.presentation.estimates import record_text
from toylab.text import percent, significant
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.dask_cluster import DISTRIBUTED_EXTRA
from toylab.your_run.files import LogError, regular_file
from toylab.your_run.run import RunFile, directory_files, step_and_rank, zip_files
from toylab.your_run.run_map import (
    WORKER_BYTES,
    default_workers,
    machine,
    most_workers,
    run_summaries,
)
from toylab.your_run.statistics import STANDARD_ERRORS
from toylab.your_run.steps import SERIES, departures

ROLES = ("sampler", "trainer", "mask", "reward", "sequence_id", "position")


RUN_FORMS = ("a directory of step files (step_N/…, global_step_N…, train_data_stepN.jsonl, …), a zip of one, or "
             "several files")
RUN_ONLY = ("workers", "scheduler")


def is_run(paths):
    """True when the paths name a run rather than one log file: a directory, a zip, or several paths."""
    return len(paths) > 1 or any(os.path.isdir(path) or path.lower().endswith(".zip") for path in paths)


def add_run_arguments(group):
    """--workers and --scheduler: where a run's steps are summarised (a run only: one log file is read in one
    process)."""
    most = most_workers()
    group.add_argument("--workers", type=_worker_count(most), default=None, metavar="N",
                       help="local processes summarising the steps, at most one per core this process may use and "
                            f"per {WORKER_BYTES / 1e9:g} GB of memory available ({most} here; default: that many for "
                            "a run of 64 MB or more, else 1; with --scheduler local, 2 or fewer)")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="summarise the steps on a Dask cluster (default: none, local processes): 'local' starts "
                            "one of --workers processes, an address (tcp://host:8786) connects to a running one, whose "
                            "workers see the run at the same path (an optional extra: "
                            f"{DISTRIBUTED_EXTRA.split(': ')[1]})")


def check_run_arguments(parser, arguments):
    """A run's arguments: Dask when --scheduler asks for it, and ``selection``, the estimators with --set applied
    (one-line errors)."""
    if arguments.scheduler is not None and importlib.util.find_spec("distributed") is None:
        parser.error(f"--scheduler needs Dask, which is not installed: {DISTRIBUTED_EXTRA}")
    try:
        arguments.selection = selection_from_overrides(arguments.set, chosen_ids(arguments.estimators))
    except ValueError as error:
        parser.error(str(error))


def _worker_count(most):
    """An argparse ``type``: a worker count from 1 to ``most`` (``run_map.most_workers``), a refusal saying what the
    machine has."""
    def parse(raw):
        try:
            return number_in(int, 1, most)(raw)
        except argparse.ArgumentTypeError as why:
            cores, memory = machine()
            held = "" if memory is None else f" and {memory / 1e9:,.1f} GB of memory available at " \
                                             f"{WORKER_BYTES / 1e9:g} GB a worker"
            raise argparse.ArgumentTypeError(f"{why} (this machine gives this process {cores} core"
                                             f"{'s' if cores > 1 else ''}{held})") from None
    return parse


def run_files(paths):
    """The RunFiles the paths name; LogError if one cannot be read."""
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return directory_files(paths[0])
    if len(paths) == 1 and paths[0].lower().endswith(".zip"):
        regular_file(paths[0], paths[0])
        return zip_files(paths[0], paths[0], CLI_BOUNDS)
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise LogError(f"{missing[0]}: no such file")
    return [RunFile(path, *step_and_rank(path), path=path) for path in paths]


def report(arguments):
    files = run_files(arguments.paths)
    summaries, cut = _summaries(arguments, files)
    if all("error" in summary for summary in summaries):
        raise LogError(summaries[0]["error"])
    result = {"run": arguments.paths[0] if len(arguments.paths) == 1 else list(arguments.paths),
              "files": len(files), "steps": summaries, "departures": departures(summaries),
              "standard_errors": STANDARD_ERRORS, "cut_short": cut or None}
    result["notes"] = [cut] if cut else []
    result["notes"] += [f"step {summary['step']}: not read: {summary['error']}" for summary in summaries
                        if "error" in summary]
    result["notes"] += [f"step {summary['step']}: {notice}" for summary in summaries for notice in
                        summary.get("notices", ())]
    return result


def _summaries(arguments, files):
    """(each step's summary, why the reading stopped short or None), in --workers processes or on --scheduler's
    cluster, with a progress line on a terminal."""
    explicit = {role: getattr(arguments, role) for role in ROLES}
    workers = arguments.workers or (default_workers(files) if arguments.scheduler is None else min(2, most_workers()))
    bar = ProgressBar("inspect", 1) if sys.stderr.isatty() else None
    try:
        return run_summaries(files, arguments.selection, CLI_BOUNDS, allow_torch=True, explicit=explicit,
                             workers=workers, scheduler=arguments.scheduler,
                             progress=None if bar is None else lambda read: bar.update(read.share(), read.text()))
    finally:
        if bar is not None:
            bar.close()


def as_text(result):
    """The run as text: its size, a row per step, the metrics that left their early range, the notices."""
    read = [summary for summary in result["steps"] if "error" not in summary]
    lines = [f"{result['run']}: {result['files']:,} files, {len(result['steps']):,} steps "
             f"({sum(summary['tokens'] for summary in read):,} response tokens)",
             f"Each step's numbers are sample estimates ± {STANDARD_ERRORS}.", "",
             f"{'step':>6} {'seqs':>7} {'tokens':>10}  {'k1':<20}{'k3':<20}{'mean (ρ−1)²':<20}{'mean ρ − 1':<22}"
             f"{'max |log ρ|':>11} {'min ρ':>9} {'|log ρ|>0.01':>13}"]
    lines += [_step_line(summary) for summary in result["steps"]]
    lines += ["", *_departure_lines(result["departures"], len(read))]
    lines += [f"Notice: step {summary['step']}: {notice}." for summary in read for notice in summary["notices"]]
    lines += [f"Notice: {result['cut_short']}"] if result["cut_short"] else []
    return "\n".join(lines)


def _step_line(summary):
    """One step's row: its size and estimates, or why it was not read."""
    step = "?" if summary["step"] is None else summary["step"]
    if "error" in summary:
        return f"{step:>6}  not read: {summary['error']}"
    share = next(row for row in summary["tail_shares"] if row["threshold"] == 0.01)
    return (f"{step:>6} {summary['sequences']:>7,} {summary['tokens']:>10,}  "
            f"{record_text(summary['k1']):<20}{record_text(summary['k3']):<20}{record_text(summary['chi2_low_variance']):<20}"
            f"{record_text(summary['identity_mean_rho_minus_1']):<22}{significant(summary['max_abs_log_rho']):>11} "
            f"{significant(summary['min_rho']):>9} {percent(share['value']):>13}")


def _departure_lines(departures, read):
    """The metrics that left their early range and at which step; none said only when more than 3 steps were read."""
    left = {key: step for key, step in departures.items() if step is not None}
    if left:
        return ["First step outside the early range (the first 20 % of steps, ± 2 se): "
                + ", ".join(f"{key} at step {step}" for key, step in left.items())]
    return [f"No metric of {', '.join(SERIES)} left its early range (± 2 se)."] if read > 3 else []

