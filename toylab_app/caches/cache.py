"""The page's cached computations, keyed on scalars and Settings; bounded so memory stays bounded.

The toy is shared by every session (one object per four numbers, which keeps μ(y) once the Ratios tab has
built it) in a cache bounded by bytes (``ByteBoundedCache``): toys differ in size a thousandfold. Everything
else is small data (a few kB per entry: (T, V) means, frames of at most a few thousand rows), bounded by
entry count and keyed on the Settings fields it depends on, so changing N does not recompute moments. The
selected estimators' moments come from one exact pass together (at T = 10 it costs 0.09 s for nine, where a
pass per estimator cost 0.2 s).
"""

import streamlit as st

import toylab
from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import monte_carlo, summarise, undefined_sizes
from toylab.engine.moments import exact_moments_many
from toylab.presentation import frames
from toylab.state.query import PAGE_SIZE_LIMIT
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.work_slots import large_work

MONTE_CARLO_SIZES = (1, 10, 100, 1_000)        # 10,000 would cost ~0.7 s per change for little insight
MONTE_CARLO_REPLICATES = 200
HISTOGRAM_BINS = 60


TOY_CACHE_BYTES = 160 * 2**20      # four toys at the largest size (36 MB each: μ(y) and r(y), see toylab.engine.toy)
TOYS = ByteBoundedCache(TOY_CACHE_BYTES, lambda toy: toy.nbytes())


def toy(T, V, mismatch, seed, sampler):
    """The toy, shared by every session while the toy cache's byte budget allows; ValueError (with the reason) if
    it is invalid, over the page's size limit or beyond float64 (``query.toy_problem``)."""
    return TOYS.get((T, V, mismatch, seed, sampler),
                    lambda: toylab.make_toy(T, V, mismatch, seed, sampler, max_sequences=PAGE_SIZE_LIMIT))


def settings_toy(settings):
    return toy(*settings.toy_key)


def sequences(toy_key):
    """M = V**T of a toy key (T, V, mismatch, seed, sampler)."""
    return toy_key[1] ** toy_key[0]


@st.cache_resource(max_entries=256, show_spinner=False)
def selection_moments(toy_key, selection, baseline):
    """{id: Moments} of ``selection`` ((id, ((name, value), …)), …) from one exact pass."""
    with large_work(sequences(toy_key)):
        return exact_moments_many(toy(*toy_key), {id: dict(params) for id, params in selection}, baseline)


def selected_moments(settings):
    """{id: Moments} for the selected exact estimators, in registry order."""
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection(exact_only=True).items())
    return selection_moments(settings.toy_key, selection, settings.baseline)


def reference_moments(settings):
    """seq_is's Moments (it has no thresholds): the unbiased reference of the crossover."""
    if "seq_is" in settings.estimators:
        return selected_moments(settings)["seq_is"]
    return selection_moments(settings.toy_key, (("seq_is", ()),), settings.baseline)["seq_is"]


@st.cache_data(max_entries=32, show_spinner=False)
def toy_diagnostics(toy_key):
    with large_work(sequences(toy_key)):
        return diagnostics(toy(*toy_key))


@st.cache_data(max_entries=32, show_spinner=False)
def sequence_facts(toy_key):
    with large_work(sequences(toy_key)):
        return frames.sequence_facts(toy(*toy_key))


@st.cache_data(max_entries=8, show_spinner=False)
def sampled_batch(toy_key, N, draw):
    """One batch of N sequences from μ; ``draw`` counts the resample button's presses (it is the seed)."""
    return frames.sampled_batch(toy(*toy_key), N, draw)


@st.cache_data(max_entries=16, show_spinner=False)
def sequence_histogram(toy_key, kind, N, draw):
    _, log_W = sampled_batch(toy_key, N, draw)
    with large_work(sequences(toy_key)):
        return frames.sequence_histogram_frame(toy(*toy_key), kind, HISTOGRAM_BINS, log_W)


MONTE_CARLO_ERRORS = ByteBoundedCache(2**21, lambda errors: errors.nbytes)   # (sizes, replicates) each: 6.4 kB


def monte_carlo_frame(toy_key, selection, baseline, aggregation):
    """(Monte Carlo summary at MONTE_CARLO_SIZES, {id: batch sizes where it is undefined}); ``selection`` is
    ((id, ((name, value), ...)), ...). Each estimator's errors are kept on their own (an estimator's draws do not
    depend on the others chosen: ``monte_carlo``), so a new threshold or estimator samples only that estimator;
    those not kept are sampled together, in one run."""
    chosen = {id: dict(params) for id, params in selection}
    keys = {id: (toy_key, id, params, baseline, aggregation) for id, params in selection}

    def sampled(ids):
        return monte_carlo(toy(*toy_key), {id: chosen[id] for id in ids}, baseline, MONTE_CARLO_SIZES,
                           MONTE_CARLO_REPLICATES, seed=0, aggregation=aggregation)

    missing = [id for id in chosen if keys[id] not in MONTE_CARLO_ERRORS]
    fresh = sampled(missing) if missing else {}
    errors = {id: MONTE_CARLO_ERRORS.get(key, lambda id=id: fresh[id] if id in fresh else sampled([id])[id])
              for id, key in keys.items()}
    return frames.monte_carlo_frame(summarise(errors, MONTE_CARLO_SIZES)), undefined_sizes(errors, MONTE_CARLO_SIZES)
