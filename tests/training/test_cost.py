"""The cost model of a training run (toylab/training/cost.py): the probe's line through timed copies recovers a known
step cost exactly; the records' bytes are the trajectories' bytes exactly; a step's temporaries are within a factor of
2 of the model (tracemalloc, not timing); a run over the memory bound is refused before any probe. (Predicted against
measured seconds and peak memory on a grid: benchmarks/training_cost.py.)"""

import tracemalloc

import numpy as np
import pytest
from messages import says

from toylab import make_toy
from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.training import cost
from toylab.training.loop import TrainingConfig, train, trained_ids

DEFAULT = ["naive", "tok_is", "tok_tis", "tok_mis", "seq_is", "seq_tis", "seq_mis", "geo_rs"]


class Clock:
    """A fake timer that ``train`` advances by a known cost: setup + (K + 1)·step(x, config), x = M·T the toy's
    sequence-tokens."""

    def __init__(self, step, setup=0.37):
        self.now, self.step, self.setup = 0.0, step, setup

    def __call__(self):
        return self.now

    def train(self, toy, selection, baseline, config):
        self.now += self.setup + (config.steps + 1) * self.step(toy.M * toy.T, config)


@pytest.mark.parametrize(("T", "V"), [(11, 4), (16, 2), (3, 8), (9, 3)])
def test_the_probe_recovers_an_expected_step_a_plus_b_m_t(monkeypatch, T, V):
    clock = Clock(lambda x, config: 2e-3 + 7e-9 * x)
    monkeypatch.setattr(cost, "train", clock.train)
    monkeypatch.setattr(cost, "bandwidth_factor", lambda size, probed: 1.0)        # the fake clock has no caches
    line = cost.probe((T, V, 0.3, 0, DEFAULT_SAMPLER), {"naive": {}}, "none", TrainingConfig(), timer=clock)
    config = TrainingConfig(steps=500)
    assert line.seconds(T, V, config) == pytest.approx(clock.setup + 501 * (2e-3 + 7e-9 * V**T * T))
    assert clock.now < 12 * (clock.setup + 4 * (2e-3 + 7e-9 * cost.PROBE_SEQUENCES * T))   # the copies stay small


@pytest.mark.parametrize(("runs", "N", "selection"), [(64, 2, {"naive": {}}), (8, 1024, {"naive": {}}),
                                                    (1, 64, {"naive": {}}), (64, 1, {"naive": {}}),
                                                    (32, 64, {"rloo": {}, "naive": {}})])
def test_the_probe_recovers_a_sampled_step_a_plus_b_r_plus_c_r_n(monkeypatch, runs, N, selection):
    clock = Clock(lambda x, config: 1e-3 + 4e-5 * config.runs + 5e-7 * config.runs * config.N)
    monkeypatch.setattr(cost, "train", clock.train)
    monkeypatch.setattr(cost, "bandwidth_factor", lambda size, probed: 1.0)
    config = TrainingConfig(steps=300, mode="sampled", runs=runs, N=N)
    line = cost.probe((16, 2, 0.3, 0, DEFAULT_SAMPLER), selection, "none", config, timer=clock)
    assert line.seconds(16, 2, config) == pytest.approx(clock.setup + 301 * (1e-3 + 4e-5 * runs + 5e-7 * runs * N))


def test_the_bandwidth_factor_scales_only_what_the_copies_did_not_reach(monkeypatch):
    monkeypatch.setattr(cost, "_seconds_per_number", lambda size: 1e-9 * (1 + size / 2**20))
    assert cost.bandwidth_factor(2**14, 2**16) == 1.0 == cost.bandwidth_factor(2**16, 2**16)
    assert cost.bandwidth_factor(2**22, 2**16) == pytest.approx(5 / (1 + 2**-4))
    line = cost.Probe("expected", 1e-3, 1e-8, setup=0.5, probed=2**16)
    assert line.seconds(11, 4, TrainingConfig(steps=9)) == pytest.approx(
        0.5 + 10 * (1e-3 + 1e-8 * 4**11 * 11 * cost.bandwidth_factor(4**11 * 11, 2**16)))


