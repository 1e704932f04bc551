"""Cached computations of the sweep views (a threshold, the sampler, the length T), keyed on Settings and scalars.

Each key holds only what its result depends on: the threshold sweep ignores unselected estimators, the
length points ignore T and N (the view scales the spread by 1/sqrt(N) itself).
"""

from dataclasses import replace

import streamlit as st

from toylab.analysis import length, repeated, sweeps
from toylab.engine.toy import make_toy
from toylab.state.query import DEFAULTS
from toylab_app.caches import cache
from toylab_app.caches.work_slots import large_work


@st.cache_data(max_entries=16, show_spinner="Sweeping the thresholds: every point in one exact pass …")
def threshold_sweep(settings):
    """(rows, best rows by estimator, C*) of the threshold sweep on the Settings' toy."""
    toy = cache.settings_toy(settings)
    with large_work(toy.M):
        rows = sweeps.threshold_sweep(toy, settings.selection(exact_only=True), settings.baseline, settings.N)
    return rows, sweeps.best_thresholds(rows), sweeps.rule_of_thumb(toy)


def sampler_sweep(settings, parameter):
    """(estimator rows, divergence rows, left out) of the sweep of ``parameter`` (mismatch, top_p, temperature, precision)
    over its grid alone: the chosen value is only marked, so moving its slider recomputes nothing here."""
    return _grid_sweep(replace(settings, **{parameter: SWEEP_ANCHORS[parameter]}), parameter)


SWEEP_ANCHORS = {"mismatch": 0.0, "top_p": 1.0, "temperature": 1.0, "precision": "none"}   # grid points: nothing added


@st.cache_data(max_entries=16, show_spinner="Sweeping the sampler: one toy per point …")
def _grid_sweep(settings, parameter):
    with large_work(settings.V**settings.T):
        return sweeps.sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch, settings.sampler,
                                    parameter, settings.selection(exact_only=True), settings.baseline, settings.N)


def pipeline_sweep(settings, parameter):
    """(estimator rows, pipeline rows, left out) of the sweep of ``parameter`` under each framework pipeline
    (``sweeps.pipeline_sweep``), over its grid alone (the chosen value is only marked)."""
    return _pipeline_grid_sweep(replace(settings, **{parameter: SWEEP_ANCHORS[parameter]}), parameter)


@st.cache_data(max_entries=8, show_spinner="Sweeping under each framework pipeline: one toy per point and pipeline …")
def _pipeline_grid_sweep(settings, parameter):
    with large_work(settings.V**settings.T):
        return sweeps.pipeline_sweep(settings.T, settings.V, settings.seed, settings.mismatch, settings.sampler,
                                     parameter, settings.selection(exact_only=True), settings.baseline, settings.N)


def length_key(settings):
    """The Settings with the fields a length point ignores (T, N) set to their defaults."""
    return replace(settings, T=DEFAULTS.T, N=DEFAULTS.N)


@st.cache_data(max_entries=32, show_spinner=False)
def length_points(settings, sampled):
    """``length.length_points``; call with ``length_key(settings)``. One cache entry for every length, so a slider
    step hashes the Settings once."""
    with large_work(length.largest_work(settings.V, sampled)):
        return length.length_points(settings, sampled)


@st.cache_data(max_entries=16, show_spinner=False)
def capped_means(toy_key, cap):
    """``repeated.capped_means`` of the toy of ``toy_key`` (T, V, mismatch, seed, sampler), capped at ``cap``: only its
    first position's (V,) tables are used, so the toy is built without the page's size and range checks."""
    return repeated.capped_means(make_toy(*toy_key, max_sequences=None), cap)
