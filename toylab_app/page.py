"""toylab: what happens to policy-gradient estimates when the sampler μ and the trainer π disagree.

``run()`` is one run of the page; Streamlit calls it on every rerun through a two-line script,
``toylab_app/script/streamlit_app.py``, served by ``streamlit run streamlit_app.py`` in a clone (the ``st.App``
there) and by ``toylab app`` in an installed package. The sidebar gives the Settings; each tab's
``render(settings)`` runs only while that tab is open, under the lesson on show (if it opens that tab). To add a
tab, add its label to ``TAB_LABELS`` (toylab/state/query.py, the one place a label is spelled) and ``(its name
there, its module)`` to TABS. The link the session opened is read first (it may ask for presentation mode, which
collapses the sidebar), and the address is written last, once, with the link of what the page shows. An
unexpected error in a tab is a notice in that tab (``last_resort``): the other tabs, the sidebar and the address go
on. A run does its work in turn with the other sessions' runs (``turns``: at most two at once), and says so while
it waits.
"""

from pathlib import Path

import streamlit as st

from toylab.state.query import (
    ERRORS_TAB,
    ESTIMATORS_TAB,
    EXPERTS_TAB,
    LENGTH_TAB,
    LESSONS_TAB,
    MISMATCH_SWEEP_TAB,
    RATIOS_TAB,
    THRESHOLD_SWEEP_TAB,
    TRAINING_TAB,
    YOUR_RUN_TAB,
    threshold_problem,
    toy_problem,
)
from toylab_app import (
    address,
    errors_tab,
    estimators_tab,
    experts_tab,
    header,
    heap,
    internals,
    last_resort,
    length_tab,
    lessons_tab,
    mismatch_sweep_tab,
    ratios_tab,
    screen_share,
    sidebar,
    threshold_sweep_tab,
    tour,
    training_tab,
    turns,
    user_text,
    your_run_tab,
)
from toylab_app.caches import ahead, kept

internals.serve_static_files_from_memory()         # process-wide: Streamlit's frontend read once, not at every request

TABS = [   # (label, the tab's module: its render looked up each run), in TAB_LABELS' order (tests/page/test_app_links.py)
    (ESTIMATORS_TAB, estimators_tab),
    (RATIOS_TAB, ratios_tab),
    (ERRORS_TAB, errors_tab),
    (THRESHOLD_SWEEP_TAB, threshold_sweep_tab),
    (MISMATCH_SWEEP_TAB, mismatch_sweep_tab),
    (LENGTH_TAB, length_tab),
    (TRAINING_TAB, training_tab),
    (EXPERTS_TAB, experts_tab),
    (YOUR_RUN_TAB, your_run_tab),
    (LESSONS_TAB, lessons_tab),
]

PAGE_CONFIG_KEY = "_toylab_page_config"    # the page config this session's browser was last sent (presenting or not)
TURN_KEY = "_toylab_turn"              # the session's place in the line for a turn (toylab_app/turns.py)
ICON = Path(__file__).resolve().parent / "icon.png"   # served by the app: a :material/…: icon is fetched from Google


def run():
    """One run of the page: the link, the sidebar, the header, the open tab, the address."""
    heap.freeze_imports()                   # once, on the server's first run: the imports' heap (Streamlit, pandas, Altair)
                                            # is left out of Python's collections (.streamlit/config.toml: no full one a run)
    sidebar.open_link()
    _page_config(screen_share.on())
    screen_share.style()
    waiting = st.empty()                    # the queue notice's place, first on the page: empty unless this run waits
    with turns.turn(st.session_state.setdefault(TURN_KEY, turns.Ticket()), served=waiting.empty,
                    waiting=lambda ahead: waiting.info(turns.notice(ahead), icon=":material/hourglass_top:")), \
            kept.recorded() as pictures:
        settings, notices = sidebar.render()
        with st.sidebar:                        # a script with no layout: at the sidebar's end, it moves nothing
            dropped = address.dropped_link()
        for notice in notices + ([dropped] if dropped else []):
            st.warning(user_text.code(notice), icon=":material/link_off:")        # a link's values are never Markdown
        problem = _problem(settings)
        if problem:
            st.error(problem, icon=":material/block:")
            address.write(settings)
            st.stop()
        header.render(settings)                 # behind a spinner while its numbers are computed (header.metrics)
        for tab, (label, module) in zip(st.tabs([label for label, _ in TABS], key=sidebar.TAB_KEY, on_change="rerun"),
                                        TABS, strict=True):
            if tab.open:
                with tab, last_resort.contained(label):     # each tab's pictures say "Computing…" while computed
                    tour.banner(label, settings)
                    module.render(settings)
        address.write(settings)
    ahead.note(pictures)                        # made beside this mismatch while the server is idle


def _page_config(present):
    """The page's title, icon, layout, sidebar and menu, sent when this session's browser does not have them yet: on
    its first run, and when presentation mode (which collapses the sidebar) is switched. The browser keeps a page
    config until another comes; sent every run, it cost a fifth of a step's page frame (the icon read and encoded
    again each time) and 1 kB."""
    if st.session_state.get(PAGE_CONFIG_KEY) == present:
        return
    st.set_page_config(page_title="toylab: sampler ≠ trainer", page_icon=str(ICON), layout="wide",
                       initial_sidebar_state="collapsed" if present else "auto", menu_items=header.MENU)
    st.session_state[PAGE_CONFIG_KEY] = present


@kept.kept
def _problem(settings):
    """Why the page cannot show ``settings`` (too large, beyond float64, a threshold refused), or None."""
    return toy_problem(settings) or threshold_problem(settings)
