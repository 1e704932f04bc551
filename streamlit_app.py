"""toylab: what happens to policy-gradient estimates when the sampler μ and the trainer π disagree.

Run with ``streamlit run streamlit_app.py``. The sidebar gives the Settings; each tab's ``render(settings)``
runs only while that tab is open, under the lesson on show (if it opens that tab). Append ``(label, render)`` to
TABS to add a tab. The link the session opened is read first (it may ask for presentation mode, which collapses
the sidebar), and the address is written last, once, with the link of what the page shows.
"""

from pathlib import Path

import streamlit as st

from toylab.state.query import threshold_problem, toy_problem
from views import (
    address,
    errors_tab,
    estimators_tab,
    header,
    length_tab,
    lessons_tab,
    mismatch_sweep_tab,
    presentation,
    ratios_tab,
    sidebar,
    threshold_sweep_tab,
    tour,
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
sidebar.open_link()
st.set_page_config(page_title="toylab: sampler ≠ trainer", page_icon=str(ICON), layout="wide",
                   initial_sidebar_state="collapsed" if presentation.on() else "auto", menu_items=header.MENU)
presentation.style()
settings, notices = sidebar.render()
for notice in notices:
    st.warning(user_text.code(notice), icon=":material/link_off:")        # a link's values are never Markdown
problem = toy_problem(settings) or threshold_problem(settings)
if problem:
    st.error(problem, icon=":material/block:")
    address.write(settings)
    st.stop()
with st.spinner(f"Enumerating all {settings.V**settings.T:,} sequences…"):
    header.render(settings)
for tab, (label, render) in zip(st.tabs([label for label, _ in TABS], key=sidebar.TAB_KEY, on_change="rerun"),
                                TABS, strict=True):
    if tab.open:
        with tab, st.spinner("Computing…"):
            tour.banner(label, settings)
            render(settings)
address.write(settings)
