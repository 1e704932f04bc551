"""The mismatch sweep tab: every selected estimator's exact error as the sampler moves away from the trainer."""

import streamlit as st

from toylab.presentation import sweep_charts, sweep_frames
from views import chart_element, sweep_panel
from views.caches import sweep_cache

LABEL = "Mismatch sweep"


def render(settings):
    if not settings.selection(exact_only=True):
        st.info("Select at least one exact estimator in the sidebar.")
        return
    panel = sweep_panel.picker("mismatch_panel")
    estimator_rows, divergence_rows = sweep_cache.mismatch_sweep(settings)
    chart = sweep_charts.mismatch_chart(sweep_frames.mismatch_frame(estimator_rows),
                                        sweep_frames.divergence_frame(divergence_rows), settings.mismatch, panel)
    chart_element.draw(st, chart, width="stretch" if panel else "content")
    st.caption(f"Exact at every point (T = {settings.T}, V = {settings.V}, seed {settings.seed}, N = {settings.N:,}). "
               "θ and b come from the seed alone, so only μ = softmax(θ + mismatch·b) moves. At mismatch 0 every "
               "weight is 1 and every estimator coincides with naive (and on_policy). Batch-coupled estimators "
               "have no exact moments and are not shown.")
