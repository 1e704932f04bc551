"""What a training run costs, known before it runs: its seconds, measured on small copies of it, and its memory.

Seconds. A run is K + 1 steps of the same work, and a step's seconds depend on more than its sizes: an estimator's
weight function may cost thirty times another's, the sampler model adds its own tables, and the machine and its load
set the pace. So a step is timed, not guessed: ``probe`` runs ``train`` for one step (K = 1: two steps' work) on
copies of the run small enough to take milliseconds, with the same estimators, baseline, optimizer, noise and toy,
and a line through those times gives a step at the run's size:

    expected:  step(M) = a + b·M                 M = V**T sequences, up to M₂; copies at T₁ < T₂ ≤ T, the same V,
                                                 M₂ ≤ PROBE_SEQUENCES, ≤ PROBE_WORK per enumerating estimator but
                                                 not below PROBE_SEQUENCES_LEAST (the run's own T when M is small)
               step(M) = s₁ + g·b·(M − M₁)       beyond M₂: s₁ the smaller copy's step, b grown by g
    sampled:   step(r, N) = a + b·r + c·g·r·N    r runs of N draws; copies of the run's own toy at (1, n₀), (R, n₀)
                                                 (b + c·n₀ a run) and (r₂, n₀), (r₂, N₂) (c a draw), r₂ = min(r,
                                                 PROBE_RUNS), N₂ = min(N, PROBE_DRAWS), R = min(r, max(r₂,
                                                 PROBE_ROWS / E)) for E estimators; n₀ = 1 (2 when rloo is trained:
                                                 it needs N ≥ 2); g = 1 up to r₂·N₂ draws

    seconds = setup + (K + 1)·step               setup: what K = 1 takes beyond its two steps, on the largest copy;
                                                 coefficients below 0 (timing noise) are taken as 0

Seconds of the thread's CPU, so that other work does not blur the line; a run is refused by those, the work it would
do, not by the wall's clock: on a busy server (eight heavy sessions on two cores) the copies took up to 30 times
longer by the wall, and a run that takes 11 s alone was refused at an estimated 13 to 401 s. How much longer the copies
took by the wall (``slowdown``) says how long the run may take now, in words (``busy_note``).

The probe is bounded itself (``ProbeStopped``): before each copy it checks the CPU seconds it has spent against
PROBE_SECONDS, and after each copy of the run's own estimators it checks that copy's seconds per step, a floor of the
run's (the copies are smaller than the run), against ``stop_above`` (the refusal's: EARLY_MARGIN times a step's share
of the limit). Either stops it with an incomplete Probe whose line is that floor: a run is then refused as estimated
at over its floor's seconds, or, when the floor fits, timed again without ``stop_above`` (the page keeps both). A run
estimated at 168,363 s was refused after 102 s on the page; it is now refused after its first copy.

g, ``growth``: a number does not cost the same in every array. numpy allocates each temporary afresh; the C library
maps a large one anew and gives it back when freed, faulting it in 4 KB page by page, until it has freed one as
large (it then keeps that much: a threshold that moves with what the process has done), and numpy asks the kernel
for huge pages from 4 MB (2**19 numbers) on; caches, and the engine's chunks (``exact.chunk_rows``: several
estimators at once below 2**16 sequences), move it too. Measured on the default estimators at V = 4: 92–103 ns a
sequence from 2**14 to 2**18 (a 4 KB page faulted per 33 sequences at 2**18), 48 at 2**20, 38 at 2**22 (one per
660); a copy of every estimator at 2**15 cost a third as much a sequence chunked as one at a time. So a line
through small copies missed a large run by 2–3 times either way. g is measured for the run's toy on
REFERENCE_SELECTION (one estimator that enumerates, seq_tis), timed at the copies' sizes and at the run's (up to
GROWTH_SEQUENCES sequences, else the largest V**t under it past T₂; up to GROWTH_TOKENS drawn tokens r·N·T):

    expected:  g = [r(M₃) − r(M₁)] / [(r(M₂) − r(M₁))·(M₃ − M₁)/(M₂ − M₁)]      its growth beyond the copies over
                                                                                 what their line gives: exact when
                                                                                 the run's grows as the reference's
    sampled:   g = [r(r₃, N₃) − r(r₃, n₀)]/[r₃·(N₃ − n₀)] ÷ [r(r₂, N₂) − r(r₂, n₀)]/[r₂·(N₂ − n₀)]
                                                 its seconds per draw at the run's (r₃, N₃) over at the copies' (the
                                                 per-run work, E·r rows of the count recursion, grows with E, not as
                                                 one estimator's: R runs of the run's estimators measure it)

The reference makes one recomputed update a step whatever the run's update (g is how a number's cost grows with the
arrays; the copies time the run's U updates): with U = 8 a reference at the run's size cost up to a minute.
g = 1 when no estimator enumerates, when the run is no larger than the copies, when the reference's timings are
noise (no growth), or for a run with hidden variables (its components' passes are linear in M: 165 → 85 ns a
sequence from T = 6 to 10 with router draws, 89 → 51 ns from 6 to 8 with drawn switches, where a reference of two
estimators, its step mostly overhead there, grew sublinearly and cut the estimate by up to 3×). The reference runs
first (after one look at the smallest copy, for the probe's own bound), at the run's size: the copies then see the
memory the run will see. It is timed twice at least at every size, and g is at least GROWTH_LEAST: a sequence past
the copies cost no less than 38 % of one in them (2**22 against 2**18), so a smaller g is a slow outlier among the
reference's timings near the copies (a sampled run's draws have no such measurement: the floor errs towards
refusing). (A run of T = 11, V = 4 estimated here at 200–300 s was once trained by the
page in CI: under load its g, the near sizes timed once, must have come out under about 0.05.) Every copy runs
once untimed before it is timed (its memory touched afresh), a copy whose step is short is timed over more steps,
and the copies enumerate as the run will (its ``chunk_rows``).

(a: the per-step work of every estimator, the recursions; b: enumerating, or a run's tables; c: drawing and scoring
sequences.) A copy costs at most a few steps of PROBE_SEQUENCES sequences, or of PROBE_RUNS ×
PROBE_DRAWS draws and R runs of n₀, per estimator, and the reference a few steps of one estimator at the run's size
(within GROWTH_SEQUENCES or GROWTH_TOKENS, no more memory than the run's own step): a small part of any run worth
refusing, and the page keeps the line (``Probe``) for the next settings.

Bytes, from the arrays the loop keeps and one step's temporaries (measured with tracemalloc; benchmarks/training_cost.py
checks the whole model on a grid):

    records:     8 · E · r · ((K + 1) · (T·V + R) + 1)    θ_k and R numbers per step (R = 13 expected, 11 sampled;
                                                     r = 1 expected), and the step each run stopped at: exact
    one step:    expected  8 · FLOATS_PER_ENUMERATED_SEQUENCE · M        when an estimator enumerates (one at a time;
                                                 a hidden run's: ``enumerated_bytes``),
                           8 · FLOATS_PER_PENALISED_SEQUENCE · M         with a KL penalty in the reward
                 sampled   8 · (FLOATS_PER_DRAWN_TOKEN · r·N·T (+ FLOATS_PER_UPDATED_TOKEN when a batch feeds
                                    updates away from its anchor: the frozen g, A, log π_old, log μ and each update's)
                                + E·r·(FLOATS_PER_TABLE_ENTRY · T·V + FLOATS_PER_COUNT_PAIR · T² + FLOATS_PER_RUN))
    run          records + one step: what the page's server adds, refused over MEMORY_LIMIT_BYTES
    command line BASE_BYTES + the largest of: run + lists, the toy's diagnostics (8·FLOATS_PER_ENUMERATED_SEQUENCE·M),
                 lists + JSON text; lists: LISTED_BYTES_PER_VALUE per step value of every run (Python floats),
                 JSON text: JSON_BYTES_PER_VALUE per value (``--json``)
"""

