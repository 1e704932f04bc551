"""Cached computations of the seeds views: each tab's takeaway over the current toy and its population
(``analysis.seeds``: 30 toys that differ in their seed alone), exact, and what it would cost before it runs.

A seeds view is opt-in (a toggle in its tab): off, it costs nothing. On, the Estimators tab reads 30 exact passes
(each toy's moments cached as the tab's own are: the current one is already there), Training trains the 30 toys
together (``training.train_population``) and the staleness view runs its lags over them together
(``staleness.staleness_population``); both keep only what they show. A population over SEEDS_SEQUENCES_AT_MOST
sequences a toy is refused, and a training one whose estimate (two steps of it timed, times (K + 1)/2) is over the
page's seconds.
"""

import time
from dataclasses import replace

import streamlit as st

from toylab.analysis.seeds import seeds_around
from toylab.training import cost
from toylab.training.loop import train_population
from toylab.training.staleness import read_config, reading, staleness_population
from toylab_app.caches import cache
from toylab_app.caches.work_slots import large_work

SEEDS_SEQUENCES_AT_MOST = 2**18          # M of each toy: 30 exact passes of up to ~0.05 s each (T = 9 at V = 4)
LIMIT_SECONDS = cost.PAGE_SECONDS


def too_large(settings):
    """Why the current toy is too large for a seeds view, or None."""
    M = cache.sequences(settings.toy_key)
    if M <= SEEDS_SEQUENCES_AT_MOST:
        return None
    return (f"a seeds view takes 30 toys of {M:,} sequences each: it is offered up to {SEEDS_SEQUENCES_AT_MOST:,} "
            "sequences a toy (a smaller T or V)")


def toy_keys(settings):
    """The toy keys of the population, the current toy's among them."""
    T, V, mismatch, _, sampler = settings.toy_key
    return [(T, V, mismatch, seed, sampler) for seed in seeds_around(settings.seed)]


def estimator_values(settings, N):
    """{seed: {id: relative RMSE at N}} of the selected exact estimators over the population, each toy's moments from
    the Estimators tab's own cache (``cache.selection_moments``)."""
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection(exact_only=True).items())
    return {key[3]: {id: moments.rel_rmse(N) for id, moments in
                     cache.selection_moments(key, selection, settings.baseline).items()}
            for key in toy_keys(settings)}


def _toys(keys):
    return [cache.toy(*key) for key in keys]


@st.cache_data(max_entries=8, show_spinner=False)
def final_J(keys, selection, baseline, config):
    """{seed: {id: J after the run's K steps}} of ``selection`` ((id, ((name, value), …)), …) trained on every toy of
    ``keys`` in expected mode."""
    toys = _toys(keys)
    with large_work(len(keys) * cache.sequences(keys[0])):
        runs = train_population(toys, {id: dict(params) for id, params in selection}, baseline, config)
    return {key[3]: {id: float(trajectory.J[-1]) for id, trajectory in run.items()} for key, run in zip(keys, runs,
                                                                                                        strict=True)}


@st.cache_data(max_entries=8, show_spinner=False)
def staleness_readings(keys, baseline, config, draw, cap):
    """{seed: staleness.Reading} of every toy of ``keys`` under ``config`` as the staleness view reads it."""
    toys = _toys(keys)
    with large_work(len(keys) * cache.sequences(keys[0])):
        return {key[3]: reading(result) for key, result in
                zip(keys, staleness_population(toys, baseline, read_config(config), draw=draw, cap=cap), strict=True)}


@st.cache_data(max_entries=32, show_spinner=False)
def _seconds(sizes, what, selection, baseline, config, draw, cap, _keys):
    """(seconds of K = 1, seconds of K = 3) of the population on the wall's clock: a line through them gives any K (a
    run is a setup and K + 1 steps of the same work). Kept under ``sizes``, the keys without their mismatch, which
    does not change a step's work: the first mismatch timed serves every other (``_keys``, not part of the key)."""
    toys = _toys(_keys)
    times = []
    for steps in (1, 3):
        short = replace(config, steps=steps)
        start = time.perf_counter()
        if what == "training":
            train_population(toys, {id: dict(params) for id, params in selection}, baseline, short)
        else:
            staleness_population(toys, baseline, read_config(short), draw=draw, cap=cap)
        times.append(time.perf_counter() - start)
    return tuple(times)


def refusal(keys, what, selection, baseline, config, draw="fixed", cap=None):
    """Why training the population (``what``: "training" or "staleness") would not finish within the page's seconds,
    or None: a line through its timed runs of 1 and 3 steps, at the run's K."""
    sizes = tuple((T, V, seed, sampler) for T, V, _, seed, sampler in keys)
    one, three = _seconds(sizes, what, selection, baseline, replace(config, steps=1), draw, cap, keys)
    seconds = one + max(0.0, three - one) * (config.steps - 1) / 2
    if seconds <= LIMIT_SECONDS:
        return None
    return (f"about {seconds:.0f} s for the 30 toys, over the page's {LIMIT_SECONDS:.0f} s: fewer steps, or a smaller "
            "toy")
