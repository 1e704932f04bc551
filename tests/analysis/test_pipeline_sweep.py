"""The Mismatch sweep under each framework pipeline: one sweep per distinct (logged, scored) of the presets at the
sampler's top-p, every point the exact table of its toy, its identity check and objective shift the dense sums."""

import numpy as np
import pytest
from dense import DenseToy

from toylab.analysis.sweeps import PRECISION_ORDER, pipeline_combinations, pipeline_sweep, sweep_grid
from toylab.catalogue.pipelines import PIPELINES
from toylab.engine.moments import exact_moments
from toylab.engine.sampler import Sampler
from toylab.engine.toy import make_toy
from toylab.presentation import sweep_charts, sweep_frames


def test_the_combinations_are_the_presets_choices_each_once():
    for top_p in (0.9, 1.0):
        combinations = pipeline_combinations(top_p)
        assert sorted(id for ids in combinations.values() for id in ids) == sorted(PIPELINES)
        assert all(PIPELINES[id].choices(top_p) == key for key, ids in combinations.items() for id in ids)
    assert "slime" in pipeline_combinations(0.9)[("processed", "keep_mask")]
    assert "slime" in pipeline_combinations(1.0)[("temperature", "temperature")]     # no nucleus at top-p 1


def test_every_point_is_the_exact_table_and_the_dense_sums_of_its_toy():
    sampler = Sampler(top_p=0.9)
    selection = {"naive": {}, "seq_is": {}}
    estimators, pipelines, left_out = pipeline_sweep(3, 3, 2, 0.6, sampler, "temperature", selection, "logged", 16)
    grid = set(sweep_grid("temperature", 27)) | {1.0}
    for (logged, scored) in pipeline_combinations(0.9):
        values = {row["temperature"] for row in pipelines if (row["logged"], row["scored"]) == (logged, scored)}
        assert values | set(left_out.get((logged, scored), [])) == grid
    for row in estimators[::7]:
        toy = make_toy(3, 3, 0.6, 2, top_p=0.9, temperature=row["temperature"], logged=row["logged"],
                       scored=row["scored"])
        assert row["rel_bias"] == pytest.approx(exact_moments(toy, row["estimator"], baseline="logged").rel_bias,
                                                rel=1e-12, abs=1e-15)
    for row in pipelines[::11]:
        toy = make_toy(3, 3, 0.6, 2, top_p=0.9, temperature=row["temperature"], logged=row["logged"],
                       scored=row["scored"])
        dense = DenseToy(toy).population()
        assert row["identity"] == pytest.approx(dense["identity"], rel=1e-10)
        assert row["objective_shift"] == pytest.approx(dense["objective_shift"], rel=1e-9, abs=1e-12)


def test_the_precision_sweep_under_each_pipeline_is_the_exact_table_and_the_dense_sums_of_its_toy():
    """The precision (none, fp16, bf16) swept under every pipeline: each point is the exact table of its toy, and its
    identity check and objective shift the dense sums (the dense oracle rounds the logits itself). Rounding moves the
    identity check of every pipeline that logs or samples rounded logits against an unrounded trainer."""
    selection = {"naive": {}, "seq_is": {}, "tok_tis": {}}
    estimators, pipelines, left_out = pipeline_sweep(3, 3, 0, 0.6, Sampler(top_p=0.9, temperature=0.7), "precision",
                                                     selection, "logged", 16)
    assert not left_out and {(row["logged"], row["scored"]) for row in pipelines} == set(pipeline_combinations(0.9))
    for key in pipeline_combinations(0.9):
        assert [row["precision"] for row in pipelines if (row["logged"], row["scored"]) == key] == list(PRECISION_ORDER)
    assert len(estimators) == len(pipelines) * len(selection)
    for row in estimators:
        toy = make_toy(3, 3, 0.6, 0, top_p=0.9, temperature=0.7, precision=row["precision"], logged=row["logged"],
                       scored=row["scored"])
        assert row["rel_bias"] == pytest.approx(exact_moments(toy, row["estimator"], baseline="logged").rel_bias,
                                                rel=1e-12, abs=1e-15)
    for row in pipelines:
        toy = make_toy(3, 3, 0.6, 0, top_p=0.9, temperature=0.7, precision=row["precision"], logged=row["logged"],
                       scored=row["scored"])
        dense = DenseToy(toy).population()
        assert row["identity"] == pytest.approx(dense["identity"], rel=1e-10)
        assert row["objective_shift"] == pytest.approx(dense["objective_shift"], rel=1e-9, abs=1e-12)
    raw = [row["identity"] for row in pipelines if (row["logged"], row["scored"]) == ("raw", "temperature")]
    assert len(set(raw)) == len(PRECISION_ORDER)


