"""The tables and sentences the page shows, built in toylab.presentation: each holds the library's numbers (the
sweep's rows, the crossover frame, the suggestions, the estimators applied to a log) in the places its columns say."""

import base64
import math

import pandas as pd
import pytest
from messages import says
from rollout_logs import EXAMPLES

from toylab import make_toy, resolve_params
from toylab.analysis.sweeps import best_thresholds, rule_of_thumb, threshold_sweep
from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import (
    coincidence,
    colours,
    estimates,
    frames,
    run_frames,
    run_steps_text,
    sweep_frames,
)
from toylab.state.query import make_settings
from toylab.text import UNDEFINED
from toylab.your_run.applied import on_log
from toylab.your_run.log import load_log
from toylab.your_run.steps import AFFECTED_SERIES
from toylab.your_run.suggestions import suggestions

SWEPT = ("tok_tis", "seq_tis", "seq_mis")


@pytest.fixture(scope="module")
def toy():
    return make_toy(3, 3, 0.8, 1)


@pytest.fixture(scope="module")
def sweep(toy):
    rows = threshold_sweep(toy, {id: resolve_params(id) for id in SWEPT}, "logged", 16)
    return rows, best_thresholds(rows)


@pytest.fixture(scope="module")
def example():
    return load_log(str(EXAMPLES / "rollouts_per_sequence.parquet"))


def test_the_best_threshold_table_holds_each_estimators_lowest_rmse_and_its_chosen_row(sweep):
    rows, best = sweep
    table = sweep_frames.best_threshold_table(rows, best).set_index("estimator")
    assert list(table.index) == list(SWEPT)
    for id in SWEPT:
        own = [row for row in rows if row["estimator"] == id]
        lowest = min(own, key=lambda row: row["rel_rmse"])
        (chosen,) = [row for row in own if row["chosen"]]
        assert table.loc[id, "lowest-RMSE threshold"] == lowest["threshold"]
        assert table.loc[id, "its rel RMSE"] == lowest["rel_rmse"]
        assert (table.loc[id, "chosen threshold"], table.loc[id, "chosen rel RMSE"]) == (chosen["threshold"],
                                                                                          chosen["rel_rmse"])
        assert table.loc[id, "at the sweep's edge"] in ("", "lower", "upper")
    assert set(sweep_frames.BEST_THRESHOLD_NUMBERS) <= set(table.columns)


def test_the_edge_note_names_only_the_estimators_at_an_edge(sweep):
    _, best = sweep
    inside = {id: row | {"edge": None} for id, row in best.items()}
    assert sweep_frames.edge_note(inside) is None
    one = inside | {"seq_tis": best["seq_tis"] | {"edge": "upper", "threshold": 12.5}}
    note = sweep_frames.edge_note(one)
    assert "seq_tis at its upper edge (C = 12.5)" in note
    assert "tok_tis" not in note and "seq_mis" not in note


def test_the_rule_of_thumb_note_shows_c_star_and_seq_tis_best_threshold(toy, sweep):
    _, best = sweep
    c_star = rule_of_thumb(toy)
    note = sweep_frames.rule_of_thumb_note(best, c_star, 16)
    assert f"**{c_star:.3g}**" in note and f"C = **{best['seq_tis']['threshold']:.3g}**" in note
    assert "N = 16" in note
    assert sweep_frames.rule_of_thumb_note({"tok_tis": best["tok_tis"]}, c_star, 16) is None


def test_the_crossover_table_words_each_first_winning_batch_size():
    crossovers = pd.DataFrame({"estimator": ["tok_tis", "naive"], "crossover_N": [3.5, math.nan],
                               "first_N": [1234.0, math.nan], "rel_rmse": [0.1, math.nan]})
    table = frames.crossover_table(crossovers)
    assert list(table["estimator"]) == ["tok_tis", "naive"]
    assert list(table["seq_is has the lower RMSE for"]) == ["every N ≥ 1,234", "no N"]


def test_the_evidence_table_shows_each_quantity_to_six_digits():
    table = frames.evidence_table({"rel bias": 0.123456789, "N": 1024})
    assert table.to_dict("list") == {"quantity": ["rel bias", "N"], "value": ["0.123457", "1024"]}


def test_a_swatch_is_a_circle_of_the_colour():
    svg = base64.b64decode(colours.swatch("#1f77b4").removeprefix("data:image/svg+xml;base64,")).decode()
    assert "<circle" in svg and 'fill="#1f77b4"' in svg


def test_the_applied_table_holds_each_measured_estimator_with_its_colour(example):
    rows = on_log(example, {"tok_tis": {}, "seq_mis": {}, "on_policy": {}})
    measured = [row for row in rows if row.tokens_affected is not None]
    table = run_frames.applied_frame(rows)
    assert list(table["name"]) == [row.name for row in measured] and measured
    for record, row in zip(table.to_dict("records"), measured, strict=True):
        assert record["tokens_affected"] == row.tokens_affected and record["ess_fraction"] == row.ess_fraction
        assert record["swatch"] == colours.swatch(ESTIMATORS[row.name].colour)


