"""The threshold sweep tab: each thresholded estimator's exact error against its threshold."""

from dataclasses import replace

import pandas as pd
import streamlit as st

from toylab.analysis.sweeps import SWEPT_PARAMETER, grid_points
from toylab.presentation import sweep_charts, sweep_frames
from toylab.state.query import COMPARED_SIZES
from views import chart_element, screen_share, sweep_panel, tour
from views.caches import sweep_cache

LABEL = "Threshold sweep"
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
    lying = sweep_frames.coincident(frame, "threshold")
    at_edge = [f"{id} at its {row['edge']} edge ({row['parameter']} = {row['threshold']:.3g})"
               for id, row in best.items() if row["edge"]]
    if at_edge:                                    # above the chart, so a room sees it with the chart
        st.caption(":material/first_page: The lowest RMSE lies at the edge of the range swept for " + "; ".join(at_edge)
                   + ": the best threshold may lie beyond it, outside what the estimator allows.")
    chart_element.draw(st, sweep_charts.threshold_chart(sweep_frames.styled(frame, lying), rule_of_thumb, panel,
                                                        marks=tour.marks(settings, "threshold_rmse"),
                                                        labels=sweep_frames.legend_words(lying)),
                       width="stretch" if panel else "content")
    note = sweep_frames.coincident_note(lying, frame["threshold"], "threshold")
    if note:
        st.caption(f"Drawn in short dashes over the line each lies on: {note}.")
    st.caption(f"Exact at every point, batch size N = {settings.N:,}. Bands (tok_mis, geo_rs) sweep their upper "
               "bound hi with lo held at the sidebar's value; the other thresholds sweep their one parameter "
               f"over its allowed range ({grid_points(settings.V**settings.T)} log-spaced values plus the chosen one; "
               "fewer on large toys, where each point is a full pass over the M sequences).")
    chosen_rows = {row["estimator"]: row for row in rows if row["chosen"]}
    summary = pd.DataFrame([{
        "estimator": id, "parameter": best[id]["parameter"], "lowest-RMSE threshold": best[id]["threshold"],
        "at the sweep's edge": best[id]["edge"] or "", "its rel RMSE": best[id]["rel_rmse"],
        "chosen threshold": chosen_rows[id]["threshold"], "chosen rel RMSE": chosen_rows[id]["rel_rmse"]} for id in best])
    st.dataframe(summary, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g") for name in
                                ("lowest-RMSE threshold", "its rel RMSE", "chosen threshold", "chosen rel RMSE")})
    if "seq_tis" in best:
        st.markdown(f"**Rule of thumb (Li et al. 2025):** C* = sqrt(2(1 + χ²_seq)) = **{rule_of_thumb:.3g}**; "
                    f"on this toy seq_tis's lowest relative RMSE at N = {settings.N:,} is at "
                    f"C = **{best['seq_tis']['threshold']:.3g}** (rel RMSE {best['seq_tis']['rel_rmse']:.3g})"
                    + (f", the {best['seq_tis']['edge']} edge of the range swept." if best["seq_tis"]["edge"] else "."))
