"""Sample statistics of a rollout log against a direct computation on the same file, and their standard
errors against the spread of replicate logs."""

import math

import numpy as np
import pandas as pd
import pytest
from rollout_logs import EXAMPLES

from toylab.presentation import run_charts as log_charts
from toylab.presentation import run_frames as log_frames
from toylab.your_run.log import RolloutLog, load_log
from toylab.your_run.statistics import TAIL_THRESHOLDS, ess_fraction, log_statistics, token_mean

PER_TOKEN = EXAMPLES / "rollouts_per_token.csv"


@pytest.fixture(scope="module")
def direct():
    """The example read by pandas (not toylab), grouped by sequence in plain numpy: one array per sequence."""
    frame = pd.read_csv(PER_TOKEN).sort_values(["sequence_id", "position"], kind="stable")
    groups = [group for _, group in frame.groupby("sequence_id", sort=False)]
    return {"log_rho": [g["trainer_logprobs"].to_numpy() - g["sampler_logprobs"].to_numpy() for g in groups],
            "sampler": [g["sampler_logprobs"].to_numpy() for g in groups],
            "reward": np.array([g["reward"].iloc[0] for g in groups])}


@pytest.fixture(scope="module")
def log():
    return load_log(str(PER_TOKEN))


@pytest.fixture(scope="module")
def statistics(log):
    return log_statistics(log)


def clustered(per_sequence_values):
    """Token mean and its cluster-robust se, written out sequence by sequence."""
    sums = np.array([values.sum() for values in per_sequence_values])
    lengths = np.array([len(values) for values in per_sequence_values])
    mean = sums.sum() / lengths.sum()
    B = len(sums)
    variance = sum((s - mean * n) ** 2 for s, n in zip(sums, lengths, strict=True)) / (B * (B - 1) * lengths.mean() ** 2)
    return mean, math.sqrt(variance)


def assert_estimate(estimate, value, se):
    assert estimate.value == pytest.approx(value, rel=1e-12, abs=1e-15)
    assert estimate.se == pytest.approx(se, rel=1e-10)


def test_counts_and_mean_length(statistics, direct):
    lengths = np.array([len(x) for x in direct["log_rho"]])
    assert (statistics.sequences, statistics.tokens, statistics.dropped) == (240, lengths.sum(), 0)
    assert_estimate(statistics.mean_length, lengths.mean(), lengths.std(ddof=1) / math.sqrt(240))


def test_k1_k3_chi2_and_tail_shares_against_numpy(statistics, direct):
    log_rho = direct["log_rho"]
    assert_estimate(statistics.k1, *clustered([-x for x in log_rho]))
    assert_estimate(statistics.k3, *clustered([np.exp(x) - 1 - x for x in log_rho]))
    mean, se = clustered([np.exp(2 * x) for x in log_rho])
    assert_estimate(statistics.chi2_token, mean - 1, se)
    for c in TAIL_THRESHOLDS:
        assert_estimate(statistics.tail_shares[c], *clustered([(np.abs(x) > c).astype(float) for x in log_rho]))


def test_sequence_ratios_ess_and_reward_against_numpy(statistics, direct):
    log_W = np.array([x.sum() for x in direct["log_rho"]])
    log_geo = np.array([x.mean() for x in direct["log_rho"]])
    for spread, values in ((statistics.log_W, log_W), (statistics.log_rho_geo, log_geo)):
        assert_estimate(spread.mean, values.mean(), values.std(ddof=1) / math.sqrt(len(values)))
        assert spread.sd == pytest.approx(values.std(ddof=1), rel=1e-12)
        assert list(spread.quantiles.values()) == pytest.approx(np.quantile(values, list(spread.quantiles)), rel=1e-12)
        assert (spread.low, spread.high) == pytest.approx((values.min(), values.max()), rel=1e-12)
    W = np.exp(log_W)
    assert statistics.ess_fraction == pytest.approx(W.sum() ** 2 / (len(W) * (W**2).sum()), rel=1e-12)
    reward = direct["reward"]
    assert_estimate(statistics.mean_reward, reward.mean(), reward.std(ddof=1) / math.sqrt(len(reward)))


