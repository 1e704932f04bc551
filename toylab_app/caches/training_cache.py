"""Cached computations of the Training tab, keyed on the toy, the trained selection, the baseline and the tab's
controls; plus the work limits that keep a re-render within seconds on the largest toys."""

from dataclasses import replace

import numpy as np
import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.training import cost
from toylab.training.loop import REFERENCE, cannot_train, train, trained_ids
from toylab.training.sga import monte_carlo_improvement, second_order, toy_at
from toylab.training.staleness import LAGS, OBJECTIVES, read_config
from toylab.training.staleness import staleness as staleness_of
from toylab_app.caches import cache
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.work_slots import large_work

SGA_CURVE_LRS = tuple(float(lr) for lr in np.logspace(-2, 2, 33))          # 0.01 … 100, the second-order lines
SGA_SAMPLED_LRS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)     # Monte Carlo points (plus the chosen lr)
SGA_SEQUENCES = 200 * 64        # sequences per estimator for the Monte Carlo points: 200 batches at N = 64
SGA_MOST_BATCHES = 4000         # small N: more batches, cheaply (±2 s.e. under-covers zero-inflated gains at 200)
SGA_FEWEST_BATCHES = 30
SECONDS_PER_SECOND_ORDER = 7e-7             # measured: E[ĝᵀHĝ] of one estimator, per sequence of the toy
LIMIT_SECONDS = cost.PAGE_SECONDS
TRAJECTORY_CACHE_BYTES = 256 * 2**20        # runs kept over every session (the one just asked for always stays)


def trained(settings, mode, weights_only=False):
    """((id, ((name, value), …)), …): on_policy (the reference) and the selected estimators that can train in this
    mode at the sidebar's N (as a weight g(w) of an update when ``weights_only``: ``training.trained_ids``), in
    registry order."""
    chosen = {REFERENCE: {}} | settings.selection()
    return tuple((id, tuple(chosen[id].items())) for id in trained_ids(chosen, mode, settings.N, weights_only))


def left_out(settings, mode, weights_only=False):
    """'id (why)' for each selected estimator that cannot train in this mode at the sidebar's N."""
    return [f"{id} ({why})" for id, params in settings.selection().items()
            if (why := cannot_train(id, mode, settings.N, weights_only, params))]


def staleness(settings, config):
    """``training.staleness`` of the Settings' toy under ``config``, kept under what it reads of the config
    (``staleness.read_config``): a change of N, runs, mode, lag or anchor does not train its runs again."""
    return _staleness(settings.toy_key, settings.baseline, read_config(config))


@st.cache_data(max_entries=16, show_spinner=False)
def _staleness(toy_key, baseline, config):
    """Every run of it factorises over positions: no enumeration, whatever the toy's size."""
    return staleness_of(cache.toy(*toy_key), baseline, config)


STALENESS_SELECTION = tuple((id, ()) for id in dict.fromkeys(
    ("on_policy", *(id for _, id in OBJECTIVES.values()))))


def staleness_refusal(settings, config):
    """Why the staleness view's runs would not finish within the page's seconds or memory, or None: timed as one run
    of its estimators at the largest lag for len(LAGS) times the steps (each lag trains them once, the reference
    once in all)."""
    run = replace(read_config(config), steps=config.steps * len(LAGS), lag=max(LAGS))
    return refusal(settings, run, STALENESS_SELECTION, fewer="fewer steps or updates per batch, or a smaller toy")


def refusal(settings, config, selection, fewer=None):
    """Why ``trajectories`` would not finish within the page's seconds or memory (``training.cost.refusal``), or
    None. Its memory is known from its sizes; its seconds from a probe of small copies of it, which is kept for the
    next steps, mismatch, and runs and N up to their next power of 2 (``cost.probed_config``: it depends on the
    toy's sizes, seed and sampler, the selection, the baseline and the mode, optimizer and noise, and how far a
    sampled run's reference goes)."""
    ids = [id for id, _ in selection]
    T, V, mismatch, seed, sampler = settings.toy_key
    return cost.refusal(T, V, config, ids, lambda: probe((T, V, seed, sampler), selection, settings.baseline,
                                                         cost.probed_config(config), mismatch), LIMIT_SECONDS,
                        fewer=fewer)


@st.cache_data(max_entries=64, show_spinner="Timing small copies of the run …")
def probe(sizes, selection, baseline, config, _mismatch):
    """The run's ``cost.Probe``: a line through the timed steps of small copies of it. ``sizes`` is the toy's key
    without its mismatch, which does not change a step's work (the same arrays at any mismatch): the probe timed at
    the first mismatch asked (``_mismatch``, not part of the cache's key) serves every other, so a mismatch step
    does not time copies again."""
    T, V, seed, sampler = sizes
    return cost.probe((T, V, _mismatch, seed, sampler), {id: dict(params) for id, params in selection}, baseline,
                      config)


TRAJECTORIES = ByteBoundedCache(TRAJECTORY_CACHE_BYTES, lambda runs: sum(
    value.nbytes for trajectory in runs.values() for value in vars(trajectory).values()
    if isinstance(value, np.ndarray)))


def trajectories(toy_key, selection, baseline, config):
    """{id: Trajectory} of ``training.train`` on the toy; ``selection`` as from ``trained``. Kept by bytes over every
    session, shared, never copied (a run's records reach MEMORY_LIMIT_BYTES), and computed in a large-work slot."""
    def build():
        work = cost.run_bytes(toy_key[0], toy_key[1], config, [id for id, _ in selection]) // 8
        with large_work(work):
            return train(cache.toy(*toy_key), {id: dict(params) for id, params in selection}, baseline, config)
    return TRAJECTORIES.get((toy_key, selection, baseline, config), build)


def sga_batches(N):
    """Monte Carlo batches for the SGA points at batch size N (0: too few to be worth showing)."""
    batches = min(SGA_MOST_BATCHES, SGA_SEQUENCES // N)
    return batches if batches >= SGA_FEWEST_BATCHES else 0


def sga_has_second_order(settings, selection):
    """Whether the exact second order of every selected exact estimator fits in the time limit."""
    exact = sum(ESTIMATORS[id].exact for id, _ in selection)
    return exact * settings.V**settings.T * SECONDS_PER_SECOND_ORDER <= LIMIT_SECONDS


@st.cache_data(max_entries=16, show_spinner=False)
def sga(toy_key, selection, baseline, N, config, step, with_second_order):
    """(J, {id: SecondOrder}, {id: MonteCarloImprovement}, why no second order or "") at θ_step of on_policy's
    expected run under ``config``'s optimizer, lr and noise (b_step with redrawn errors); second order for the exact
    estimators (if asked and W stays within float64), Monte Carlo for all (if N allows), with Adam's actual step."""
    toy, optimizer = toy_at(cache.toy(*toy_key), baseline, config, step)
    chosen = {id: dict(params) for id, params in selection}
    try:
        exact = {id: second_order(toy, id, params, baseline, N) for id, params in chosen.items()
                 if ESTIMATORS[id].exact and with_second_order}
        skipped = ""
    except ValueError as error:
        exact, skipped = {}, str(error)
    lrs = sorted(set(SGA_SAMPLED_LRS) | {config.lr})
    batches = sga_batches(N)
    sampled = monte_carlo_improvement(toy, chosen, baseline, N, lrs, batches, optimizer=optimizer) if batches else {}
    return toy.J, exact, sampled, skipped
