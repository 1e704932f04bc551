"""The seeds views as the page draws them: each toy's number read back from the chart and checked against the library
(and the dense oracle on two toys), the ranks, counts and words recomputed here, the population's seeds, the link."""

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dense import DenseToy
from streamlit.testing.v1 import AppTest

from toylab import make_toy
from toylab.engine.moments import exact_moments_many
from toylab.state.settings import Settings
from toylab.training.loop import TrainingConfig, train
from toylab.training.staleness import LAGS, staleness

APP = str(Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py")


def _open(query):
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def _strip(at):
    """The seeds chart's rows: estimator, seed, value, rank, current."""
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "vega_lite_chart" and "30 toys" in json.dumps(json.loads(child.proto.spec).get("title")):
                found.extend(pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
                             for d in child.proto.datasets)
            walk(child)
    walk(at._tree)
    return found


def _ranks(values, lowest_first):
    """1 + how many numbers are strictly better: ties share the better rank."""
    sign = 1 if lowest_first else -1
    return {id: 1 + sum(sign * other < sign * value and not np.isclose(other, value, rtol=1e-12, atol=0)
                        for other in values.values()) for id, value in values.items()}


def _check_table_and_words(at, values, current, lowest_first):
    ranked = {seed: _ranks(numbers, lowest_first) for seed, numbers in values.items()}
    table = at.dataframe[-1].value.set_index("estimator")
    for id in values[current]:
        assert table.loc[id, "rank"] == ranked[current][id]
        assert table.loc[id, "same_rank"] == sum(r[id] == ranked[current][id] for r in ranked.values())
        assert table.loc[id, "first"] == sum(r[id] == 1 for r in ranked.values())
        assert table.loc[id, "toys"] == len(values)
    same = sum(r == ranked[current] for r in ranked.values())
    here = ranked[current]
    order = " · ".join(f"{rank} {', '.join(id for id in values[current] if here[id] == rank)}"
                       for rank in sorted(set(here.values())))
    assert any(f"on this toy: {order}." in caption.value for caption in at.caption), order
    assert any(f"{same} of {len(values)} toys rank every estimator the same way" in caption.value
               for caption in at.caption)


def _read(frames):
    rows = pd.concat([frame for frame in frames if "rank" in frame])
    values = {}
    for row in rows.itertuples():
        values.setdefault(int(row.seed), {})[row.estimator] = row.value
    currents = set(rows.loc[rows["current"], "seed"])
    return values, rows, currents


@pytest.mark.slow
def test_the_estimators_seeds_view_ranks_thirty_toys_by_their_exact_rmse():
    at = _open({"est_seeds": "1"})
    values, rows, currents = _read(_strip(at))
    settings = Settings()
    assert sorted(values) == list(range(30)) and currents == {0}
    for seed in values:
        moments = exact_moments_many(make_toy(settings.T, settings.V, settings.mismatch, seed),
                                     settings.selection(exact_only=True), settings.baseline)
        for id, number in values[seed].items():
            assert number == pytest.approx(moments[id].rel_rmse(settings.N), rel=1e-12)
    for seed in (0, 17):                                             # the dense oracle, summed over every sequence
        toy = make_toy(settings.T, settings.V, settings.mismatch, seed)
        dense = DenseToy(toy)
        scale = np.linalg.norm(dense.true_grad)
        for id in ("naive", "tok_tis", "seq_is", "geo_rs"):
            _, bias, var = dense.moments(id, settings.params(id), settings.baseline)
            assert values[seed][id] == pytest.approx(np.sqrt(bias**2 + var / settings.N) / scale, rel=1e-9)
    _check_table_and_words(at, values, 0, lowest_first=True)
    assert at.query_params == {"est_seeds": "1"}


def test_a_seed_beyond_the_thirty_is_read_with_seeds_0_to_28():
    at = _open({"est_seeds": "1", "seed": "37", "est": "naive,tok_is,seq_is"})
    values, _, currents = _read(_strip(at))
    assert sorted(values) == [*range(29), 37] and currents == {37}
    assert any("seeds 37 and 0–28" in caption.value for caption in at.caption)


def test_a_toy_too_large_for_thirty_is_refused_with_the_reason():
    at = _open({"est_seeds": "1", "T": "10"})
    assert not _strip(at)
    assert any("up to 262,144 sequences a toy" in info.value for info in at.info)


@pytest.mark.slow
def test_the_training_seeds_view_is_each_toys_own_run():
    at = _open({"tab": "Training", "train_seeds": "1", "train_steps": "20"})
    values, _, currents = _read(_strip(at))
    settings = Settings()
    assert sorted(values) == list(range(30)) and currents == {0}
    for seed in values:
        runs = train(make_toy(settings.T, settings.V, settings.mismatch, seed),
                     {"on_policy": {}} | settings.selection(exact_only=True), settings.baseline, TrainingConfig(20))
        assert values[seed] == pytest.approx({id: run.J[-1] for id, run in runs.items()}, rel=1e-12)
    _check_table_and_words(at, values, 0, lowest_first=False)
    ends = [number for numbers in values.values() for number in numbers.values()]
    saturated = sum(J >= 0.98 for J in ends)
    assert any(f"Saturated: {saturated} of the {len(ends)} runs end within 0.02 of J = 1" in caption.value
               for caption in at.caption) == (saturated > 0)


def test_the_training_seeds_view_asks_for_expected_mode():
    at = _open({"tab": "Training", "train_seeds": "1", "train_mode": "sampled", "train_steps": "10"})
    assert any("Across seeds trains in expected mode" in info.value for info in at.info)


@pytest.mark.slow
def test_the_staleness_seeds_view_is_each_toys_own_runs():
    at = _open({"tab": "Training", "staleness": "1", "staleness_seeds": "1", "train_steps": "20"})
    frames = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "vega_lite_chart" and "on 30 toys" in json.dumps(json.loads(child.proto.spec).get("title")):
                frames.extend(pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
                              for d in child.proto.datasets)
            walk(child)
    walk(at._tree)
    rows = pd.concat(frames).drop_duplicates(["seed", "objective", "lag"])
    settings = Settings()
    ahead, behind, ordered = {}, {}, [0] * len(LAGS)
    for seed in range(30):
        steps_of = {}
        result = staleness(make_toy(settings.T, settings.V, settings.mismatch, seed), "none", TrainingConfig(20))
        target = 0.9 * result.on_policy_curve[-1]
        for objective, curves in result.curves.items():
            steps = []
            for lag, curve in zip(LAGS, curves, strict=True):
                row = rows[(rows["seed"] == seed) & (rows["objective"] == objective) & (rows["lag"] == lag)].iloc[0]
                hits = np.flatnonzero(curve >= target)
                steps.append(int(hits[0]) if len(hits) else None)
                assert bool(row["never"]) == (steps[-1] is None)
                if steps[-1] is not None:
                    assert row["drawn"] == steps[-1]
            never = 10**9
            first = steps[0] if steps[0] is not None else never
            helped = any((s if s is not None else never) < first or np.any(curve > curves[0] + 1 / 150)
                         for s, curve in zip(steps[1:], curves[1:], strict=True))
            ahead[objective] = ahead.get(objective, 0) + helped
            behind[objective] = behind.get(objective, 0) + ((steps[-1] if steps[-1] is not None else never) > first)
            steps_of[objective] = [s if s is not None else never for s in steps]
        for index in range(len(LAGS)):
            d, r, b = (steps_of[o][index] for o in ("decoupled", "recompute", "bypass"))
            ordered[index] += d <= r <= b
    words = next(caption.value for caption in at.caption if caption.value.startswith("Across the 30 toys (seeds"))
    for objective, count in ahead.items():
        assert re.search(rf"{objective}: ahead of its run at lag 0 at some lag on {count} of 30 toys; later to the "
                         rf"target at 16 than at 0 on {behind[objective]}", words)
    assert "at lag " + ", ".join(f"{lag} on {count}" for lag, count in zip(LAGS, ordered, strict=True)) + " of 30" \
        in words


def test_the_staleness_seeds_view_reads_the_frozen_population_where_there_is_one(monkeypatch):
    """At the page's defaults (one of ``staleness_evidence``'s entries) the seeds view trains nothing: its 30 toys are
    the frozen population's (whose currency tests/training/test_staleness_evidence.py checks), drawn as the file holds
    them, and its counts are theirs; at a seed beyond 29 its population is another, which it trains."""
    from toylab.training.staleness import tally
    from toylab.training.staleness_evidence import frozen
    from toylab_app.caches import seeds_cache

    readings = frozen()["page defaults"]["at this setting"]
    trained = []

    def recorded(keys, *rest):                     # stands in for the training: which populations it was asked for
        trained.append([key[3] for key in keys])
        return dict(zip([key[3] for key in keys], readings, strict=True))

    monkeypatch.setattr(seeds_cache, "staleness_readings", recorded)
    monkeypatch.setattr(seeds_cache, "refusal", lambda *args, **kwargs: None)     # not refused, whatever the load
    at = _open({"tab": "Training", "staleness": "1", "staleness_seeds": "1"})
    assert trained == []
    frames = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "vega_lite_chart" and "on 30 toys" in json.dumps(json.loads(child.proto.spec).get("title")):
                frames.extend(pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
                              for d in child.proto.datasets)
            walk(child)
    walk(at._tree)
    rows = pd.concat(frames).drop_duplicates(["seed", "objective", "lag"])
    assert sorted(set(rows["seed"])) == list(range(30)) and set(rows.loc[rows["current"], "seed"]) == {0}
    for seed, reading in enumerate(readings):
        for objective, steps in reading.steps.items():
            for lag, step in zip(reading.lags, steps, strict=True):
                row = rows[(rows["seed"] == seed) & (rows["objective"] == objective) & (rows["lag"] == lag)].iloc[0]
                assert bool(row["never"]) == (step is None) and (step is None or row["drawn"] == step)
    counts = tally(readings)
    words = next(caption.value for caption in at.caption if caption.value.startswith("Across the 30 toys (seeds"))
    assert all(f"on {counts.ahead[objective]} of 30 toys" in words for objective in counts.ahead)
    _open({"tab": "Training", "staleness": "1", "staleness_seeds": "1", "seed": "40"})
    assert trained == [[40, *range(29)]]
