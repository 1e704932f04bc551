"""The ratios tab: where the per-token and sequence ratios fall under μ, the thresholds, and a sampled batch."""

import streamlit as st

from toylab.presentation import charts, frames
from toylab.state.query import DRAWS
from toylab_app import chart_element, screen_share, tour
from toylab_app.caches import cache

DRAW_KEY = "draw"
PANELS_KEY = "ratio_panels"
PLOT_WIDTH = {True: (1000, 480), False: (420, 240)}   # the narrowest plots, full width and half (presenting or not)
SEQUENCE_HEIGHT = {True: 260, False: 320}             # the sequence ratio's plots: presenting, both in view
EXPLAINED = ("Grey: the exact μ-probability. Orange: one sampled batch of N = {N:,} sequences (draw {draw}), what a "
             "training log would show. Dashed: the selected estimators' thresholds, with the probability beyond each "
             "in a row above the plot.")


def _resample():
    st.session_state[DRAW_KEY] = (st.session_state.get(DRAW_KEY, 0) + 1) % (DRAWS + 1)


def render(settings):
    """The per-token ratios, then the sequence ratios; a lesson that marks the sequence ratios gets them first."""
    toy = cache.settings_toy(settings)
    selection = settings.selection()
    draw = st.session_state.get(DRAW_KEY, 0)
    present = screen_share.on()
    lesson_first = any(chart.startswith("sequence_") for chart in tour.marked(settings))
    if lesson_first:
        _sequence_charts(settings, toy, selection, draw, present, heading=False)
    left, right = st.columns([3, 1], vertical_alignment="center")
    (left.caption if present else left.markdown)(EXPLAINED.format(N=settings.N, draw=draw))
    right.button("Resample the batch", on_click=_resample, icon=":material/casino:", width="stretch")
    tokens, _ = cache.sampled_batch(settings.toy_key, settings.N, draw)

    if not present:
        st.subheader("Per-token ratio ρ_t = π_t(y_t) / μ_t(y_t)")
    per_position = (right if present else st).toggle("one panel per position", key=PANELS_KEY,
                                                     persist_state="session")
    token_frame = frames.token_ratio_frame(toy, tokens)
    thresholds = frames.token_threshold_frame(toy, selection, per_position=per_position)
    if per_position:
        chart = charts.token_ratio_panels(token_frame, thresholds)
    else:
        chart = charts.readable(charts.token_ratio_chart(frames.pooled_token_frame(token_frame), thresholds,
                                                         height=240 if present else 320,
                                                         plot_width=PLOT_WIDTH[present][0]))
    chart_element.draw(st, chart)
    if not lesson_first:
        _sequence_charts(settings, toy, selection, draw, present)
    _sequence_facts(settings, toy, selection)


def _sequence_charts(settings, toy, selection, draw, present, heading=True):
    """log W and log ρ_geo side by side, each with its thresholds and a lesson's marks."""
    if heading:
        st.subheader("Sequence ratio")
    for column, kind in zip(st.columns(2), ("W", "geo"), strict=True):
        histogram = cache.sequence_histogram(settings.toy_key, kind, settings.N, draw)
        chart_element.draw(column, charts.sequence_ratio_chart(
            histogram, frames.sequence_threshold_frame(toy, selection, kind), kind,
            marks=tour.marks(settings, f"sequence_{kind}"), height=SEQUENCE_HEIGHT[present],
            plot_width=PLOT_WIDTH[present][1]))


def _sequence_facts(settings, toy, selection):
    facts = cache.sequence_facts(settings.toy_key)
    with st.container(horizontal=True, gap="medium"):
        st.metric("E_μ[W]", f"{facts['mean_W']:.6f}", width="content",
                  help="Σ of π(y) over the sequences μ draws: exactly 1, IS reweights μ to π on average — less the "
                       "π-mass out of reach when the sampler truncates (top-k, top-p), which no weight recovers.")
        st.metric("median W", f"{facts['median_W']:.4f}", width="content",
                  help="Below 1 when μ ≠ π: most sequences are down-weighted, a few get huge weights.")
        st.metric("P_μ(W > 1)", f"{facts['above_one']:.4f}", help="Share of sampled sequences up-weighted.",
                  width="content")
        st.metric("E_μ[log W]", f"{facts['mean_log_W']:.4f}", help="= −KL(μ‖π).", width="content")
        for row in frames.sequence_threshold_frame(toy, selection, "W").itertuples():
            st.metric(f"P(W > {row.value:g}) · {row.threshold}", f"{row.beyond:.4f}", width="content",
                      help="μ-probability that this sequence-level threshold clips or masks.")
