"""No line hides another: the coincidence rule on Training's default view and on the Mismatch sweep at top_p = 0.9 and
bf16 (issue 24's two cases), checked against numpy on the same curves; the chart specs draw what the rule says; colours
of the default selection look apart (CIEDE2000, checked against Sharma, Wu and Dalal's published test pairs); the numpy
pairing of series against pandas' alignment on random frames."""

import json

import numpy as np
import pandas as pd
import pytest
from chart_specs import spec_nodes

from toylab.analysis import sweeps
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.toy import make_toy
from toylab.presentation import (
    coincidence,
    colours,
    sweep_charts,
    sweep_frames,
    training_charts,
    training_frames,
)
from toylab.state.query import DEFAULTS, parse_query
from toylab.training.loop import TrainingConfig, train

PLOT_HEIGHT = 300          # pixels: the J chart's plot in presentation mode
LINE_WIDTH = 2.5           # pixels


def _rows(spec):
    return [row for rows in spec["datasets"].values() for row in rows]


def _legend(spec):
    return next(node["legend"]["labelExpr"] for node in spec_nodes(spec) if isinstance(node.get("legend"), dict)
                and node.get("field") == "estimator" and "labelExpr" in node["legend"])


@pytest.fixture(scope="module")
def training_curves():
    toy = make_toy(*DEFAULTS.toy_key)
    runs = train(toy, DEFAULTS.selection(exact_only=True), DEFAULTS.baseline, TrainingConfig())
    return training_frames.curve_frame({id: runs[id] for id in DEFAULTS.estimators if id in runs})


def hidden_steps(curves, quantity, height=PLOT_HEIGHT):
    """{(later, earlier): share of steps where the later line (drawn over) covers the earlier one within a line's
    width in pixels}, straight from the curves with numpy: what a viewer would not see."""
    rows = training_frames.quantity_curves(curves, quantity, False)
    table = rows.pivot(index="step", columns="estimator", values="median")[list(dict.fromkeys(rows["estimator"]))]
    pixels = (table - table.min().min()) / (table.max().max() - table.min().min()) * height
    ids = list(table.columns)
    return {(later, earlier): float((np.abs(pixels[later] - pixels[earlier]) < LINE_WIDTH).mean())
            for index, later in enumerate(ids) for earlier in ids[:index]}


def test_on_trainings_default_view_every_line_that_hides_another_is_dashed_and_named(training_curves):
    """The issue: naive and tok_is had no visible pixel (geo_rs on naive, tok_tis and tok_mis on tok_is) and only
    seq_is = on_policy was said. Every line that covers another at 90 % of the steps (numpy, in pixels) now lies on it
    by the rule, and the J chart's data dashes it and its legend names it."""
    found = training_frames.coincident(training_curves, "J", False)
    lying = {c.id for c in found}
    covering = {later for (later, _), share in hidden_steps(training_curves, "J").items() if share >= 0.9}
    assert covering <= lying and {"seq_is", "geo_rs", "tok_tis"} <= lying
    by_id = {c.id: c for c in found}
    assert by_id["seq_is"].first == "on_policy" and by_id["seq_is"].everywhere
    assert by_id["geo_rs"].first == "naive" and not by_id["geo_rs"].everywhere and by_id["geo_rs"].within < 1e-6
    assert by_id["tok_tis"].first == "tok_is"
    words = training_frames.coincident_note(training_curves, False)
    assert "seq_is = on_policy" in words and "geo_rs ≈ naive" in words and "tok_tis ≈ tok_is" in words
    spec = training_charts.objective_chart(training_curves, False).to_dict()
    styles = {row["estimator"]: row["line"] for row in _rows(spec) if "line" in row}
    assert styles["on_policy"] == "reference" and all(styles[id].endswith(("of 1", "of 2", "of 3")) for id in lying)
    assert {styles[id] for id in lying if by_id[id].first == "tok_is"} == {"1 of 2", "2 of 2"}   # each in its phase
    assert "seq_is = on_policy here" in _legend(spec) and json.dumps("geo_rs ≈ naive") in _legend(spec)


