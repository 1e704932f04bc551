"""toylab: what happens to policy-gradient estimates when the sampler μ and the trainer π disagree.

Run with ``streamlit run streamlit_app.py``. The sidebar gives the Settings; each tab's ``render(settings)``
runs only while that tab is open. Append ``(label, render)`` to TABS to add a tab.
"""

from pathlib import Path

import streamlit as st

from toylab.state.query import size_problem
from views import (
    errors_tab,
    estimators_tab,
    header,
    length_tab,
    lessons_tab,
    mismatch_sweep_tab,
    ratios_tab,
    sidebar,
    threshold_sweep_tab,
    training_tab,
    user_text,
    your_run_tab,
)

TABS = [
    ("Estimators", estimators_tab.render),
    ("Ratios", ratios_tab.render),
    ("Error vs batch size", errors_tab.render),
    (threshold_sweep_tab.LABEL, threshold_sweep_tab.render),
    (mismatch_sweep_tab.LABEL, mismatch_sweep_tab.render),
    (length_tab.LABEL, length_tab.render),
    (training_tab.LABEL, training_tab.render),
    (your_run_tab.LABEL, your_run_tab.render),
    (lessons_tab.LABEL, lessons_tab.render),
]

ICON = Path(__file__).resolve().parent / "docs" / "icon.png"   # served by the app: a :material/…: icon is fetched from Google
st.set_page_config(page_title="toylab: sampler ≠ trainer", page_icon=str(ICON), layout="wide")
settings, notices = sidebar.render()
st.title("toylab · when the sampler μ and the trainer π disagree")
for notice in notices:
    st.warning(user_text.code(notice), icon=":material/link_off:")        # a link's values are never Markdown
problem = size_problem(settings.T, settings.V)
if problem:
    st.error(f"This toy is too large to enumerate. {problem}", icon=":material/block:")
    st.stop()
with st.spinner(f"Enumerating all {settings.V**settings.T:,} sequences…"):
    header.render(settings)
for tab, (_, render) in zip(st.tabs([label for label, _ in TABS], key=sidebar.TAB_KEY, bind="query-params"),
                            TABS, strict=True):
    if tab.open:
        with tab, st.spinner("Computing…"):
            render(settings)
