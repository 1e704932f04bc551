"""Cached computations of the Training tab, keyed on the toy, the trained selection, the baseline and the tab's
controls; plus the work limits that keep a re-render within seconds on the largest toys."""

import numpy as np
import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.toy import Toy
from toylab.training import cost
from toylab.training.loop import TrainingConfig, cannot_train, train
from toylab.training.sga import monte_carlo_improvement, second_order
from views.caches import cache

REFERENCE = "on_policy"
SGA_CURVE_LRS = tuple(float(lr) for lr in np.logspace(-2, 2, 33))          # 0.01 … 100, the second-order lines
SGA_SAMPLED_LRS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)     # Monte Carlo points (plus the chosen lr)
SGA_SEQUENCES = 200 * 64        # sequences per estimator for the Monte Carlo points: 200 batches at N = 64
SGA_FEWEST_BATCHES = 30
SECONDS_PER_SECOND_ORDER = 7e-7             # measured: E[ĝᵀHĝ] of one estimator, per sequence of the toy
LIMIT_SECONDS = cost.PAGE_SECONDS


def trained(settings, mode):
    """((id, ((name, value), …)), …): on_policy (the reference) and the selected estimators that can train in this
    mode at the sidebar's N (``training.cannot_train``), in registry order."""
    chosen = {REFERENCE: {}} | settings.selection()
    return tuple((id, tuple(chosen[id].items())) for id in ESTIMATORS
                 if id in chosen and not cannot_train(id, mode, settings.N))


def left_out(settings, mode):
    """'id (why)' for each selected estimator that cannot train in this mode at the sidebar's N."""
    return [f"{id} ({why})" for id in settings.estimators if (why := cannot_train(id, mode, settings.N))]


def estimated_seconds(settings, config, selection):
    """A rough time for ``trajectories`` (``training.cost``), to refuse what would freeze the page."""
    return cost.estimated_seconds(settings.T, settings.V, config, [id for id, _ in selection])


@st.cache_data(max_entries=16, show_spinner=False)
def trajectories(toy_key, selection, baseline, config):
    """{id: Trajectory} of ``training.train`` on the toy; ``selection`` as from ``trained``."""
    return train(cache.toy(*toy_key), {id: dict(params) for id, params in selection}, baseline, config)


def sga_batches(N):
    """Monte Carlo batches for the SGA points at batch size N (0: too few to be worth showing)."""
    batches = min(200, SGA_SEQUENCES // N)
    return batches if batches >= SGA_FEWEST_BATCHES else 0


def sga_has_second_order(settings, selection):
    """Whether the exact second order of every selected exact estimator fits in the time limit."""
    exact = sum(ESTIMATORS[id].exact for id, _ in selection)
    return exact * settings.V**settings.T * SECONDS_PER_SECOND_ORDER <= LIMIT_SECONDS


@st.cache_data(max_entries=16, show_spinner=False)
def sga(toy_key, selection, baseline, N, config, step, with_second_order):
    """(J, {id: SecondOrder}, {id: MonteCarloImprovement}) at θ_step of on_policy's expected run under ``config``'s
    optimizer and lr; second order for the exact estimators (if asked), Monte Carlo for all (if N allows)."""
    base = cache.toy(*toy_key)
    path = train(base, {REFERENCE: {}}, baseline, TrainingConfig(max(step, 1), config.lr, config.optimizer))
    toy = Toy(path[REFERENCE].theta[step], base.b, base.mismatch, base.seed)
    chosen = {id: dict(params) for id, params in selection}
    exact = {id: second_order(toy, id, params, baseline, N) for id, params in chosen.items()
             if ESTIMATORS[id].exact and with_second_order}
    lrs = sorted(set(SGA_SAMPLED_LRS) | {config.lr})
    batches = sga_batches(N)
    sampled = monte_carlo_improvement(toy, chosen, baseline, N, lrs, batches) if batches else {}
    return toy.J, exact, sampled
