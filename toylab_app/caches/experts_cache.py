"""Cached computations of the Experts & versions tab, keyed on the toy, the selection, the baseline and the tab's
controls: the same settings give the same exact numbers for every session."""

import streamlit as st

from toylab.analysis.routing import flip_curve, routing_view
from toylab.analysis.versions import versions_view
from toylab.catalogue.updates import Update
from toylab.engine.experts import LIMITS
from toylab.engine.toy import make_toy
from toylab.training.history import history_of
from toylab_app.caches import cache
from toylab_app.caches.work_slots import large_work

FLIP_VALUES = {"layers": tuple(range(1, LIMITS["layers"][1] + 1)), "experts": tuple(range(2, LIMITS["experts"][1] + 1))}


@st.cache_data(max_entries=32, show_spinner=False)
def routing(toy_key, experts, selection, baseline, N):
    """``analysis.routing.routing_view`` of the toy (every replay mode)."""
    with large_work(cache.sequences(toy_key) * experts.draws):
        return routing_view(cache.toy(*toy_key), experts, {id: dict(params) for id, params in selection}, baseline, N)


@st.cache_data(max_entries=32, show_spinner=False)
def flips(T, V, seed, experts, axis):
    """The flip rates as ``axis`` (layers or experts) takes each of its values: they read the router and the engine's
    error draws only (from the seed), so a mismatch or sampler step keeps them."""
    values = FLIP_VALUES[axis] if axis == "layers" else tuple(v for v in FLIP_VALUES["experts"] if v > experts.top_k)
    return flip_curve(make_toy(T, V, 0.0, seed, max_sequences=None), experts, axis, values)


@st.cache_data(max_entries=32, show_spinner=False)
def versions(toy_key, versions_model, lag, anchor, selection, baseline, N, step, lr):
    """``analysis.versions.versions_view`` at on_policy's step ``step`` (SGD at ``lr``), every mode of logging."""
    toy = cache.toy(*toy_key)
    T, V, _, seed, sampler = toy_key
    with large_work(cache.sequences(toy_key) * lag * toy.T):
        return versions_view(toy, versions_model, lag, anchor, Update(), {id: dict(params) for id, params in selection},
                             _history(T, V, seed, sampler, step, lr), baseline, N)


@st.cache_data(max_entries=32, show_spinner=False)
def _history(T, V, seed, sampler, step, lr):
    """on_policy's versions θ_k … θ_0: its ascent reads π alone, so a mismatch step keeps them."""
    thetas = history_of(make_toy(T, V, 0.0, seed, sampler, max_sequences=None), step, lr)
    return _Versions(tuple(thetas(v) for v in range(step + 1)))


class _Versions:
    """v ↦ θ_{k−v} from a kept tuple (θ_k, θ_{k−1}, …, θ_0): what ``history_of`` returns, picklable for the cache."""

    def __init__(self, thetas):
        self.thetas = thetas

    def __call__(self, v):
        return self.thetas[min(v, len(self.thetas) - 1)]
