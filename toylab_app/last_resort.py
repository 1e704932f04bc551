"""The last resort: an unexpected error in a tab becomes a notice with the error's one line, and the rest of the page
works. Never a traceback, and never a server path: the server's log keeps the traceback, the page shows each path by
its last part (``.../toylab/state/query.py`` as ``query.py``).

Streamlit's own control flow (a rerun, ``st.stop``) is a BaseException, not an Exception, and passes through.
"""

import contextlib
import logging
import re

import streamlit as st

from toylab_app.user_text import code

LOGGER = logging.getLogger("toylab.page")
PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/'\"]+)+[\\/]([^\s\\/'\"]*)")    # two parts or more: its last part
LINE_LIMIT = 200


def one_line(error):
    """'TypeError: its message's first line', paths as their last part, at most LINE_LIMIT characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    text = PATH.sub(lambda match: match.group(1) or "…", text)
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT - 1] + "…"


@contextlib.contextmanager
def contained(label):
    """Run a tab's block; an Exception in it is logged and shown as a notice, and the page goes on."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 — the last resort: whatever a tab raised, the page goes on
        LOGGER.exception("the %s tab stopped on an unexpected error", label)
        st.error(f"The {label} tab stopped on an unexpected error; the rest of the page works, and other settings "
                 f"may show this tab. The error: {code(one_line(error))}", icon=":material/bug_report:")