def test_every_example_file_gives_identical_statistics(statistics):
    for path in EXAMPLES.glob("rollouts_*"):
        if path.suffix != ".py":
            assert log_statistics(load_log(str(path))) == statistics, path.name


def test_ess_fraction_survives_huge_weights():
    assert ess_fraction(np.array([800.0, 800.0, 0.0])) == pytest.approx(2 / 3)
    assert ess_fraction(np.zeros(5)) == pytest.approx(1.0)


def _log(per_sequence_values, rewards=None):
    lengths = [len(values) for values in per_sequence_values]
    trainer = np.concatenate(per_sequence_values)
    return RolloutLog("test", None, np.zeros_like(trainer), trainer, np.concatenate([[0], np.cumsum(lengths)]),
                      rewards, np.arange(1, len(lengths) + 1), 0)


def test_with_one_token_per_sequence_the_se_is_the_plain_one():
    values = np.random.default_rng(1).normal(size=50)
    estimate = token_mean(_log([[v] for v in values]), values)
    assert_estimate(estimate, values.mean(), values.std(ddof=1) / math.sqrt(50))


def test_a_single_sequence_has_no_standard_error():
    statistics = log_statistics(_log([np.array([-0.1, -0.3])]))
    assert statistics.k1.value == pytest.approx(0.2) and statistics.k1.se is None      # k1 = −mean log ρ
    assert statistics.log_W.sd is None and statistics.log_W.mean.se is None and statistics.mean_reward is None


def test_clustered_standard_error_matches_the_spread_of_replicate_logs():
    """Tokens of a sequence share a random offset (correlated within a sequence): over 400 replicate logs the
    clustered se² matches the variance of k1, while the naive token-level se² is several times too small."""
    rng = np.random.default_rng(7)
    estimates, clustered_var, naive_var = [], [], []
    for _ in range(400):
        lengths = rng.integers(5, 40, size=60)
        values = [rng.normal(0.2, 0.5) + rng.normal(0, 0.3, size=n) for n in lengths]
        estimate = token_mean(_log(values), np.concatenate(values))
        flat = np.concatenate(values)
        estimates.append(estimate.value)
        clustered_var.append(estimate.se ** 2)
        naive_var.append(flat.var(ddof=1) / len(flat))
    spread = np.var(estimates, ddof=1)
    # the variance of a sample variance of 400 draws has relative se ≈ sqrt(2/399) ≈ 0.07: 25 % is > 3 se
    assert np.mean(clustered_var) == pytest.approx(spread, rel=0.25)
    assert np.mean(naive_var) < spread / 4


# -- the frames behind the charts ------------------------------------------------------------------------------

def test_token_histogram_counts_every_token(log, direct):
    frame = log_frames.token_histogram_frame(log, bins=40)
    log_rho = np.concatenate(direct["log_rho"])
    assert frame["tokens"].sum() == len(log_rho) and (frame["tokens"] > 0).all()
    counts, edges = np.histogram(log_rho, bins=40)
    np.testing.assert_array_equal(frame["tokens"], counts[counts > 0])
    np.testing.assert_allclose(frame["bin_start"], edges[:-1][counts > 0])


def test_sequence_histograms(log, direct):
    for kind, values in (("W", [x.sum() for x in direct["log_rho"]]), ("geo", [x.mean() for x in direct["log_rho"]])):
        frame = log_frames.sequence_histogram_frame(log, kind, bins=25)
        counts, _ = np.histogram(values, bins=25)
        np.testing.assert_array_equal(frame["sequences"], counts[counts > 0])
    with pytest.raises(ValueError, match="kind must be"):
        log_frames.sequence_histogram_frame(log, "rho")


