"""A step's means are taken together (a row per quantity, ``statistics.token_means`` and ``sequence_means``, a
batch's estimators in one ``applied._Totals``) so that a run of many tiny steps reads fast: on real runs (the example
run, the prime-rl and SkyRL dumps the framework tests use, the example logs) every number equals, bit for bit, the
one its own definition gives when it is computed alone."""

import math
from pathlib import Path

import numpy as np
import pytest

from toylab.catalogue.estimators import ESTIMATORS
from toylab.your_run.applied import on_log
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.log import load_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.parity import framework_metrics
from toylab.your_run.run import directory_files, step_logs, zip_files
from toylab.your_run.statistics import TAIL_THRESHOLDS, sequence_means, token_means
from toylab.your_run.steps import step_summary

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "framework_writers" / "recorded"


def real_logs():
    """(name, RolloutLog) of every step of the example run and of the recorded prime-rl and SkyRL dumps, and the
    example logs."""
    data = (ROOT / "examples" / "example_run.zip").read_bytes()
    runs = [("example_run", step_logs(zip_files("example_run.zip", data, CLI_BOUNDS))),
            ("prime-rl", step_logs(directory_files(str(RECORDED / "prime_rl" / "token_exports")), allow_torch=True)),
            ("SkyRL", step_logs(directory_files(str(RECORDED / "skyrl" / "dumped_data")), allow_torch=True))]
    logs = [(f"{run} step {step.step}", step.log) for run, steps in runs for step in steps]
    logs += [(path.name, load_log(str(path))) for path in sorted((ROOT / "examples").glob("rollouts_per_*.jsonl"))]
    assert all(log is not None for _, log in logs) and len(logs) > 12
    return logs


LOGS = real_logs()


def token_mean_alone(log, x):
    """The token mean Σ_b S_b / Σ_b L_b and se = √(B/(B − 1)·Σ_b (S_b − k·L_b)²) / Σ_b L_b of one array, on values
    divided by the power of two at or above max |x| when that is over 1 (the definition, one array at a time)."""
    top = max(float(np.max(x)), -float(np.min(x)))
    scale = 1.0 if top <= 1 else 2.0 ** math.ceil(math.log2(top))
    sums = np.add.reduceat(x / scale, log.offsets[:-1])
    lengths = np.diff(log.offsets)
    mean = float(sums.sum() / lengths.sum())
    B = len(lengths)
    se = None if B < 2 else float(math.sqrt(B / (B - 1) * np.sum((sums - mean * lengths) ** 2)) / lengths.sum())
    return mean * scale, None if se is None else se * scale


def per_token_quantities(log):
    log_rho, rho = log.log_ratio, log.ratio
    return [-log_rho, rho - 1 - log_rho, rho**2, (rho - 1) ** 2, rho, np.abs(log_rho), np.exp(log.sampler_logprobs),
            *((np.abs(log_rho) > c).astype(float) for c in TAIL_THRESHOLDS)]


@pytest.mark.parametrize("name, log", LOGS, ids=[name for name, _ in LOGS])
def test_token_means_taken_together_are_each_taken_alone(name, log):
    quantities = per_token_quantities(log)
    together = token_means(log, quantities)
    assert [(estimate.value, estimate.se) for estimate in together] == \
        [token_mean_alone(log, x) for x in quantities]


@pytest.mark.parametrize("name, log", LOGS, ids=[name for name, _ in LOGS])
def test_sequence_means_taken_together_are_each_taken_alone(name, log):
    log_W = np.add.reduceat(log.log_ratio, log.offsets[:-1])
    arrays = [log_W, log_W / np.diff(log.offsets), np.exp(np.clip(log_W, -20, 20)), np.diff(log.offsets)]
    B = len(log_W)
    alone = [(float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(B)) if B > 1 else None) for x in arrays]
    assert [(estimate.value, estimate.se) for estimate in sequence_means(arrays)] == alone


@pytest.mark.parametrize("name, log", LOGS, ids=[name for name, _ in LOGS])
def test_estimators_summed_together_are_each_summed_alone(name, log):
    every = {id: {} for id in ESTIMATORS}
    together = on_log(log, every)
    alone = [on_log(log, {id: {}})[0] for id in every]
    assert together == alone
    assert sum(row.weight_mean is not None for row in together) > 50       # most estimators do weigh a real log


@pytest.mark.parametrize("name, log", LOGS[:4], ids=[name for name, _ in LOGS[:4]])
def test_a_step_summary_holds_the_means_taken_alone(name, log):
    summary = step_summary(1, [name], log, {"tok_tis": {"C": 2.0}})
    k1, k3, chi2, chi2_low_variance, identity, *_ = [token_mean_alone(log, x) for x in per_token_quantities(log)]
    assert (summary["k1"]["value"], summary["k1"]["se"]) == k1
    assert (summary["k3"]["value"], summary["k3"]["se"]) == k3
    assert (summary["chi2_token"]["value"], summary["chi2_token"]["se"]) == (chi2[0] - 1.0, chi2[1])
    assert (summary["chi2_low_variance"]["value"], summary["chi2_low_variance"]["se"]) == chi2_low_variance
    assert summary["identity_mean_rho_minus_1"]["value"] == identity[0] - 1.0
    metrics = {metric.name: metric for metric in framework_metrics(log)}
    assert (metrics["rollout_corr/kl"].value, metrics["rollout_corr/kl"].se) == k1
    assert (metrics["training/rollout_probs_diff_mean"].value, metrics["training/rollout_probs_diff_mean"].se) == \
        token_mean_alone(log, np.abs(np.exp(log.trainer_logprobs) - np.exp(log.sampler_logprobs)))
    assert magnitudes(log, worst=0).chi2_low_variance.value == chi2_low_variance[0]