import time
from dataclasses import dataclass, replace

from toylab.catalogue.kl import NO_PENALTY
from toylab.catalogue.updates import DEFAULT_UPDATE
from toylab.engine.hidden import CHUNK
from toylab.engine.recursion import FACTORS
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import make_toy
from toylab.training.exact import chunk_rows
from toylab.training.loop import LIMITS, train

PAGE_SECONDS = 10.0                         # the page refuses a run estimated over this
COMMAND_LINE_FACTOR = 30                    # … and the command line one over 30 times that
MEMORY_LIMIT_BYTES = 10**9                  # both refuse a run estimated over this
PROBE_SEQUENCES = 2**18                     # the larger copy of an expected run enumerates at most this many …
PROBE_SEQUENCES_LEAST = 2**16               # … and at least this many when the run does (if its M allows) …
PROBE_WORK = 2**21                          # … and about this many over all its enumerating estimators
PROBE_RUNS, PROBE_DRAWS = 16, 256           # the copies of a sampled run: r₂ runs of N₂ draws …
PROBE_ROWS = 2**12                          # … and R runs of n₀, up to this many runs of all its estimators
GROWTH_SEQUENCES = 2**21                    # the reference runs at the run's size up to this M (or the next T) …
GROWTH_TOKENS = 2**18                       # … or this many drawn tokens r·N·T
REFERENCE_SELECTION = {"on_policy": {}, "seq_tis": {}}       # g's reference: one estimator that enumerates
GROWTH_LEAST = 0.25                         # … and g is at least this (below it: a spike in a timing)
PROBE_SECONDS = 5.0                         # the probe stops starting copies once it has spent this (CPU) …
EARLY_MARGIN = 2.0                          # … or a copy's step is this many times a step's share of the limit
BUSY = 1.5                                  # copies this much slower by the wall than by the CPU: a busy machine …
BUSY_NOTE_SECONDS = 2.0                     # … worth a note when the run may take at least this long by the clock
QUICK_PROBE_SECONDS = 0.05                  # a copy is timed again (the least counts) until this is spent …
PROBE_REPEATS = 5                           # … at most this many times
SHORT_COPY_SECONDS, SHORT_COPY_STEPS = 0.01, 9      # a copy whose K = 1 takes less is timed for K = 9, not 3
BASE_BYTES = 150 * 2**20                    # the interpreter, numpy and toylab (the command line)
FLOATS_PER_ENUMERATED_SEQUENCE = 9          # measured 5.2–6.4 (the default estimators) to 13–15 (every one)
FLOATS_PER_PENALISED_SEQUENCE = 20          # a KL penalty in the reward, one row at a time: measured 17.5–18.7
PENALISED_WORK = 16                         # … and a sequence's step costs about this many enumerated ones: its copies
                                            # are that much smaller
