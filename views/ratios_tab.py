"""The ratios tab: where the per-token and sequence ratios fall under μ, the thresholds, and a sampled batch."""

import streamlit as st

from toylab.presentation import charts, frames
from views import chart_element
from views.caches import cache

DRAW_KEY = "draw"
PANELS_KEY = "ratio_panels"


def _resample():
    st.session_state[DRAW_KEY] = st.session_state.get(DRAW_KEY, 0) + 1


def render(settings):
    toy = cache.settings_toy(settings)
    selection = settings.selection()
    draw = st.session_state.get(DRAW_KEY, 0)
    left, right = st.columns([3, 1], vertical_alignment="center")
    left.markdown(f"Grey: the exact μ-probability. Orange: one sampled batch of N = {settings.N:,} sequences "
                  f"(draw {draw}), what a training log would show. Dashed: the selected estimators' thresholds, "
                  "with the probability beyond each.")
    right.button("Resample the batch", on_click=_resample, icon=":material/casino:", width="stretch")
    tokens, _ = cache.sampled_batch(settings.toy_key, settings.N, draw)

    st.subheader("Per-token ratio ρ_t = π_t(y_t) / μ_t(y_t)")
    per_position = st.toggle("one panel per position", key=PANELS_KEY, bind="query-params")
    token_frame = frames.token_ratio_frame(toy, tokens)
    thresholds = frames.token_threshold_frame(toy, selection, per_position=per_position)
    if per_position:
        chart = charts.token_ratio_panels(token_frame, thresholds)
    else:
        chart = charts.readable(charts.token_ratio_chart(frames.pooled_token_frame(token_frame), thresholds))
    chart_element.draw(st, chart)

    st.subheader("Sequence ratio")
    facts = cache.sequence_facts(settings.toy_key)
    columns = st.columns([2, 2, 1])
    for column, kind in zip(columns, ("W", "geo"), strict=False):
        histogram = cache.sequence_histogram(settings.toy_key, kind, settings.N, draw)
        chart_element.draw(column, charts.sequence_ratio_chart(
            histogram, frames.sequence_threshold_frame(toy, selection, kind), kind))
    with columns[2]:
        st.metric("E_μ[W]", f"{facts['mean_W']:.6f}",
                  help="Σ of π(y) over the sequences μ draws: exactly 1, IS reweights μ to π on average — less the "
                       "π-mass out of reach when the sampler truncates (top-k, top-p), which no weight recovers.")
        st.metric("median W", f"{facts['median_W']:.4f}",
                  help="Below 1 when μ ≠ π: most sequences are down-weighted, a few get huge weights.")
        st.metric("P_μ(W > 1)", f"{facts['above_one']:.4f}", help="Share of sampled sequences up-weighted.")
        st.metric("E_μ[log W]", f"{facts['mean_log_W']:.4f}", help="= −KL(μ‖π).")
        for row in frames.sequence_threshold_frame(toy, selection, "W").itertuples():
            st.metric(f"P(W > {row.value:g}) · {row.threshold}", f"{row.beyond:.4f}",
                      help="μ-probability that this sequence-level threshold clips or masks.")
