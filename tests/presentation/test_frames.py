"""The page's frames hold the library's numbers, and their few own formulas agree with brute force."""

import math

import numpy as np
import pandas as pd
import pytest
from dense import DenseToy

from toylab import exact_moments, exact_table, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.presentation import frames
from toylab.presentation.labels import text_size
from toylab.state.settings import Settings

SETTINGS = Settings(mismatch=0.7, seed=3, estimators=("on_policy", "naive", "tok_tis", "tok_mis", "seq_is",
                                                      "seq_tis", "seq_mis", "geo_rs", "geo_rs_tok_tis"),
                    thresholds=(("tok_tis", "C", 1.5), ("seq_mis", "C", 1.2), ("geo_rs", "hi", 1.1)), N=32)


@pytest.fixture(scope="module")
def toy():
    return make_toy(*SETTINGS.toy_key)


@pytest.fixture(scope="module")
def dense(toy):
    return DenseToy(toy)


@pytest.fixture(scope="module")
def moments(toy):
    return {id: exact_moments(toy, id, params, "logged") for id, params in SETTINGS.selection(True).items()}


def test_table_frame_equals_exact_table(toy, moments):
    table = frames.table_frame(moments, SETTINGS.N)
    expected = exact_table(toy, SETTINGS.selection(True), "logged", SETTINGS.N)
    assert list(table["estimator"]) == [row["estimator"] for row in expected]
    for row, want in zip(table.to_dict("records"), expected, strict=True):
        for column in ("rel_bias", "rel_std", "rel_rmse", "cosine", "tokens_affected", "sequences_affected",
                       "unbiased"):
            assert row[column] == want[column]
        assert row["params"] == frames.params_text(want["params"])


def test_iso_rmse_circles_have_the_level_as_radius(moments):
    table = frames.table_frame(moments, 64)
    iso = frames.iso_rmse_frame(table)
    assert len(iso) and np.allclose(np.hypot(iso["rel_bias"], iso["rel_std"]), iso["level"])
    assert iso["level"].min() >= table["rel_rmse"].min() * 0.7 and iso["level"].max() <= table["rel_rmse"].max() * 1.3


def test_nice_levels():
    assert frames.nice_levels(0.15, 2.1) == [0.15, 0.2, 0.5, 0.7, 1.5, 2.0]     # 8 candidates, 6 spread evenly
    assert frames.nice_levels(0.68, 2.09) == [0.7, 1.0, 1.5, 2.0]
    assert len(frames.nice_levels(1e-3, 1e3)) == 6
    assert frames.nice_levels(0, 0) == []


def test_error_curve_is_sqrt_bias2_plus_var_over_N(moments):
    curves = frames.error_curve_frame(moments)
    for row in curves.sample(20, random_state=0).itertuples():
        m = moments[row.estimator]
        assert row.rel_rmse == pytest.approx(math.sqrt(m.bias**2 + m.var / row.N) / m.grad_norm, rel=1e-12)
    assert curves["N"].min() == 1 and curves["N"].max() == pytest.approx(1e5)


@pytest.mark.parametrize("reference, candidate, expected", [
    ((0.0, 4.0), (1.0, 2.0), 2.0), ((0.0, 1.0), (0.5, 2.0), 1.0), ((0.0, 1.0), (0.0, 2.0), math.inf),
    ((0.3, 1.0), (0.1, 0.5), math.inf), ((0.1, 9.0), (0.2, 1.0), 8 / 0.03)])
def test_crossover_n_cases(reference, candidate, expected):
    assert frames.crossover_n(*reference, *candidate) == pytest.approx(expected)


def test_crossover_is_where_the_rmse_curves_cross(moments):
    reference = moments["seq_is"]
    crossovers = frames.crossover_frame(moments, reference)
    assert set(crossovers["estimator"]) == {id for id, m in moments.items() if not m.unbiased}
    crossed = 0
    for row in crossovers.itertuples():
        m, n = moments[row.estimator], row.crossover_N
        if n > 1 and math.isfinite(n):
            crossed += 1
            assert reference.rel_rmse(n * 0.99) > m.rel_rmse(n * 0.99)
            assert reference.rel_rmse(n * 1.01) < m.rel_rmse(n * 1.01)
        elif n == 1:
            assert reference.rel_rmse(1) <= m.rel_rmse(1)
    assert crossed >= 3


