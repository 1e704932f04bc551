"""What a training run costs, known before it runs: its seconds, measured on small copies of it, and its memory.

Seconds. A run is K + 1 steps of the same work, and a step's seconds depend on more than its sizes: an estimator's
weight function may cost thirty times another's, the sampler model adds its own tables, and the machine and its load
set the pace. So a step is timed, not guessed: ``probe`` runs ``train`` for one step (K = 1: two steps' work) on
copies of the run small enough to take milliseconds, with the same estimators, baseline, optimizer, noise and toy,
and a line through those times gives a step at the run's size:

    expected:  step(M) = a + b·M                 M = V**T sequences, up to M₂; copies at T₁ < T₂ ≤ T, the same V,
                                                 M₂ ≤ PROBE_SEQUENCES, ≤ PROBE_WORK per enumerating estimator but
                                                 not below PROBE_SEQUENCES_LEAST (the run's own T when M is small)
               step(M) = a + b·M₁ + b·g·(M − M₁) beyond M₂: the smaller copy's step, and b grown by g
    sampled:   step(r, N) = a + b·r + c·r·N      r runs of N draws; copies at (1, 1), (r₂, 1), (r₂, N₂) of the
                                                 run's own toy, r₂ = min(r, PROBE_RUNS), N₂ = min(N, PROBE_DRAWS)
                                                 (N = 2 for 1 when rloo is trained: it needs N ≥ 2)

    seconds = setup + (K + 1)·step               setup: what K = 1 takes beyond its two steps, on the largest copy;
                                                 coefficients below 0 (timing noise) are taken as 0

Seconds of the thread's CPU, so that other work does not blur the line; a run is refused by the seconds it would take
on the wall's clock: those, times how much longer the copies took by that clock (a busy server's users wait longer).

b is per sequence: the engine enumerates M-vectors (``engine.grid``: no (M, T) array). But a sequence does not cost
the same at every M: numpy allocates each temporary afresh, and arrays under 4 MB (2**19 numbers) are faulted in
page by page, while larger ones get the kernel's huge pages (numpy advises them); caches and the engine's chunks
(``loop.chunk_rows``: several estimators at once below 2**16 sequences) move it too. Measured on the default
estimators at V = 4: 92–103 ns a sequence from 2**14 to 2**18, 48 at 2**20, 38 at 2**22 (a 4 KB page faulted per 33
sequences at 2**18, per 660 at 2**22). So b from copies under 2**19 overstated a large run's step by 2–3 times.
g (``growth``) is measured, for the run's toy, on REFERENCE_SELECTION (one estimator that enumerates, seq_tis):

    g = [r(M₃) − r(M₁)]/(M₃ − M₁) ÷ [r(M₂) − r(M₁)]/(M₂ − M₁)      r(m): its seconds for K = 1 at m = V**t sequences;
                                                                  M₃: the run's M up to GROWTH_LARGEST (else the
                                                                  largest V**t under it, at least V**(T₂+1))

its cost per added sequence as far as the run against as far as the copies (g = 1 when no estimator enumerates or
the run is no larger than the copies): exact when the run's cost beyond M₁ grows as the reference's does. And the copies enumerate as the run will (its ``chunk_rows``): an estimator
at a time when the run's M is over 2**16 (chunked, every estimator at 2**15 cost a third as much a sequence).
(A sampled run's arrays, r·N·T numbers, showed no such growth on the grid of benchmarks/training_cost.py.)

(a: the per-step work of every estimator, the recursions; b: enumerating, or a run's tables; c: drawing and scoring
sequences). A copy costs at most a few steps of PROBE_SEQUENCES sequences, or of PROBE_RUNS × PROBE_DRAWS draws, per
estimator, and the reference four steps of one estimator at M₃ ≤ GROWTH_LARGEST (0.1–0.2 s here, and no more memory
than the run's own step): a small part of any run worth refusing, and the page keeps the line (``Probe``) for the next
settings.

Bytes, from the arrays the loop keeps and one step's temporaries (measured with tracemalloc; benchmarks/training_cost.py
checks the whole model on a grid):

    records:     8 · E · r · (K + 1) · (T·V + R)    θ_k and R numbers per step (R = 8 expected, 6 sampled; r = 1
                                                     expected): exact
    one step:    expected  8 · FLOATS_PER_ENUMERATED_SEQUENCE · M        when an estimator enumerates (one at a time)
                 sampled   8 · (FLOATS_PER_DRAWN_TOKEN · r·N·T
                                + E·r·(FLOATS_PER_TABLE_ENTRY · T·V + FLOATS_PER_COUNT_PAIR · T² + FLOATS_PER_RUN))
    run          records + one step: what the page's server adds, refused over MEMORY_LIMIT_BYTES
    command line BASE_BYTES + the largest of: run + lists, the toy's diagnostics (8·FLOATS_PER_ENUMERATED_SEQUENCE·M),
                 lists + JSON text; lists: LISTED_BYTES_PER_VALUE per step value of every run (Python floats),
                 JSON text: JSON_BYTES_PER_VALUE per value (``--json``)
"""

