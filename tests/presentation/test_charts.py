"""Every chart builds and serialises; colours come from the registry; every text is 16 px or more in the page's own
text colour (currentColor: the theme's contrast, light or dark); one legend per colour field, with no layer
disabling it (Vega-Lite warns "Conflicting legend property"); legends highlight; duplicates show."""

import json

import pandas as pd
import pytest
from chart_specs import spec_nodes

from toylab import exact_moments, make_toy
from toylab.analysis.montecarlo import monte_carlo, summarise
from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import charts, coincidence, frames
from toylab.state.settings import Settings

SETTINGS = Settings(estimators=("naive", "tok_tis", "tok_mis", "seq_is", "seq_tis", "geo_rs", "grpo"))


@pytest.fixture(scope="module")
def built():
    toy = make_toy(*SETTINGS.toy_key)
    selection = SETTINGS.selection()
    moments = {id: exact_moments(toy, id, params) for id, params in SETTINGS.selection(True).items()}
    table = frames.table_frame(moments, 64)
    same = frames.duplicates(moments)
    tokens, log_W = frames.sampled_batch(toy, 64, 0)
    token_frame = frames.token_ratio_frame(toy, tokens)
    errors = monte_carlo(toy, selection, "none", (1, 10, 100), 8, 0)
    return {
        "scatter": charts.bias_std_chart(frames.bias_std_frames(table, same), 64),
        "tokens": charts.readable(charts.token_ratio_chart(frames.pooled_token_frame(token_frame),
                                                           frames.token_threshold_frame(toy, selection))),
        "token panels": charts.token_ratio_panels(token_frame, frames.token_threshold_frame(toy, selection, True)),
        **{f"sequence {kind}": charts.sequence_ratio_chart(frames.sequence_histogram_frame(toy, kind, 30, log_W),
                                                           frames.sequence_threshold_frame(toy, selection, kind), kind)
           for kind in ("W", "geo")},
        "errors": charts.error_chart(frames.error_curve_frame(moments),
                                     frames.monte_carlo_frame(summarise(errors, (1, 10, 100))),
                                     frames.crossover_frame(moments, moments["seq_is"]),
                                     coincidence.coincidences(frames.error_curve_frame(moments), "N", "rel_rmse", log=True)),
    }


NAMES = ["scatter", "tokens", "token panels", "sequence W", "sequence geo", "errors"]


def text_is_readable(spec):
    """Every font size in the spec (config and marks) is ≥ 16 px and every text colour is the page's own."""
    config = spec["config"]
    for part in ("axis", "legend", "header"):
        assert config[part]["labelFontSize"] >= 16 and config[part]["titleFontSize"] >= 16
        assert config[part]["labelColor"] == config[part]["titleColor"] == "currentColor"
    assert config["title"]["fontSize"] >= 16 and config["title"]["color"] == "currentColor"
    assert config["text"]["fontSize"] >= 16 and config["text"]["color"] == "currentColor"
    for node in spec_nodes(spec):
        mark = node.get("mark")
        if isinstance(mark, dict) and mark.get("type") == "text":
            assert mark.get("fontSize", 16) >= 16 and mark.get("color", "currentColor") == "currentColor"
            assert "color" not in node.get("encoding", {})            # not in an estimator's (low-contrast) colour


def one_legend_per_field(spec):
    """No layer of a chart turns off a legend another layer of it gives (Vega-Lite's "Conflicting legend" warning)."""
    legends = {}
    for node in spec_nodes(spec):
        for channel in ("color", "shape", "strokeDash"):
            definition = node.get("encoding", {}).get(channel) if isinstance(node.get("encoding"), dict) else None
            if isinstance(definition, dict) and "field" in definition:
                legends.setdefault((channel, definition["field"]), set()).add(json.dumps(definition.get("legend", {}),
                                                                                          sort_keys=True))
    for key, found in legends.items():
        assert "null" not in found or found == {"null"}, key


@pytest.mark.parametrize("name", NAMES)
def test_chart_serialises_with_registry_colours_and_readable_fonts(built, name):
    spec = built[name].to_dict()
    json.dumps(spec)
    text_is_readable(spec)
    one_legend_per_field(spec)
    scales = [node["scale"] for node in spec_nodes(spec) if node.get("field") == "estimator" and "scale" in node]
    assert scales, "the chart colours by estimator"
    for scale in scales:
        assert scale == {"domain": list(ESTIMATORS), "range": [e.colour for e in ESTIMATORS.values()]}


def test_colour_scale_is_the_registry_and_distinct():
    scale = charts.colour_scale().to_dict()
    assert scale["domain"] == list(ESTIMATORS)
    assert scale["range"] == [e.colour for e in ESTIMATORS.values()]
    assert len(set(scale["range"])) == len(ESTIMATORS)


