"""The sweep views' frames reshape the library's numbers faithfully; their charts build and serialise."""

import json
import warnings

import numpy as np
import pytest
from chart_specs import spec_nodes

from toylab import ESTIMATORS, make_toy
from toylab.analysis import sweeps
from toylab.analysis.length import MONTE_CARLO, length_point
from toylab.presentation import sweep_charts, sweep_frames
from toylab.presentation.charts import TEXT
from toylab.state.settings import Settings

SETTINGS = Settings(estimators=("naive", "tok_tis", "seq_is", "seq_tis", "geo_rs"), baseline="logged", N=16)


@pytest.fixture(scope="module")
def threshold():
    toy = make_toy(*SETTINGS.toy_key)
    rows = sweeps.threshold_sweep(toy, SETTINGS.selection(), SETTINGS.baseline, SETTINGS.N)
    return rows, sweep_frames.threshold_frame(rows, sweeps.best_thresholds(rows)), sweeps.rule_of_thumb(toy)


@pytest.fixture(scope="module")
def mismatch():
    rows, divergences, _ = sweeps.sampler_sweep(SETTINGS.T, SETTINGS.V, SETTINGS.seed, SETTINGS.mismatch,
                                                SETTINGS.sampler, "mismatch", SETTINGS.selection(), SETTINGS.baseline,
                                                SETTINGS.N)
    return (sweep_frames.sampler_frame(rows), sweep_frames.divergence_frame(divergences),
            sweep_frames.out_of_reach_frame(divergences))


@pytest.fixture(scope="module")
def top_p():
    settings = Settings(estimators=SETTINGS.estimators, baseline="logged", N=16, top_p=0.9)
    rows, divergences, _ = sweeps.sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch,
                                                settings.sampler, "top_p", settings.selection(), settings.baseline,
                                                settings.N)
    return rows, divergences


@pytest.fixture(scope="module")
def length():
    population, estimators = [], []
    for T in (4, 12, 32):
        point_population, point_estimators = length_point(SETTINGS, T, samples=2000)
        population += point_population
        estimators += point_estimators
    return population, estimators


def _serialised(chart):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = chart.to_dict()
    return spec, json.dumps(spec)


def _estimator_colour_scales(node):
    """Every colour scale of an encoding on the ``estimator`` field, anywhere in a spec."""
    if isinstance(node, dict):
        colour = node.get("color")
        if isinstance(colour, dict) and colour.get("field") == "estimator" and "scale" in colour:
            yield colour["scale"]
        for value in node.values():
            yield from _estimator_colour_scales(value)
    elif isinstance(node, list):
        for value in node:
            yield from _estimator_colour_scales(value)


def _check_style(spec, text):
    assert spec["config"]["axis"]["labelFontSize"] >= 13 and spec["config"]["legend"]["labelFontSize"] >= 13
    assert '"type": "log"' in text
    assert '"bind": "legend"' in text and '"fields": ["estimator"]' in text
    scales = list(_estimator_colour_scales(spec))
    assert scales and all(scale == {"domain": list(ESTIMATORS), "range": [e.colour for e in ESTIMATORS.values()]}
                          for scale in scales)


def test_threshold_frame_marks_best_and_chosen(threshold):
    rows, frame, _ = threshold
    best = sweeps.best_thresholds(rows)
    marked = frame[frame["best"] & (frame["metric"] == "relative RMSE at N")]
    assert dict(zip(marked["estimator"], marked["threshold"], strict=True)) == \
        {id: row["threshold"] for id, row in best.items()}
    chosen = frame[frame["chosen"] & (frame["metric"] == "relative bias")]
    assert set(chosen["estimator"]) == {"tok_tis", "seq_tis", "geo_rs"}
    spread = frame[frame["metric"] != "relative bias"]
    assert (spread["value"] > sweep_frames.UNBIASED).all()
    assert len(frame[frame["metric"] == "relative bias"]) == len(rows)


def test_threshold_chart_builds(threshold):
    _, frame, rule = threshold
    spec, text = _serialised(sweep_charts.threshold_chart(frame, rule))
    assert len(spec["vconcat"]) == 3 and f"{rule:.3g}" in text
    _check_style(spec, text)


def test_mismatch_frame_keeps_zero_bias_and_equal_rmse_at_zero(mismatch):
    frame, divergences, out_of_reach = mismatch
    at_zero = frame[frame["mismatch"] == 0.0]
    assert np.allclose(at_zero[at_zero["metric"] == "relative bias"]["value"], 0.0, atol=1e-12)
    rmse = at_zero[at_zero["metric"] == "relative RMSE at N"]["value"]
    assert np.allclose(rmse, rmse.iloc[0], rtol=1e-12)
    assert set(divergences["quantity"]) == {"KL(μ‖π)", "χ²_seq"} and (divergences["value"] > 0).all()
    assert out_of_reach.empty                                                      # plain softmax: nothing out of reach


def test_mismatch_chart_builds(mismatch):
    spec, text = _serialised(sweep_charts.sampler_chart(*mismatch, SETTINGS.mismatch))
    assert len(_panels(spec)) == 3 and len(spec["vconcat"][0]["vconcat"]) == 2       # one legend over bias and RMSE
    _check_style(spec, text)


