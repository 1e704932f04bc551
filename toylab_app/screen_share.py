"""Presentation mode: the page for a screen-share at 1280×720 (``present=1`` in a link, its button, or the P key).

When it is on, the sidebar starts collapsed, one line of key numbers replaces the title and the metrics, the
margins shrink, tables keep the columns a room reads, charts sit beside them, and the sweeps show one panel at a
time. ``style`` is the page's only CSS: in both modes the tab names wrap onto a second row instead of scrolling out
of sight (at browser zoom 125 % they do not fit one row beside the sidebar); when presenting, the margins shrink
to what Streamlit's own header (its menu and the sidebar's button) needs, and the Exit button (with the Lessons tab's)
moves up into that header, beside the menu, leaving the header line to the numbers.
"""

import streamlit as st

KEY = "present"          # the URL parameter and session-state key (toylab.state.query.VIEW_PARAMETERS)
BUTTON_KEY = "present_button"
BUTTONS_KEY = "toylab_buttons"       # the header's buttons: the Lessons tab's and this switch
SHORTCUT = "P"
ALWAYS = ('[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; row-gap: 0.25rem; }'
          '[data-testid="stFileUploaderDropzoneInstructions"] * { white-space: normal; }')   # its types, not cut
NORMAL = ('[data-testid="stMainBlockContainer"] { padding-top: 4rem; }'        # below Streamlit's header (3.75rem)
          '.st-key-toylab_title h1 { font-size: 2rem; padding: 0; }'
          '.st-key-toylab_header { column-gap: 0.75rem; }'                 # the eight numbers in one row at 1280 px,
          '.st-key-toylab_header [data-testid="stMetricValue"] { font-size: 1.6rem; }')   # 7.9e-07 and 1.57e-06 too
PRESENTING = ('[data-testid="stMainBlockContainer"] { padding: 3.5rem 1.5rem 2rem; }'
              f'.st-key-{BUTTONS_KEY} {{ position: fixed; top: 0.6rem; right: 3.5rem; left: auto; '
              'width: fit-content !important; z-index: 1000000; }'
              f'[data-testid="stLayoutWrapper"]:has(> .st-key-{BUTTONS_KEY}) {{ position: absolute; }}')  # its place:
                                                                    # out of the header line's row (no second row)


def on():
    """Whether presentation mode is on."""
    return bool(st.session_state.get(KEY, False))


def style():
    """The page's style sheet for the current mode (a style-only st.html takes no room on the page)."""
    st.html(f"<style>{ALWAYS}{PRESENTING if on() else NORMAL}</style>")


def _switch():
    st.session_state[KEY] = not on()


def button(where):
    """The presentation-mode switch, in ``where`` (a container), as wide as its label."""
    where.button("Exit" if on() else "Present", key=BUTTON_KEY, on_click=_switch, shortcut=SHORTCUT,
                 icon=":material/close_fullscreen:" if on() else ":material/co_present:",
                 help="Presentation mode (Exit leaves it), for a screen-share at 1280×720: one line of key numbers, the "
                      "sidebar collapsed (its arrow, top left, opens it), one sweep panel at a time. Key: P. In a link: "
                      "present=1.", width="content")
