"""Two logs side by side on the Your run tab (before and after a fix, bf16 against fp8): every number of each with
its standard error in one table, and their log ρ_t histograms overlaid on the same bins."""

import streamlit as st

from toylab.presentation import run_charts, run_frames
from toylab.presentation.estimates import se_text, value_text
from toylab_app import chart_element


def render(named):
    """``named``: {name: (RolloutLog, LogStatistics, Magnitudes)} of the logs to compare, in order."""
    st.subheader("Side by side")
    table = run_frames.side_by_side_frame({name: (statistics, sizes) for name, (_, statistics, sizes) in named.items()})
    shown = table.copy()
    for column in shown.columns[1:]:
        shown[column] = shown[column].map(se_text if column.endswith(" ± se") else value_text)
    st.dataframe(shown, hide_index=True, width="stretch")
    st.caption("Sample estimates of each log, each with its standard error (clustered by sequence); compare two "
               "logs by their values against both errors.")
    frame = run_frames.overlaid_histogram_frame({name: log for name, (log, _, _) in named.items()})
    chart_element.draw(st, run_charts.overlaid_histogram_chart(frame))
    st.caption("The same bins for every log, over their tokens' 0.1 %–99.9 % range (the end bins also count the "
               "tokens beyond); each line is the share of that log's tokens per bin.")
