"""The sequence-length tab: how χ²_seq, the ratios' tails and each estimator's error scale with T; and one position
repeated T times, where the sequence ratio W falls with T and its geometric mean does not."""

import streamlit as st

from toylab.analysis.length import ENUMERATION_LIMIT, MAX_LENGTH, SAMPLES, TOKEN_BUDGET
from toylab.analysis.repeated import COUNT_LIMIT
from toylab.presentation import coincidence, sweep_charts, sweep_frames
from toylab.state.query import ESTIMATORS_TAB
from toylab_app import chart_element, sweep_panel, tour
from toylab_app.caches import sweep_cache

SAMPLED_KEY = "length_mc"          # its URL name (toylab.state.query.VIEW_PARAMETERS)


def render(settings):
    """The sweep over T (its panels, and how each point was computed), and the chart of one position repeated; a lesson
    that marks the latter gets it first."""
    lesson_first = CAPPED_CHART in tour.marked(settings)
    if lesson_first:
        _capped(settings)
    if not settings.selection(exact_only=True):
        st.info("Select at least one exact estimator in the sidebar.")
    else:
        _sweep(settings)
    if not lesson_first:
        _capped(settings)


CAPPED_CHART = "length_capped"       # its name among the lessons' charts (toylab.lessons.lesson.CHARTS)


def _capped(settings):
    """E_μ[min(W, C)] against E_μ[min(ρ_geo, C)] with the toy's first position repeated T times."""
    cap = settings.params("seq_tis")["C"]
    truncates = settings.top_p < 1 or settings.top_k
    frame = sweep_frames.length_capped_frame(sweep_cache.capped_means(settings.toy_key, cap))
    chart_element.draw(st, sweep_charts.capped_chart(frame, cap, marks=tour.marks(settings, CAPPED_CHART)),
                       width="stretch")
    st.caption(
        f"The first position of the {ESTIMATORS_TAB} tab's toy (T = {settings.T}, V = {settings.V}, mismatch "
        f"{settings.mismatch:g}, seed {settings.seed}) repeated T times, so every token ratio is alike: "
        + ("E_μ[W] is π's mass on the tokens the sampler keeps to the T-th power (the dotted line at 1 is its value "
           "for a sampler that keeps every token), and " if truncates else "E_μ[W] = 1 at every T (dotted), yet ")
        + f"W's typical value e^(T·E_μ[log ρ]) falls with T, and the cap C = {cap:g} (seq_tis's, in the sidebar) cuts "
        "ever more of its mean; the geometric mean ρ_geo = W^(1/T) keeps its typical value. Exact: W depends only on "
        "how often each token is drawn, a multinomial sum over the count vectors (drawn while they number at most "
        f"{COUNT_LIMIT:,}, so fewer lengths at large V).")


def _sweep(settings):
    panel = sweep_panel.picker("length_panel")
    sampled = st.toggle("Monte Carlo beyond enumeration", key=SAMPLED_KEY, persist_state="session",
                        help=f"Beyond V**T = {ENUMERATION_LIMIT:,} the estimators whose weight does not factorise over "
                             "positions, and the two tail probabilities, can only be sampled. Off, the chart shows "
                             "what is exact at every T and a slider step does not wait for the sampling.")
    population, estimators, stopped = sweep_cache.length_points(sweep_cache.length_key(settings), sampled)
    if stopped:
        st.warning(f"Stopped at T = {stopped[0]}: {stopped[1]}")
    estimator_frame = sweep_frames.length_estimator_frame(estimators)
    lying = sweep_frames.coincident(estimator_frame, "T",
                                    sweep_charts.drawn_panels(sweep_charts.LENGTH_ESTIMATOR_PANELS, panel))
    chart = sweep_charts.length_chart(sweep_frames.length_divergence_frame(population),
                                      sweep_frames.length_probability_frame(population),
                                      sweep_frames.styled(estimator_frame, lying), panel,
                                      marks=tour.marks(settings, "length_std_ratio"),
                                      labels=sweep_frames.legend_words(lying))
    chart_element.draw(st, chart, width="stretch" if panel else "content")
    note = sweep_frames.coincident_note(lying, "T")
    if note:
        st.caption(coincidence.dashed_caption(note))
    overflowed = sweep_frames.length_overflow_caption(population, estimators)
    if overflowed:
        st.caption(overflowed)
    seq_tis, geo_rs = settings.params("seq_tis"), settings.params("geo_rs")
    st.caption(
        f"V = {settings.V}, mismatch {settings.mismatch:g}, seed {settings.seed}, sampler "
        f"{settings.sampler.describe()}; only T changes: the toy at "
        f"length T is the first T positions of one {MAX_LENGTH}-position toy make_toy({MAX_LENGTH}, V, mismatch, "
        f"seed), so its b differs from the {ESTIMATORS_TAB} tab's (drawn for T positions) and the numbers at the "
        f"sidebar's T differ from that tab's. C = {seq_tis['C']:g} (seq_tis), band "
        f"[{geo_rs['lo']:g}, {geo_rs['hi']:g}] (geo_rs). Circles: exact by enumeration (while V**T ≤ "
        f"{ENUMERATION_LIMIT:,}); squares: "
        "exact by the recursion over the count of token 0 (the estimators whose weight factorises over "
        "positions, and ∇J, J, E_μ[r]); " + (
            f"triangles: Monte Carlo (stratified by that count, {SAMPLES:,} sequences, fewer for T > "
            f"{TOKEN_BUDGET // SAMPLES} so that a point draws at most {TOKEN_BUDGET:,} tokens) with ±2 s.e. bars. "
            if sampled else "beyond enumeration the other estimators and the two tail probabilities can only be "
                            "sampled: turn on the Monte Carlo above to draw them. ") +
        "χ²_seq = ∏(1 + χ²_t) − 1 and the ESS fraction are exact at every T. Relative bias "
        "divides by ‖∇J‖, which shrinks as the reward gets rare at large T. The bottom panel divides each "
        "estimator's std by on-policy's (exact at every T, flat at 1 when on_policy is selected) at the same T: "
        "the rarity cancels and the ratio holds at any batch size N; seq_is's variance ratio grows roughly like "
        "∏(1 + χ²_t) = 1 + χ²_seq."
        + (" The sampler truncates: the π-mass out of reach, 1 − ∏_t π_t(S_t), grows with T, and with it the bias "
           "floor every estimator on μ carries (χ²_seq and the ESS are over the sequences μ draws)."
           if settings.top_p < 1 or settings.top_k else ""))
