"""Every chart builds and serialises; colours come from the registry; fonts are readable; legends highlight."""

import json

import pytest

from toylab import exact_moments, make_toy
from toylab.analysis.montecarlo import monte_carlo, summarise
from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import charts, frames
from toylab.state.settings import Settings

SETTINGS = Settings(estimators=("naive", "tok_tis", "tok_mis", "seq_is", "seq_tis", "geo_rs", "grpo"))


@pytest.fixture(scope="module")
def built():
    toy = make_toy(*SETTINGS.toy_key)
    selection = SETTINGS.selection()
    moments = {id: exact_moments(toy, id, params) for id, params in SETTINGS.selection(True).items()}
    table = frames.table_frame(moments, 64)
    tokens, log_W = frames.sampled_batch(toy, 64, 0)
    token_frame = frames.token_ratio_frame(toy, tokens)
    errors = monte_carlo(toy, selection, "none", (1, 10, 100), 8, 0)
    return {
        "scatter": charts.bias_std_chart(table, frames.iso_rmse_frame(table), 64),
        "tokens": charts.readable(charts.token_ratio_chart(frames.pooled_token_frame(token_frame),
                                                           frames.token_threshold_frame(toy, selection))),
        "token panels": charts.token_ratio_panels(token_frame, frames.token_threshold_frame(toy, selection, True)),
        **{f"sequence {kind}": charts.sequence_ratio_chart(frames.sequence_histogram_frame(toy, kind, 30, log_W),
                                                           frames.sequence_threshold_frame(toy, selection, kind), kind)
           for kind in ("W", "geo")},
        "errors": charts.error_chart(frames.error_curve_frame(moments),
                                     frames.monte_carlo_frame(summarise(errors, (1, 10, 100))),
                                     frames.crossover_frame(moments, moments["seq_is"])),
    }


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize("name", ["scatter", "tokens", "token panels", "sequence W", "sequence geo", "errors"])
def test_chart_serialises_with_registry_colours_and_readable_fonts(built, name):
    spec = built[name].to_dict()
    json.dumps(spec)
    assert spec["config"]["axis"]["labelFontSize"] >= 13 and spec["config"]["legend"]["labelFontSize"] >= 13
    scales = [node["scale"] for node in _walk(spec) if node.get("field") == "estimator" and "scale" in node]
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
    params = [p for node in _walk(spec) for p in node.get("params", []) if isinstance(p, dict)]
    assert any(p.get("bind") == "legend" and p["select"]["fields"] == ["estimator"] for p in params)
    assert any("condition" in node.get("opacity", {}) for node in _walk(spec) if isinstance(node.get("opacity"), dict))


def test_legends_list_each_estimator_once(built):
    for name, chart in built.items():
        for node in _walk(chart.to_dict()):
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
