"""The frames behind a run's and two logs' views, and the exports: against numpy on the same tokens; every chart
validates against the Vega-Lite schema."""

import io

import numpy as np
import pandas as pd
import pytest

from toylab.presentation import run_charts, run_frames
from toylab.your_run.log import RolloutLog
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.statistics import log_statistics


def small_log(seed=0, outlier=None):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 30, size=40)
    n = lengths.sum()
    sampler = -rng.exponential(1.0, n)
    trainer = np.minimum(sampler + rng.normal(0, 0.01, n), 0.0)
    if outlier is not None:
        trainer[5] = sampler[5] + outlier
    return RolloutLog("small", None, sampler, trainer, np.concatenate([[0], np.cumsum(lengths)]),
                      rng.integers(0, 2, 40).astype(float), np.arange(1, 41), 0)


def test_the_token_histogram_is_zoomed_to_the_data_and_counts_the_tail():
    log = small_log(outlier=-5.0)
    frame = run_frames.token_histogram_frame(log, bins=30)
    log_rho = log.log_ratio
    low = np.quantile(log_rho, run_frames.ZOOM[0], method="higher")
    high = np.quantile(log_rho, run_frames.ZOOM[1], method="lower")
    assert frame["tokens"].sum() == log.tokens
    assert frame["bin_start"].min() == pytest.approx(low) and frame["bin_end"].max() == pytest.approx(high)
    assert frame["tail"].iloc[0] and frame["tokens"].iloc[0] == np.sum(log_rho <= frame["bin_end"].iloc[0])
    assert high - low < 0.1                               # the outlier at −5 does not stretch the view
    thresholds = pd.DataFrame({"estimator": ["tok_tis", "tok_mis"], "threshold": ["tok_tis.C", "tok_mis.lo"],
                               "value": [2.0, 0.999], "log_value": [np.log(2.0), np.log(0.999)],
                               "side": ["above", "below"], "beyond": [0.0, 0.1]})
    inside, beyond = run_frames.thresholds_in_view(thresholds, frame)
    assert list(inside["estimator"]) == ["tok_mis"] and list(beyond["estimator"]) == ["tok_tis"]
    run_charts.token_histogram_chart(frame, inside).to_dict()


def test_overlaid_histograms_share_bins_and_each_sums_to_one():
    logs = {"bf16": small_log(1), "fp8": small_log(2)}
    frame = run_frames.overlaid_histogram_frame(logs, bins=20)
    assert frame.groupby("log")["share"].sum().tolist() == pytest.approx([1.0, 1.0])
    assert frame.groupby("log")["tokens"].sum().to_dict() == {name: log.tokens for name, log in logs.items()}
    every = np.concatenate([log.log_ratio for log in logs.values()])
    edges = np.linspace(np.quantile(every, 0.001, method="higher"), np.quantile(every, 0.999, method="lower"), 21)
    for name in logs:
        starts = frame[frame["log"] == name]["bin_start"].to_numpy()
        assert np.isclose(starts[:, None], edges[:-1][None, :], rtol=0, atol=1e-15).any(axis=1).all()
    run_charts.overlaid_histogram_chart(frame).to_dict()


def test_side_by_side_holds_each_logs_numbers():
    logs = {"before": small_log(3), "after": small_log(4)}
    named = {name: (log_statistics(log), magnitudes(log)) for name, log in logs.items()}
    table = run_frames.side_by_side_frame(named).set_index("quantity")
    for name, log in logs.items():
        assert table.loc["k1", name] == named[name][0].k1.value and table.loc["k1", f"{name} ± se"] == named[name][0].k1.se
        assert table.loc["response tokens", name] == log.tokens
        assert table.loc["share |log ρ| > 0.01", name] == pytest.approx(np.mean(np.abs(log.log_ratio) > 0.01))