def test_a_busy_machine_s_wall_clock_slows_the_estimate_the_page_refuses_by(monkeypatch):
    cpu = Clock(lambda x, config: 1e-3 + 1e-9 * x)
    wall = Clock(lambda x, config: 3 * (1e-3 + 1e-9 * x), setup=3 * cpu.setup)          # three times longer
    monkeypatch.setattr(cost, "train", lambda *args: (cpu.train(*args), wall.train(*args)))
    line = cost.probe((10, 4, 0.3, 0, DEFAULT_SAMPLER), {"naive": {}}, "none", TrainingConfig(), timer=cpu,
                      clock=wall)
    config = TrainingConfig(steps=1000)
    assert line.slowdown == pytest.approx(3) and line.wall_seconds(10, 4, config) == pytest.approx(
        3 * line.seconds(10, 4, config))
    limit = 2 * line.seconds(10, 4, config)                                          # the CPU's fit, the wall's not
    assert "over the limit" in cost.refusal(10, 4, config, ["naive"], lambda: line, limit)


def test_a_larger_copy_timed_no_slower_puts_all_of_its_time_on_the_sequences(monkeypatch):
    """Timing noise can make the larger copy look no slower: the estimate then errs long (refusing more), not short."""
    clock = Clock(lambda x, config: 1e-3 - 1e-10 * x)                     # a step that "gets faster" with M·T
    monkeypatch.setattr(cost, "train", clock.train)
    line = cost.probe((10, 4, 0.3, 0, DEFAULT_SAMPLER), {"naive": {}}, "none", TrainingConfig(), timer=clock,
                      clock=clock)
    large, small = 4**9 * 9, 4**8 * 8                                      # the copies: T = 9 and T = 8
    assert line.b == pytest.approx((1e-3 - 1e-10 * large) / large)
    assert line.a == pytest.approx(1e-3 - 1e-10 * small - line.b * small)
    assert line.step_seconds(10, 4, 1, 1) > 1e-3                           # longer than any copy took


@pytest.mark.parametrize("config", [TrainingConfig(steps=7), TrainingConfig(steps=5, mode="sampled", runs=3, N=11)])
def test_the_records_bytes_are_the_trajectories_bytes(config):
    toy = make_toy(5, 3)
    ids = trained_ids(DEFAULT, config.mode, config.N)
    trajectories = train(toy, {id: {} for id in ids}, "none", config)
    kept = sum(value.nbytes for trajectory in trajectories.values() for value in vars(trajectory).values()
               if isinstance(value, np.ndarray))
    step = cost.run_bytes(5, 3, config, ids) - kept                        # what is left is the step's temporaries
    expected_step = 8 * cost.FLOATS_PER_ENUMERATED_SEQUENCE * 3**5 if config.mode == "expected" else \
        8 * (cost.FLOATS_PER_DRAWN_TOKEN * 3 * 11 * 5 + len(ids) * 3 * (cost.FLOATS_PER_TABLE_ENTRY * 5 * 3
                                                                         + cost.FLOATS_PER_COUNT_PAIR * 25
                                                                         + cost.FLOATS_PER_RUN))
    assert step == expected_step


@pytest.mark.parametrize(("T", "V", "config", "ids"), [
    (10, 4, TrainingConfig(steps=2), DEFAULT),
    (8, 5, TrainingConfig(steps=2), ["naive", "seq_mis", "geo_rs", "verl:decoupled_geo_rs_token_tis", "ppo_clip"]),
    (6, 4, TrainingConfig(steps=3, mode="sampled", runs=16, N=2048), DEFAULT),
    (16, 2, TrainingConfig(steps=3, mode="sampled", runs=64, N=2), DEFAULT + ["seq_mis", "trm", "k3_rs"]),
])
def test_a_run_s_memory_is_within_a_factor_of_two_of_the_model(T, V, config, ids):
    toy = make_toy(T, V)
    ids = trained_ids(ids, config.mode, config.N)
    tracemalloc.start()
    try:
        train(toy, {id: {} for id in ids}, "none", config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    predicted = cost.run_bytes(T, V, config, ids)
    assert predicted / 2 <= peak <= 2 * predicted, (peak, predicted)


def test_a_run_over_the_memory_bound_is_refused_before_any_probe():
    config = TrainingConfig(steps=1000, mode="sampled", runs=64, N=16_384)
    refused = cost.refusal(16, 2, config, DEFAULT, pytest.fail, cost.PAGE_SECONDS)
    assert says(refused, "need", "limit of 1 GB")


def test_a_run_within_both_bounds_is_not_refused():
    line = cost.Probe("expected", 1e-3, 1e-9)
    assert cost.refusal(6, 4, TrainingConfig(), DEFAULT, lambda: line, cost.PAGE_SECONDS) is None
    assert says(cost.refusal(6, 4, TrainingConfig(steps=1000), DEFAULT, lambda: cost.Probe("expected", 0.02, 0.0),
                             cost.PAGE_SECONDS), "limit of 10 s", "fewer steps")