def test_the_suggested_thresholds_table_and_its_note_hold_the_suggestions(example):
    suggested = suggestions(example, {"tok_tis": resolve_params("tok_tis"), "seq_tis": resolve_params("seq_tis")})
    table = run_frames.suggested_threshold_frame(suggested)
    assert list(table["threshold"]) == [f"{row['estimator']}.{row['parameter']}" for row in suggested]
    for record, row in zip(table.to_dict("records"), suggested, strict=True):
        assert record["now"] == row["current"]
        assert [record[f"touches {share}"] for share in ("0.1 %", "1 %", "10 %")] == [p["value"] for p in row["at"]]
    outside = [p for row in suggested for p in row["at"] if not p["in_range"]]
    assert ("outside the estimator's range" in run_frames.thresholds_outside_note(suggested)) == bool(outside)
    forced = [suggested[0] | {"at": [point | {"in_range": False} for point in suggested[0]["at"]]}]
    assert "tok_tis.C at 0.1 %" in run_frames.thresholds_outside_note(forced)


def test_the_run_headline_counts_the_read_steps_only():
    summaries = [{"step": 1, "tokens": 1_200, "sequences": 10}, {"step": 2, "error": "bad"},
                 {"step": 3, "tokens": 800, "sequences": 6}]
    assert run_steps_text.run_headline(summaries) == ("**A run of 3 steps** (2,000 response tokens in 16 sequences, "
                                                      "2 steps read)")


def test_the_step_notices_name_their_step_and_count_the_rest():
    summaries = [{"step": step, "notices": [f"n{step}a", f"n{step}b"]} for step in range(1, 5)]
    text = run_steps_text.step_notices(summaries, shown=3)
    assert text.split("; ") == ["step 1: n1a", "step 1: n1b", "step 2: n2a", "… and 5 more"]
    assert run_steps_text.step_notices([{"step": 1}]) == ""


def test_the_steps_caption_names_each_departure_and_each_constant_metric():
    labels = {"k1": "k1 per token", "k3": "k3 per token"}
    text = run_steps_text.steps_caption(labels, {"k1": 7, "k3": None, "unlabelled": 2}, {"ESS": 0.5})
    assert says(text, "k1 per token at step 7", "ESS = 0.5") and "k3 per token" not in text
    assert "unlabelled" not in text
    assert "at step 7. Not drawn" in text                   # two sentences (it read "at step 7 Not drawn")
    assert "none left it" in run_steps_text.steps_caption(labels, {"k1": None}, {})


def test_the_affected_caption_names_the_estimators_that_moved():
    departures = {f"{AFFECTED_SERIES}tok_tis": 4, f"{AFFECTED_SERIES}seq_mis": None, "k1": 3}
    text = run_steps_text.affected_caption(departures, [])
    assert says(text, "tok_tis at step 4") and "seq_mis" not in text and "k1" not in text


def test_the_error_caption_says_where_the_dots_are_and_which_estimators_have_only_those():
    on = frames.error_chart_caption(True, 200, ["seq_snis"], [])
    assert says(on, "Monte Carlo rms over 200 batches") and "Turn on" not in on
    off = frames.error_chart_caption(False, 200, ["seq_snis"], [])
    assert says(off, "Turn on the Monte Carlo check", "batch-coupled seq_snis") and "rms over" not in off
    assert "batch-coupled" not in frames.error_chart_caption(False, 200, [], [])


def test_an_undefined_monte_carlo_point_is_named_with_its_batch_sizes():
    (note,) = frames.undefined_monte_carlo_notes({"rloo": [1, 2]})
    assert says(note, "rloo", "N = 1, 2", ESTIMATORS["rloo"].undefined)


def test_a_json_estimate_is_written_as_every_estimate_is():
    assert estimates.record_text({"value": 6.1634e-05, "se": 1.71e-05}) == estimates.with_se(6.1634e-05, 1.71e-05)
    assert estimates.record_text({"value": 0.5, "se": None}) == "0.5"
    assert estimates.record_text({"value": None, "se": 0.1}) == UNDEFINED


def test_the_dashed_lines_sentence_names_them_and_says_nothing_when_none_lies_on_another():
    assert coincidence.dashed_caption("") == ""
    assert says(coincidence.dashed_caption("seq_is = on_policy"), "short dashes", ": seq_is = on_policy.")
    assert coincidence.dashed_caption("a = b", chart="the J chart").startswith("On the J chart, drawn")


def test_the_threshold_sweep_caption_states_its_batch_size_and_grid():
    assert says(sweep_frames.threshold_sweep_caption(4096, 33), "N = 4,096", "33 log-spaced values")


def test_the_sampler_sweep_captions_say_what_moves_and_what_was_left_out():
    settings = make_settings(T=4, V=3, mismatch=0.5, seed=2, N=64)
    for parameter in sweep_frames.SWEEP_ABOUT:
        caption = sweep_frames.sampler_sweep_caption(settings, parameter, [])
        assert says(caption, "T = 4, V = 3, seed 2, N = 64", sweep_frames.SWEEP_ABOUT[parameter])
        assert "Left out" not in caption
    assert says(sweep_frames.sampler_sweep_caption(settings, "top_p", [0.12345, 0.2]), "top_p = 0.123, 0.2")
    assert says(sweep_frames.pipeline_sweep_caption("precision", {("raw", "plain"): ["bf16"]}), "precision = bf16")
    assert sweep_frames.pipeline_sweep_caption("mismatch", {}) == sweep_frames.PIPELINE_SWEEP_ABOUT