def test_on_the_mismatch_sweep_at_top_p_09_and_bf16_seq_is_is_no_longer_hidden():
    """The issue: seq_is vanished under seq_tis and seq_mis after mismatch 0.5 (0.9656 for all three at mismatch 1),
    with no note. The part-range case: equal there, said where, and dashed over it."""
    settings, _ = parse_query({"top_p": "0.9", "precision": "bf16"})
    rows, _, _ = sweeps.sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch, settings.sampler,
                                      "mismatch", settings.selection(exact_only=True), settings.baseline, settings.N)
    frame = sweep_frames.sampler_frame(rows, "mismatch")
    bias = frame[frame["metric"] == "relative bias"].pivot(index="mismatch", columns="estimator", values="value")
    assert bias.loc[1.0, ["seq_is", "seq_tis", "seq_mis"]].round(4).tolist() == [0.9656] * 3
    tail = bias.index >= 0.5
    gap = np.abs(bias.loc[tail, "seq_tis"] - bias.loc[tail, "seq_is"]) / bias.loc[tail, "seq_is"]   # numpy, same rows
    assert gap.max() < 0.005 and (gap <= 1e-12).mean() > 0.7        # under a pixel from 0.5 on, equal at most points
    found = sweep_frames.coincident(frame, "mismatch", sweep_charts.drawn_panels(sweep_charts.SAMPLER_PANELS))
    on_seq_is = {c.id: c for c in found["relative bias", None] if c.first == "seq_is"}
    assert {"seq_tis", "seq_mis"} <= set(on_seq_is)
    assert set(bias.index[tail]) <= set(on_seq_is["seq_tis"].close) and not on_seq_is["seq_tis"].everywhere
    note = sweep_frames.coincident_note(found, "mismatch")
    assert "seq_tis ≈ seq_is at mismatch" in note and "≥ 0.5" in note
    spec = sweep_charts.sampler_chart(sweep_frames.styled(frame, found), pd.DataFrame(columns=["mismatch", "quantity",
                                                                                               "value"]),
                                      pd.DataFrame(columns=["mismatch", "value"]), 0.3,
                                      labels=sweep_frames.legend_words(found)).to_dict()
    styles = {(row["estimator"], row["metric"]): row["line"] for row in _rows(spec) if "line" in row}
    assert styles[("seq_is", "relative bias")] == "own"
    assert {styles[("seq_tis", "relative bias")], styles[("seq_mis", "relative bias")]} == {"1 of 2", "2 of 2"}
    assert json.dumps("seq_tis ≈ seq_is in part") in _legend(spec)         # not at mismatch 0.45


def test_a_coincidence_needs_a_run_not_a_shared_starting_point():
    """Lines that start at one point and part at once, or cross, hide nothing."""
    steps = np.arange(20)
    frame = pd.DataFrame({"estimator": ["a"] * 20 + ["b"] * 20 + ["c"] * 20,
                          "step": np.tile(steps, 3),
                          "median": np.concatenate([steps * 1.0, steps * 2.0, 19.0 - steps])})
    assert coincidence.coincidences(frame, "step", "median") == []
    frame.loc[frame["estimator"] == "b", "median"] = np.where(steps < 5, steps * 1.0, steps * 2.0)  # equal for 5 steps
    (found,) = coincidence.coincidences(frame, "step", "median")
    assert (found.id, found.first, found.equal) == ("b", "a", (0, 1, 2, 3, 4))
    assert coincidence.describe([found], "step") == "b = a at step ≤ 4"


def test_phased_dashes_show_each_colour_in_turn():
    """k of n: n dashes of 4 px in one period, each in its own phase, and a gap for the line under them."""
    for n in range(1, coincidence.MOST_ON_ONE + 1):
        period = 4 * (n + 1)
        shown = []
        for k in range(1, n + 1):
            pattern = coincidence.DASHES[f"{k} of {n}"]
            assert sum(pattern) == period
            start = sum(pattern[:-2]) if len(pattern) == 4 else 0
            shown.append((start, start + 4))
        assert shown == [(4 * i, 4 * i + 4) for i in range(n)]          # disjoint, the last 4 px left to the line


