"""The staleness view as the page draws it, at its defaults and at the stale-rollouts lesson's setting: what its charts
draw, read back from their data and checked against the library and a direct reading here — J's whole axis, the
steps to the target, which runs are said to have saturated — and the rule that no line a reader would take as
"staleness helps" is drawn without the page saying how often that holds across the population."""

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from toylab import make_toy
from toylab.lessons import training as lessons
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.state.query import TRAINING, VIEW_DEFAULTS, to_query, view_query
from toylab.state.settings import Settings
from toylab.training.loop import REACHED, TrainingConfig
from toylab.training.staleness import LAGS, OBJECTIVES, SATURATED, VISIBLE, staleness, staleness_population
from toylab.training.staleness_evidence import ENTRIES

APP = str(Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py")


def _charts(at):
    """[(spec, {dataset name: DataFrame})] of every chart the run drew."""
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "vega_lite_chart":
                found.append((json.loads(child.proto.spec),
                              {d.name: pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
                               for d in child.proto.datasets}))
            walk(child)
    walk(at._tree)
    return found


def _open(query):
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def _curves_chart(charts):
    (found,) = [(spec, data) for spec, data in charts if "hconcat" in spec and "J against step" in str(spec["title"])]
    return found


def _drawn_curves(charts):
    """{objective: {series: J values by step}} as the learning curves draw them, and each panel's y domain."""
    spec, datasets = _curves_chart(charts)
    frame = next(frame for frame in datasets.values() if "series" in frame)
    domains = [panel["layer"][0]["encoding"]["y"]["scale"]["domain"] for panel in spec["hconcat"]]
    curves = {objective: {series: rows.sort_values("step")["J"].to_numpy()
                          for series, rows in panel.groupby("series", observed=True)}
              for objective, panel in frame.groupby("objective", sort=False, observed=True)}
    return curves, domains


def _first(J, target):
    hits = np.flatnonzero(J >= target)
    return int(hits[0]) if len(hits) else None


def _ahead_on_drawn(curves):
    """Objectives whose drawn lines a reader would take as "staleness helps": a lag's line visibly above the first
    lag's at some step, or reaching the target sooner — read from the chart's own data."""
    ahead = []
    for objective, lines in curves.items():
        target = REACHED * lines["on_policy"][-1]
        base, first = lines[str(LAGS[0])], _first(lines[str(LAGS[0])], target)
        for lag in LAGS[1:]:
            line = lines[str(lag)]
            steps = _first(line, target)
            sooner = steps is not None and (first is None or steps < first)
            if sooner or np.any(line > base + VISIBLE):
                ahead.append(objective)
                break
    return ahead


def _check_view(at, toy, baseline, config, entry):
    charts = _charts(at)
    curves, domains = _drawn_curves(charts)
    assert domains == [[0, 1]] * len(OBJECTIVES)                      # J's whole axis on every panel: no zoom
    result = staleness(toy, baseline, config)
    for objective, lines in curves.items():                           # every line the library's run
        np.testing.assert_array_equal(lines["on_policy"], result.on_policy_curve)
        for lag, curve in zip(LAGS, result.curves[objective], strict=True):
            np.testing.assert_array_equal(lines[str(lag)], curve)
    (steps_spec, steps_data), = [(s, d) for s, d in charts if "steps to the target" in str(s.get("title", ""))
                                 and "layer" in s]
    drawn = pd.concat([frame for frame in steps_data.values() if "drawn" in frame])     # reached, and never
    for objective, lines in curves.items():                           # the steps, read off the drawn curves
        target = REACHED * lines["on_policy"][-1]
        for lag in LAGS:
            row = drawn[(drawn["objective"] == objective) & (drawn["lag"] == lag)].iloc[0]
            steps = _first(lines[str(lag)], target)
            assert (row["never"], None if row["never"] else int(row["steps"])) == (steps is None, steps)
    captions = " ".join(caption.value for caption in at.caption)
    ends = [line[-1] for lines in curves.values() for series, line in lines.items() if series != "on_policy"]
    saturated = sum(J >= 1 - SATURATED for J in ends)
    if saturated:
        which = "every run" if saturated == len(ends) else f"{saturated} of the {len(ends)} runs"
        assert f"Saturated: after {config.steps} steps {which}" in captions
    else:
        assert "Saturated:" not in captions
    target = REACHED * next(iter(curves.values()))["on_policy"][-1]
    assert f"{target:.4f} (the table's" in captions
    ahead = _ahead_on_drawn(curves)
    for objective in ahead:                                            # how far ahead, and whether sooner
        lines = curves[objective]
        lead = max(max(0.0, float(np.max(lines[str(lag)] - lines[str(LAGS[0])]))) for lag in LAGS[1:])
        first = _first(lines[str(LAGS[0])], target)
        sooner = [lag for lag in LAGS[1:] if (s := _first(lines[str(lag)], target)) is not None
                  and (first is None or s < first)]
        words = re.search(rf"puts {objective} ahead of its run at lag 0 \(by up to ([0-9.]+) in J at some step; the "
                          r"target (no sooner|sooner at [^)]+)\)", captions)
        assert words and words[1] == f"{lead:.3f}" and (words[2] == "no sooner") == (not sooner), (objective, words)
    groups = {label: [make_toy(at_.T, at_.V, at_.mismatch, seed) for seed in range(30)]
              for label, at_ in ENTRIES[entry].neighbours()}
    for objective in OBJECTIVES:
        if objective not in ahead:
            assert f"puts {objective} ahead" not in captions
            continue
        said = re.search(rf"{objective} on ((?:\d+ of 30 at [^,;.]+(?:, )?)+)", captions)
        assert said, f"{objective} is drawn ahead at a lag but the page does not say how often: {captions}"
        counts = dict((label, int(count)) for count, label in re.findall(r"(\d+) of 30 (at [^,;.]+)", said[1]))
        assert list(counts) == list(groups)
        for label, toys in groups.items():                           # each count, recomputed from the curves here
            population = staleness_population(toys, ENTRIES[entry].baseline, ENTRIES[entry].config)
            count = 0
            for one in population:
                lines = {str(lag): curve for lag, curve in zip(one.lags, one.curves[objective], strict=True)}
                count += objective in _ahead_on_drawn({objective: lines | {"on_policy": one.on_policy_curve}})
            assert counts[label] == count, (objective, label)
    return ahead


@pytest.mark.slow
def test_the_defaults_draw_learning_curves_and_say_how_often_a_lag_helps():
    at = _open({"tab": "Training", "staleness": "1"})
    defaults = Settings()
    ahead = _check_view(at, make_toy(*defaults.toy_key), defaults.baseline, TRAINING, "page defaults")
    assert ahead == ["decoupled"]              # seed 0: the decoupled run at lag 4–16 gets ahead mid-run


@pytest.mark.slow
def test_the_lessons_setting_draws_learning_curves_and_says_how_often_a_lag_helps():
    (lesson,) = [lesson for lesson in LESSONS if lesson.id == "stale_objectives_part"]
    chosen = lesson_settings(lesson)
    at = _open(to_query(chosen) | view_query(VIEW_DEFAULTS | view_of(lesson)))
    _check_view(at, make_toy(*chosen.toy_key), chosen.baseline, lessons.STALE, "stale rollouts lesson")


def test_the_views_controls_are_in_the_link_and_the_cap_adds_its_run():
    at = _open({"tab": "Training", "staleness": "1", "train_steps": "20", "staleness_draw": "uniform",
                "staleness_cap": "5"})
    curves, _ = _drawn_curves(_charts(at))
    assert list(curves) == [*OBJECTIVES, "capped"]
    result = staleness(make_toy(*Settings().toy_key), "none", TrainingConfig(20), draw="uniform", cap=5.0)
    np.testing.assert_array_equal(curves["capped"]["16"], result.curves["capped"][-1])
    captions = " ".join(caption.value for caption in at.caption)
    assert "s drawn from 0 … η for each batch" in captions and "areal:token_mask, w·1[w ≤ 5]" in captions
    assert at.query_params["staleness_draw"] == "uniform" and at.query_params["staleness_cap"] == "5"
    assert "Whether that holds beyond this toy: turn on Across seeds." in captions or "Staleness helps?" not in captions
