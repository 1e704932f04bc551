"""The page's unvalidated chart path sends exactly what ``st.altair_chart`` would; a slider step changes a chart's
data, not its spec."""

import json
from collections import OrderedDict
from pathlib import Path

import altair as alt
import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from toylab import exact_table, make_toy
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.presentation import charts, frames
from toylab.presentation.training_charts import objective_chart
from toylab.presentation.training_frames import curve_frame
from toylab.state.query import VIEW_DEFAULTS, to_query, view_query
from toylab.training.loop import TrainingConfig, train
from toylab_app import chart_element, internals
from toylab_app.caches import ahead, kept
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.chart_element import vega_lite_spec

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"


def _charts():
    toy = make_toy()
    table = pd.DataFrame(exact_table(toy))
    yield charts.bias_std_chart(frames.bias_std_frames(table, {}), 64)
    trajectories = train(toy, {"on_policy": {}, "seq_tis": {}}, "none", TrainingConfig(steps=5))
    yield objective_chart(curve_frame(trajectories), False)


def _both_ways():
    """A page drawing each chart of ``_charts`` twice: by ``st.altair_chart``, then by the page's own path."""
    import streamlit as st
    from page.test_chart_element import _charts

    from toylab_app.chart_element import draw

    for chart in _charts():
        st.altair_chart(chart, theme=None, width="stretch")
        draw(st, chart)


