"""Altair charts onto the page without re-validating them against the Vega-Lite schema on every run.

Altair validates twice: every schema object it constructs (a Scale, a Legend, …) while "debug mode" is on,
its default, and the whole spec in ``chart.to_dict()``, which ``st.altair_chart`` calls. Together that was
most of a chart's server time here (0.1–0.35 s a tab). The chart builders are validated by the tests
(tests/presentation/test_charts.py and friends call ``to_dict()``, which validates whatever the mode), so the page
turns debug mode off once, process-wide (a per-run switch would race between sessions), serialises with
``validate=False`` and hands the dict to ``st.vega_lite_chart``, as Streamlit's own Altair path does: the
theme "none" (no default width and height) and each data frame sent once (as Arrow, by Streamlit), named by a
hash of its contents (so a frame that did not change keeps its name and two layers showing one frame share it).

Building a chart is next: Altair copies every sub-chart, deeply, each time it layers or stacks charts; the page's charts
copy one level (``toylab_app/internals.py``, where every use of a library's internals lives).

Serialising is still most of a chart's server time: Altair rebuilds every layered and concatenated chart, deep-copying
its layers, at each level of ``to_dict`` (0.05–0.1 s for a sweep's panels). The spec is a function of the chart's
structure — its object tree with each data frame replaced by its place, columns and dtypes — and the data frames'
names; a slider step changes only the frames. So the spec is kept by structure (``SPECS``) and a chart whose
structure was serialised before gets that spec with its own frames' names; a test compares it with a fresh
serialisation for every chart of every tab.
"""

import hashlib
import threading
from collections import OrderedDict

import altair as alt
import numpy as np
import pandas as pd
from altair.expr.core import OperatorMixin

from toylab_app import internals

internals.disable_debug_mode()
internals.copy_whole_charts_one_level()
_altair_globals = threading.Lock()     # the theme and data transformer are process-wide: one session at a time


def _by_reference(data, datasets, names):
    """Altair data transformer: the frame itself into ``datasets`` (``st.vega_lite_chart`` sends it as Arrow), named
    once per frame object (``names``: the name given to each frame seen in this chart, by id) however many layers
    show it."""
    if id(data) not in names:
        names[id(data)] = name = _name(data)
        datasets[name] = data
    return {"name": names[id(data)]}


alt.data_transformers.register("toylab_by_reference", _by_reference)


SPECS_KEPT = 64                        # structures: a tab draws at most a few charts
SPECS = OrderedDict()                  # structure → (spec without datasets, its frames' names in structure order)


def vega_lite_spec(chart):
    """The chart's Vega-Lite dict, unvalidated, its data frames under ``datasets`` by the names ``_name`` gives."""
    frames = {}
    try:
        structure = _structure(chart, frames)
    except TypeError:                  # something the structure does not know: serialise it afresh
        structure = None
    with _altair_globals:
        known = SPECS.get(structure) if structure is not None else None
        if known is not None:
            SPECS.move_to_end(structure)
    if known is not None:
        spec, names = known
        new_names = [_name(frame) for frame in frames.values()]
        renaming = dict(zip(names, new_names, strict=True))
        if all(renaming[old] == new for old, new in zip(names, new_names, strict=True)) \
                and len(set(new_names)) == len(renaming):       # the frames alike are alike as before, and only they
            renamed = _renamed(spec, renaming)
            return {**renamed, "datasets": {**renamed.get("datasets", {}), **dict(zip(new_names, frames.values(), strict=True))}}
    datasets, names = {}, {}
    with _altair_globals, alt.theme.enable("none"), alt.data_transformers.enable("toylab_by_reference",
                                                                                 datasets=datasets, names=names):
        spec = chart.to_dict(validate=False)
        if structure is not None and names.keys() == frames.keys():
            SPECS[structure] = (_renamed(spec, {}), [names[id(frame)] for frame in frames.values()])
            if len(SPECS) > SPECS_KEPT:
                SPECS.popitem(last=False)
    return {**spec, "datasets": {**spec.get("datasets", {}), **datasets}}


def _name(frame):
    """A hash of the frame's columns, dtypes, index and values: a frame that did not change keeps its name."""
    hasher = hashlib.md5(repr((list(frame.columns), list(map(str, frame.dtypes)))).encode(), usedforsecurity=False)
    hasher.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return hasher.hexdigest()


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


def draw(where, chart, width="stretch"):
    """Draw an Altair chart in ``where``: ``st``, a column or a placeholder (what ``where.altair_chart`` would)."""
    where.vega_lite_chart(vega_lite_spec(chart), width=width)