def test_the_first_winning_batch_size_is_a_whole_number_found_by_counting(moments):
    """seq_is wins from first_N on and not at first_N − 1: checked batch size by batch size, up to 100,000."""
    reference = moments["seq_is"]
    sizes = np.arange(1, 100_001)
    for row in frames.crossover_frame(moments, reference).itertuples():
        m = moments[row.estimator]
        wins = reference.bias**2 + reference.var / sizes < m.bias**2 + m.var / sizes
        first = int(sizes[wins][0]) if wins.any() else math.nan
        if math.isnan(first):
            assert math.isnan(row.first_N) or row.first_N > 100_000
        else:
            assert row.first_N == first and float(row.first_N).is_integer()
            assert wins[first - 1:].all()                 # and at every larger batch size
            assert row.rel_rmse == pytest.approx(reference.rel_rmse(first), rel=1e-12)


@pytest.mark.parametrize("reference_bias, reference_var, bias, var, first", [
    (0.0, 2.0, 1.0, 1.0, 2),           # wins when N > 1: from 2
    (0.0, 307.1, 1.0, 1.0, 307),       # N > 306.1
    (0.0, 1.5, 1.0, 1.0, 1),           # N > 0.5: every N
    (0.0, 0.5, 1.0, 1.0, 1),           # less variance and less bias: every N
    (1.0, 1.0, 1.0, 2.0, None),        # same bias: it never wins outright
    (2.0, 1.0, 1.0, 2.0, None),        # more bias: never from some N on
])
def test_first_winning_n_by_hand(reference_bias, reference_var, bias, var, first):
    assert frames.first_winning_n(reference_bias, reference_var, bias, var) == first


def test_token_ratio_frame_and_batch_fractions(toy):
    tokens, _ = frames.sampled_batch(toy, 500, seed=1)
    frame = frames.token_ratio_frame(toy, tokens)
    assert len(frame) == toy.T * toy.V
    for row in frame.sample(8, random_state=0).itertuples():
        assert row.log_rho == pytest.approx(math.log(toy.pi[row.position, row.token] / toy.mu[row.position, row.token]))
        assert row.probability == toy.mu[row.position, row.token]
        assert row.batch == np.mean(tokens[:, row.position] == row.token)
    pooled = frames.pooled_token_frame(frame)
    assert pooled["probability"].sum() == pytest.approx(1) and pooled["batch"].sum() == pytest.approx(1)


def test_token_thresholds_match_brute_force(toy, dense):
    selection = SETTINGS.selection(True)
    per_position = frames.token_threshold_frame(toy, selection, per_position=True)
    pooled = frames.token_threshold_frame(toy, selection)
    for row in per_position.itertuples():
        rho_t = dense.rho[:, int(row.position)]
        hit = rho_t > row.value if row.side == "above" else rho_t < row.value
        assert row.log_value == pytest.approx(np.log(row.value))
        assert row.beyond == pytest.approx(dense.p_sampler @ hit, abs=1e-12)
    for row in pooled.itertuples():
        hit = dense.rho > row.value if row.side == "above" else dense.rho < row.value
        assert row.beyond == pytest.approx(dense.p_sampler @ hit.mean(axis=1), abs=1e-12)
    assert set(pooled["threshold"]) == {"tok_tis.C", "tok_mis.lo", "tok_mis.hi", "geo_rs_tok_tis.C"}


def test_trust_region_rules_sit_at_plus_and_minus_eps(toy, dense):
    pooled = frames.token_threshold_frame(toy, {"trm": {"eps": 0.3}})
    assert sorted(pooled["log_value"]) == [-0.3, 0.3]
    log_rho = np.log(dense.rho)
    for row in pooled.itertuples():
        hit = log_rho > 0.3 if row.side == "above" else log_rho < -0.3
        assert row.beyond == pytest.approx(dense.p_sampler @ hit.mean(axis=1), abs=1e-12)


@pytest.mark.parametrize("kind", ["W", "geo"])
def test_sequence_histogram_and_thresholds_match_brute_force(toy, dense, kind):
    tokens, log_W = frames.sampled_batch(toy, 300, seed=2)
    values = np.log(dense.W) / (1 if kind == "W" else toy.T)
    histogram = frames.sequence_histogram_frame(toy, kind, 40, log_W)
    edges = np.append(histogram["bin_start"], histogram["bin_end"].iloc[-1])
    assert edges[0] == pytest.approx(values.min()) and edges[-1] == pytest.approx(values.max())
    bin_of = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, 39)   # the last bin is closed
    assert np.allclose(histogram["probability"], np.bincount(bin_of, weights=dense.p_sampler, minlength=40),
                       rtol=1e-10, atol=1e-15)
    sample = log_W / (1 if kind == "W" else toy.T)
    assert np.array_equal(histogram["batch"], np.histogram(sample, edges)[0] / 300)
    for row in frames.sequence_threshold_frame(toy, SETTINGS.selection(True), kind).itertuples():
        ratio = np.exp(values)
        hit = ratio > row.value if row.side == "above" else ratio < row.value
        assert row.beyond == pytest.approx(dense.p_sampler @ hit, abs=1e-12)


