"""The Training tab's frames equal the library's numbers; its charts build, serialise and use the registry colours."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from chart_specs import spec_nodes

from toylab import make_toy
from toylab.catalogue.estimators import ESTIMATORS
from toylab.catalogue.updates import Update
from toylab.lessons.lesson import Mark
from toylab.presentation import training_charts, training_frames
from toylab.presentation.charts import MARK_NAMES
from toylab.presentation.frames import mark_frame
from toylab.training.loop import (
    TrainingConfig,
    largest_drop,
    per_step_median,
    steps_to_reach,
    summary,
    train,
)
from toylab.training.sga import monte_carlo_improvement, second_order

SELECTION = {"on_policy": {}, "naive": {}, "tok_mis": {}, "trm": {}}


@pytest.fixture(scope="module")
def expected():
    return train(make_toy(mismatch=1.0), SELECTION, "none", TrainingConfig(steps=60))


@pytest.fixture(scope="module")
def sampled():
    return train(make_toy(mismatch=1.0), SELECTION | {"grpo": {}}, "none",
                 TrainingConfig(steps=20, mode="sampled", N=16, runs=7))


def test_expected_curves_are_the_trajectories_and_undefined_cosines_are_left_out(expected):
    curves = training_frames.curve_frame(expected)
    for id, trajectory in expected.items():
        J = curves[(curves["estimator"] == id) & (curves["quantity"] == training_frames.QUANTITIES["J"])]
        np.testing.assert_array_equal(J["median"], trajectory.J)
        np.testing.assert_array_equal(J["q10"], trajectory.J)
        np.testing.assert_array_equal(J["step"], np.arange(61))
    cosine = curves[curves["quantity"] == training_frames.QUANTITIES["cosine"]]
    assert "trm" not in set(cosine["estimator"])            # masks every sequence at mismatch 1: undefined throughout
    assert not curves[["median", "q10", "q90"]].isna().any().any()


def test_sampled_curves_are_medians_and_quantiles_over_runs(sampled):
    curves = training_frames.curve_frame(sampled)
    naive = curves[(curves["estimator"] == "naive") & (curves["quantity"] == training_frames.QUANTITIES["J"])]
    J = sampled["naive"].J
    np.testing.assert_allclose(naive["median"], np.median(J, axis=0), rtol=1e-15)
    np.testing.assert_allclose(naive["q10"], np.quantile(J, 0.1, axis=0), rtol=1e-15)
    np.testing.assert_allclose(naive["q90"], np.quantile(J, 0.9, axis=0), rtol=1e-15)
    grpo = sampled["grpo"].cosine                                           # some runs have a zero step
    assert np.isnan(grpo).any()
    shown = curves[(curves["estimator"] == "grpo") & (curves["quantity"] == training_frames.QUANTITIES["cosine"])]
    for k, row in zip(shown["step"], shown["median"], strict=True):
        assert row == pytest.approx(np.median(grpo[~np.isnan(grpo[:, k]), k]))


def test_summary_rows_follow_their_definitions(expected, sampled):
    frame = training_frames.summary_frame(expected)
    target = 0.9 * expected["on_policy"].J[-1]
    for row in frame.itertuples():
        J = expected[row.estimator].J
        reached = [k for k, value in enumerate(J) if value >= target]
        assert row.steps_to_reach == (str(reached[0]) if reached else "never")
        assert row.largest_drop == pytest.approx(max(max(J[:k + 1]) - J[k] for k in range(len(J))), abs=1e-15)
        assert row.final_J == J[-1] and row.final_kl_mu_pi == expected[row.estimator].kl_mu_pi[-1]
    rows = frame.set_index("estimator")
    assert rows.loc["tok_mis", "steps_to_reach"] == "never" and rows.loc["tok_mis", "largest_drop"] > 0.05
    assert rows.loc["trm", "final_cosine"] == "—" and rows.loc["on_policy", "final_cosine"] == "+1.000"
    medians = summary(sampled)
    naive = next(row for row in medians if row["estimator"] == "naive")
    assert naive["final_J"] == np.median(sampled["naive"].J[:, -1])


def test_the_small_helpers():
    J = np.array([0.1, 0.5, 0.3, 0.6, 0.2])
    assert largest_drop(J) == pytest.approx(0.4) and largest_drop(np.sort(J)) == 0
    assert steps_to_reach(J, 0.55) == 3 and steps_to_reach(J, 0.7) is None
    runs = np.array([[1.0, np.nan], [3.0, np.nan], [2.0, 5.0]])
    np.testing.assert_array_equal(per_step_median(runs), [2.0, 5.0])
    assert np.isnan(per_step_median(np.full((2, 3), np.nan))).all()


def test_logged_frame_is_the_two_rewards(expected):
    frame = training_frames.logged_frame(expected["tok_mis"])
    np.testing.assert_array_equal(frame["J"], expected["tok_mis"].J)
    np.testing.assert_array_equal(frame["gap"], expected["tok_mis"].logged_reward - expected["tok_mis"].J)


@pytest.fixture(scope="module")
def sga():
    toy = make_toy(4, 3, 0.6, 1)
    selection = {"on_policy": {}, "seq_tis": {}, "grpo": {}}
    exact = {id: second_order(toy, id, {}, "none", 16) for id in ("on_policy", "seq_tis")}
    lrs = [0.1, 1.0, 10.0]
    return toy, exact, monte_carlo_improvement(toy, selection, "none", 16, lrs, batches=50)


def test_sga_frames(sga):
    toy, exact, sampled = sga
    grid = np.logspace(-2, 2, 9)
    curves = training_frames.second_order_frame(exact, grid, toy.J)
    for id, result in exact.items():
        mine = curves[curves["estimator"] == id]
        np.testing.assert_allclose(mine["improvement"], result.improvement(mine["lr"].to_numpy()), rtol=1e-14)
        assert ((mine["improvement"] >= -toy.J) & (mine["improvement"] <= 1 - toy.J)).all()
    points = training_frames.monte_carlo_frame(sampled, exact)
    grpo = points[points["estimator"] == "grpo"]
    assert (grpo["agrees"] == "—").all()
    row = points[(points["estimator"] == "seq_tis") & (points["lr"] == 0.1)].iloc[0]
    assert row["agrees"] == ("yes" if abs(exact["seq_tis"].improvement(0.1) - row["mean"]) <= 2 * row["se"] else "no")
    table = training_frames.sga_table(["on_policy", "seq_tis", "grpo"], exact, sampled, 1.0).set_index("estimator")
    assert table.loc["grpo", "second_order"] == "—" and table.loc["grpo", "slope"] == "—"
    assert table.loc["seq_tis", "second_order"] == f"{float(exact['seq_tis'].improvement(1.0)):+.4f}"
    assert table.loc["seq_tis", "monte_carlo"] == f"{sampled['seq_tis'].mean[1]:+.4f} ± {sampled['seq_tis'].se[1]:.4f}"


def test_charts_serialise_with_registry_colours(expected, sampled, sga):
    toy, exact, monte = sga
    built = []
    for trajectories, is_sampled in ((expected, False), (sampled, True)):
        curves = training_frames.curve_frame(trajectories)
        built += [training_charts.objective_chart(curves, is_sampled), training_charts.cosine_chart(curves, is_sampled),
                  training_charts.curve_chart(curves, "chi2_seq", is_sampled, log=True),
                  training_charts.logged_chart(training_frames.logged_frame(trajectories["naive"]), "naive",
                                               ESTIMATORS["naive"].colour)]
    built.append(training_charts.sga_chart(training_frames.second_order_frame(exact, np.logspace(-2, 2, 9), toy.J),
                                           training_frames.monte_carlo_frame(monte, exact), 1.0))
    stepped = built[0].to_dict()                                         # the J chart draws a step axis
    assert any(node.get("field") == "step" and "axis" in node for node in spec_nodes(stepped))
    for chart in built:
        spec = chart.to_dict()
        json.dumps(spec)
        assert spec["config"]["axis"]["labelFontSize"] >= 13
        for node in spec_nodes(spec):
            if node.get("field") == "estimator" and "scale" in node:
                assert node["scale"] == {"domain": list(ESTIMATORS), "range": [e.colour for e in ESTIMATORS.values()]}
            if node.get("field") == "step" and "axis" in node:                 # whole steps, no tick at 0.5
                assert node["axis"]["format"] == "d" and node["axis"]["tickMinStep"] == 1


def test_sampled_chart_has_bands_and_expected_does_not(expected, sampled):
    def marks(chart):
        return {node["mark"]["type"] if isinstance(node["mark"], dict) else node["mark"]
                for node in spec_nodes(chart.to_dict()) if "mark" in node}
    assert "area" in marks(training_charts.objective_chart(training_frames.curve_frame(sampled), True))
    assert "area" not in marks(training_charts.objective_chart(training_frames.curve_frame(expected), False))


def test_empty_selection_gives_empty_frames():
    assert training_frames.curve_frame({}).empty
    assert isinstance(training_frames.monte_carlo_frame({}, {}), pd.DataFrame)


def test_a_log_axis_leaves_out_the_steps_where_chi2_is_exactly_zero():
    """With top-p 0.95, top-k 3, τ 0.75 and bf16 logits, naive's run makes χ²_seq exactly 0 on μ's support from some
    step on: its log chart leaves those steps out, its linear frame keeps every one."""
    toy = make_toy(6, 4, 0.3, 0, top_p=0.95, top_k=3, temperature=0.75, precision="bf16")
    run = train(toy, {"on_policy": {}, "naive": {}}, "none", TrainingConfig(steps=100))
    zero = run["naive"].chi2_seq == 0
    assert 0 < zero.sum() < len(zero)
    curves = training_frames.curve_frame(run)
    linear = training_frames.quantity_curves(curves, "chi2_seq", False)
    logged = training_frames.quantity_curves(curves, "chi2_seq", False, log=True)
    naive = logged[logged["estimator"] == "naive"]
    np.testing.assert_array_equal(naive["step"], np.flatnonzero(~zero))
    assert len(linear) - len(logged) == zero.sum() and (logged["median"] > 0).all()


def test_a_marks_number_at_the_last_step_stands_before_its_ring(expected):
    """A lesson's ring at the run's last step had its number after it, beyond the plot, on the legend (lesson 12's
    '3' on 'estimator'): there it is drawn right-aligned before the ring; a ring inside the run keeps it after."""
    curves = training_frames.curve_frame(expected)
    last = int(curves["step"].max())
    J = curves[(curves["estimator"] == "naive") & (curves["quantity"] == training_frames.QUANTITIES["J"])] \
        .set_index("step")["median"]
    marks = mark_frame([Mark("training_J", "inside", 10, float(J[10])), Mark("training_J", "at the end", last,
                                                                             float(J[last]))])
    spec = training_charts.objective_chart(curves, False, marks=marks).to_dict()
    layers = {node["name"]: node for node in spec_nodes(spec) if str(node.get("name", "")).startswith("lesson_mark")}
    after, before = layers[MARK_NAMES["number"]], layers[MARK_NAMES["number_before"]]
    assert (after["mark"]["align"], before["mark"]["align"]) == ("left", "right") and before["mark"]["dx"] < 0
    numbers = {name: [row["number"] for row in spec["datasets"][layers[name]["data"]["name"]]]
               for name in (MARK_NAMES["number"], MARK_NAMES["number_before"])}
    assert numbers == {MARK_NAMES["number"]: ["1"], MARK_NAMES["number_before"]: ["2"]}


def test_the_staleness_view_keeps_the_update_but_its_anchor_and_ignores_what_it_sets_itself():
    from toylab.training.staleness import OBJECTIVES, staleness
    toy = make_toy(4, 3, 0.7, 1)
    update = Update("bypass", epochs=3, weights_at="current")
    result = staleness(toy, "logged", TrainingConfig(6, update=update), lags=(2,))
    ignored = staleness(toy, "logged", TrainingConfig(6, mode="sampled", N=4096, runs=3, lag=5,
                                                      update=replace(update, anchor="rollout")), lags=(2,))
    assert ignored.J == result.J and np.array_equal(ignored.on_policy_curve, result.on_policy_curve)
    anchor, id = OBJECTIVES["decoupled"]
    runs = train(toy, {id: {}}, "logged", TrainingConfig(6, update=replace(update, anchor=anchor), lag=2))
    assert result.J["decoupled"] == (float(runs[id].J[-1]),)           # weights_at="current" kept
    anchored = staleness(toy, "logged", TrainingConfig(6, update=replace(update, weights_at="anchor")), lags=(2,))
    assert anchored.J["decoupled"] != result.J["decoupled"]


def test_the_policy_curves_are_the_records():
    runs = train(make_toy(4, 3, 0.7, 1), {"on_policy": {}, "tok_is": {}}, "logged",
                 TrainingConfig(8, update=Update("bypass", epochs=2), lag=1))
    curves = training_frames.curve_frame(runs, training_frames.CURVES + training_frames.POLICY_CURVES)
    for quantity in training_frames.POLICY_CURVES:
        rows = curves[(curves["estimator"] == "tok_is") & (curves["quantity"] == training_frames.QUANTITIES[quantity])]
        assert rows["median"].tolist() == getattr(runs["tok_is"], quantity).tolist()
    assert set(training_frames.curve_frame(runs)["quantity"]) == {training_frames.QUANTITIES[q]
                                                                  for q in training_frames.CURVES}


def test_a_quantity_constant_to_rounding_is_said_in_words_as_its_value():
    """A quantity whose values differ only in a sum's last bits (R3's PPO KL about 0) is one value, said as a
    sentence instead of a chart whose ticks would be rounding's digits; a real change, or a NaN, keeps the chart."""
    def curves(values):
        return pd.DataFrame({"quantity": training_frames.QUANTITIES["ppo_kl"], "estimator": "naive",
                             "step": range(len(values)), "median": values, "q10": values, "q90": values})
    assert training_frames.constant_value(curves([1e-17, -2e-17, 0.0]), "ppo_kl") == 0.0
    assert str(training_frames.constant_value(curves([-1e-17, -1e-17]), "ppo_kl")) == "0.0"      # not "-0.0"
    assert training_frames.constant_value(curves([0.25, 0.25 + 1e-14]), "ppo_kl") == 0.25
    assert training_frames.constant_value(curves([0.0, 1e-9]), "ppo_kl") is None
    assert training_frames.constant_value(curves([0.0, float("nan")]), "ppo_kl") is None
    assert training_frames.constant_value(curves([0.0, 0.0]), "w_std") is None                  # not recorded
