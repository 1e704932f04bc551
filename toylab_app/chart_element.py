"""Altair charts onto the page without re-validating them against the Vega-Lite schema on every run, and ready to send
for every session once made.

Altair validates twice: every schema object it constructs (a Scale, a Legend, …) while "debug mode" is on,
its default, and the whole spec in ``chart.to_dict()``, which ``st.altair_chart`` calls. Together that was
most of a chart's server time here (0.1–0.35 s a tab). The chart builders are validated by the tests
(tests/presentation/test_charts.py and friends call ``to_dict()``, which validates whatever the mode), so the page
turns debug mode off once, process-wide (a per-run switch would race between sessions), serialises with
``validate=False`` and hands the dict to ``st.vega_lite_chart``, as Streamlit's own Altair path does: the
theme "none" (no default width and height) and each data frame sent once (as Arrow), named by its place in the
chart (``toylab_frame_0``, ``toylab_frame_1``, … in the order the chart's structure meets them; two layers showing one
frame share it). Streamlit's frontend matches a chart's datasets by their place too, and swaps the data of one whose bytes
changed; a name is never a hash of the frame's contents (hashing them was 7 % of a room's server CPU).

Building a chart is next: Altair copies every sub-chart, deeply, each time it layers or stacks charts; the page's charts
copy one level (``toylab_app/internals.py``, where every use of a library's internals lives).

Serialising is still most of a chart's server time: Altair rebuilds every layered and concatenated chart, deep-copying
its layers, at each level of ``to_dict`` (0.05–0.1 s for a sweep's panels). The spec is a function of the chart's
structure — its object tree with each data frame replaced by its place, columns and dtypes — and, since a frame is
named by its place, nothing else: a chart whose structure was serialised before gets that spec as it is (``SPECS``);
a test compares it with a fresh serialisation for every chart of every tab.

``prepare`` does all of it once — the spec, and each frame converted to an Arrow table (``chart_arrow``: what
Streamlit would convert it to on every run, without the index and with each text column's words once) — into a
``Prepared`` chart that any number of sessions draw: a tab's kept pictures (``toylab_app.caches.kept``) hold their
charts prepared, so drawing one for another session is a dictionary and Arrow's IPC write.
"""

import copy
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
from altair.expr.core import OperatorMixin

from toylab_app import internals

internals.disable_debug_mode()
internals.copy_whole_charts_one_level()
_altair_globals = threading.Lock()     # the theme and data transformer are process-wide: one session at a time


def _by_reference(data, datasets, names):
    """Altair data transformer: the frame itself into ``datasets``, named once per frame object (``names``: the name
    given to each frame seen in this chart, by id) however many layers show it."""
    if id(data) not in names:
        names[id(data)] = name = f"toylab_layer_frame_{len(names)}"
        datasets[name] = data
    return {"name": names[id(data)]}


alt.data_transformers.register("toylab_by_reference", _by_reference)


SPECS_KEPT = 64                        # structures: a tab draws at most a few charts
SPECS = OrderedDict()                  # structure → spec without datasets, its frames named by their place


def frame_name(place):
    """The name of a chart's frame at ``place`` (0, 1, … in the order the chart's structure meets its frames). Not
    ``data_0``, … : Vega-Lite names its own data sources so, and a chart whose dataset has such a name draws
    nothing."""
    return f"toylab_frame_{place}"


def vega_lite_spec(chart):
    """The chart's Vega-Lite dict, unvalidated, its data frames under ``datasets`` named by their place
    (``frame_name``)."""
    frames = {}
    try:
        structure = _structure(chart, frames)
    except TypeError:                  # something the structure does not know: serialise it afresh
        structure = None
    with _altair_globals:
        known = SPECS.get(structure) if structure is not None else None
        if known is not None:
            SPECS.move_to_end(structure)
    if known is None:
        datasets, names = {}, {}
        with _altair_globals, alt.theme.enable("none"), alt.data_transformers.enable("toylab_by_reference",
                                                                                     datasets=datasets, names=names):
            spec = chart.to_dict(validate=False)
        if structure is None or names.keys() != frames.keys():
            return {**spec, "datasets": {**spec.get("datasets", {}), **datasets}}
        places = {names[key]: frame_name(place) for place, key in enumerate(frames)}
        known = _renamed(spec, places)
        with _altair_globals:
            SPECS[structure] = known
            if len(SPECS) > SPECS_KEPT:
                SPECS.popitem(last=False)
    return {**known, "datasets": {**known.get("datasets", {}),
                                  **{frame_name(place): frame for place, frame in enumerate(frames.values())}}}