FLOATS_PER_HIDDEN_TOKEN = 12                # a per-token router draw's enumerated chunk (measured 11 at T = 5)
FLOATS_PER_DRAWN_TOKEN = 16                 # measured 14 to 22
FLOATS_PER_UPDATED_TOKEN = 20               # more when a batch feeds U updates away from its anchor (measured 17–22)
FLOATS_PER_TABLE_ENTRY = 20                 # a run's (T, V) tables, the optimizer's state, the step …
FLOATS_PER_COUNT_PAIR = 4                   # … its count recursion over (position, count of token 0) …
FLOATS_PER_RUN = 100                        # … and its per-run numbers (fitted to 8 toys, T = 4 to 16, V = 2 to 8)
LISTED_BYTES_PER_VALUE = 32                 # a float object and its place in a list
JSON_BYTES_PER_VALUE = 68
LISTS = {"expected": 12, "sampled": 10}     # per-step lists of a run (sampled: no rel_bias, step_cosine)
RECORDED = {"expected": 13, "sampled": 11}  # numbers recorded per step besides θ


@dataclass(frozen=True)
class Probe:
    """A step's seconds as a line ℓ through timed copies of a run, a + b·M (expected) or a + b·r + c·r·N (sampled),
    up to the largest copy's size (``probed``: M₂, or r₂·N₂ draws); beyond it s₁ + g·(ℓ − s₁), s₁ (``base``) the
    smaller copy's step (expected), or a + b·r + c·g·r·N (sampled), g (``growth``) measured for the toy probed. And
    the seconds a run takes to set up (its records, optimizer, generators), measured on the largest copy. Seconds of
    the thread's CPU; ``slowdown`` is how much longer the copies took by the clock on the wall (other work on the
    machine), at least 1. An incomplete Probe (``complete`` False: the probe stopped early) is a floor: a, the
    seconds of one step of a copy, at every size."""
    mode: str
    a: float
    b: float
    c: float = 0.0
    setup: float = 0.0
    probed: int = 1
    base: float = 0.0
    growth: float = 1.0
    slowdown: float = 1.0
    complete: bool = True                   # False: stopped early (``ProbeStopped``), its line a floor
    kind: tuple = ()

    def step_seconds(self, T, V, runs, N):
        if self.mode == "expected":
            M = sequences(T, V, self.kind)
            line = self.a + self.b * M
            return line if M <= self.probed else self.base + self.growth * (line - self.base)
        return self.a + self.b * runs + self.c * runs * N * (self.growth if runs * N > self.probed else 1.0)

    def seconds(self, T, V, config):
        """CPU seconds of ``train`` under ``config`` on a toy of T, V."""
        return self.setup + (config.steps + 1) * self.step_seconds(T, V, config.runs, config.N)

    def wall_seconds(self, T, V, config):
        """Seconds on the wall's clock: the CPU seconds, as slowed as the copies were."""
        return self.seconds(T, V, config) * self.slowdown