def test_the_pipeline_chart_names_the_precisions_on_its_x_axis():
    """Swept over the precision, both parts of the chart put the names in PRECISION_ORDER on a nominal x (a
    quantitative one would draw no point), as the sampler sweep does; a number swept stays quantitative."""
    estimators, pipelines, _ = pipeline_sweep(3, 3, 0, 0.6, Sampler(top_p=0.9, temperature=0.7), "precision",
                                              {"naive": {}}, "none", 16)
    spec = sweep_charts.pipeline_chart(sweep_frames.pipeline_frame(estimators, pipelines, "precision"),
                                       sweep_frames.pipeline_identity_frame(pipelines, "precision"), "bf16",
                                       "precision").to_dict()
    panels, check = spec["vconcat"][0]["spec"]["encoding"], spec["vconcat"][1]["layer"][0]["encoding"]
    for encoding in (panels, check):
        assert encoding["x"]["type"] == "nominal" and encoding["x"]["scale"]["domain"] == list(PRECISION_ORDER)
        assert {"field": "precision", "type": "nominal"} in encoding["tooltip"]
    rule = spec["vconcat"][1]["layer"][2]
    assert rule["encoding"]["x"] == {"field": "chosen precision", "type": "nominal"}
    assert spec["datasets"][rule["data"]["name"]] == [{"chosen precision": "bf16"}]
    estimators, pipelines, _ = pipeline_sweep(3, 3, 0, 0.6, Sampler(top_p=0.9), "temperature", {"naive": {}}, "none",
                                              16)
    spec = sweep_charts.pipeline_chart(sweep_frames.pipeline_frame(estimators, pipelines, "temperature"),
                                       sweep_frames.pipeline_identity_frame(pipelines, "temperature"), 1.0,
                                       "temperature").to_dict()
    assert spec["vconcat"][0]["spec"]["encoding"]["x"]["type"] == "quantitative"
    assert spec["vconcat"][0]["spec"]["encoding"]["x"]["scale"]["type"] == "log"


def test_raw_logging_s_identity_check_is_one_at_temperature_one_without_truncation_only():
    _, pipelines, _ = pipeline_sweep(3, 3, 2, 0.6, Sampler(), "temperature", {"naive": {}}, "none", 16)
    raw = {row["temperature"]: row["identity"] for row in pipelines if row["logged"] == "raw"}
    assert raw[1.0] == pytest.approx(1.0, abs=1e-14)
    assert min(abs(value - 1) for tau, value in raw.items() if abs(tau - 1) > 0.1) > 1e-3


def test_the_pipeline_chart_has_a_panel_per_pipeline_and_the_identity_check():
    estimators, pipelines, _ = pipeline_sweep(3, 3, 2, 0.6, Sampler(top_p=0.9), "temperature",
                                              {"naive": {}, "seq_is": {}}, "none", 16)
    frame = sweep_frames.pipeline_frame(estimators, pipelines, "temperature")
    identity = sweep_frames.pipeline_identity_frame(pipelines, "temperature")
    assert frame["pipeline"].nunique() == len(pipeline_combinations(0.9)) == identity["pipeline"].nunique()
    assert np.array_equal(identity["value"], [row["identity"] for row in pipelines])
    spec = sweep_charts.pipeline_chart(frame, identity, 0.7, "temperature").to_dict()
    assert spec["vconcat"][0]["facet"]["field"] == "pipeline" and "SkyRL" in " ".join(frame["frameworks"])


def test_the_length_view_takes_the_pipeline_and_stops_where_the_scored_objective_is_flat():
    from toylab.analysis.length import length_point, length_toy
    from toylab.state.settings import Settings
    settings = Settings(T=4, V=3, mismatch=0.5, seed=1, top_p=0.9, temperature=0.7, logged="raw", scored="temperature",
                        estimators=("naive", "seq_is"))
    _, rows = length_point(settings, 3)
    toy = length_toy(3, 3, 0.5, 1, settings.sampler)
    assert toy.sampler.logged == "raw"
    for row in rows:
        assert row["rel_bias"] == pytest.approx(exact_moments(toy, row["estimator"]).rel_bias, rel=1e-12)
    with pytest.raises(ValueError, match="does not depend on θ"):
        length_point(Settings(T=4, V=3, mismatch=0.5, seed=1, top_p=0.9, temperature=0.7, scored="keep_mask"), 3)