def test_sampled_batch_log_W_is_the_sum_of_token_log_ratios(toy):
    tokens, log_W = frames.sampled_batch(toy, 50, seed=4)
    assert tokens.shape == (50, toy.T)
    for y, value in zip(tokens, log_W, strict=True):
        assert value == pytest.approx(sum(math.log(toy.pi[t, v] / toy.mu[t, v]) for t, v in enumerate(y)))
    assert np.array_equal(frames.sampled_batch(toy, 50, seed=4)[0], tokens)


def test_sequence_facts_match_brute_force(toy, dense):
    facts = frames.sequence_facts(toy)
    order = np.argsort(dense.W)
    median = dense.W[order][np.searchsorted(np.cumsum(dense.p_sampler[order]), 0.5)]
    assert facts["mean_W"] == pytest.approx(dense.p_sampler @ dense.W, rel=1e-12) == pytest.approx(1)
    assert facts["median_W"] == pytest.approx(median, rel=1e-12) and facts["median_W"] < 1
    assert facts["mean_log_W"] == pytest.approx(-diagnostics(toy).kl_mu_pi, rel=1e-10)
    assert facts["above_one"] == pytest.approx(dense.p_sampler @ (dense.W > 1), abs=1e-12)


def test_monte_carlo_frame_columns():
    rows = [{"estimator": "naive", "N": 1, "rms": 1.0, "q10": 0.5, "median": 0.9, "q90": 1.5}]
    assert list(frames.monte_carlo_frame(rows).columns) == ["estimator", "N", "rms", "q10", "median", "q90"]


def test_equal_thresholds_share_one_label_and_take_turns_in_the_dash(toy):
    selection = Settings(estimators=("seq_tis", "seq_mis", "geo_rs")).selection()     # seq_tis.C = seq_mis.C = 2
    thresholds = frames.sequence_threshold_frame(toy, selection, "W")
    assert list(frames.threshold_rule_frame(thresholds)["overlap"]) == [0, 1]
    (row,) = frames.threshold_label_frame(thresholds, (-5.0, 3.0)).itertuples()
    assert row.text.startswith("seq_tis.C = seq_mis.C · P(above) = ") and row.row_y < 0


@pytest.mark.parametrize("width", [240, 420, 1000])
def test_threshold_labels_get_a_row_each_and_stay_inside_the_narrowest_plot(toy, width):
    selection = Settings(estimators=("tok_tis", "tok_mis", "trm")).selection()
    thresholds = frames.token_threshold_frame(toy, selection)
    domain = frames.ratio_domain(toy.log_rho.ravel(), thresholds)
    labels = frames.threshold_label_frame(thresholds, domain, "P", width)
    assert len(labels) == len(set(labels["row_y"])) == thresholds["log_value"].round(12).nunique()
    for row in labels.itertuples():
        at = (row.log_value - domain[0]) / (domain[1] - domain[0]) * width
        text_width, _ = text_size(row.text, frames.FONT)
        left, right = (at, at + text_width) if row.align == "left" else (at - text_width, at)
        assert left >= -1e-9 and (right <= width + 1e-9 or left <= 1e-9)   # inside, or from the left edge on


def test_a_label_that_fits_neither_side_of_its_rule_covers_it_inside_the_plot():
    """geo_rs.hi's label sat about 100 px from its rule (lesson 7): one too wide for either side is centred on its rule,
    moved only as far as the plot's edge asks."""
    width, name = 480, "a_long_threshold_name.hi"
    for at in (0.3, 0.5, 0.62):
        thresholds = pd.DataFrame({"threshold": [name], "log_value": [at], "side": ["above"], "beyond": [0.0]})
        (row,) = frames.threshold_label_frame(thresholds, (0.0, 1.0), "P", width).itertuples()
        text_width, _ = text_size(row.text, frames.FONT)
        assert text_width > max(at, 1 - at) * width and row.align == "left"      # fits neither side
        left = row.log_value * width
        assert -1e-9 <= left and left + text_width <= width + 1e-9 and left < at * width < left + text_width
