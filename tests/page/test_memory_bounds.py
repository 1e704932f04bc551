"""What bounds the server's memory: a toy keeps two M-vectors, the toy cache is bounded by bytes, at most
LARGE_WORK_SLOTS large computations run at once, Monte Carlo works in small chunks with the same draws.
(The memory itself is measured by benchmarks/session_memory.py, not asserted here.)"""

import threading
import time

import numpy as np
import pytest

import toylab.analysis.montecarlo
from toylab import EXACT_IDS, exact_table, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import monte_carlo
from toylab.presentation import frames
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.work_slots import LARGE_WORK, LARGE_WORK_SLOTS, large_work


def kept_vectors(toy):
    return {name for name, value in vars(toy).items() if isinstance(value, np.ndarray) and value.size == toy.M}


def test_a_toy_keeps_only_the_sampler_probabilities_and_the_reward():
    toy = make_toy(T=8, V=4)
    exact_table(toy, None, "logged")                # the exact pass works in chunks: the toy keeps no M-vector
    diagnostics(toy)                                # J, E_μ[r], ∇J from the count of token 0
    assert kept_vectors(toy) == set()
    frames.sequence_facts(toy)                      # the Ratios tab's exact distribution of W needs μ(y)
    assert toy.rewarded.dtype == bool and toy.R.dtype == float and np.array_equal(toy.R, toy.rewarded)
    assert kept_vectors(toy) == {"p_sampler", "rewarded"}
    assert toy.log_logged is toy.log_mu                 # logged = sampled: one array
    tables = sum(array.nbytes for array in (toy.theta, toy.b, toy.log_pi, toy.log_mu, toy.pi, toy.mu, toy.log_rho,
                                            toy.rho, toy.kept, toy.true_grad, toy.identity_tokens))
    memo = sum(array.nbytes for pair in toy.memo.values() for array in pair)
    assert toy.nbytes() == 9 * toy.M + tables + memo


@pytest.mark.parametrize("T", [1, 3])
def test_working_in_place_never_touches_the_toys_tables(T):
    toy = make_toy(T=T, V=3, mismatch=1.0)
    before = {name: getattr(toy, name).copy() for name in ("log_pi", "log_mu", "log_rho", "rho", "pi", "mu")}
    for estimator in EXACT_IDS:
        exact_table(toy, {estimator: {}})
    diagnostics(toy)
    frames.sequence_facts(toy)
    for name, table in before.items():
        np.testing.assert_array_equal(getattr(toy, name), table, err_msg=name)


class Sized:
    def __init__(self, size):
        self.size = size


def test_the_cache_evicts_the_least_recently_used_by_bytes():
    cache = ByteBoundedCache(100, lambda value: value.size)
    a = cache.get("a", lambda: Sized(40))
    cache.get("b", lambda: Sized(40))
    assert cache.get("a", lambda: Sized(-1)) is a                     # kept: not rebuilt, and now the latest
    c = cache.get("c", lambda: Sized(40))                              # 120 bytes: b, least recently used, goes
    assert cache.total() == 80 and cache.get("a", lambda: Sized(-1)) is a
    a.size = 90                                                        # values grow after they are stored
    assert cache.get("c", lambda: Sized(-1)) is c                      # 130 bytes: a goes, c stays
    assert len(cache) == 1 and cache.total() == 40
    assert "c" in cache and "a" not in cache and "b" not in cache
    assert cache.get("huge", lambda: Sized(500)).size == 500 and len(cache) == 1   # the one asked for stays


def test_a_failed_build_is_not_kept():
    cache = ByteBoundedCache(100, lambda value: value.size)

    def fail():
        raise ValueError("too large")
    with pytest.raises(ValueError):
        cache.get("x", fail)
    assert len(cache) == 0 and cache.get("x", lambda: Sized(1)).size == 1


def test_at_most_the_slots_run_large_work_at_once():
    running, most, lock = [0], [0], threading.Lock()

    def work(size, nested=False):
        with large_work(size):
            if nested:
                with large_work(size):              # a thread holding a slot does not wait for a second one
                    pass
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=work, args=(LARGE_WORK, i % 2 == 0)) for i in range(2 * LARGE_WORK_SLOTS + 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert most[0] == LARGE_WORK_SLOTS and not any(thread.is_alive() for thread in threads)
    with large_work(LARGE_WORK - 1):                # small work never waits, even with every slot taken
        pass


def test_monte_carlo_draws_do_not_depend_on_the_chunk_size(monkeypatch):
    toy = make_toy(T=5, V=3, mismatch=0.5)
    selection = {"on_policy": {}, "seq_tis": {}, "rloo": {}}
    whole = monte_carlo(toy, selection, "logged", (1, 10, 100), replicates=50, seed=4)
    monkeypatch.setattr(toylab.analysis.montecarlo, "SAMPLES_PER_CHUNK", 700)   # 1 replicate of 100 × 5 tokens per chunk
    chunked = monte_carlo(toy, selection, "logged", (1, 10, 100), replicates=50, seed=4)
    for estimator in selection:
        np.testing.assert_array_equal(whole[estimator], chunked[estimator])
