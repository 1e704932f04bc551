"""The threshold sweep tab: each thresholded estimator's exact error against its threshold."""

from dataclasses import dataclass, replace

import pyarrow as pa
import streamlit as st

from toylab.analysis.sweeps import SWEPT_PARAMETER, grid_points
from toylab.presentation import coincidence, sweep_charts, sweep_frames
from toylab.state.query import COMPARED_SIZES
from toylab_app import chart_element, screen_share, sweep_panel, tour
from toylab_app.caches import sweep_cache
from toylab_app.caches.kept import kept

COMPARE_KEY = "compare_N"          # the URL parameter: a second batch size, its curves dashed (0: none)


def render(settings):
    chosen = [id for id in settings.estimators if id in SWEPT_PARAMETER]
    if not chosen:
        st.info(f"Select an estimator with a threshold ({', '.join(SWEPT_PARAMETER)}) in the sidebar.")
        return
    present = screen_share.on()
    top = st.columns(2) if present else st.columns([1, 2], vertical_alignment="bottom")    # normal: the edge note
    panel = sweep_panel.picker("threshold_panel", top[0])                                   # beside the second N,
    compared = (top[1] if present else top[0]).selectbox(                                   # the chart in view

        "also at a second batch size", COMPARED_SIZES, key=COMPARE_KEY, persist_state="session",
        format_func=lambda N: "no second batch size" if N == 0 else f"also at N = {N:,} (dashed)",
        label_visibility="collapsed" if present else "visible",
        help="Draw the std and RMSE at a second batch size too (dashed): how the best threshold moves with N. The bias "
             "does not depend on N.")
    picture = _picture(settings, panel, compared,
                       tour.lesson_id(settings) if "threshold_rmse" in tour.marked(settings) else None)
    if picture.at_edge:                            # above the chart, so a room sees it with the chart
        (st if present else top[1]).caption(f":material/first_page: {picture.at_edge}")
    chart_element.draw(st, picture.chart, width="stretch" if panel else "content")
    for caption in picture.captions:
        st.caption(caption)
    st.dataframe(picture.table, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g")
                                for name in sweep_frames.BEST_THRESHOLD_NUMBERS})
    if picture.rule_of_thumb:
        st.markdown(picture.rule_of_thumb)


@dataclass(frozen=True)
class Picture:
    """What the tab shows of a Settings, kept for every session: the note on a best threshold at the grid's edge (or
    ''), the chart, the captions under it, the best thresholds' table, the rule of thumb's note (or '')."""
    at_edge: str
    chart: chart_element.Prepared
    captions: list
    table: pa.Table
    rule_of_thumb: str


@kept(spinner="Computing…")
def _picture(settings, panel, compared, lesson):
    """The sweep at the sidebar's N (and at ``compared``, dashed, unless 0), one ``panel`` or all (None), marked by
    lesson ``lesson`` (or None)."""
    rows, best, rule_of_thumb = sweep_cache.threshold_sweep(settings)
    sweeps = [(settings.N, rows, best)]
    if compared and compared != settings.N:
        sweeps.append((compared, *sweep_cache.threshold_sweep(replace(settings, N=compared))[:2]))
    frame = sweep_frames.compared_threshold_frame(sweeps)
    lying = sweep_frames.coincident(frame, "threshold", sweep_charts.drawn_panels(sweep_charts.THRESHOLD_PANELS, panel))
    chart = sweep_charts.threshold_chart(sweep_frames.styled(frame, lying), rule_of_thumb, panel,
                                         marks=tour.marks_of(lesson, "threshold_rmse"),
                                         labels=sweep_frames.legend_words(lying))
    note = sweep_frames.coincident_note(lying, "threshold")
    captions = [coincidence.dashed_caption(note)] if note else []
    captions.append(sweep_frames.threshold_sweep_caption(settings.N, grid_points(settings.V**settings.T)))
    return Picture(sweep_frames.edge_note(best) or "", chart_element.prepare(chart), captions,
                   chart_element.arrow(sweep_frames.best_threshold_table(rows, best)),
                   sweep_frames.rule_of_thumb_note(best, rule_of_thumb, settings.N) or "")