# Sharma, Wu and Dalal (2005), "The CIEDE2000 color-difference formula: implementation notes, supplementary test data,
# and mathematical observations", Color Res. Appl. 30(1), 21-30, Table 1: all 34 pairs (L1, a1, b1, L2, a2, b2, ΔE00).
SHARMA_TABLE = """
50.0000 2.6772 -79.7751 50.0000 0.0000 -82.7485 2.0425 | 50.0000 3.1571 -77.2803 50.0000 0.0000 -82.7485 2.8615
50.0000 2.8361 -74.0200 50.0000 0.0000 -82.7485 3.4412 | 50.0000 -1.3802 -84.2814 50.0000 0.0000 -82.7485 1.0000
50.0000 -1.1848 -84.8006 50.0000 0.0000 -82.7485 1.0000 | 50.0000 -0.9009 -85.5211 50.0000 0.0000 -82.7485 1.0000
50.0000 0.0000 0.0000 50.0000 -1.0000 2.0000 2.3669 | 50.0000 -1.0000 2.0000 50.0000 0.0000 0.0000 2.3669
50.0000 2.4900 -0.0010 50.0000 -2.4900 0.0009 7.1792 | 50.0000 2.4900 -0.0010 50.0000 -2.4900 0.0010 7.1792
50.0000 2.4900 -0.0010 50.0000 -2.4900 0.0011 7.2195 | 50.0000 2.4900 -0.0010 50.0000 -2.4900 0.0012 7.2195
50.0000 -0.0010 2.4900 50.0000 0.0009 -2.4900 4.8045 | 50.0000 -0.0010 2.4900 50.0000 0.0010 -2.4900 4.8045
50.0000 -0.0010 2.4900 50.0000 0.0011 -2.4900 4.7461 | 50.0000 2.5000 0.0000 50.0000 0.0000 -2.5000 4.3065
50.0000 2.5000 0.0000 73.0000 25.0000 -18.0000 27.1492 | 50.0000 2.5000 0.0000 61.0000 -5.0000 29.0000 22.8977
50.0000 2.5000 0.0000 56.0000 -27.0000 -3.0000 31.9030 | 50.0000 2.5000 0.0000 58.0000 24.0000 15.0000 19.4535
50.0000 2.5000 0.0000 50.0000 3.1736 0.5854 1.0000 | 50.0000 2.5000 0.0000 50.0000 3.2972 0.0000 1.0000
50.0000 2.5000 0.0000 50.0000 1.8634 0.5757 1.0000 | 50.0000 2.5000 0.0000 50.0000 3.2592 0.3350 1.0000
60.2574 -34.0099 36.2677 60.4626 -34.1751 39.4387 1.2644 | 63.0109 -31.0961 -5.8663 62.8187 -29.7946 -4.0864 1.2630
61.2901 3.7196 -5.3901 61.4292 2.2480 -4.9620 1.8731 | 35.0831 -44.1164 3.7933 35.0232 -40.0716 1.5901 1.8645
22.7233 20.0904 -46.6940 23.0331 14.9730 -42.5619 2.0373 | 36.4612 47.8580 18.3852 36.2715 50.5065 21.2231 1.4146
90.8027 -2.0831 1.4410 91.1528 -1.6435 0.0447 1.4441 | 90.9257 -0.5406 -0.9208 88.6381 -0.8985 -0.7239 1.5381
6.7747 -0.2908 -2.4247 5.8714 -0.0985 -2.2286 0.6377 | 2.0776 0.0795 -1.1350 0.9033 -0.0636 -0.5514 0.9082
"""
SHARMA = [(tuple(values[:3]), tuple(values[3:6]), values[6]) for values in
          ([float(v) for v in pair.split()] for line in SHARMA_TABLE.strip().splitlines() for pair in line.split("|"))]


@pytest.mark.parametrize("first, second, expected", SHARMA)
def test_colour_difference_matches_the_published_ciede2000_pairs(first, second, expected):
    assert len(SHARMA) == 34
    assert colours.lab_difference(first, second) == pytest.approx(expected, abs=5e-5)
    assert colours.lab_difference(second, first) == pytest.approx(expected, abs=5e-5)


def test_the_default_selections_colours_look_apart_and_alike_ones_get_a_dash():
    """geo_rs's teal was ΔE₀₀ 9.6 from tok_mis's green; every pair of the default selection is now 15 apart or more.
    Two registry colours that do look alike in one chart: the later line is dash-dotted."""
    ids = DEFAULTS.estimators
    closest = min(colours.difference(ESTIMATORS[a].colour, ESTIMATORS[b].colour)
                  for index, a in enumerate(ids) for b in ids[:index])
    assert closest >= 15
    assert colours.difference("#44AA99", ESTIMATORS["tok_mis"].colour) < colours.ALIKE
    alike = ("seq_is", "geo_tis")                   # #0072B2 and #4477AA: ΔE₀₀ 4.7
    assert colours.difference(*(ESTIMATORS[id].colour for id in alike)) < colours.ALIKE
    assert coincidence.line_styles([], list(alike)) == {"seq_is": "own", "geo_tis": "alike"}