@pytest.mark.parametrize("name", ["scatter", "errors"])
def test_legend_click_highlights(built, name):
    spec = built[name].to_dict()
    params = [p for node in spec_nodes(spec) for p in node.get("params", []) if isinstance(p, dict)]
    assert any(p.get("bind") == "legend" and p["select"]["fields"] == ["estimator"] for p in params)
    assert any("condition" in node.get("opacity", {}) for node in spec_nodes(spec) if isinstance(node.get("opacity"), dict))


def test_legends_list_each_estimator_once(built):
    for name, chart in built.items():
        for node in spec_nodes(chart.to_dict()):
            values = node.get("legend", {}).get("values") if isinstance(node.get("legend"), dict) else None
            if values:
                assert len(values) == len(set(values)), name


def test_error_chart_shows_batch_coupled_estimators_as_monte_carlo_only(built):
    spec = built["errors"].to_dict()
    datasets = spec["datasets"]
    curve_ids = {row["estimator"] for rows in datasets.values() for row in rows if "rel_rmse" in row and "N" in row
                 and "rms" not in row}
    mc_ids = {row["estimator"] for rows in datasets.values() for row in rows if "rms" in row}
    assert "grpo" in mc_ids and "grpo" not in curve_ids


def test_duplicates_are_the_estimators_with_equal_moments(built):
    toy = make_toy(*SETTINGS.toy_key)
    moments = {id: exact_moments(toy, id, params) for id, params in SETTINGS.selection(True).items()}
    same = frames.duplicates(moments)
    assert same == {"geo_rs": "naive"}             # on the default toy geo_rs's band keeps every sequence
    for id, first in same.items():
        assert moments[id].rel_bias == pytest.approx(moments[first].rel_bias, rel=1e-12)
    assert frames.duplicates({id: moments[id] for id in ("naive", "seq_is")}) == {}


def test_a_duplicate_is_a_ring_named_with_what_it_equals(built):
    spec = built["scatter"].to_dict()
    rows = [row for rows in spec["datasets"].values() for row in rows]
    assert {row["estimator"]: row["ring"] for row in rows if "ring" in row} == {
        "naive": 0, "tok_tis": 0, "tok_mis": 0, "seq_is": 0, "seq_tis": 0, "geo_rs": 1}
    texts = {row["text"] for row in rows if row.get("kind") == "estimator"}
    assert "naive = geo_rs" in texts and "geo_rs" not in texts
    legend = next(node["legend"] for node in spec_nodes(spec) if isinstance(node.get("legend"), dict)
                  and node.get("field") == "estimator")
    assert "geo_rs = naive here" in legend["labelExpr"]


def test_a_duplicate_line_is_dashed_over_the_one_it_equals(built):
    spec = built["errors"].to_dict()
    styles = {row["estimator"]: row["line"] for rows in spec["datasets"].values() for row in rows if "line" in row}
    assert styles["geo_rs"] == "1 of 1" and set(styles.values()) - {"1 of 1"} == {"own"}
    legend = next(node["legend"] for node in spec_nodes(spec) if isinstance(node.get("legend"), dict)
                  and node.get("field") == "estimator")
    assert "geo_rs = naive here" in legend["labelExpr"]


def test_log_axes_fit_their_data(built):
    """A log axis rounded out to whole decades spanned 0.1–10 for curves within 0.8–1.6 (the Threshold sweep's RMSE
    panel): every log value axis here takes its data's extent (nice off), a few pixels to spare."""
    from toylab.presentation import sweep_charts, training_charts
    from toylab.presentation.sweep_frames import threshold_frame
    rows = [{"estimator": "seq_tis", "parameter": "C", "threshold": c, "chosen": c == 2.0, "rel_bias": 0.1 / c,
             "rel_std": 0.8 + 0.01 * c, "rel_rmse": 0.9 + 0.01 * c} for c in (1.0, 2.0, 4.0)]
    frame = threshold_frame(rows, {"seq_tis": rows[0] | {"edge": "lower"}})
    curves = pd.DataFrame({"estimator": "naive", "quantity": "χ²_seq", "step": [0, 1, 2], "median": [1.0, 1.1, 1.2],
                           "q10": [1.0, 1.1, 1.2], "q90": [1.0, 1.1, 1.2]})
    charts = [built["errors"], sweep_charts.threshold_chart(frame, 2.0),
              training_charts.curve_chart(curves, "chi2_seq", False, log=True)]
    for chart in charts:
        scales = [node["scale"] for node in spec_nodes(chart.to_dict()) if isinstance(node.get("scale"), dict)
                  and node["scale"].get("type") == "log" and node.get("field") in ("value", "rel_rmse", "median")]
        assert scales and all(scale.get("nice") is False for scale in scales)
