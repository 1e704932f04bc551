"""The staleness view's frames hold the library's runs, its charts draw them on J's whole axis, and its words say what
the runs show, each read here from the runs directly."""

import numpy as np
import pandas as pd

from toylab import make_toy
from toylab.lessons.lesson import Mark
from toylab.presentation import staleness_charts, staleness_frames
from toylab.presentation.charts import MARK_NAMES
from toylab.presentation.frames import mark_frame
from toylab.training.loop import TrainingConfig
from toylab.training.staleness import LAGS, reading, staleness

RESULT = staleness(make_toy(4, 3, 0.7, 1), "logged", TrainingConfig(12), cap=2.0)


def test_the_curve_frame_holds_every_run_and_its_reference():
    frame, found = staleness_frames.curve_frame(RESULT)
    assert list(frame["objective"].unique()) == ["bypass", "decoupled", "recompute", "capped"] == list(found)
    for objective, curves in RESULT.curves.items():
        rows = frame[frame["objective"] == objective]
        np.testing.assert_array_equal(rows.loc[rows["series"] == "on_policy", "J"], RESULT.on_policy_curve)
        for lag, curve in zip(LAGS, curves, strict=True):
            np.testing.assert_array_equal(rows.loc[rows["series"] == str(lag), "J"], curve)
            assert rows.loc[rows["series"] == str(lag), "step"].tolist() == list(range(13))


def test_the_steps_frame_reads_the_first_step_at_the_target():
    frame = staleness_frames.steps_frame(RESULT)
    target = 0.9 * RESULT.on_policy_curve[-1]
    for objective, curves in RESULT.curves.items():
        for lag, curve in zip(LAGS, curves, strict=True):
            row = frame[(frame["objective"] == objective) & (frame["lag"] == lag)].iloc[0]
            hits = np.flatnonzero(curve >= target)
            assert row["never"] == (len(hits) == 0)
            assert row["drawn"] == (hits[0] if len(hits) else 12 * (1 + staleness_frames.NEVER_AT))


def test_the_curves_chart_keeps_js_whole_axis_and_puts_a_mark_on_its_panel():
    frame, found = staleness_frames.curve_frame(RESULT)
    marks = mark_frame([Mark("training_staleness", "one", 12, float(RESULT.curves["decoupled"][-1, -1]),
                             panel="decoupled")])
    spec = staleness_charts.curves_chart(frame, RESULT.lags, "fixed", RESULT.target, marks,
                                         labels=staleness_frames.legend_words(found)).to_dict()
    assert [panel["title"] for panel in spec["hconcat"]] == ["bypass", "decoupled", "recompute", "capped"]
    assert all(panel["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, 1] for panel in spec["hconcat"])
    rings = [index for index, panel in enumerate(spec["hconcat"]) for layer in panel["layer"]
             if str(layer.get("name", "")).startswith(MARK_NAMES["ring"])]
    assert rings == [1] and spec["autosize"]["type"] == "pad"


def test_the_words_on_saturation_and_on_a_lag_ahead():
    flat = staleness(make_toy(4, 3, 0.3, 1), "none", TrainingConfig(60, lr=10.0), lags=(0, 4))   # some saturate
    ends = [J for curves in flat.curves.values() for J in curves[:, -1]]
    saturated = sum(J >= 0.98 for J in ends)
    assert 0 < saturated
    note = staleness_frames.saturation_note(flat)
    assert (f"{saturated} of the {len(ends)} runs" in note or (saturated == len(ends) and "every run" in note)) \
        if saturated else note == ""
    read = reading(RESULT)
    for objective, curves in RESULT.curves.items():
        words = staleness_frames.ahead_words(read, objective)
        lead = max(max(0.0, float(np.max(curve - curves[0]))) for curve in curves[1:])
        assert (words == "") == (not any(read.ahead(objective)))
        if words:
            assert f"by up to {lead:.3f} in J" in words


def test_the_population_frame_marks_the_current_toy():
    readings = {seed: reading(staleness(make_toy(3, 3, 0.5, seed), "none", TrainingConfig(6), lags=(0, 2)))
                for seed in (0, 1, 2)}
    frame = staleness_frames.population_frame(readings, 1)
    assert set(frame.loc[frame["current"], "seed"]) == {1}
    assert len(frame) == 3 * 3 * 2 and isinstance(frame, pd.DataFrame)
    spec = staleness_charts.population_chart(frame, 6, "fixed").to_dict()
    assert len(spec["hconcat"]) == 3