class ProbeStopped(Exception):
    """The probe stopped before its line was complete: ``floor`` is the most a step of a copy of the run's own
    estimators took (CPU seconds; 0 if none had run)."""

    def __init__(self, floor):
        super().__init__(floor)
        self.floor = floor


def hidden_kind(config):
    """What sets a run's size besides V**T (``sequences``): () for today's runs; ("sequence", D) or ("token", D) for
    a mixture of experts' D router draws per sequence or per token; ("drawn", η) for version switches drawn per
    sequence (η(T − 1) patterns)."""
    if config.experts is not None:
        return (config.experts.draw, config.experts.draws)
    if config.versions.switch == "drawn":
        return ("drawn", max(config.lag, 1))
    return ()


def sequences(T, V, kind=()):
    """M, the sequences a step's exact sums visit per estimator: V**T, times D router draws per sequence or η(T − 1)
    version patterns, or (D·V)**T when a router draw is a hidden value of each token."""
    if not kind:
        return V**T
    name, count = kind
    if name == "token":
        return (count * V)**T
    return count * V**T if name == "sequence" else count * max(T - 1, 1) * V**T


def enumerated_bytes(T, V, kind=()):
    """Bytes of one step's enumeration: 8·FLOATS_PER_ENUMERATED_SEQUENCE·V**T — a hidden run enumerates one
    component's sequences after another, so D router draws per sequence or η(T − 1) version patterns add time, not
    memory — and, when a router draw is a hidden value of each token, a chunk of its (D·V)**T sequences at a time
    (``hidden.CHUNK``), FLOATS_PER_HIDDEN_TOKEN floats per token of it."""
    held = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T
    if kind and kind[0] == "token":
        held += 8 * FLOATS_PER_HIDDEN_TOKEN * T * min(sequences(T, V, kind), CHUNK)
    return held


