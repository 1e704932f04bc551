"""The page's unvalidated chart path sends exactly what ``st.altair_chart`` would."""

import json

import pandas as pd
from streamlit.elements.vega_charts import (
    _convert_altair_to_vega_lite_spec,  # st.altair_chart's own conversion
)

from toylab import exact_table, make_toy
from toylab.presentation import charts, frames
from toylab.presentation.training_charts import objective_chart
from toylab.presentation.training_frames import curve_frame
from toylab.training.loop import TrainingConfig, train
from views.chart_element import vega_lite_spec


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