def test_the_page_sends_what_st_altair_chart_sends():
    """The spec, each dataset named by its place, and the data the chart reads: every column's values in order, in
    fewer bytes (``chart_arrow``: no unnamed index, text dictionary-encoded)."""
    at = AppTest.from_function(_both_ways, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    drawn = _drawn(at)
    assert len(drawn) == 4 and all(data for _, data in drawn)
    for (altair_spec, altair_data), (page_spec, page_data) in (drawn[0:2], drawn[2:4]):
        assert page_spec == altair_spec
        assert [_columns(data) for data in page_data] == [_columns(data) for data in altair_data]
        assert sum(map(len, page_data)) < sum(map(len, altair_data))


def _columns(ipc_stream):
    """An Arrow stream's columns as a chart reads them: {name: values}, text decoded, pandas' index left out."""
    table = pa.ipc.open_stream(ipc_stream).read_all()
    return {name: table.column(name).to_pylist() for name in table.column_names
            if not name.startswith("__index_level_")}


def test_frames_are_named_by_their_place_not_by_their_contents(monkeypatch):
    """No frame's contents are hashed to name it: its name is its place in the chart, and a frame two layers show is
    sent once."""
    monkeypatch.setattr(pd.util, "hash_pandas_object", lambda *args, **kwargs: pytest.fail("contents hashed"))
    frame = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    line = alt.Chart(frame).mark_line().encode(x="x", y="y")
    other = alt.Chart(frame.assign(y=[5.0, 6.0])).mark_point().encode(x="x", y="y")
    spec = vega_lite_spec(alt.layer(line, line.mark_point(), other))
    assert list(spec["datasets"]) == [chart_element.frame_name(0), chart_element.frame_name(1)]
    assert spec["datasets"][chart_element.frame_name(1)]["y"].tolist() == [5.0, 6.0]
    for chart in _charts():
        assert list(vega_lite_spec(chart)["datasets"]) == [chart_element.frame_name(place) for place in
                                                           range(len(vega_lite_spec(chart)["datasets"]))]


def _prepared_and_not():
    """A page drawing each chart of ``_charts`` as it is, then prepared (as a kept picture holds it) twice."""
    import streamlit as st
    from page.test_chart_element import _charts

    from toylab_app.chart_element import draw, prepare

    for chart in _charts():
        prepared = prepare(chart)
        draw(st, chart)
        draw(st, prepared)
        draw(st, prepared)


def test_a_prepared_chart_draws_what_the_chart_draws_and_stays_as_made():
    """A prepared chart (its frames already Arrow tables) sends the same spec and bytes as the chart, however often
    it is drawn: Streamlit's edits of a spec (a null legend title) do not reach the kept one."""
    at = AppTest.from_function(_prepared_and_not, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    drawn = _drawn(at)
    assert len(drawn) == 6 and drawn[0] == drawn[1] == drawn[2] and drawn[3] == drawn[4] == drawn[5]
    before = json.dumps(NULL_TITLE.spec)
    at = AppTest.from_function(_draws_null_title, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert json.dumps(NULL_TITLE.spec) == before and "null" in before


NULL_TITLE = chart_element.prepare(alt.Chart(pd.DataFrame({"x": [1.0], "c": ["a"]})).mark_point().encode(
    x="x", color=alt.Color("c", legend=alt.Legend(title=None), title=None)))


def _draws_null_title():
    import streamlit as st
    from page.test_chart_element import NULL_TITLE

    from toylab_app.chart_element import draw

    draw(st, NULL_TITLE)


def _drawn(at):
    """Each chart on the page: its spec with every dataset named by its place (as Streamlit's frontend compares
    them), and its datasets' bytes."""
    found = []
    for chart in _vega_lite_elements(at._tree):
        spec, names = chart.proto.spec, [dataset.name for dataset in chart.proto.datasets]
        for index, name in enumerate(names):
            spec = spec.replace(name, f"dataset-{index}")
        found.append((spec, [dataset.data.data for dataset in chart.proto.datasets]))
    return found


def _vega_lite_elements(node):
    for child in getattr(node, "children", {}).values():
        if child.type == "vega_lite_chart":
            yield child
        yield from _vega_lite_elements(child)


@pytest.mark.parametrize("query", [{"present": "1"}, {"tab": "Ratios"}, {"tab": "Error vs batch size"},
                                   {"tab": "Threshold sweep"}, {"tab": "Mismatch sweep"}, {"tab": "Training"}])
def test_a_slider_step_changes_a_charts_data_not_its_spec(query):
    """Streamlit keeps a drawn chart and swaps its data when the spec is unchanged (a new spec is drawn from
    scratch, the most of the browser's work after a step): every number a slider moves is data."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query)
    at.run()
    before = _drawn(at)
    at.slider(key="mismatch").set_value(0.31).run()
    after = _drawn(at)
    assert before and len(before) == len(after)
    assert [spec for spec, _ in before] == [spec for spec, _ in after]
    assert [data for _, data in before] != [data for _, data in after]


@pytest.mark.slow
@pytest.mark.parametrize("query", [{"tab": "Estimators"}, {"present": "1"}, {"tab": "Ratios", "ratio_panels": "1"},
                                   {"tab": "Error vs batch size", "mc_dots": "1"}, {"tab": "Threshold sweep"},
                                   {"tab": "Mismatch sweep", "present": "1"}, {"tab": "Sequence length", "length_mc": "1"},
                                   {"tab": "Training", "sga": "1"}, {"tab": "Training", "train_mode": "sampled"}])
def test_a_kept_spec_is_the_spec_altair_writes(query, monkeypatch):
    """After a slider step each chart's spec comes from the specs kept by structure; it equals Altair's own
    serialisation of the same chart, and the kept ones were used: by every chart the step left alike (a step that
    changes a legend's words, "≈ … in part" for "≈", changes that chart's structure and serialises it afresh)."""
    specs = _CountingSpecs()
    monkeypatch.setattr(chart_element, "SPECS", specs)
    _forget_kept_pictures(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query)
    at.run()
    before = _drawn(at)
    specs.used = 0
    _forget_kept_pictures(monkeypatch)                                              # every chart built again
    at.slider(key="mismatch").set_value(0.31).run()
    kept = _drawn(at)
    alike = sum(spec == then for (spec, _), (then, _) in zip(kept, before, strict=True))
    assert kept and alike and specs.used == alike                                   # every alike chart from a kept spec
    monkeypatch.setattr(chart_element, "SPECS_KEPT", 0)
    chart_element.SPECS.clear()
    _forget_kept_pictures(monkeypatch)
    at.run()                                                                        # the same step, serialised afresh
    assert _drawn(at) == kept


def _forget_kept_pictures(monkeypatch):
    """No chart kept for every session (toylab_app/caches/kept.py): the next run builds every chart it draws, and
    none is made ahead in the background (toylab_app/caches/ahead.py), where it would use the kept specs too."""
    monkeypatch.setattr(kept, "KEPT", ByteBoundedCache(kept.KEPT_BYTES, kept.weight, grows=False))
    monkeypatch.setattr(ahead, "note", lambda calls: None)


class _CountingSpecs(OrderedDict):
    """The kept specs, counting how many were used."""
    used = 0

    def get(self, structure, default=None):
        spec = super().get(structure, default)
        self.used += spec is not None
        return spec


EVERY_VIEW = [{"tab": "Estimators"}, {"present": "1"}, {"tab": "Ratios", "ratio_panels": "1"},
              {"tab": "Error vs batch size", "mc_dots": "1"}, {"tab": "Threshold sweep", "compare_N": "4096"},
              {"tab": "Mismatch sweep"}, {"tab": "Mismatch sweep", "sweep": "temperature", "sweep_pipelines": "1"},
              {"tab": "Sequence length", "length_mc": "1"}, {"tab": "Training", "sga": "1"},
              {"tab": "Training", "train_mode": "sampled", "train_optimizer": "adam"},
              {"tab": "Your run", "click": "Use the example log"}, {"tab": "Your run", "click": "Use the example run"}]


@pytest.mark.slow
@pytest.mark.parametrize("query", EVERY_VIEW + [
    to_query(lesson_settings(lesson)) | view_query(VIEW_DEFAULTS | view_of(lesson) | {"present": True})
    for lesson in LESSONS], ids=[str(view) for view in EVERY_VIEW] + [f"lesson {lesson.id}" for lesson in LESSONS])
def test_charts_layered_by_one_level_copies_are_altairs_own(query, monkeypatch):
    """Every chart of every tab and lesson, built with the page's one-level copies of whole charts
    (``internals.copy_whole_charts_one_level``) and unvalidated parameter comparisons, is the chart Altair's deep copies build (Your run: after a click on an example)."""
    _forget_kept_pictures(monkeypatch)
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({name: value for name, value in query.items() if name != "click"})
    at.run()
    if "click" in query:
        next(button for button in at.button if button.label == query["click"]).click().run()
    assert not at.exception, at.exception
    shallow = _drawn(at)
    monkeypatch.delattr(alt.TopLevelMixin, "copy")                                 # Altair's own deep copies …
    monkeypatch.setattr(internals.ALTAIR_API, "_viewless_dict", internals.ALTAIR_PARAMETER_DICT)   # … and comparisons
    monkeypatch.setattr(internals.ALTAIR_API, "_prepare_to_lift", internals.ALTAIR_LIFT)          # … and lifts
    monkeypatch.setattr(chart_element, "SPECS_KEPT", 0)
    chart_element.SPECS.clear()
    _forget_kept_pictures(monkeypatch)
    at.run()
    assert alt.Chart().copy.__func__ is internals.SCHEMA_COPY
    assert shallow and _drawn(at) == shallow


def test_a_chart_frame_keeps_a_named_index_and_leaves_what_arrow_cannot_convert_to_streamlit():
    by_step = pd.DataFrame({"step": [1, 2, 3], "estimator": ["naive", "naive", "tok_is"]}).set_index("step")
    table = chart_element.chart_arrow(by_step)
    assert table.column_names == ["step", "estimator"] and table.column("step").to_pylist() == [1, 2, 3]
    assert pa.types.is_dictionary(table.schema.field("estimator").type)
    assert table.column("estimator").to_pylist() == ["naive", "naive", "tok_is"]
    filtered = pd.DataFrame({"x": [1.0, 2.0, 3.0], "c": ["a", "b", "a"]}).iloc[[2, 0]]
    assert chart_element.chart_arrow(filtered).column_names == ["x", "c"]
    mixed = pd.DataFrame({"x": [1, "a"]})
    assert chart_element.chart_arrow(mixed) is mixed
