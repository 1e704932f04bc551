"""The sampler model on the page (AppTest): links set its controls, the header states the π-mass out of reach, the
table splits each bias, the sweeps, the Training tab's error redrawn, Adam's actual step and the interval check, and
every bad link value falls back with a notice. The page runs in this process: a RuntimeWarning fails these tests."""

import numpy as np
import pytest
from dense import DenseToy
from test_app import assert_table_is_library, run, tab_content, table

from toylab import make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.state.query import parse_query
from toylab.training.loop import TrainingConfig, train
from toylab.training.sga import toy_at

LINK = {"top_p": "0.9", "top_k": "3", "temperature": "0.8", "precision": "bf16", "mismatch": "0.5", "T": "4"}


def metric(at, label):
    return next(m for m in at.metric if m.label == label)


def test_a_link_sets_the_sampler_and_the_page_shows_its_exact_numbers():
    at = run(LINK)
    assert not at.exception and not at.error and not at.warning
    assert (at.slider(key="top_p").value, at.slider(key="top_k").value, at.slider(key="temperature").value,
            at.radio(key="precision").value) == (0.9, 3, 0.8, "bf16")
    assert at.query_params == LINK                                              # the link stays the view's
    settings, _ = parse_query(LINK)
    toy = make_toy(*settings.toy_key)
    assert metric(at, "π-mass out of reach").value == f"{DenseToy(toy).unreachable_mass():.4f}"
    assert metric(at, "χ²_seq").value == f"{diagnostics(toy).chi2_seq:.4g}"
    assert_table_is_library(at, settings)
    shown = table(at)
    dense = DenseToy(toy)
    scale = np.linalg.norm(dense.true_grad)
    out_of_reach = np.linalg.norm(dense.true_grad - dense.reachable_gradient("none")) / scale
    on_mu = shown["estimator"] != "on_policy"
    np.testing.assert_allclose(shown.loc[on_mu, "rel_out_of_reach"], out_of_reach, rtol=1e-9)
    assert (shown.loc[~on_mu, "rel_out_of_reach"] == 0).all()
    assert any("(out of reach)" in caption.value and "not a floor" in caption.value for caption in at.caption)


def test_the_default_page_has_no_split_and_no_out_of_reach_metric():
    at = run()
    assert not [m for m in at.metric if m.label == "π-mass out of reach"]
    assert not any("out of reach" in caption.value for caption in at.caption)
    assert "Sampler (inference engine)" in [expander.label for expander in at.expander] and not at.query_params


def test_moving_a_sampler_control_writes_the_link():
    at = run()
    at.slider(key="top_p").set_value(0.8).run()
    at.radio(key="precision").set_value("fp16").run()
    assert not at.exception and at.query_params == {"top_p": "0.8", "precision": "fp16"}
    assert metric(at, "π-mass out of reach").value == f"{make_toy(top_p=0.8, precision='fp16').unreachable_mass:.4f}"


def test_a_smaller_vocabulary_keeps_top_k_within_it():
    at = run({"V": "6", "top_k": "5"})
    at.slider(key="V").set_value(3).run()
    assert not at.exception and at.slider(key="top_k").value == 3 and at.query_params["top_k"] == "3"


@pytest.mark.parametrize("query, words", [
    ({"top_p": "0"}, "top_p = '0' is outside 0.01 to 1; using the default top_p = 1.0"),
    ({"top_k": "9"}, "top_k = '9' is outside 0 to 8"),
    ({"top_k": "5"}, "top_k = 5 is above V = 4"),
    ({"temperature": "hot"}, "temperature = 'hot' is not a number"),
    ({"precision": "fp8"}, "precision = 'fp8' is not one of none, bf16, fp16"),
    ({"T": "4", "mismatch": "2", "seed": "3558", "temperature": "0.25"}, "beyond float64's range"),
    ({"tab": "Mismatch sweep", "sweep": "seed"}, "sweep = 'seed' is not one of mismatch, top_p, temperature"),
    ({"tab": "Training", "train_noise": "often"}, "train_noise = 'often' is not one of fixed, redrawn"),
])
def test_a_bad_sampler_value_in_a_link_falls_back_with_a_notice(query, words):
    at = run(query)
    assert not at.exception and not at.error
    notices = [warning.value for warning in at.warning]
    assert len(notices) == 1 and words in notices[0], notices


@pytest.mark.parametrize("sweep", ["top_p", "temperature"])
def test_the_sampler_sweeps_open_from_a_link(sweep):
    at = run({"tab": "Mismatch sweep", "sweep": sweep, "top_p": "0.95"})
    assert not at.exception and not at.error and not at.warning
    assert at.radio(key="sweep").value == sweep and at.query_params["sweep"] == sweep
    assert tab_content(at, "Mismatch sweep").count("vega_lite_chart") == 1
    assert any(f"only the sampler's {'top-p' if sweep == 'top_p' else 'temperature'}" in c.value for c in at.caption)


def test_the_training_tab_redraws_the_error_from_a_link():
    query = {"tab": "Training", "train_noise": "redrawn", "mismatch": "1", "est": "tok_mis", "train_steps": "50"}
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    assert at.radio(key="train_noise").value == "redrawn"
    assert at.query_params == query | {"train_pick": "tok_mis"}      # the log shown: naive is not trained here
    settings, _ = parse_query(query)
    expected = train(make_toy(*settings.toy_key), {"on_policy": {}, "tok_mis": {}}, "none",
                     TrainingConfig(steps=50, noise="redrawn"))
    assert at.dataframe[0].value.set_index("estimator").loc["tok_mis", "final_J"] == expected["tok_mis"].J[-1]
    assert any("b redrawn from Student-t(3)" in caption.value for caption in at.caption)


def test_with_adam_the_page_shows_the_step_cosine_and_adams_actual_step():
    # At θ_30 (on main this link said sga_step=0, which the page dropped — a link value equal to a slider's minimum
    # was lost — and showed step 30; at step 0 seq_is's batches show 536 % of the exact variance and pass the check.)
    query = {"tab": "Training", "train_optimizer": "adam", "train_lr": "0.1", "mismatch": "1",
             "est": "naive,seq_is,seq_tis", "sga": "1", "sga_step": "30"}
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    assert tab_content(at, "Training").count("vega_lite_chart") == 7           # the step's cosine: one more chart
    sga = at.dataframe[1].value.set_index("estimator")
    assert all(cell != "—" for cell in sga["adam"]) and all(cell != "—" for cell in sga["adam_lr"])
    settings, _ = parse_query(query)
    _, optimizer = toy_at(make_toy(*settings.toy_key), "none", TrainingConfig(lr=0.1, optimizer="adam"), 30)
    assert at.slider(key="sga_step").value == 30 and optimizer.k == 30         # Adam's state after 30 steps
    assert sga.loc["seq_is", "trusted"].startswith("no: heavy tail")            # seq_is at mismatch 1: flagged
    assert sga.loc["seq_tis", "trusted"].startswith("yes")
    assert any("Not trusted here: seq_is" in caption.value for caption in at.caption)
    assert any("Diamonds:" in caption.value for caption in at.caption)


def test_a_preset_is_a_toy_with_the_plain_sampler():
    at = run({"mismatch": "0", "top_p": "0.9"})
    assert at.selectbox(key="preset").value == "custom"                        # not "sampler = trainer"
    at.selectbox(key="preset").set_value("heavy (mismatch 1.0)").run()
    assert not at.exception and at.slider(key="top_p").value == 1.0 and at.query_params == {"mismatch": "1"}
