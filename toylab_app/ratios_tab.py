"""The ratios tab: where the per-token and sequence ratios fall under μ, the thresholds, and a sampled batch."""

import streamlit as st

from toylab.presentation import charts, frames
from toylab.state.query import DRAWS
from toylab_app import chart_element, screen_share, tour
from toylab_app.caches import cache
from toylab_app.caches.kept import kept

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
    """The per-token ratios, then the sequence ratios; a lesson that marks the sequence ratios gets them first. Every
    chart and number is kept for every session (``_token_chart``, ``_sequence_picture``)."""
    draw = st.session_state.get(DRAW_KEY, 0)
    present = screen_share.on()
    marked = tour.marked(settings)
    lesson_first = any(chart.startswith("sequence_") for chart in marked)
    lesson = tour.lesson_id(settings) if lesson_first else None          # the only charts here a lesson marks
    if lesson_first:
        _sequence_charts(settings, draw, present, lesson, heading=False)
    left, right = st.columns([3, 1], vertical_alignment="center")
    (left.caption if present else left.markdown)(EXPLAINED.format(N=settings.N, draw=draw))
    right.button("Resample the batch", on_click=_resample, icon=":material/casino:", width="stretch")

    if not present:
        st.subheader("Per-token ratio ρ_t = π_t(y_t) / μ_t(y_t)")
    per_position = (right if present else st).toggle("one panel per position", key=PANELS_KEY,
                                                     persist_state="session")
    chart_element.draw(st, _token_chart(settings, draw, per_position, present))
    if not lesson_first:
        _sequence_charts(settings, draw, present, lesson)
    _sequence_facts(settings, draw, present, lesson)


@kept
def _token_chart(settings, draw, per_position, present):
    """The per-token ratios of batch ``draw`` against their exact distribution, with the thresholds, prepared."""
    toy = cache.settings_toy(settings)
    tokens, _ = cache.sampled_batch(settings.toy_key, settings.N, draw)
    token_frame = frames.token_ratio_frame(toy, tokens)
    thresholds = frames.token_threshold_frame(toy, settings.selection(), per_position=per_position)
    if per_position:
        return chart_element.prepare(charts.token_ratio_panels(token_frame, thresholds))
    return chart_element.prepare(charts.readable(charts.token_ratio_chart(
        frames.pooled_token_frame(token_frame), thresholds, height=240 if present else 320,
        plot_width=PLOT_WIDTH[present][0])))


def _sequence_charts(settings, draw, present, lesson, heading=True):
    """log W and log ρ_geo side by side, each with its thresholds and a lesson's marks."""
    if heading:
        st.subheader("Sequence ratio")
    ratios, _ = _sequence_picture(settings, draw, present, lesson)
    for column, chart in zip(st.columns(2), ratios, strict=True):
        chart_element.draw(column, chart)


def _sequence_facts(settings, draw, present, lesson):
    with st.container(horizontal=True, gap="medium"):
        for label, value, help in _sequence_picture(settings, draw, present, lesson)[1]:
            st.metric(label, value, help=help, width="content")


@kept(spinner="Computing…")
def _sequence_picture(settings, draw, present, lesson):
    """((the histograms of log W and log ρ_geo, exact and of batch ``draw``, prepared, marked by lesson ``lesson`` or
    None), (label, value, help) of each number under them)."""
    toy, selection = cache.settings_toy(settings), settings.selection()
    charts_ = tuple(chart_element.prepare(charts.sequence_ratio_chart(
        cache.sequence_histogram(settings.toy_key, kind, settings.N, draw),
        frames.sequence_threshold_frame(toy, selection, kind), kind, marks=tour.marks_of(lesson, f"sequence_{kind}"),
        height=SEQUENCE_HEIGHT[present], plot_width=PLOT_WIDTH[present][1])) for kind in ("W", "geo"))
    facts = cache.sequence_facts(settings.toy_key)
    numbers = [("E_μ[W]", f"{facts['mean_W']:.6f}",
                "Σ of π(y) over the sequences μ draws: exactly 1, IS reweights μ to π on average — less the π-mass "
                "out of reach when the sampler truncates (top-k, top-p), which no weight recovers."),
               ("median W", f"{facts['median_W']:.4f}",
                "Below 1 when μ ≠ π: most sequences are down-weighted, a few get huge weights."),
               ("P_μ(W > 1)", f"{facts['above_one']:.4f}", "Share of sampled sequences up-weighted."),
               ("E_μ[log W]", f"{facts['mean_log_W']:.4f}", "= −KL(μ‖π)."),
               *((f"P(W > {row.value:g}) · {row.threshold}", f"{row.beyond:.4f}",
                  "μ-probability that this sequence-level threshold clips or masks.")
                 for row in frames.sequence_threshold_frame(toy, selection, "W").itertuples())]
    return charts_, numbers
