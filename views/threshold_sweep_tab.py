"""The threshold sweep tab: each thresholded estimator's exact error against its threshold."""

import pandas as pd
import streamlit as st

from toylab.analysis.sweeps import SWEPT_PARAMETER, grid_points
from toylab.presentation import sweep_charts, sweep_frames
from views import chart_element
from views.caches import sweep_cache

LABEL = "Threshold sweep"


def render(settings):
    chosen = [id for id in settings.estimators if id in SWEPT_PARAMETER]
    if not chosen:
        st.info(f"Select an estimator with a threshold ({', '.join(SWEPT_PARAMETER)}) in the sidebar.")
        return
    rows, best, rule_of_thumb = sweep_cache.threshold_sweep(settings)
    frame = sweep_frames.threshold_frame(rows, best)
    chart_element.draw(st, sweep_charts.threshold_chart(frame, rule_of_thumb), width="content")
    st.caption(f"Exact at every point, batch size N = {settings.N:,}. Bands (tok_mis, geo_rs) sweep their upper "
               "bound hi with lo held at the sidebar's value; the other thresholds sweep their one parameter "
               f"over its allowed range ({grid_points(settings.V**settings.T)} log-spaced values plus the chosen one; "
               "fewer on large toys, where each point is a full pass over the M sequences).")
    chosen_rows = {row["estimator"]: row for row in rows if row["chosen"]}
    summary = pd.DataFrame([{
        "estimator": id, "parameter": best[id]["parameter"], "lowest-RMSE threshold": best[id]["threshold"],
        "its rel RMSE": best[id]["rel_rmse"], "chosen threshold": chosen_rows[id]["threshold"],
        "chosen rel RMSE": chosen_rows[id]["rel_rmse"]} for id in best])
    st.dataframe(summary, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g") for name in summary.columns[2:]})
    if "seq_tis" in best:
        st.markdown(f"**Rule of thumb (Li et al. 2025):** C* = sqrt(2(1 + χ²_seq)) = **{rule_of_thumb:.3g}**; "
                    f"on this toy seq_tis's lowest relative RMSE at N = {settings.N:,} is at "
                    f"C = **{best['seq_tis']['threshold']:.3g}** (rel RMSE {best['seq_tis']['rel_rmse']:.3g}).")
