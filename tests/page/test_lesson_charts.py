"""Each lesson's chart draws what its claim says: read from the page's own chart specs and data (AppTest, the lesson's
link in presentation mode).

For every lesson (however many ``LESSONS`` holds): one mark drawn per mark of its evidence, each marked point a point
the chart draws (the marks sit on the data, not beside it), each marked x inside the data's range. Then what each
claim needs: distinct points, the N the claim is about, both states of a change, both precisions.
"""

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from chart_specs import spec_nodes
from streamlit.testing.v1 import AppTest

from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.presentation.charts import MARK_NAMES
from toylab.state.query import VIEW_DEFAULTS, to_query, view_query

pytestmark = pytest.mark.slow
APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
BY_ID = {lesson.id: lesson for lesson in LESSONS}
SAME = 1e-9


def _elements(node):
    for child in getattr(node, "children", {}).values():
        if child.type == "vega_lite_chart":
            yield child
        yield from _elements(child)


def _frame(data):
    return pa.ipc.open_stream(io.BytesIO(data)).read_all().to_pandas()


@pytest.fixture(scope="module")
def drawn():
    """{lesson id: [(spec, {dataset name: DataFrame})]} of the charts on the lesson's tab, opened by its link."""
    cache = {}

    def charts(lesson_id):
        if lesson_id not in cache:
            lesson = BY_ID[lesson_id]
            view = VIEW_DEFAULTS | view_of(lesson) | {"present": True}
            at = AppTest.from_file(APP, default_timeout=300)
            at.query_params.update(to_query(lesson_settings(lesson)) | view_query(view))
            at.run()
            assert not at.exception, at.exception
            cache[lesson_id] = [(json.loads(chart.proto.spec),
                                 {dataset.name: _frame(dataset.data.data) for dataset in chart.proto.datasets})
                                for chart in _elements(at._tree)]
        return cache[lesson_id]
    return charts


def mark_data(spec, datasets, name):
    """The rows of the layers named ``name`` (a lesson's rings or rules) in a chart, or None: one layer, or on a chart
    of several panels one a panel, which Vega-Lite names ``name``_0, ``name``_1, …"""
    found = [datasets[node["data"]["name"]] for node in spec_nodes(spec) if isinstance(node.get("data"), dict)
             and re.fullmatch(rf"{name}(_\d+)?", str(node.get("name", "")))]
    return pd.concat(found, ignore_index=True) if found else None


def marked(charts):
    """[(spec, datasets, rings, rules)] of the charts that carry the lesson's marks."""
    found = []
    for spec, datasets in charts:
        rings, rules = (mark_data(spec, datasets, MARK_NAMES[kind]) for kind in ("ring", "rule"))
        if rings is not None or rules is not None:
            found.append((spec, datasets, rings, rules))
    return found


