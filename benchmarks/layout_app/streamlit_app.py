"""The Estimators tab's layout without toylab: Streamlit's own cost for the page's elements (run by page_latency.py).

    python benchmarks/page_latency.py --tabs Estimators --against benchmarks/layout_app

The same kinds and number of elements a slider step sends on the Estimators tab (a sidebar of a slider and four
closed groups, a placeholder, a style block, a title with two buttons, eight metrics, ten tabs, a bar chart of the
estimators, their 17-row table, captions, toggles, a download button), filled with numbers that need no computation
(the page's one custom component, which checks for a dropped link, left out). Its multiple of the floor is what
Streamlit's frontend costs for that layout: the part of the page's own multiple that no code of the page can remove
short of showing less.
"""

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

TABS = ["Estimators", "Ratios", "Error vs batch size", "Threshold sweep", "Mismatch sweep", "Sequence length",
        "Training", "Experts & versions", "Your run", "Lessons"]

st.empty()
st.html("<style>[data-testid='stTabs'] [role='tablist'] { flex-wrap: wrap; }</style>")
mismatch = st.sidebar.slider("mismatch", 0.0, 2.0, 0.3, step=0.01)
for group in ("Toy", "Sampler", "Estimators", "Baseline"):
    st.sidebar.expander(group)
with st.container(horizontal=True):
    st.title("layout of the Estimators tab", width="stretch")
    with st.container(horizontal=True, width="content"):
        st.button("Tour")
        st.button("Present")
st.caption(f"mismatch {mismatch:.2f}")
with st.container(horizontal=True):
    for index in range(8):
        st.metric(f"metric {index}", f"{mismatch * (index + 1):.4f}", width="content")
with st.tabs(TABS)[0]:
    estimators = [f"estimator {index}" for index in range(17)]
    values = np.linspace(0.1, 1.0, 17) * mismatch
    table = pd.DataFrame({"estimator": estimators, **{f"column {j}": values * (j + 1) for j in range(8)}})
    st.altair_chart(alt.Chart(table).mark_bar().encode(x="column 0", y="estimator"), width="stretch")
    st.dataframe(table, hide_index=True)
    st.caption(" · ".join(estimators))
    st.caption(f"relative RMSE at mismatch {mismatch:.2f}")
    st.download_button("Download CSV", table.to_csv(), on_click="ignore")
    st.toggle("Across seeds")
    st.subheader("The reference")
    st.toggle("Show the KL view")
    st.expander("Formulas")
