"""The pipeline on the page (AppTest): a link or the sidebar sets logged, scored or a framework's pipeline; the header
shows the identity check E_μs[W] with what it certifies, and how far the scored objective moved; the table adds each
estimator's error against softmax(θ)'s gradient; a preset shows its choices, disabled. The page runs in this process:
a RuntimeWarning fails these tests."""

import numpy as np
from dense import DenseToy
from test_app import assert_table_is_library, run, table

from toylab import exact_table, make_toy
from toylab.state.query import parse_query

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
    identity = metric(at, "E_μs[W] identity check")
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
    assert metric(at, "E_μs[W] identity check").value == "1.0000"
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
        assert "E_μs[W] identity check" in next(text.help for text in at.markdown if "‖∇J‖" in text.value)