LEAVES = (str, int, float, bool, type(None), type(alt.Undefined))


def _structure(node, frames):
    """A hashable image of an Altair object tree: each data frame as (its place among the distinct frames, columns,
    dtypes), added to ``frames`` (id → frame) in the order met. TypeError for a node of any other kind. Left out: what
    ``to_dict`` leaves out (Undefined), and Altair's ``_cached_hash`` (a hash of a layer's data, kept to name a view:
    the name itself is in the tree)."""
    if isinstance(node, LEAVES):
        return node
    if isinstance(node, pd.DataFrame):
        frames.setdefault(id(node), node)
        return ("frame", list(frames).index(id(node)), tuple(node.columns), tuple(map(str, node.dtypes)))
    if isinstance(node, np.generic):
        return (type(node).__name__, node.item())
    if isinstance(node, dict):
        return ("dict", tuple((key, _structure(value, frames)) for key, value in node.items()))
    if isinstance(node, list | tuple):
        return (type(node).__name__, tuple(_structure(item, frames) for item in node))
    if isinstance(node, alt.SchemaBase):
        return (type(node).__name__, _structure(node._args, frames),
                _structure({key: value for key, value in node._kwds.items()
                            if value is not alt.Undefined and key != "_cached_hash"}, frames))
    if isinstance(node, alt.Parameter):
        return ("Parameter", _structure(vars(node), frames))
    if isinstance(node, OperatorMixin):                     # a Vega expression (alt.datum …): its text
        return ("expression", repr(node))
    raise TypeError(f"no structure for {type(node).__name__}")


def _renamed(spec, names):
    """A copy of ``spec`` with every string found in ``names`` replaced by its value (the frames' new names)."""
    if isinstance(spec, dict):
        return {key: _renamed(value, names) for key, value in spec.items()}
    if isinstance(spec, list):
        return [_renamed(value, names) for value in spec]
    return names.get(spec, spec) if isinstance(spec, str) else spec


@dataclass(frozen=True)
class Prepared:
    """A chart ready to draw in any session: its spec without datasets, and its datasets as Arrow tables (a frame
    Arrow cannot convert stays a frame, for Streamlit to convert as it can); ``nbytes``, about what it holds (the
    spec as JSON and the tables). Shared: nobody changes it."""
    spec: dict
    datasets: dict
    nbytes: int


def prepare(chart):
    """The chart serialised and its frames converted, once (``Prepared``)."""
    spec = vega_lite_spec(chart)
    datasets = {name: chart_arrow(frame) for name, frame in spec.pop("datasets").items()}
    return Prepared(spec, datasets, len(json.dumps(spec, default=str)) + sum(
        table.nbytes if isinstance(table, pa.Table) else int(table.memory_usage(deep=True).sum())
        for table in datasets.values()))


def arrow(frame, index=None):
    """The Arrow table Streamlit would make of ``frame`` (``pa.Table.from_pandas``, its first try), or the frame when
    that fails (Streamlit's fixes of mixed columns then apply, as for any frame): a chart's data, or a table for
    ``st.dataframe``, converted once for every session that shows it. ``index`` is Arrow's ``preserve_index``."""
    if not isinstance(frame, pd.DataFrame):
        return frame
    try:
        return pa.Table.from_pandas(frame, preserve_index=index)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return frame


def chart_arrow(frame):
    """A chart's frame as the Arrow table the chart reads, smaller than Streamlit's: no unnamed index (a chart encodes
    columns; a filtered frame's index was a column of its own) and each text column dictionary-encoded (an estimator's
    name once, not once a row). Training's five charts sent 253 kB a press, now 150 kB. A frame Arrow cannot convert
    stays a frame, as in ``arrow``."""
    named_index = isinstance(frame, pd.DataFrame) and any(name is not None for name in frame.index.names)
    table = arrow(frame.reset_index() if named_index else frame, index=False)
    if not isinstance(table, pa.Table):
        return table
    for place, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            table = table.set_column(place, field.name, table.column(place).dictionary_encode())
    return table


def draw(where, chart, width="stretch"):
    """Draw a chart in ``where`` (``st``, a column or a placeholder): an Altair chart, or one ``prepare``d (kept)."""
    if not isinstance(chart, Prepared):
        chart = prepare(chart)
    spec = {**chart.spec, "datasets": dict(chart.datasets)}
    if "encoding" in spec:              # Streamlit edits the top-level encoding in place (a null legend title): a
        spec["encoding"] = copy.deepcopy(spec["encoding"])                 # kept spec stays as it was made
    where.vega_lite_chart(spec, width=width)
