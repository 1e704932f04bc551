"""The pipeline on the page (AppTest): a link or the sidebar sets logged, scored or a framework's pipeline; the header
shows the identity check E_μs[W] with what it certifies, and how far the scored objective moved; the table adds each
estimator's error against softmax(θ)'s gradient; a preset shows its choices, disabled. The page runs in this process:
a RuntimeWarning fails these tests."""

import json

import numpy as np
import pytest
from dense import DenseToy
from rollout_logs import log_bytes, log_records, pipeline_log
from test_app import assert_table_is_library, run, table
from test_your_run_app import run as run_your_run
from test_your_run_app import upload

from toylab import exact_table, make_toy
from toylab.presentation.pipeline_text import signature_text
from toylab.state.query import parse_query
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.signature import logging_signature

LINK = {"T": "4", "mismatch": "0.5", "temperature": "0.6", "top_p": "0.9", "pipeline": "trl_colocate_before_4163"}


def metric(at, label):
    return next(m for m in at.metric if m.label == label)


def test_a_pipeline_link_shows_its_identity_check_objective_and_errors_against_softmax():
    at = run(LINK)
    assert not at.exception and not at.error and not at.warning and at.query_params == LINK
    assert at.selectbox(key="pipeline").value == "trl_colocate_before_4163"
    assert (at.radio(key="logged").value, at.radio(key="scored").value) == ("raw", "temperature")
    assert at.radio(key="logged").disabled and at.radio(key="scored").disabled
    settings, _ = parse_query(LINK)
    dense = DenseToy(make_toy(*settings.toy_key)).population()
    identity = metric(at, "E_μs[W] check")
    assert identity.value == f"{dense['identity']:.4f}" and "certifies only" in identity.help
    assert metric(at, "objective moved").value == f"{dense['objective_shift']:.1%}"
    assert_table_is_library(at, settings)
    expected = {row["estimator"]: row["rel_plain_bias"]
                for row in exact_table(make_toy(*settings.toy_key), settings.selection(True))}
    np.testing.assert_array_equal(table(at)["rel_plain_bias"], [expected[id] for id in table(at)["estimator"]])
    captions = " ".join(caption.value for caption in at.caption)
    assert "objective" in captions and "does not certify" in captions


def test_choosing_a_pipeline_in_the_sidebar_sets_both_choices_and_writes_only_its_name():
    at = run()
    at.selectbox(key="pipeline").set_value("skyrl").run()
    assert not at.exception and at.query_params == {"pipeline": "skyrl"}
    assert (at.radio(key="logged").value, at.radio(key="scored").value) == ("raw", "temperature")
    at.selectbox(key="pipeline").set_value("custom").run()
    at.radio(key="scored").set_value("keep_mask").run()
    assert not at.exception and at.query_params == {"logged": "raw", "scored": "keep_mask"}
    assert not at.radio(key="logged").disabled


def test_the_default_page_shows_the_identity_check_as_one_and_no_objective_metric():
    at = run()
    assert metric(at, "E_μs[W] check").value == "1.0000"
    assert not [m for m in at.metric if m.label == "objective moved"]
    assert "rel_plain_bias" not in table(at).columns


def test_the_mismatch_sweep_compares_the_framework_pipelines_on_request():
    link = {"tab": "Mismatch sweep", "sweep": "temperature", "top_p": "0.9", "T": "4"}
    at = run(link)
    assert not at.toggle(key="sweep_pipelines").value and len(at.get("vega_lite_chart")) == 1
    at.toggle(key="sweep_pipelines").set_value(True).run()
    assert not at.exception and not at.error and at.query_params == link | {"sweep_pipelines": "1"}
    assert len(at.get("vega_lite_chart")) == 2
    assert any("One panel per pipeline" in caption.value for caption in at.caption)


def test_the_one_line_header_shows_the_identity_check_only_where_it_adds_to_the_other_numbers():
    """Presenting, E_μs[W] is left to the tooltip where it equals 1 − π's mass out of reach (logged = sampled), and
    shown where it does not (raw logging): the header stays on one line with every sampler field set."""
    truncating = {"present": "1", "top_p": "0.95", "top_k": "3", "temperature": "0.75", "precision": "bf16"}
    for link, shown in ((truncating, False), (truncating | {"logged": "raw"}, True), ({"present": "1"}, False)):
        at = run(link)
        settings, _ = parse_query(link)
        dense = DenseToy(make_toy(*settings.toy_key)).population()
        (line,) = [text.value for text in at.markdown if "‖∇J‖" in text.value]
        assert not at.exception and ("E_μs[W]" in line) == shown, link
        assert shown == (abs(dense["identity"] - (1 - dense["unreachable_mass"])) > 1e-12), link
        assert "E_μs[W] check" in next(text.help for text in at.markdown if "‖∇J‖" in text.value)


@pytest.mark.slow
def test_the_precision_sweep_compares_the_framework_pipelines_with_the_precisions_by_name():
    """The lead's merge made the precision sweepable; under each framework pipeline its chart names the precisions on
    its x axis (a quantitative axis would draw nothing) and its rule marks the chosen one."""
    link = {"tab": "Mismatch sweep", "sweep": "precision", "top_p": "0.9", "temperature": "0.7", "precision": "bf16",
            "T": "3", "V": "3", "sweep_pipelines": "1"}
    at = run(link)
    assert not at.exception and not at.error and at.query_params == link
    charts = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    assert len(charts) == 2
    pipelines = charts[1]
    assert pipelines["vconcat"][0]["spec"]["encoding"]["x"]["type"] == "nominal"
    assert pipelines["vconcat"][0]["spec"]["encoding"]["x"]["scale"]["domain"] == ["none", "fp16", "bf16"]
    assert pipelines["vconcat"][1]["layer"][2]["encoding"]["x"] == {"field": "chosen precision", "type": "nominal"}


@pytest.mark.parametrize("pipeline, opening", [
    ({"temperature": 0.6, "logged": "raw", "scored": "temperature"}, "These log-probabilities look pre-temperature"),
    pytest.param({"temperature": 0.8, "top_p": 0.9, "scored": "temperature"}, "These log-probabilities look truncated",
                 marks=pytest.mark.slow),
    pytest.param({}, None, marks=pytest.mark.slow)])
def test_your_run_warns_of_the_log_s_signature(pipeline, opening):
    """A log drawn through a pipeline and uploaded: the tab warns with the library's signature (raw, truncated), with
    the sidebar's advice; a log whose logged μ is the sampled one gets no such warning."""
    log = pipeline_log(make_toy(6, 4, 0.1, 0, **pipeline), 600, seed=3)
    at = upload(run_your_run(), "log.jsonl", log_bytes(log_records(log), "jsonl"))
    assert not at.exception and not at.error
    warnings = [warning.value for warning in at.warning if "These log-probabilities" in warning.value]
    signature = logging_signature(magnitudes(log).identity)
    assert warnings == ([] if opening is None else [signature_text(signature)])
    assert opening is None or (warnings[0].startswith(opening) and "sidebar" in warnings[0])