import time
from dataclasses import dataclass, replace

from toylab.engine.recursion import FACTORS
from toylab.engine.toy import make_toy
from toylab.training.loop import TrainingConfig, chunk_rows, train

PAGE_SECONDS = 10.0                         # the page refuses a run estimated over this
COMMAND_LINE_FACTOR = 30                    # … and the command line one over 30 times that
MEMORY_LIMIT_BYTES = 10**9                  # both refuse a run estimated over this
PROBE_SEQUENCES = 2**18                     # the larger copy of an expected run enumerates at most this many …
PROBE_SEQUENCES_LEAST = 2**16               # … and at least this many when the run does (if its M allows) …
PROBE_WORK = 2**21                          # … and about this many over all its enumerating estimators
PROBE_RUNS, PROBE_DRAWS = 16, 256           # the copies of a sampled run
GROWTH_LARGEST = 2**21                      # the reference runs at the run's M up to this (or the next T past M₂)
REFERENCE_SELECTION = {"on_policy": {}, "seq_tis": {}}       # g's reference: one estimator that enumerates
QUICK_PROBE_SECONDS = 0.05                  # a copy is timed again (the least counts) until this is spent …
PROBE_REPEATS = 5                           # … at most this many times
BASE_BYTES = 150 * 2**20                    # the interpreter, numpy and toylab (the command line)
FLOATS_PER_ENUMERATED_SEQUENCE = 9          # measured 5.2–6.4 (the default estimators) to 13–15 (every one)
FLOATS_PER_DRAWN_TOKEN = 16                 # measured 14 to 22
FLOATS_PER_TABLE_ENTRY = 20                 # a run's (T, V) tables, the optimizer's state, the step …
FLOATS_PER_COUNT_PAIR = 4                   # … its count recursion over (position, count of token 0) …
FLOATS_PER_RUN = 100                        # … and its per-run numbers (fitted to 8 toys, T = 4 to 16, V = 2 to 8)
LISTED_BYTES_PER_VALUE = 32                 # a float object and its place in a list
JSON_BYTES_PER_VALUE = 68
LISTS = {"expected": 7, "sampled": 5}       # per-step lists of a run (sampled: no rel_bias, step_cosine)
RECORDED = {"expected": 8, "sampled": 6}    # numbers recorded per step besides θ


@dataclass(frozen=True)
class Probe:
    """A step's seconds as a line through timed copies of a run: a + b·M (expected; beyond the larger copy's
    ``probed`` sequences a + b·M₁ + b·g·(M − M₁), M₁ the smaller's, g ``growth``) or a + b·r + c·r·N (sampled);
    and the seconds a run takes to set up (its records, optimizer, generators), measured on the largest copy.
    Seconds of the thread's CPU; ``slowdown`` is how much longer the copies took by the clock on the wall (other
    work on the machine), at least 1."""
    mode: str
    a: float
    b: float
    c: float = 0.0
    setup: float = 0.0
    probed: int = 1                 # expected: the larger copy's sequences, M₂ = V**T₂ …
    smaller: int = 1                # … the smaller's, M₁ = V**T₁ …
    growth: float = 1.0             # … and g, measured for the toy probed (its M)
    slowdown: float = 1.0

    def step_seconds(self, T, V, runs, N):
        if self.mode == "expected":
            M = V**T
            return self.a + self.b * (M if M <= self.probed else self.smaller + self.growth * (M - self.smaller))
        return self.a + self.b * runs + self.c * runs * N

    def seconds(self, T, V, config):
        """CPU seconds of ``train`` under ``config`` on a toy of T, V."""
        return self.setup + (config.steps + 1) * self.step_seconds(T, V, config.runs, config.N)

    def wall_seconds(self, T, V, config):
        """Seconds on the wall's clock: the CPU seconds, as slowed as the copies were."""
        return self.seconds(T, V, config) * self.slowdown