def fitted(config, T):
    """``config`` for a copy of T tokens: a fixed version switch moved inside it (at most T − 1), none below T = 2."""
    versions = config.versions
    if versions.switch == "off" or (versions.switch == "fixed" and versions.at < T):
        return config
    if T < 2:
        return replace(config, versions=replace(versions, switch="off"))
    return replace(config, versions=replace(versions, at=min(versions.at, T - 1)))


def probe(toy_key, selection, baseline, config, timer=time.thread_time, clock=time.perf_counter, stop_above=None):
    """The Probe of ``train`` on the toy of ``toy_key`` (T, V, mismatch, seed, sampler) with ``selection`` ({id:
    overrides}), ``baseline`` and ``config``'s mode, optimizer, noise, update (anchor, loss, U = minibatches × epochs,
    where the correction reads) and lag (its steps, runs and N are the line's variables: a step's U updates are in
    the copies' steps); ValueError as ``train`` raises it. ``timer`` measures CPU seconds, ``clock`` the wall's. It
    stops early, with an incomplete Probe (a floor), after PROBE_SECONDS of CPU, or once a step of a copy has taken
    over ``stop_above`` seconds (see the module docstring)."""
    T, V, mismatch, seed, sampler = toy_key
    spent = {"cpu": 0.0, "wall": 0.0, "floor": 0.0}
    chunk = chunk_rows(V**T)                                        # the copies enumerate as the run will

    warm = config.lag if config.versions.switch == "drawn" else 0   # a drawn switch's first η steps draw fewer
                                                                    # versions (at most k back): each copy runs them
                                                                    # first, so its steps are the run's own
    def run(T, chosen, steps, runs, N):
        """``train``'s CPU seconds on a copy: K = ``steps`` (+ ``warm``) of ``chosen`` at T (the toy's V), ``runs``,
        N; ProbeStopped before it when the probe's seconds are spent, or after it when its step is over
        ``stop_above``."""
        if spent["cpu"] >= PROBE_SECONDS:
            raise ProbeStopped(spent["floor"])
        toy = make_toy(T, V, mismatch, seed, sampler)
        if config.mode == "expected":
            split_grid(T, V)                                        # built once per process: not a step's time
        copy = replace(fitted(config, T), steps=steps + warm, N=N, runs=runs)
        if chosen is REFERENCE_SELECTION:            # g is the arrays' growth: one recomputed update a step measures it
            copy = replace(copy, update=DEFAULT_UPDATE, lag=0, kl=NO_PENALTY)
        start, wall = timer(), clock()
        train(toy, chosen, baseline, copy, chunk=chunk)
        cpu, wall = timer() - start, clock() - wall
        spent["cpu"] += cpu
        spent["wall"] += wall
        if chosen is not REFERENCE_SELECTION:
            spent["floor"] = max(spent["floor"], cpu / (steps + 1))
            if stop_above is not None and spent["floor"] > stop_above:
                raise ProbeStopped(spent["floor"])
        return cpu

    def timed(T, runs=1, N=1, chosen=selection, twice=False, look=False):
        """(a step's seconds, the setup's): after a first K = 1, untimed (the first run at a size larger than any
        before touches its memory afresh: a one-off of the run, not a step), a step is the time of K = 3 (K =
        SHORT_COPY_STEPS when that first took under SHORT_COPY_SECONDS: a short step's difference is a noisy one)
        less K = 1, over K − 1, and the setup what K = 1 takes beyond its two steps; each the least of up to
        PROBE_REPEATS timings, until they have taken QUICK_PROBE_SECONDS in all, and at least two if ``twice`` (the
        growth reference, at every size: its g is a ratio of its timings, and one slow timing would move it). ``look``: the
        first K = 1 only, for the floor it gives (``run``), before anything larger is timed."""
        first = run(T, chosen, 1, runs, N)
        if look:
            return first, 0.0
        longer = SHORT_COPY_STEPS if first < SHORT_COPY_SECONDS else 3
        times, here = {1: float("inf"), longer: float("inf")}, first
        for repeat in range(PROBE_REPEATS):
            for steps in times:
                cpu = run(T, chosen, steps, runs, N)
                times[steps] = min(times[steps], cpu)
                here += cpu
            if here >= QUICK_PROBE_SECONDS and repeat >= twice:
                break
        step = max(0.0, times[longer] - times[1]) / (longer - 1)
        return step, max(0.0, times[1] - 2 * step)

    kind = hidden_kind(config)
    try:
        line = _expected_line(timed, T, V, selection, config, kind) if config.mode == "expected" else \
            _sampled_line(timed, T, selection, config)
    except ProbeStopped as stopped:
        line = Probe(config.mode, stopped.floor, 0.0, complete=False)
    return replace(line, slowdown=max(1.0, spent["wall"] / spent["cpu"]) if spent["cpu"] > 0 else 1.0, kind=kind)


