"""Altair charts onto the page without re-validating them against the Vega-Lite schema on every run.

Altair validates twice: every schema object it constructs (a Scale, a Legend, …) while "debug mode" is on,
its default, and the whole spec in ``chart.to_dict()``, which ``st.altair_chart`` calls. Together that was
most of a chart's server time here (0.1–0.35 s a tab). The chart builders are validated by the tests
(tests/presentation/test_charts.py and friends call ``to_dict()``, which validates whatever the mode), so the page
turns debug mode off once, process-wide (a per-run switch would race between sessions), serialises with
``validate=False`` and hands the dict to ``st.vega_lite_chart``, as Streamlit's own Altair path does: the
theme "none" (no default width and height) and each data frame sent once as Arrow, named by a hash of its
bytes (so a frame that did not change keeps its name and two layers showing one frame share it).
"""

import hashlib
import threading

import altair as alt
from streamlit.dataframe_util import convert_anything_to_arrow_bytes

alt.utils.schemapi.disable_debug_mode()
_altair_globals = threading.Lock()     # the theme and data transformer are process-wide: one session at a time


def _by_reference(data, datasets, names):
    """Altair data transformer: the frame's Arrow bytes into ``datasets``, converted once per frame object
    (``names``: the name given to each frame seen in this chart, by id) however many layers show it."""
    if id(data) not in names:
        arrow = convert_anything_to_arrow_bytes(data)
        names[id(data)] = name = hashlib.md5(arrow, usedforsecurity=False).hexdigest()
        datasets[name] = arrow
    return {"name": names[id(data)]}


alt.data_transformers.register("toylab_by_reference", _by_reference)


def vega_lite_spec(chart):
    """The chart's Vega-Lite dict, unvalidated, its data frames as Arrow bytes under ``datasets``."""
    datasets = {}
    with _altair_globals, alt.theme.enable("none"), alt.data_transformers.enable("toylab_by_reference",
                                                                                 datasets=datasets, names={}):
        spec = chart.to_dict(validate=False)
    spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return spec


def draw(where, chart, width="stretch"):
    """Draw an Altair chart in ``where``: ``st``, a column or a placeholder (what ``where.altair_chart`` would)."""
    where.vega_lite_chart(vega_lite_spec(chart), width=width)