def probe(toy_key, selection, baseline, config, timer=time.thread_time, clock=time.perf_counter):
    """The Probe of ``train`` on the toy of ``toy_key`` (T, V, mismatch, seed, sampler) with ``selection`` ({id:
    overrides}), ``baseline`` and ``config``'s mode, optimizer and noise (its steps, runs and N are the line's
    variables); ValueError as ``train`` raises it. ``timer`` measures CPU seconds, ``clock`` the wall's."""
    T, V, mismatch, seed, sampler = toy_key
    spent = {"cpu": 0.0, "wall": 0.0}
    chunk = chunk_rows(V**T)                                        # the copies enumerate as the run will

    def run(T, chosen, steps, runs, N):
        """``train``'s CPU seconds on a copy: K = ``steps`` of ``chosen`` at T (the toy's V), ``runs``, N."""
        toy = make_toy(T, V, mismatch, seed, sampler)
        copy = TrainingConfig(steps=steps, lr=config.lr, optimizer=config.optimizer, mode=config.mode, N=N, runs=runs,
                              noise=config.noise)
        start, wall = timer(), clock()
        train(toy, chosen, baseline, copy, chunk=chunk)
        cpu, wall = timer() - start, clock() - wall
        spent["cpu"] += cpu
        spent["wall"] += wall
        return cpu

    def timed(T, runs=1, N=1):
        """(a step's seconds, the setup's): a step is the time of K = 3 less K = 1, over 2, and the setup what K = 1
        takes beyond its two steps; each the least of up to PROBE_REPEATS timings, until they have taken
        QUICK_PROBE_SECONDS in all (a short time is a noisy one)."""
        times, here = {1: float("inf"), 3: float("inf")}, 0.0
        for _ in range(PROBE_REPEATS):
            for steps in times:
                cpu = run(T, selection, steps, runs, N)
                times[steps] = min(times[steps], cpu)
                here += cpu
            if here >= QUICK_PROBE_SECONDS:
                break
        step = max(0.0, times[3] - times[1]) / 2
        return step, max(0.0, times[1] - 2 * step)

    def reference(T):
        """REFERENCE_SELECTION's seconds for K = 1 at T, the least of two (the first may build the toy's grid)."""
        return min(run(T, REFERENCE_SELECTION, 1, 1, 1) for _ in range(2))

    line = _line(timed, reference, T, V, selection, config)
    return replace(line, slowdown=max(1.0, spent["wall"] / spent["cpu"]) if spent["cpu"] > 0 else 1.0)


