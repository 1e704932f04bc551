"""The page's address: a link opens its view, every run writes back the link of what the page shows, and the
browser's Back and Forward buttons return to the views it showed before.

Every URL parameter is the page's own (``toylab.state.query``): the sidebar's controls and the view parameters,
stored in session state under their URL names, which are also their widgets' keys. No widget is bound to the
URL by Streamlit. On a session's first run the sidebar parses the link into session state (``open_view`` for
the view); at the end of every run ``write`` replaces the address with the canonical link of the page, in one
update, so each change is one entry in the browser's history. When the user goes Back or Forward, Streamlit
reruns the script with the address of that entry and says so (``navigated``: the run's history-navigation flag,
the signal Streamlit's own URL-bound widgets follow); the page then reads that address as it reads a new link.
"""

import streamlit as st

from toylab.state.query import VIEW_PARAMETERS, dropped_link_notice, to_query, view_query
from toylab_app import internals

DROPPED_KEY = "_toylab_dropped_link"
REPORTED_KEY = "_toylab_dropped_link_reported"
DROPPED_JS = """
export default function ({ data, setStateValue }) {
    const query = window.location.search.replace(/^\\?/, "");
    const fields = query ? query.split("&").length : 0;
    if (!data.reported && (fields > data.fields || query.length > data.length)) {   // once: a report reruns the
        setStateValue("dropped", { fields: fields, characters: query.length });      // page, which may mount this
    }                                                                                // script again
}
"""


def query():
    """The address's parameters as {name: [values]} (a repeated parameter has several)."""
    return {name: st.query_params.get_all(name) for name in st.query_params}


def navigated():
    """Whether this run follows the browser's Back or Forward button (Streamlit reruns with that entry's address)."""
    return internals.history_navigation()


def open_view(view, linked, navigation=False):
    """Put a link's view values into session state: those the link gives (``linked``: their names) and, after Back
    or Forward, every one its address can show (absent there: the default). The others keep a value they have, e.g.
    a closed tab's control, and start at the link's (default) value otherwise."""
    for name, value in view.items():
        if name in linked or (navigation and VIEW_PARAMETERS[name].shown(view)):
            st.session_state[name] = value
        else:
            st.session_state.setdefault(name, value)


def view():
    """Every view parameter's current value: session state's, or its default where the page has not set it."""
    return {name: st.session_state.get(name, parameter.default) for name, parameter in VIEW_PARAMETERS.items()}


def dropped_link():
    """A notice when Streamlit dropped the link unread (over its most parameters or characters, it hands the page no
    parameter at all: ``internals.QUERY_STRING_LIMITS``), or None. Only the browser still has that link: a script
    without layout checks it there and tells the page, which reruns. The component is declared in the run, as a
    script's own components are: Streamlit registers components with the runtime of the run that declares them."""
    limits = internals.QUERY_STRING_LIMITS
    check = st.components.v2.component("toylab_dropped_link", js=DROPPED_JS)
    result = check(key=DROPPED_KEY, data=limits | {"reported": st.session_state.get(REPORTED_KEY, False)},
                   default={"dropped": None}, on_dropped_change=lambda: None, height=0)
    dropped = result.dropped
    st.session_state[REPORTED_KEY] = bool(dropped)
    return None if not dropped else dropped_link_notice(dropped["fields"], dropped["characters"], limits["fields"],
                                                        limits["length"])


def write(settings):
    """Make the address the canonical link of ``settings`` and the current view, in one update (one history entry),
    unless it is that already."""
    wanted = to_query(settings) | view_query(view())
    if query() != {name: [value] for name, value in wanted.items()}:
        st.query_params.from_dict(wanted)