def test_top_p_frames_carry_the_gradient_and_the_mass_out_of_reach(top_p):
    rows, divergences = top_p
    out_of_reach = sweep_frames.out_of_reach_frame(divergences, "top_p")
    assert out_of_reach["value"].tolist() == [row["rel_out_of_reach"] for row in divergences]
    assert out_of_reach.loc[out_of_reach["top_p"] == 1.0, "value"].tolist() == [0.0]
    quantities = sweep_frames.divergence_frame(divergences, "top_p")
    reach = quantities[quantities["quantity"] == "π-mass out of reach"]
    assert len(reach) == sum(row["unreachable_mass"] > 1e-12 for row in divergences) > 0
    spec, text = _serialised(sweep_charts.sampler_chart(sweep_frames.sampler_frame(rows, "top_p"), quantities, out_of_reach,
                                                        0.9, "top_p"))
    assert "out of reach (seq_is's bias)" in text and "floor" not in text and _panels(spec)[0]["layer"][-1]["mark"]["color"] == TEXT
    _check_style(spec, text)


def test_length_frames_carry_the_std_ratio_and_error_bars(length):
    population, estimators = length
    frame = sweep_frames.length_estimator_frame(estimators)
    for row in estimators:
        point = frame[(frame["T"] == row["T"]) & (frame["estimator"] == row["estimator"])
                      & (frame["metric"] == sweep_frames.STD_RATIO)].iloc[0]
        assert point["value"] == row["std_ratio"]
        assert point["upper"] == pytest.approx(row["std_ratio"] + 2 * row["std_ratio_se"], rel=1e-12)
    monte_carlo = frame[frame["monte_carlo"]]
    assert len(monte_carlo) and (monte_carlo["upper"] > monte_carlo["value"]).all()
    assert (frame.loc[~frame["monte_carlo"], "upper"] == frame.loc[~frame["monte_carlo"], "value"]).all()
    probabilities = sweep_frames.length_probability_frame(population)
    assert (probabilities["lower"] >= 0).all() and (probabilities["upper"] <= 1).all()
    assert set(probabilities.loc[probabilities["monte_carlo"], "method"]) == {MONTE_CARLO}
    assert set(sweep_frames.length_divergence_frame(population)["quantity"]) == {"χ²_seq", "ESS fraction"}
    truncated = length_point(Settings(estimators=("naive", "seq_is"), top_p=0.8), 64, samples=500)[0]
    reach = sweep_frames.length_divergence_frame(truncated)
    assert reach.loc[reach["quantity"] == "π-mass out of reach", "value"].between(0, 1).all()


def test_length_chart_builds(length):
    population, estimators = length
    chart = sweep_charts.length_chart(sweep_frames.length_divergence_frame(population),
                                     sweep_frames.length_probability_frame(population),
                                     sweep_frames.length_estimator_frame(estimators))
    spec, text = _serialised(chart)
    assert len(_panels(spec)) == 4 and "Monte Carlo" in text and len(spec["vconcat"][2]["vconcat"]) == 2
    assert _panels(spec)[3]["layer"][0]["encoding"]["y"]["title"].startswith("std ÷ on-policy std")
    _check_style(spec, text)


def _panels(spec):
    """A stack's panels, top to bottom: a block of panels under one legend (``sweep_charts._one_legend``) opened."""
    return [panel for node in spec["vconcat"] for panel in (node["vconcat"] if "vconcat" in node else [node])]


def _shape_domains(node):
    """Every shape scale's domain of an encoding on ``method``, anywhere in a spec."""
    for found in spec_nodes(node):
        shape = found.get("shape")
        if isinstance(shape, dict) and shape.get("field") == "method":
            yield shape["scale"]["domain"]


def test_the_length_legend_names_only_the_ways_drawn():
    """With the Monte Carlo toggle off (the default, issue 29) no triangle is drawn, and the legend names none: it
    listed 'Monte Carlo' under lesson 3's chart beside points that were all exact. With it on, the triangle is named."""
    for sampled, expected in ((False, ["exact (enumeration)", "exact (recursion)"]),
                              (True, ["exact (enumeration)", "exact (recursion)", MONTE_CARLO])):
        population, estimators = [], []
        for T in (4, 64):
            point_population, point_estimators = length_point(SETTINGS, T, samples=200, sampled=sampled)
            population += point_population
            estimators += point_estimators
        frame = sweep_frames.length_estimator_frame(estimators)
        spec, _ = _serialised(sweep_charts.length_chart(sweep_frames.length_divergence_frame(population),
                                                        sweep_frames.length_probability_frame(population), frame,
                                                        panel="std_ratio"))
        assert sorted(set(frame["method"])) == sorted(expected)
        assert list(_shape_domains(spec)) and all(domain == expected for domain in _shape_domains(spec))
    spec, _ = _serialised(sweep_charts.length_chart(sweep_frames.length_divergence_frame(population),
                                                    sweep_frames.length_probability_frame(population), frame))
    assert all(domain == expected for domain in _shape_domains(spec))      # the stack shares one shape scale
