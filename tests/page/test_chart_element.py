"""The page's unvalidated chart path sends exactly what ``st.altair_chart`` would; a slider step changes a chart's
data, not its spec."""

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.elements.vega_charts import (
    _convert_altair_to_vega_lite_spec,  # st.altair_chart's own conversion
)
from streamlit.testing.v1 import AppTest

from toylab import exact_table, make_toy
from toylab.presentation import charts, frames
from toylab.presentation.training_charts import objective_chart
from toylab.presentation.training_frames import curve_frame
from toylab.training.loop import TrainingConfig, train
from views.chart_element import vega_lite_spec

APP = Path(__file__).resolve().parents[2] / "streamlit_app.py"


def _comparable(spec):
    """The spec with each dataset's name replaced by its position in a sorted list of the datasets' bytes."""
    spec = dict(spec)
    datasets = spec.pop("datasets")
    order = sorted(datasets, key=lambda name: datasets[name])
    text = json.dumps(spec, sort_keys=True)
    for index, name in enumerate(order):
        text = text.replace(name, f"dataset-{index}")
    return text, [datasets[name] for name in order]


def _charts():
    toy = make_toy()
    table = pd.DataFrame(exact_table(toy))
    yield charts.bias_std_chart(frames.bias_std_frames(table, {}), 64)
    trajectories = train(toy, {"on_policy": {}, "seq_tis": {}}, "none", TrainingConfig(steps=5))
    yield objective_chart(curve_frame(trajectories), False)


def test_specs_equal_streamlits_own_conversion():
    for chart in _charts():
        ours, theirs = _comparable(vega_lite_spec(chart)), _comparable(_convert_altair_to_vega_lite_spec(chart))
        assert ours == theirs
        assert ours[1] and all(isinstance(data, bytes) for data in ours[1])


def test_an_unchanged_frame_keeps_its_dataset_name():
    chart = next(_charts())
    assert set(vega_lite_spec(chart)["datasets"]) == set(vega_lite_spec(chart)["datasets"])


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