def probed_config(config):
    """The config a probe of a run under ``config`` depends on, for keeping the Probe (the page): its mode,
    optimizer and noise; in sampled mode its runs and N up to the next power of 2 (within ``LIMITS``), as far as
    the reference and the wide copy go (a probe for the power of 2 serves every run below it); neither in expected
    mode."""
    if config.mode == "expected":
        return replace(config, steps=1, lr=1.0, runs=1, N=1)
    return replace(config, steps=1, lr=1.0, runs=_power_of_two(config.runs, LIMITS["runs"][1]),
                   N=_power_of_two(config.N, LIMITS["N"][1]))


def _power_of_two(value, most):
    return min(most, 1 << (value - 1).bit_length())


def _expected_line(timed, T, V, selection, config, kind=()):
    """The expected Probe through the copies at T₁ < T₂ and, beyond them, the reference's growth (see the module
    docstring); sizes M are ``sequences`` of the run's ``kind``. A KL penalty in the reward makes every estimator
    enumerate."""
    def size(t):
        return sequences(t, V, kind)
    weight = PENALISED_WORK if penalised_in_reward(config) else 1
    enumerated = len(selection) if penalised_in_reward(config) else sum(id not in FACTORS for id in selection)
    largest = min(PROBE_SEQUENCES, max(PROBE_SEQUENCES_LEAST // weight, PROBE_WORK // (max(1, enumerated) * weight)))
    if kind:                                     # a hidden run's copies go twice as far: with no growth measured,
        largest *= 2                             # its line alone reaches the run
    T2 = max((t for t in range(1, T + 1) if size(t) <= largest), default=1)
    T1 = max(1, T2 - (2 if V < 4 else 1))                                  # M₁ ≤ M₂/4: b from the difference
    M1, M2 = size(T1), size(T2)
    grows = enumerated and T1 < T2 < T and not kind        # a hidden run's step is linear in M: no growth measured
    timed(T1, look=True)                            # a first look at the run's own step, the smallest copy's
    T3 = max(t for t in range(T2 + 1, T + 1) if t == T2 + 1 or size(t) <= GROWTH_SEQUENCES) if grows else T
    far = timed(T3, chosen=REFERENCE_SELECTION, twice=True)[0] if grows else 0.0   # first: the run's arrays
    large, setup = timed(T2)
    if T1 == T2:
        return Probe("expected", large, 0.0, setup=setup, probed=M2)
    small, _ = timed(T1)
    b = (large - small) / (M2 - M1) if large > small else large / M2        # noise: all of it on b
    line = Probe("expected", max(0.0, small - b * M1), b, setup=setup, probed=M2, base=small)
    if not grows:
        return line
    near = [timed(t, chosen=REFERENCE_SELECTION, twice=True)[0] for t in (T1, T2)]
    return replace(line, growth=_growth(far - near[0], (near[1] - near[0]) * (size(T3) - M1) / (M2 - M1)))


def _sampled_line(timed, T, selection, config):
    """The sampled Probe through the copies at (1, n₀), (R, n₀), (r₂, n₀), (r₂, N₂) and, beyond them, the
    reference's growth per draw (see the module docstring)."""
    low = max(2 if "rloo" in selection else 1, config.update.minibatches)   # rloo trains only with N ≥ 2, and a
                                                                            # batch of N makes at most N minibatches
    runs, draws = min(config.runs, PROBE_RUNS), max(low, min(config.N, PROBE_DRAWS))
    wide = min(config.runs, max(runs, PROBE_ROWS // len(selection)))      # R runs: R·E ≤ PROBE_ROWS, R ≥ r₂
    far = min(config.runs, max(1, GROWTH_TOKENS // (low * T)))            # the run's (r, N), r·N·T ≤ GROWTH_TOKENS
    deep = min(config.N, max(low, GROWTH_TOKENS // (far * T)))
    grows = config.runs * config.N > runs * draws and deep > low and draws > low
    timed(T, 1, low, look=True)                     # a first look at the run's own step, the smallest copy's
    beyond = [timed(T, far, n, chosen=REFERENCE_SELECTION, twice=True)[0] for n in (low, deep)] if grows else []
    copies = [(1, low), (wide, low), (runs, low), (runs, draws)]
    timings = {copy: timed(T, *copy) for copy in dict.fromkeys(copies)}    # each copy once, where two coincide
    a, b, c, setup = _plane(copies, [timings[copy] for copy in copies])
    line = Probe("sampled", a, b, c, setup, probed=runs * draws)
    if not grows:
        return line
    near = [timed(T, runs, n, chosen=REFERENCE_SELECTION, twice=True)[0] for n in (low, draws)]
    return replace(line, growth=_growth((beyond[1] - beyond[0]) / (far * (deep - low)),
                                        (near[1] - near[0]) / (runs * (draws - low))))


def _plane(copies, timings):
    """(a, b, c, setup) of a + b·r + c·r·N through the steps timed at (1, n₀), (R, n₀), (r₂, n₀), (r₂, N₂): b + c·n₀
    the growth per run from the first two, c the growth per draw from the last two (a term is 0 when its copies
    coincide); the setup measured on the last."""
    (_, low), (wide_runs, _), (runs, _), (_, draws) = copies
    (base, _), (wide, _), (narrow, _), (deep, setup) = timings
    c = max(0.0, (deep - narrow) / (runs * (draws - low))) if draws > low else 0.0
    b = max(0.0, (wide - base) / (wide_runs - 1) - c * low) if wide_runs > 1 else 0.0
    return max(0.0, base - b - c * low), b, c, setup


def _growth(beyond, along):
    """g = max(GROWTH_LEAST, ``beyond`` / ``along``): the reference's growth measured out to the run's size, over the
    growth its copies give (1 when either is not above 0: timing noise)."""
    return max(GROWTH_LEAST, beyond / along) if beyond > 0 and along > 0 else 1.0


def run_bytes(T, V, config, estimator_ids):
    """Bytes a run adds while it runs: its records and one step's temporaries (see the module docstring)."""
    runs = config.runs if config.mode == "sampled" else 1
    count = len(estimator_ids)
    records = 8 * count * runs * ((config.steps + 1) * (T * V + RECORDED[config.mode]) + 1) \
        + 8 * count * runs * T * V * config.lag                             # θ_{k−1} … θ_{k−s}: the engine's past
    if config.mode == "expected" and penalised_in_reward(config):
        step = 8 * FLOATS_PER_PENALISED_SEQUENCE * V**T
    elif config.mode == "expected":
        enumerates = any(id not in FACTORS for id in estimator_ids)
        step = enumerated_bytes(T, V, hidden_kind(config)) if enumerates else 0
    else:
        per_token = FLOATS_PER_DRAWN_TOKEN + (FLOATS_PER_UPDATED_TOKEN if config.weights_only else 0)
        step = 8 * (per_token * config.runs * config.N * T
                    + count * config.runs * (FLOATS_PER_TABLE_ENTRY * T * V + FLOATS_PER_COUNT_PAIR * T * T
                                             + FLOATS_PER_RUN))
    return records + step


def penalised_in_reward(config):
    """True when a KL penalty in the reward gives each token its own advantage: every row enumerates, position by
    position (``reward_penalty``)."""
    return config.kl.active and config.kl.placement == "reward"


def command_line_bytes(T, V, config, estimator_ids, as_json=False):
    """Peak bytes of ``python -m toylab train`` (see the module docstring)."""
    runs = config.runs if config.mode == "sampled" else 1
    values = len(estimator_ids) * runs * (config.steps + 1) * LISTS[config.mode]
    lists, text = LISTED_BYTES_PER_VALUE * values, JSON_BYTES_PER_VALUE * values if as_json else 0
    diagnostics = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T
    return BASE_BYTES + max(run_bytes(T, V, config, estimator_ids) + lists, diagnostics, lists + text)


def refusal(T, V, config, estimator_ids, probed, seconds_limit, memory=None, limit_note="", fewer=None, repeats=1):
    """Why a run is refused, in words, or None: its bytes (``memory``, default ``run_bytes``) over
    MEMORY_LIMIT_BYTES, or its seconds of work (``probed(stop_above)``, the Probe, asked only when the memory fits:
    first one that may stop early, then, if its floor fits, a complete one) over ``seconds_limit`` (``limit_note``
    follows the limit: how it was set; ``fewer``: what to lower, by default the run's own sizes). ``repeats``: the run
    is trained that many times in turn (its seconds add up; its memory, freed in between, does not)."""
    memory = run_bytes(T, V, config, estimator_ids) if memory is None else memory
    fewer = fewer or ("fewer steps or estimators, or a smaller toy" if config.mode == "expected" else
                      "fewer steps, estimators or runs, or a smaller N")
    if memory > MEMORY_LIMIT_BYTES:
        return (f"this run is estimated to need {memory / 1e9:,.1f} GB of memory, over the limit of "
                f"{MEMORY_LIMIT_BYTES / 1e9:g} GB; use {fewer}")
    line = probed(EARLY_MARGIN * seconds_limit / (repeats * (config.steps + 1)))
    if not line.complete and repeats * line.seconds(T, V, config) <= seconds_limit:
        line = probed(None)                             # its floor fits: the whole line decides
    seconds = repeats * line.seconds(T, V, config)
    limit = f"the limit of {seconds_limit:,.0f} s{limit_note}"
    if seconds > seconds_limit:
        over = "" if line.complete else "over "
        return f"this run is estimated at {over}{_seconds(seconds)}{_busy(line, seconds)}, over {limit}; use {fewer}"
    if not line.complete:
        return (f"this run's seconds could not be told within {PROBE_SECONDS:g} s of timing small copies of it (it "
                f"takes at least {_seconds(seconds)}; {limit}); use {fewer}")
    return None


def busy_note(probe, T, V, config, repeats=1):
    """How long a run that fits may take on a busy machine, in words ('' when it is not busy, or the run is short
    even so: under ``BUSY_NOTE_SECONDS`` by the clock)."""
    seconds = repeats * probe.seconds(T, V, config)
    if probe.slowdown < BUSY or seconds * probe.slowdown < BUSY_NOTE_SECONDS:
        return ""
    return (f"the machine is busy (other work): this run, about {_seconds(seconds)} of computing, may take about "
            f"{_seconds(seconds * probe.slowdown)}")


def _busy(probe, seconds):
    return f" of computing (about {_seconds(seconds * probe.slowdown)} by the clock now: the machine is busy)" \
        if probe.slowdown >= BUSY else ""


def _seconds(seconds):
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
