"""Presentation mode: the page for a screen-share at 1280×720 (``present=1`` in a link, its button, or the P key).

When it is on, the sidebar starts collapsed, one line of key numbers replaces the title and the metrics, the
margins shrink, tables keep the columns a room reads, charts sit beside them, and the sweeps show one panel at a
time. ``style`` is the page's only CSS: in both modes the tab names wrap onto a second row instead of scrolling out
of sight (at browser zoom 125 % they do not fit one row beside the sidebar); when presenting, the margins shrink
to what Streamlit's own header (its menu and the sidebar's button) needs, and the Exit button moves up into that
header, beside the menu, leaving the header line to the numbers.
"""

import streamlit as st

KEY = "present"          # the URL parameter and session-state key (toylab.state.query.VIEW_PARAMETERS)
BUTTON_KEY = "present_button"
SHORTCUT = "P"
ALWAYS = '[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; row-gap: 0.25rem; }'
PRESENTING = ('[data-testid="stMainBlockContainer"] { padding: 3.5rem 1.5rem 2rem; }'
              f'.st-key-{BUTTON_KEY} {{ position: fixed; top: 0.6rem; right: 3.5rem; z-index: 1000000; }}')


def on():
    """Whether presentation mode is on."""
    return bool(st.session_state.get(KEY, False))


def style():
    """The page's style sheet for the current mode (a style-only st.html takes no room on the page)."""
    st.html(f"<style>{ALWAYS}{PRESENTING if on() else ''}</style>")


def _switch():
    st.session_state[KEY] = not on()


def button(where):
    """The presentation-mode switch, in ``where`` (a container), as wide as its label."""
    where.button("Exit" if on() else "Present", key=BUTTON_KEY, on_click=_switch, shortcut=SHORTCUT,
                 icon=":material/close_fullscreen:" if on() else ":material/co_present:",
                 help="Presentation mode (Exit leaves it), for a screen-share at 1280×720: one line of key numbers, the "
                      "sidebar collapsed (its arrow, top left, opens it), one sweep panel at a time. Key: P. In a link: "
                      "present=1.", width="content")
