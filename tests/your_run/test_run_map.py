"""The parallel reading of a run (``run_map``) cut by the bounds as the one-process reading is, and its progress:
steps, tokens, tokens per second and the time left against a clock the test holds."""

from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hostile_runs import many_steps

from toylab.your_run import run_map
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.run import step_logs, zip_files
from toylab.your_run.run_progress import RunProgress
from toylab.your_run.steps import step_summaries


@pytest.fixture
def run_zip(tmp_path):
    """Six steps of one tiny log each, in a zip on disk (a zip in memory cannot reach other processes)."""
    name, content = many_steps(6)
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def in_threads(monkeypatch):
    """run_map's pool of processes replaced by one of threads: the same submit, gather and cancel."""
    monkeypatch.setattr(run_map, "_local_pool", lambda workers: ThreadPoolExecutor(max_workers=workers))


@pytest.mark.parametrize("steps", [1, 4, 6, 7])
def test_workers_cut_at_the_steps_bound_as_one_process_does(monkeypatch, run_zip, steps):
    in_threads(monkeypatch)
    bounds = CLI_BOUNDS.but(steps=steps)
    files = zip_files(run_zip, run_zip, bounds)
    one = run_map.run_summaries(files, {}, bounds, workers=1)
    two = run_map.run_summaries(files, {}, bounds, workers=2)
    assert two == one and len(one[0]) == min(steps, 6) and bool(one[1]) == (steps < 6)


def test_workers_cut_at_the_seconds_bound_as_one_process_does(run_zip):
    bounds = CLI_BOUNDS.but(run_seconds=25)

    def ticks():                                   # the start at 0 s, then 10 s more before each step
        return iter(range(0, 1000, 10)).__next__

    files = zip_files(run_zip, run_zip, bounds)
    one = step_summaries(step_logs(files, bounds), 6, {}, bounds, clock=ticks())
    plan = run_map.plan_run(files, bounds, False)
    works = [run_map.StepWork(step, run_map._part(plan, step), bounds, False, (), {}) for step in plan.steps]

    def submit(function, work):                    # at once, in this process
        future = Future()
        future.set_result(function(work))
        return future

    two = run_map._gathered(submit, works, [], 6, 2, bounds, None, clock=ticks())
    assert two == one and [summary["step"] for summary in one[0]] == [1, 2] and "first 2 steps of 6" in one[1]


def test_the_progress_counts_steps_and_tokens_against_the_clock():
    now = iter([100.0, 110.0, 110.0, 130.0, 130.0]).__next__
    progress = RunProgress(4, clock=now)                        # starts at 100 s
    progress.add(5_000_000)
    assert progress.share() == 0.25
    assert progress.text() == "1 of 4 steps, 5.0 M tokens, 0.50 M tokens/s, about 30 s left"       # at 110 s
    assert progress.seconds() == 10.0
    progress.add(7_000_000)
    assert progress.text() == "2 of 4 steps, 12.0 M tokens, 0.40 M tokens/s, about 30 s left"      # at 130 s


def test_the_last_progress_holds_every_step_and_every_token_read(monkeypatch, run_zip):
    in_threads(monkeypatch)
    files = zip_files(run_zip, run_zip, CLI_BOUNDS)
    for workers in (1, 2):
        seen = []
        summaries, _ = run_map.run_summaries(files, {}, CLI_BOUNDS, workers=workers,
                                             progress=lambda shown, seen=seen: seen.append((shown.read, shown.tokens)))
        assert seen[0] == (0, 0) and seen[-1] == (6, sum(summary["tokens"] for summary in summaries))
        assert [read for read, _ in seen] == list(range(7))


def works_of(run_zip, bounds):
    plan = run_map.plan_run(zip_files(run_zip, run_zip, bounds), bounds, False)
    return [run_map.StepWork(step, run_map._part(plan, step), bounds, False, (), {}) for step in plan.steps]


def test_a_step_that_never_comes_back_is_cut_at_the_run_s_seconds(run_zip):
    """Issue 41, case 2: a cluster that takes the steps and never returns them (a scheduler without workers) held the
    command past 720 s: the run's seconds were checked only between results."""
    bounds = CLI_BOUNDS.but(run_seconds=1)
    summaries, cut = run_map._gathered(lambda function, work: Future(), works_of(run_zip, bounds), [], 6, 2, bounds,
                                       None)
    assert summaries == [] and cut == "The first 0 steps of 6 were read: as many steps as 1 s allow of a run are read here."


def test_a_worker_that_stops_is_that_step_s_error(run_zip):
    from concurrent.futures.process import BrokenProcessPool

    def submit(function, work):
        future = Future()
        if work.step == 3:
            future.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
        else:
            future.set_result(function(work))
        return future
    summaries, cut = run_map._gathered(submit, works_of(run_zip, CLI_BOUNDS), [], 6, 2, CLI_BOUNDS, None)
    assert cut == "" and [summary["step"] for summary in summaries] == [1, 2, 3, 4, 5, 6]
    assert summaries[2] == {"step": 3, "files": ["run/step_3.jsonl"], "error": "its worker stopped (BrokenProcessPool: A "
                            "process in the process pool was terminated abruptly)"}
