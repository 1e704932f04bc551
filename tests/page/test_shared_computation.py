"""A computation shared across sessions is done once when many ask for it at the same moment (single-flight), and its
value is the one each would have computed alone. No timed assertion: builds are counted. A build holds until every
thread has called it or a grace time has passed, so a cache that let each thread build (as before) is caught, while
the single-flight cache builds once however the threads are scheduled."""

import threading

import numpy as np
import pytest

from toylab.state.query import DEFAULTS
from toylab.training.loop import TrainingConfig, train
from toylab_app.caches import cache, training_cache
from toylab_app.caches.bounded_cache import ByteBoundedCache

THREADS = 8
GRACE_S = 0.5           # how long a build waits for the other threads to call it too (they never do when shared)


class Build:
    """A build for THREADS threads: it counts its calls and returns a new object (or raises ``fail``) once every
    thread has called it or GRACE_S has passed."""

    def __init__(self, fail=None, make=object):
        self.calls, self.fail, self.make = 0, fail, make
        self.lock, self.all_called = threading.Lock(), threading.Event()

    def __call__(self):
        with self.lock:
            self.calls += 1
            if self.calls == THREADS:
                self.all_called.set()
        self.all_called.wait(GRACE_S)
        if self.fail is not None:
            raise self.fail
        return self.make()


def at_once(get, threads=THREADS):
    """Each thread's value of ``get()`` (or its exception), the threads released together."""
    ready, results = threading.Barrier(threads), [None] * threads

    def ask(index):
        ready.wait()
        try:
            results[index] = get()
        except BaseException as error:          # noqa: BLE001 — a thread's outcome, compared by the test
            results[index] = error

    workers = [threading.Thread(target=ask, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)
    return results


def test_concurrent_identical_requests_are_built_once_and_share_the_value():
    shared, build = ByteBoundedCache(10, lambda value: 1), Build()
    values = at_once(lambda: shared.get("key", build))
    assert build.calls == 1
    assert all(value is values[0] for value in values)
    assert shared.get("key", lambda: pytest.fail("kept: not built again")) is values[0]


def test_different_keys_are_built_apart():
    shared, build = ByteBoundedCache(10, lambda value: 1), Build()
    values = at_once(lambda: shared.get(threading.current_thread().name, build))
    assert build.calls == THREADS and len({id(value) for value in values}) == THREADS


def test_a_build_that_fails_fails_for_every_waiter_and_is_not_kept():
    shared, build = ByteBoundedCache(10, lambda value: 1), Build(fail=ValueError("too large"))
    outcomes = at_once(lambda: shared.get("key", build))
    assert build.calls == 1 and all(isinstance(outcome, ValueError) for outcome in outcomes)
    assert "key" not in shared and shared.get("key", lambda: 5) == 5


class Stopped(BaseException):
    """Like Streamlit's StopException: a BaseException that is not an Exception (the builder's script was stopped)."""


def test_a_stopped_build_is_taken_over_by_a_waiter():
    shared, calls, lock = ByteBoundedCache(10, lambda value: 1), [], threading.Lock()

    def build():
        with lock:
            calls.append(None)
            first = len(calls) == 1
        if first:                                # stopped after the other thread had time to wait for it
            threading.Event().wait(GRACE_S)
            raise Stopped
        return "built by the waiter"

    outcomes = at_once(lambda: shared.get("key", build), threads=2)
    assert len(calls) == 2
    assert sum(isinstance(outcome, Stopped) for outcome in outcomes) == 1 and "built by the waiter" in outcomes
    assert shared.get("key", lambda: pytest.fail("kept")) == "built by the waiter"


def test_training_runs_asked_at_once_are_trained_once_and_equal_a_run_alone(monkeypatch):
    """Eight sessions open Training at the same settings at once (``training_cache.trajectories``): one run, and the
    trajectories each gets equal, bit for bit, those of a run trained alone in this process."""
    settings, config = DEFAULTS, TrainingConfig(steps=20)
    selection = training_cache.trained(settings, config.mode)
    build = Build()

    def counted_train(*args):
        build()                                  # counted, and held until every thread has called it or GRACE_S
        return train(*args)

    monkeypatch.setattr(training_cache, "TRAJECTORIES", ByteBoundedCache(2**26, lambda runs: 1))
    monkeypatch.setattr(training_cache, "train", counted_train)
    shared = at_once(lambda: training_cache.trajectories(settings.toy_key, selection, settings.baseline, config))
    assert build.calls == 1
    alone = train(cache.toy(*settings.toy_key), {id: dict(params) for id, params in selection}, settings.baseline,
                  config)
    for runs in shared:
        assert runs is shared[0] and list(runs) == list(alone)
        for id, trajectory in alone.items():
            for name, value in vars(trajectory).items():
                np.testing.assert_array_equal(getattr(runs[id], name), value, err_msg=f"{id}.{name}")
