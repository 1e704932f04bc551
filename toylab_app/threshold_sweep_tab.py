"""The threshold sweep tab: each thresholded estimator's exact error against its threshold."""

from dataclasses import replace

import streamlit as st

from toylab.analysis.sweeps import SWEPT_PARAMETER, grid_points
from toylab.presentation import coincidence, sweep_charts, sweep_frames
from toylab.state.query import COMPARED_SIZES
from toylab_app import chart_element, screen_share, sweep_panel, tour
from toylab_app.caches import sweep_cache

COMPARE_KEY = "compare_N"          # the URL parameter: a second batch size, its curves dashed (0: none)


def render(settings):
    chosen = [id for id in settings.estimators if id in SWEPT_PARAMETER]
    if not chosen:
        st.info(f"Select an estimator with a threshold ({', '.join(SWEPT_PARAMETER)}) in the sidebar.")
        return
    top = st.columns(2) if screen_share.on() else (st, st)
    panel = sweep_panel.picker("threshold_panel", top[0])
    compared = top[1].selectbox(
        "also at a second batch size", COMPARED_SIZES, key=COMPARE_KEY, persist_state="session",
        format_func=lambda N: "no second batch size" if N == 0 else f"also at N = {N:,} (dashed)",
        label_visibility="collapsed" if screen_share.on() else "visible",
        help="Draw the std and RMSE at a second batch size too (dashed): how the best threshold moves with N. The bias "
             "does not depend on N.")
    rows, best, rule_of_thumb = sweep_cache.threshold_sweep(settings)
    sweeps = [(settings.N, rows, best)]
    if compared and compared != settings.N:
        sweeps.append((compared, *sweep_cache.threshold_sweep(replace(settings, N=compared))[:2]))
    frame = sweep_frames.compared_threshold_frame(sweeps)
    lying = sweep_frames.coincident(frame, "threshold", sweep_charts.drawn_panels(sweep_charts.THRESHOLD_PANELS, panel))
    at_edge = sweep_frames.edge_note(best)
    if at_edge:                                    # above the chart, so a room sees it with the chart
        st.caption(f":material/first_page: {at_edge}")
    chart_element.draw(st, sweep_charts.threshold_chart(sweep_frames.styled(frame, lying), rule_of_thumb, panel,
                                                        marks=tour.marks(settings, "threshold_rmse"),
                                                        labels=sweep_frames.legend_words(lying)),
                       width="stretch" if panel else "content")
    note = sweep_frames.coincident_note(lying, "threshold")
    if note:
        st.caption(coincidence.dashed_caption(note))
    st.caption(sweep_frames.threshold_sweep_caption(settings.N, grid_points(settings.V**settings.T)))
    st.dataframe(sweep_frames.best_threshold_table(rows, best), hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g")
                                for name in sweep_frames.BEST_THRESHOLD_NUMBERS})
    rule_of_thumb_note = sweep_frames.rule_of_thumb_note(best, rule_of_thumb, settings.N)
    if rule_of_thumb_note:
        st.markdown(rule_of_thumb_note)
