"""The matched toy: its KL curve against the diagnostics, the inversion, the clamps, and the example log's
generating mismatch recovered within its standard error."""


import numpy as np
import pytest
from rollout_logs import EXAMPLES

from examples.make_example_log import TOY
from toylab import make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.your_run.log import load_log
from toylab.your_run.matching import (
    comparison,
    comparison_frame,
    inverse_kl,
    kl_slope,
    match_toy,
    matched_length,
    per_token_kl,
    tail_shares,
    toy_curve,
)
from toylab.your_run.statistics import Estimate, log_statistics


@pytest.fixture(scope="module")
def statistics():
    return log_statistics(load_log(str(EXAMPLES / "rollouts_per_sequence.parquet")))


def test_the_curve_is_the_toy_and_its_kl(statistics):
    curve = toy_curve(5, 3, 2)
    for m in (0.0, 0.3, 1.7):
        toy, reference = curve(m), make_toy(5, 3, m, 2)
        np.testing.assert_array_equal(toy.log_mu, reference.log_mu)
        assert per_token_kl(toy) == pytest.approx(diagnostics(reference).kl_mu_pi / 5, rel=1e-12)


def test_the_slope_is_the_derivative_and_the_curve_increases():
    curve = toy_curve(6, 4, 0)
    for m in (0.05, 0.5, 1.5):
        h = 1e-6
        numeric = (per_token_kl(curve(m + h)) - per_token_kl(curve(m - h))) / (2 * h)
        assert kl_slope(curve(m)) == pytest.approx(numeric, rel=1e-6)
    values = [per_token_kl(curve(m)) for m in np.linspace(0, 2, 81)]
    assert values[0] == pytest.approx(0, abs=1e-15) and np.all(np.diff(values) > 0)


@pytest.mark.parametrize("m", [0.01, 0.3, 0.77, 1.99])
def test_inverse_kl_returns_the_mismatch(m):
    curve = toy_curve(7, 3, 4)
    assert inverse_kl(curve, per_token_kl(curve(m))) == pytest.approx(m, abs=1e-12)


def test_tail_shares_sum_the_sampler_probabilities_beyond():
    toy = make_toy(4, 5, 0.6, 1)
    shares = tail_shares(toy, (0.2, 1.0))
    for c, share in shares.items():
        expected = np.mean([sum(toy.mu[t, v] for v in range(5) if abs(toy.log_rho[t, v]) > c) for t in range(4)])
        assert share == pytest.approx(expected, rel=1e-12)


def test_clamps_at_both_ends():
    low = match_toy(Estimate(-0.01, 0.005), 6, 4, 0)
    assert (low.mismatch, low.clamped, low.toy_kl) == (0.0, "zero", 0.0) and low.mismatch_se is None
    high = match_toy(Estimate(5.0, 0.1), 6, 4, 0)
    assert (high.mismatch, high.clamped) == (2.0, "top") and high.top_kl < 5.0
    assert high.toy_kl == pytest.approx(high.top_kl) and high.interval == (2.0, 2.0)


def test_matched_length_is_capped_at_the_page_limit():
    assert matched_length(55.1, 4) == 11 and matched_length(3.4, 4) == 3 and matched_length(0.2, 2) == 1
    assert matched_length(500, 2) == 22 and matched_length(500, 8) == 7


def test_the_example_gives_back_its_generating_mismatch(statistics):
    """k1 ± se through the toy's exact KL curve: the example was drawn at mismatch 0.5 from this very toy."""
    match = match_toy(statistics.k1, TOY["T"], TOY["V"], TOY["seed"])
    assert match.clamped is None and 0 < match.mismatch_se < 0.05 * TOY["mismatch"]     # tight enough to fail
    assert abs(match.mismatch - TOY["mismatch"]) <= 3 * match.mismatch_se
    low, high = match.interval
    assert low < match.mismatch < high
    assert (high - low) / 2 == pytest.approx(match.mismatch_se, rel=0.05)   # the linearised se fits the curve
    assert match.toy_kl == pytest.approx(statistics.k1.value, rel=1e-12)


def test_the_comparison_words(statistics):
    same_toy = comparison(match_toy(statistics.k1, 6, 4, 0), statistics)
    assert "At mismatch 0.508 ± 0.008" in same_toy[0]
    assert all(line.endswith("consistent.") for line in same_toy[1:5])
    assert same_toy[5] == "So per token the toy is a fair stand-in for this run."
    assert "the data's 55 on average" in same_toy[6]
    other_toy = comparison(match_toy(statistics.k1, 11, 4, 0), statistics)
    assert "the data's is 0.41× the toy's" in other_toy[4] and "lighter tails" in other_toy[5]
    clamped = comparison(match_toy(Estimate(9.0, 0.1), 6, 4, 0), statistics)
    assert clamped[0].startswith("Even the page's largest mismatch, 2, gives the toy")


def test_the_comparison_frame_keeps_data_and_toy_apart(statistics):
    match = match_toy(statistics.k1, 6, 4, 0)
    frame = comparison_frame(match, statistics)
    assert list(frame.columns) == ["quantity", "data", "se", "toy", "toy_low", "toy_high"]
    assert frame["data"][1] == statistics.chi2_token.value and frame["toy"][1] == match.toy_chi2_token
    assert (frame["toy_low"] <= frame["toy"]).all() and (frame["toy"] <= frame["toy_high"]).all()