def _pandas_pairs(frame, x, y, series, log):
    """The obvious way: each series a pandas Series by x (missing rows dropped, the first of a repeated x), each pair
    aligned by pandas (inner join); (id, first, shared x, equal x, close x) of every pair the rule compares."""
    tolerance = coincidence.APART * coincidence.span(frame[y], log)
    order = list(dict.fromkeys(frame[series]))
    curves = {id: frame.loc[frame[series] == id, [x, y]].dropna().drop_duplicates(x).set_index(x)[y] for id in order}
    pairs = []
    for index, id in enumerate(order):
        for first in order[:index]:
            a, b = curves[id].align(curves[first], join="inner")
            xs, a, b = list(a.index), a.to_numpy(float), b.to_numpy(float)
            equal = np.abs(a - b) <= coincidence.EXACT * np.maximum(np.abs(a), np.abs(b))
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = np.abs(np.log10(a) - np.log10(b)) if log else np.abs(a - b)
            close = equal | (gap <= tolerance)
            pairs.append((id, first, xs, [v for v, e in zip(xs, equal, strict=True) if e],
                          [v for v, c in zip(xs, close, strict=True) if c]))
    return pairs


@pytest.mark.parametrize("log", [False, True])
def test_the_rule_pairs_series_as_pandas_aligns_them(log):
    """On random frames (x unsorted and repeated, missing values, series equal, near or apart): the numpy pairing
    finds every coincidence the pandas pairing allows, at the same x values."""
    rng = np.random.default_rng(7)
    for _ in range(150):
        base, rows = rng.normal(size=12), []
        for id in [f"e{i}" for i in range(rng.integers(2, 6))]:
            xs = rng.choice(12, size=rng.integers(1, 12), replace=bool(rng.integers(2)))
            kind = rng.integers(3)
            for x in np.sort(xs) if rng.integers(2) else xs:
                y = base[x] if kind == 0 else base[x] + 1e-3 * rng.normal() if kind == 1 else rng.normal()
                rows.append((id, float(x), np.nan if rng.random() < 0.05 else abs(y) if log else y))
        frame = pd.DataFrame(rows, columns=["estimator", "step", "median"])
        pairs = {(id, first): (shared, equal, close) for id, first, shared, equal, close in
                 _pandas_pairs(frame, "step", "median", "estimator", log)}
        with np.errstate(divide="ignore", invalid="ignore"):
            found = coincidence.coincidences(frame, "step", "median", log=log)
        for c in found:
            shared, equal, close = pairs[(c.id, c.first)]
            assert (sorted(c.shared), sorted(c.equal), sorted(c.close)) == (sorted(shared), sorted(equal), sorted(close))
        for (id, _), (shared, equal, close) in pairs.items():       # a pair the rule takes is found for its id
            if shared and (coincidence._run(np.isin(shared, equal)) >= min(coincidence.RUN, len(shared))
                           or len(close) >= coincidence.HIDDEN * len(shared)):
                assert any(c.id == id for c in found)


def _at_mismatch_0(query):
    settings, _ = parse_query(query)
    rows, _, _ = sweeps.sampler_sweep(settings.T, settings.V, settings.seed, settings.mismatch, settings.sampler,
                                      "mismatch", settings.selection(exact_only=True), settings.baseline, settings.N)
    frame = sweep_frames.sampler_frame(rows, "mismatch")
    return frame[frame["mismatch"] == 0].pivot(index="estimator", columns="metric", values="value"), settings


def test_the_mismatch_sweeps_sentence_about_mismatch_0_holds_on_its_lines():
    """The caption said "every estimator coincides with naive" at mismatch 0; a rejection whose band leaves out ratio 1
    (rs with lo = 0.1 on k1 = −log ρ) rejects every token there: relative bias 1, naive's 0. It now says which
    estimators: those whose weight is 1 at ratio 1, each one at its default thresholds — all 110 exact ones here."""
    every = ",".join(id for id, e in ESTIMATORS.items() if e.exact)
    at_0, settings = _at_mismatch_0({"est": every})
    assert len(at_0) == sum(e.exact for e in ESTIMATORS.values())
    values, naive = at_0.to_numpy(), at_0.loc["naive"].to_numpy()
    assert (np.abs(values - naive) <= 1e-12 * np.maximum(np.abs(values), np.abs(naive)) + 1e-15).all()
    caption = sweep_frames.sampler_sweep_caption(settings, "mismatch", [])
    assert "an estimator whose weight is 1 at ratio 1 (each one at its default thresholds) coincides with naive" \
        in caption and "every estimator coincides" not in caption
    moved, _ = _at_mismatch_0({"est": "naive,rs", "rs.lo": "0.1"})
    assert moved.loc["rs", "relative bias"] == pytest.approx(1.0) and moved.loc["naive", "relative bias"] < 1e-12