@pytest.mark.parametrize("format", ["csv", "parquet"])
def test_exports_round_trip_the_per_sequence_and_per_token_results(format):
    log = small_log(5)
    sequences, tokens = run_frames.sequence_results_frame(log), run_frames.token_results_frame(log)
    read = pd.read_csv if format == "csv" else pd.read_parquet
    back = read(io.BytesIO(run_frames.export_bytes(sequences, format)))
    pd.testing.assert_frame_equal(back, sequences, check_dtype=False, rtol=1e-12)
    back = read(io.BytesIO(run_frames.export_bytes(tokens, format)))
    pd.testing.assert_frame_equal(back, tokens, check_dtype=False, rtol=1e-12)
    log_rho = [log.log_ratio[a:b] for a, b in zip(log.offsets[:-1], log.offsets[1:], strict=True)]
    assert np.allclose(sequences["log_W"], [x.sum() for x in log_rho], rtol=1e-12)
    assert np.allclose(sequences["max_abs_log_rho"], [np.abs(x).max() for x in log_rho])
    assert np.allclose(sequences["mean_k3"], [np.mean(np.exp(x) - 1 - x) for x in log_rho], rtol=1e-12)
    assert list(tokens["position"][:3]) == [0, 1, 2] and len(tokens) == log.tokens
    with pytest.raises(ValueError, match="format must be"):
        run_frames.export_bytes(tokens, "xlsx")


def test_steps_frame_marks_the_departure_and_skips_failed_steps():
    summaries = [{"step": 1, "k1": {"value": 0.1, "se": 0.01}, "ess_fraction": 0.9},
                 {"step": 2, "files": ["a"], "error": "bad"},
                 {"step": 3, "k1": {"value": 0.5, "se": None}, "ess_fraction": 0.5}]
    frame = run_frames.steps_frame(summaries, {"k1": 3, "ess_fraction": None})
    k1 = frame[frame["metric"] == run_frames.STEP_METRICS["k1"]]
    assert list(k1["step"]) == [1, 3] and list(k1["left"]) == [False, True]
    assert list(k1["low"]) == pytest.approx([0.08, 0.5]) and list(k1["high"]) == pytest.approx([0.12, 0.5])
    assert list(run_frames.failed_steps_frame(summaries)["error"]) == ["bad"]
    spec = run_charts.steps_chart(frame).to_dict()
    assert "autosize" not in spec and spec["spec"]["width"] == 300      # a facet sized by its panels (fit-x: 0 px)
    assert spec["resolve"]["axis"]["x"] == "independent"    # each panel its step axis: none orphaned in an empty cell


def test_a_runs_steps_table_holds_every_followed_metric_with_its_se():
    from toylab.your_run.steps import series_keys, value_and_se

    summaries = [{"step": step, "files": [f"step_{step}.jsonl"], "sequences": 4, "tokens": 20,
                  "k1": {"value": 0.01 * step, "se": 0.002}, "ess_fraction": 0.5,
                  "tail_shares": [{"threshold": 0.01, "value": 0.1 * step, "se": 0.01}],
                  "estimators": [{"name": "tok_tis", "tokens_affected": 0.05 * step, "sequences_affected": 0.2}]}
                 for step in (1, 2)] + [{"step": 3, "files": ["step_3.jsonl"], "error": "bad"}]
    table = run_frames.steps_table(summaries)
    assert list(table["step"]) == [1, 2, 3] and list(table["error"]) == ["", "", "bad"]
    for summary, (_, row) in zip(summaries[:2], table.iloc[:2].iterrows(), strict=True):
        for key in series_keys(summaries):
            value, se = value_and_se(summary, key)
            assert row[key] == value or (np.isnan(row[key]) and np.isnan(value))
            if f"{key}_se" in table:
                assert row[f"{key}_se"] == se or (np.isnan(row[f"{key}_se"]) and np.isnan(se))
    assert {"k1_se", "tail_share>0.01_se"} <= set(table.columns) and "ess_fraction_se" not in table.columns
    assert table.loc[2, ["k1", "tail_share>0.01", "tokens_affected:tok_tis"]].isna().all()
