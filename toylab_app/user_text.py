"""Text from a user's file or link, on the page: always code text, never Markdown, HTML, LaTeX, an image or a link.

Streamlit renders Markdown in st.markdown, st.error, st.warning, st.toast, captions, expander and widget labels:
``![x](http://host/x.png)`` becomes an image the browser fetches, ``[a](http://host)`` and a bare URL become links
(GitHub's autolinks survive backslash escapes), ``$…$`` becomes LaTeX, ``:red[…]`` colour. Inside an inline code
span none of these is parsed, so every string that comes from a file or a URL — a file name, a column name, a cell,
a link's value, a message quoting any of them — reaches the page through ``code`` (a whole message) or ``value``
(one name, first cut to 40 characters by ``text.clipped``). Messages from ``toylab`` already quote each value they
hold to 40 characters (``text.quoted``). One thing Streamlit's front end still does inside code: it writes
":material/" as ":material_" before parsing, so such a name reads slightly differently (and stays inert).
"""

import re

from toylab.text import clipped

_BACKTICKS = re.compile(r"`+")


def code(text):
    """The text as one inline code span: a fence of one backtick more than its longest run of backticks, and a space
    inside each end (CommonMark strips exactly one). Line breaks become spaces (a code span is one line anyway)."""
    flat = " ".join(str(text).split())
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(flat)), default=0))
    return f"{fence} {flat} {fence}"


def value(text):
    """One user-given name or value, clipped to 40 characters, as code text."""
    return code(clipped(text))