def test_position_frame_is_the_mean_and_band_per_position(log, direct):
    frame = log_frames.position_frame(log, bins=1000)           # one bin per position
    by_position = pd.DataFrame({"position": np.concatenate([np.arange(len(x)) for x in direct["log_rho"]]),
                                "log_rho": np.concatenate(direct["log_rho"])}).groupby("position")["log_rho"]
    np.testing.assert_array_equal(frame["position"], np.arange(96))
    np.testing.assert_array_equal(frame["tokens"], by_position.size())
    np.testing.assert_allclose(frame["mean_log_rho"], by_position.mean(), rtol=1e-12)
    np.testing.assert_allclose(frame["low"], by_position.quantile(0.1), rtol=1e-12)
    np.testing.assert_allclose(frame["high"], by_position.quantile(0.9), rtol=1e-12)
    coarse = log_frames.position_frame(log, bins=10)
    assert len(coarse) == 10 and coarse["tokens"].sum() == log.tokens
    assert (coarse["position_start"].iloc[1], coarse["position_end"].iloc[1]) == (10, 19)


def test_probability_frame_bins_the_sampler_probability(log, direct):
    frame = log_frames.probability_frame(log, bins=30)
    log10_mu = np.concatenate(direct["sampler"]) / math.log(10)
    log_rho = np.concatenate(direct["log_rho"])
    assert frame["tokens"].sum() == len(log_rho)
    for row in frame.itertuples():
        inside = (log10_mu >= row.log10_mu_start) & (log10_mu < row.log10_mu_end)
        if row.log10_mu_end == 0.0:
            inside |= log10_mu == 0
        assert inside.sum() == row.tokens
        assert log_rho[inside].mean() == pytest.approx(row.mean_log_rho, rel=1e-12)


def test_tables_hold_the_statistics(statistics):
    tails = log_frames.tail_share_frame(statistics)
    assert list(tails["threshold"]) == list(TAIL_THRESHOLDS)
    assert list(tails["share"]) == [statistics.tail_shares[c].value for c in TAIL_THRESHOLDS]
    spread = log_frames.spread_frame(statistics)
    assert list(spread["quantity"]) == ["log W", "log ρ_geo"]
    assert spread["mean"][0] == statistics.log_W.mean.value and spread["50%"][1] == statistics.log_rho_geo.quantiles[0.5]


def test_charts_build_with_log_count_axes_and_thresholds(log):
    from toylab import make_toy
    from toylab.presentation import frames

    thresholds = frames.sequence_threshold_frame(make_toy(), {"seq_tis": {"C": 2.0}, "geo_rs": {"lo": 0.5, "hi": 2.0}},
                                                 "W")
    charts = {"tokens": log_charts.token_histogram_chart(log_frames.token_histogram_frame(log)),
              "position": log_charts.position_chart(log_frames.position_frame(log)),
              "probability": log_charts.probability_chart(log_frames.probability_frame(log)),
              "W": log_charts.sequence_histogram_chart(log_frames.sequence_histogram_frame(log, "W"), thresholds, "W"),
              "geo": log_charts.sequence_histogram_chart(log_frames.sequence_histogram_frame(log, "geo"), kind="geo")}
    for name, chart in charts.items():
        spec = chart.to_dict()
        assert spec["config"]["axis"]["labelFontSize"] >= 14, name
        text = str(spec)
        assert "'type': 'log'" in text or name in ("position", "probability"), name
        assert "#E69F00" in text, name
    assert "seq_tis" in str(charts["W"].to_dict())


def test_histograms_of_a_constant_ratio():
    """Every log ρ_t equal up to rounding (−0.1 from −0.6 − (−0.7) and −0.1 − 0.0): one bin, no error."""
    log = RolloutLog("test", None, np.array([-0.6, -0.1, -0.6]), np.array([-0.7, -0.2, -0.7]), np.array([0, 2, 3]),
                     None, np.array([1, 2]), 0)
    assert log_frames.token_histogram_frame(log)["tokens"].tolist() == [3]
    assert log_frames.sequence_histogram_frame(log, "geo")["sequences"].tolist() == [2]