def _equal(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return bool(np.isclose(float(a), float(b), rtol=SAME, atol=1e-15))


def on_the_data(point, datasets, marks):
    """Whether some row of a drawn (non-mark) dataset holds both the point's x and its y."""
    x, y = point
    for frame in datasets.values():
        if frame is marks or {"number", "sentence"} <= set(frame.columns):
            continue
        for row in frame.itertuples(index=False):
            values = list(row)
            if any(_equal(value, x) for value in values if isinstance(value, float | int | str)) and \
                    any(_equal(value, y) for value in values if isinstance(value, float | int) and
                        not isinstance(value, bool)):
                return True
    return False


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_every_mark_is_drawn_on_the_data(drawn, lesson):
    evidence = lesson.check(lesson_settings(lesson))
    charts = marked(drawn(lesson.id))
    if not evidence.marks:                       # the hidden variables' lessons: their numbers, no chart marked
        assert not charts, "a lesson without marks draws none"
        return
    assert charts, "the lesson's tab draws its marks"
    points = sum(0 if rings is None else len(rings) for _, _, rings, _ in charts)
    lines = sum(0 if rules is None else len(rules) for _, _, _, rules in charts)
    assert points == sum(mark.y is not None for mark in evidence.marks)
    assert lines == sum(mark.y is None for mark in evidence.marks)
    for _, datasets, rings, rules in charts:
        for row in ([] if rings is None else rings.itertuples()):
            assert on_the_data((row.x, row.y), datasets, rings), (lesson.id, row.number, row.x, row.y)
        for row in ([] if rules is None else rules.itertuples()):
            numbers = [frame[column] for frame in datasets.values() if frame is not rules
                       for column in frame.columns if frame[column].dtype.kind == "f"]
            low, high = min(float(values.min()) for values in numbers), max(float(values.max()) for values in numbers)
            assert low <= row.x <= high, (lesson.id, row.number, row.x)


def rows(charts, column):
    """Every row, across the datasets of the charts, that has ``column``."""
    frames = [frame for _, datasets in charts for frame in datasets.values() if column in frame.columns]
    return frames


def scatter_points(charts):
    (points,) = [frame for frame in rows(charts, "ring") if "rel_std" in frame.columns]
    return points.set_index("estimator")


def corners(charts):
    """The scatter's domains: its invisible corner layer (rel_bias, rel_std), two rows."""
    (frame,) = [frame for frame in rows(charts, "rel_bias") if len(frame) == 2 and set(frame.columns) ==
                {"rel_bias", "rel_std"}]
    return frame


def test_token_bias_three_distinct_points_on_axes_that_fit_them(drawn):
    """The issue: biases of 0.6–2 on an x axis to 15, marks crowding a corner. Now the x axis ends within 1.3 × the
    largest bias, the std axis is logarithmic (seq_is's std is 40 × the others'), tok_is, tok_tis, seq_is apart."""
    charts = drawn("token_bias")
    points, extent = scatter_points(charts), corners(charts)
    assert extent["rel_bias"].max() <= 1.3 * points["rel_bias"].max()
    spec = json.dumps(charts[0][0])
    assert '"type": "log"' in spec
    width, height = 360, 300                                       # the narrowest plot it is drawn in
    x = (points["rel_bias"] - extent["rel_bias"].min()) / np.ptp(extent["rel_bias"]) * width
    y = np.log(points["rel_std"] / extent["rel_std"].min()) / np.log(extent["rel_std"].max() / extent["rel_std"].min()) \
        * height
    ids = ["tok_is", "tok_tis", "seq_is"]
    gaps = [np.hypot(x[a] - x[b], y[a] - y[b]) for i, a in enumerate(ids) for b in ids[:i]]
    assert min(gaps) > 20                                           # a label's height apart at least


def test_baseline_shift_shows_both_states(drawn):
    """Before (hollow, b = 0) and after (filled, b = E_μ[r]): naive's bias moves by the lesson's amount, tok_is's not."""
    charts = drawn("baseline_shift")
    (moves,) = rows(charts, "to_bias")
    moves = moves.set_index("estimator")
    assert set(moves.index) == {"naive", "tok_is", "tok_tis", "seq_is"}
    assert abs(moves.loc["naive", "rel_bias"] - moves.loc["naive", "to_bias"]) > 0.5
    assert moves.loc["tok_is", "rel_bias"] == pytest.approx(moves.loc["tok_is", "to_bias"], rel=1e-9)
    assert moves.loc["seq_is", "rel_bias"] == pytest.approx(moves.loc["seq_is", "to_bias"], abs=1e-9)


def test_threshold_lesson_draws_both_batch_sizes(drawn):
    """The claim is about N = 4 and N = 4096: both curves are drawn, mark 2 on the N = 4096 one at its lowest RMSE."""
    charts = drawn("threshold_depends_on_N")
    (curves,) = [frame for frame in rows(charts, "batch") if "value" in frame.columns]
    rmse = curves[curves["metric"] == "relative RMSE at N"]
    assert set(rmse["batch"]) == {"N = 4", "N = 4,096"}
    large = rmse[rmse["batch"] == "N = 4,096"]
    (_, _, rings, _), = marked(charts)
    best = large.loc[large["value"].idxmin()]
    assert rings.iloc[1]["x"] == pytest.approx(best["threshold"]) and rings.iloc[1]["y"] == pytest.approx(best["value"])
    assert (large["line"] == "compared").all()


def test_bf16_lesson_draws_both_precisions(drawn):
    """The issue: fp16 never appeared and three points sat on one dot. The divergence panel has the KL at fp16 and at
    bf16, 29 × apart, marked 2 and 1."""
    charts = drawn("bf16_fp16")
    (divergence,) = [frame for frame in rows(charts, "quantity") if "precision" in frame.columns]
    kl = divergence[divergence["quantity"] == "KL(μ‖π)"].set_index("precision")["value"]
    assert set(kl.index) == {"fp16", "bf16"} and kl["bf16"] / kl["fp16"] == pytest.approx(29, abs=0.5)
    (_, _, rings, _), = marked(charts)
    assert list(rings["x"]) == ["bf16", "fp16"]


def test_top_p_out_of_reach_marks_are_apart_on_a_zoomed_axis(drawn):
    """seq_is at 0.438 and the best correction at 0.402: on an axis that fits the biases they are far apart."""
    charts = drawn("top_p_out_of_reach")
    extent = corners(charts)
    assert extent["rel_bias"].min() > 0.3                          # zoomed: 0 is not on the axis
    (_, _, rings, _), = marked(charts)
    gap = abs(rings["x"].iloc[0] - rings["x"].iloc[1]) / np.ptp(extent["rel_bias"]) * 360
    assert gap > 20


@pytest.mark.parametrize("lesson_id, charts_marked", [("logged_reward", 1), ("token_mask_collapse", 3),
                                                      ("full_mask_stalls", 1), ("collapse_needs_fixed_error", 1)])
def test_training_lessons_mark_their_charts(drawn, lesson_id, charts_marked):
    assert len(marked(drawn(lesson_id))) == charts_marked


def test_the_redrawn_error_lesson_draws_naive_wandering(drawn):
    """Lesson 12: naive's noisy plateau is marked and explained; its curve spreads over more than 0.05 from step 200."""
    charts = drawn("collapse_needs_fixed_error")
    curves = [frame for frame in rows(charts, "median") if "estimator" in frame.columns and "step" in frame.columns]
    naive = curves[0][(curves[0]["estimator"] == "naive") & (curves[0]["step"] >= 200)]["median"]
    assert np.ptp(naive) > 0.05 and len(marked(charts)[0][2]) == 3


def test_the_variance_lesson_marks_three_lengths(drawn):
    (_, _, rings, _), = marked(drawn("seq_is_variance"))
    assert list(rings["x"]) == [16, 32, 64] and rings["y"].is_monotonic_increasing


def test_the_ratio_lessons_mark_their_rules(drawn):
    (_, _, _, rules), = marked(drawn("weight_below_one"))
    assert len(rules) == 3 and rules["x"].iloc[0] == 0
    names = [(rings, rules) for _, _, rings, rules in marked(drawn("sequence_ratio_names"))]
    assert len(names) == 2 and all(rules["x"].iloc[0] == pytest.approx(np.log(2)) for _, rules in names)


def pixels_apart(a, b, extent, width=360):
    """How far apart two x values are drawn on an axis spanning ``extent`` in a plot ``width`` pixels wide."""
    return abs(a - b) / np.ptp(extent) * width


def test_raw_logprobs_lesson_draws_both_states_apart_from_other_rules(drawn):
    """Lesson 13: raw log-probabilities' mean log W (1) and processed ones' log W = 0 (2) on one axis, a label's height
    apart or more in the half-width plot (480 px), and no threshold rule of the chart beside either mark."""
    (spec, datasets, _, rules), = marked(drawn("raw_logprobs_ratio"))
    (span,) = [frame["span"] for frame in datasets.values() if "span" in frame.columns]
    assert list(rules["number"]) == ["1", "2"] and rules["x"].iloc[1] == 0 and rules["x"].iloc[0] > 0.2
    assert pixels_apart(*rules["x"], span, width=480) > 20
    for frame in datasets.values():
        if "log_value" in frame.columns:
            for value in frame["log_value"]:
                assert min(pixels_apart(value, x, span, width=480) for x in rules["x"]) > 20, value


def test_processed_top_p_lesson_marks_the_part_out_of_reach_and_the_lowest_bias_apart(drawn):
    """Lesson 14: seq_is's point at ∇J's part out of reach (1), the lowest correction's (2), on a zoomed bias axis, apart."""
    charts = drawn("processed_top_p")
    points, extent = scatter_points(charts), corners(charts)
    assert extent["rel_bias"].min() > 0.3                          # zoomed: 0 is not on the axis
    (_, _, rings, _), = marked(charts)
    assert rings["x"].iloc[0] == pytest.approx(points.loc["seq_is", "rel_bias"])
    assert rings["x"].iloc[1] == pytest.approx(points["rel_bias"].min())
    assert pixels_apart(*rings["x"], extent["rel_bias"]) > 20


def test_keep_mask_lesson_draws_seq_is_unbiased_apart_from_the_biased(drawn):
    """Lesson 15: seq_is at bias 0 (1), every correction that is not sequence IS at a bias above 1, far to its right."""
    charts = drawn("keep_mask")
    points, extent = scatter_points(charts), corners(charts)
    (_, _, rings, _), = marked(charts)
    assert rings["x"].iloc[0] == pytest.approx(points.loc["seq_is", "rel_bias"], abs=1e-12) and rings["x"].iloc[0] < 1e-9
    biased = points.drop(["seq_is", "seq_tis", "seq_mis"])["rel_bias"]
    assert biased.min() > 1 and pixels_apart(biased.min(), rings["x"].iloc[0], extent["rel_bias"]) > 20
