"""The matched toy: its KL curve against the diagnostics, the inversion, the clamps, and the example log's
generating mismatch recovered within its standard error."""


import numpy as np
import pytest
from messages import says
from rollout_logs import EXAMPLES

from examples.make_example_log import TOY
from toylab import make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import draw_tokens
from toylab.engine.sampler import Sampler
from toylab.presentation.run_verdict import comparison, comparison_frame
from toylab.your_run.log import RolloutLog, load_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import (
    inverse_kl,
    kl_slope,
    match_toy,
    matched_length,
    matching_estimate,
    per_token_kl,
    shape_checks,
    tail_shares,
    toy_curve,
)
from toylab.your_run.statistics import Estimate, log_statistics


@pytest.fixture(scope="module")
def log():
    return load_log(str(EXAMPLES / "rollouts_per_sequence.parquet"))


@pytest.fixture(scope="module")
def statistics(log):
    return log_statistics(log)


@pytest.fixture(scope="module")
def sizes(log):
    return magnitudes(log)


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


def test_the_comparison_words(statistics, sizes):
    name, kl = matching_estimate(statistics)
    assert name == "k3" and statistics.k3.se < statistics.k1.se
    same_toy = comparison(match_toy(kl, 6, 4, 0), statistics, sizes)
    assert says(same_toy[0], "mismatch 0.5032 ± 0.0029", "T = 6, V = 4, seed 0", "k3 = 0.169 ± 0.0017",
                "k1 = 0.172 ± 0.0046", "2.66×")
    assert all(line.endswith("consistent.") for line in same_toy[1:6])
    assert says(same_toy[6], "fair stand-in")
    assert "the data's 55 on average" in same_toy[7]
    other_toy = comparison(match_toy(kl, 11, 4, 0), statistics, sizes)
    assert says(other_toy[1], "below the toy's range") and says(other_toy[6], "heavier at some sizes")
    clamped = comparison(match_toy(Estimate(9.0, 0.1), 6, 4, 0), statistics, sizes)
    assert says(clamped[0], "largest mismatch, 2,")


def test_the_comparison_frame_keeps_data_and_toy_apart(statistics, sizes):
    match = match_toy(matching_estimate(statistics)[1], 6, 4, 0)
    frame = comparison_frame(match, statistics, sizes)
    assert list(frame.columns) == ["quantity", "data", "se", "toy", "toy_low", "toy_high", "verdict"]
    assert frame["data"][1] == sizes.chi2_low_variance.value and frame["toy"][1] == match.toy_chi2_token
    assert (frame["toy_low"] <= frame["toy"]).all() and (frame["toy"] <= frame["toy_high"]).all()
    assert list(frame["verdict"]) == ["matched"] + ["consistent"] * 5


def realistic_log(mismatch, sequences, seed, T=6, V=4, repeats=8):
    """Sequences of the toy itself (token t from position t mod T)."""
    toy = make_toy(T=T, V=V, mismatch=mismatch, seed=0)
    rng = np.random.default_rng(seed)
    position = np.arange(T * repeats) % T
    tokens = draw_tokens(rng, toy.mu[position], (sequences,))
    offsets = np.arange(sequences + 1) * T * repeats
    return RolloutLog("toy", None, toy.log_mu[position, tokens].ravel(), toy.log_pi[position, tokens].ravel(),
                      offsets, None, np.arange(1, sequences + 1), 0)


def test_the_match_is_on_the_estimate_with_the_smaller_standard_error():
    log = realistic_log(0.02, 400, seed=1)
    statistics = log_statistics(log)
    name, kl = matching_estimate(statistics)
    assert name == "k3" and kl == statistics.k3 and statistics.k1.se > 20 * statistics.k3.se
    match = match_toy(kl, 6, 4, 0)
    assert abs(match.mismatch - 0.02) <= 3 * match.mismatch_se          # the generating mismatch, within 3 se
    assert "(k3, not k1 = " in comparison(match, statistics, magnitudes(log))[0]


def test_a_verdict_only_when_the_data_can_tell():
    for sequences, verdict in ((1, "Whether the toy has this run's shape: cannot tell at this sample size."),
                               (2000, "So per token the toy is a fair stand-in for this run, as far as this sample "
                                      "can tell.")):
        log = realistic_log(0.3, sequences, seed=2)
        statistics = log_statistics(log)
        match = match_toy(matching_estimate(statistics)[1], 6, 4, 0)
        assert verdict in comparison(match, statistics, magnitudes(log))
    checks = {check.quantity: check.verdict for check in shape_checks(match, statistics, magnitudes(log))}
    assert checks["token χ²"] == "consistent" and set(checks.values()) <= {"consistent", "cannot tell"}


def test_heavier_tails_than_the_toy_are_called_so():
    log = realistic_log(0.1, 2000, seed=3)
    trainer = log.trainer_logprobs.copy()
    trainer[::50] -= 1.5                                                 # one token in 50 far off: a heavy tail
    heavy = RolloutLog("heavy", None, log.sampler_logprobs, trainer, log.offsets, None, log.rows, 0)
    statistics = log_statistics(heavy)
    match = match_toy(matching_estimate(statistics)[1], 6, 4, 0)
    checks = {check.quantity: check.verdict for check in shape_checks(match, statistics, magnitudes(heavy))}
    assert checks["share |log ρ| > 1"] == "heavier"


def test_no_token_beyond_a_threshold_is_not_lighter_than_a_rare_toy_share():
    log = realistic_log(0.43, 2, seed=4)                 # the toy has about 1 % of its tokens beyond |log ρ| = 1
    statistics = log_statistics(log)
    match = match_toy(matching_estimate(statistics)[1], 6, 4, 0)
    check = next(c for c in shape_checks(match, statistics, magnitudes(log)) if c.quantity == "share |log ρ| > 1")
    assert check.data.value == 0 and check.toy_high > 0 and check.verdict == "cannot tell"


def test_the_matched_toy_takes_the_sampler_model(statistics, sizes):
    """With a sampler model the curve is that toy's (its tables equal make_toy's), the match lands on the data's k1,
    the slope is the curve's own, and the JSON echoes the sampler. Truncation and rounding make KL(m) jump where a
    token leaves the kept set or a logit crosses a rounding step: the match is then a crossing, within the jump."""
    truncating = Sampler(top_p=0.95, precision="bf16")
    match = match_toy(statistics.k1, 6, 4, 0, sampler=truncating)
    assert match.clamped is None and match.toy_kl == pytest.approx(statistics.k1.value, rel=1e-3)
    assert {key: match.as_dict()[key] for key in ("top_p", "precision")} == {"top_p": 0.95, "precision": "bf16"}
    sampler = Sampler(temperature=1.2)
    curve = toy_curve(6, 4, 0, sampler)
    np.testing.assert_array_equal(curve(0.4).log_mu, make_toy(6, 4, 0.4, 0, sampler).log_mu)
    match = match_toy(statistics.k1, 6, 4, 0, sampler=sampler)
    assert match.clamped is None and match.toy_kl == pytest.approx(statistics.k1.value, rel=1e-6)
    step = 1e-3
    numeric = (per_token_kl(curve(match.mismatch + step)) - per_token_kl(curve(match.mismatch - step))) / (2 * step)
    assert statistics.k1.se / match.mismatch_se == pytest.approx(numeric, rel=0.05)
    assert match.as_dict()["temperature"] == 1.2
    zero = match_toy(Estimate(-0.01, 0.001), 6, 4, 0, sampler=Sampler(temperature=2.0))
    assert zero.clamped == "zero" and says(comparison(zero, statistics, sizes)[0], "sampler model alone")