def _line(timed, reference, T, V, selection, config):
    """The Probe through the copies ``timed(T, runs, N)`` gives, and the reference ``reference(T)`` (see ``probe``)."""
    if config.mode == "expected":
        enumerated = sum(id not in FACTORS for id in selection)
        largest = min(PROBE_SEQUENCES, max(PROBE_SEQUENCES_LEAST, PROBE_WORK // max(1, enumerated)))
        T2 = max((t for t in range(1, T + 1) if V**t <= largest), default=1)
        T1 = max(1, T2 - (2 if V < 4 else 1))                              # M₁ ≤ M₂/4: b from the difference
        large, setup = timed(T2)
        M1, M2 = V**T1, V**T2
        if T1 == T2:
            return Probe("expected", large, 0.0, setup=setup, probed=M2)
        small, _ = timed(T1)
        b = (large - small) / (M2 - M1) if large > small else large / M2    # noise: all of it on b
        line = Probe("expected", max(0.0, small - b * M1), b, setup=setup, probed=M2, smaller=M1)
        if not enumerated or T2 == T:
            return line
        T3 = max(t for t in range(T2 + 1, T + 1) if t == T2 + 1 or V**t <= GROWTH_LARGEST)
        return replace(line, growth=_growth(reference(T1), reference(T2), reference(T3), M1, M2, V**T3))
    low = 2 if "rloo" in selection else 1                                    # rloo trains only with N ≥ 2
    runs, draws = min(config.runs, PROBE_RUNS), max(low, min(config.N, PROBE_DRAWS))
    base, setup = timed(T, 1, low)                                           # a + b + c·low
    wide, setup = timed(T, runs, low) if runs > 1 else (base, setup)        # a + (b + c·low)·runs
    deep, setup = timed(T, runs, draws) if draws > low else (wide, setup)   # a + (b + c·draws)·runs
    c = max(0.0, (deep - wide) / (runs * (draws - low))) if draws > low else 0.0
    b = max(0.0, (wide - base) / (runs - 1) - c * low) if runs > 1 else 0.0
    return Probe("sampled", max(0.0, base - b - c * low), b, c, setup)


def _growth(r1, r2, r3, M1, M2, M3):
    """g: the reference's seconds per added sequence from M₁ to M₃, over its seconds per added sequence from M₁ to
    M₂ (1 when the reference's timings are noise: no slope up to M₂, or none beyond it)."""
    below, beyond = (r2 - r1) / (M2 - M1), (r3 - r1) / (M3 - M1)
    return beyond / below if below > 0 and beyond > 0 else 1.0


def run_bytes(T, V, config, estimator_ids):
    """Bytes a run adds while it runs: its records and one step's temporaries (see the module docstring)."""
    runs = config.runs if config.mode == "sampled" else 1
    count = len(estimator_ids)
    records = 8 * count * runs * (config.steps + 1) * (T * V + RECORDED[config.mode])
    if config.mode == "expected":
        enumerates = any(id not in FACTORS for id in estimator_ids)
        step = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T if enumerates else 0
    else:
        step = 8 * (FLOATS_PER_DRAWN_TOKEN * config.runs * config.N * T
                    + count * config.runs * (FLOATS_PER_TABLE_ENTRY * T * V + FLOATS_PER_COUNT_PAIR * T * T
                                             + FLOATS_PER_RUN))
    return records + step


def command_line_bytes(T, V, config, estimator_ids, as_json=False):
    """Peak bytes of ``python -m toylab train`` (see the module docstring)."""
    runs = config.runs if config.mode == "sampled" else 1
    values = len(estimator_ids) * runs * (config.steps + 1) * LISTS[config.mode]
    lists, text = LISTED_BYTES_PER_VALUE * values, JSON_BYTES_PER_VALUE * values if as_json else 0
    diagnostics = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T
    return BASE_BYTES + max(run_bytes(T, V, config, estimator_ids) + lists, diagnostics, lists + text)


def refusal(T, V, config, estimator_ids, probed, seconds_limit, memory=None, limit_note=""):
    """Why a run is refused, in words, or None: its bytes (``memory``, default ``run_bytes``) over
    MEMORY_LIMIT_BYTES, or its seconds (``probed()``, the Probe: called only when the memory fits) over
    ``seconds_limit`` (``limit_note`` follows the limit: how it was set)."""
    memory = run_bytes(T, V, config, estimator_ids) if memory is None else memory
    fewer = "fewer steps or estimators, or a smaller toy" if config.mode == "expected" else \
        "fewer steps, estimators or runs, or a smaller N"
    if memory > MEMORY_LIMIT_BYTES:
        return (f"this run is estimated to need {memory / 1e9:,.1f} GB of memory, over the limit of "
                f"{MEMORY_LIMIT_BYTES / 1e9:g} GB; use {fewer}")
    seconds = probed().wall_seconds(T, V, config)
    if seconds > seconds_limit:
        return (f"this run is estimated at {_seconds(seconds)}, over the limit of {seconds_limit:,.0f} s{limit_note}; "
                f"use {fewer}")
    return None


def _seconds(seconds):
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
