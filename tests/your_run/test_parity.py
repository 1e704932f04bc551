"""The frameworks' metrics against numbers frozen from running their own code, and their standard errors."""

import math

import numpy as np
import pytest
from framework_metric_numbers import FRAMEWORK_METRICS, LOG_RATIOS, MASK, SAMPLER

from toylab.your_run.log import RolloutLog
from toylab.your_run.parity import by_framework, framework_metrics
from toylab.your_run.statistics import token_mean


def batch_log(log_ratio):
    """The hand-made batch as a RolloutLog of its response tokens."""
    mask = np.array(MASK, bool)
    sampler = np.array(SAMPLER)
    trainer = sampler + np.array(log_ratio)
    return RolloutLog("batch", None, sampler[mask], trainer[mask], np.concatenate([[0], np.cumsum(mask.sum(1))]),
                      None, np.arange(1, 5), 0)


@pytest.mark.parametrize("case", sorted(LOG_RATIOS))
def test_every_metric_equals_the_framework_code(case):
    got = {metric.name: metric.value for metric in framework_metrics(batch_log(LOG_RATIOS[case]))}
    for name, value in FRAMEWORK_METRICS[case].items():
        # verl's and NeMo's means divide by the count + 1e-8 (the module docstring of the frozen numbers)
        assert got[name] == pytest.approx(value, rel=1e-7, abs=1e-8), name


def test_token_means_carry_the_clustered_standard_error_and_extremes_none():
    log = batch_log(LOG_RATIOS["mild"])
    metrics = {metric.name: metric for metric in framework_metrics(log)}
    abs_log_rho = np.abs(log.log_ratio)
    expected = token_mean(log, abs_log_rho)
    assert metrics["debug/vllm_vs_local_logprob_diff_mean"].se == pytest.approx(expected.se, rel=1e-12)
    assert metrics["debug/vllm_vs_local_logprob_diff_max"].se is None
    per_sequence = np.add.reduceat(abs_log_rho, log.offsets[:-1]) / log.lengths
    assert metrics["train_rollout_logprob_abs_diff"].se == pytest.approx(per_sequence.std(ddof=1) / 2, rel=1e-12)


def test_the_entropy_metric_says_why_it_has_no_value():
    metrics = by_framework(framework_metrics(batch_log(LOG_RATIOS["mild"])))
    ratio = next(metric for metric in metrics["prime-rl"] if metric["name"] == "kl_ent_ratio/mean")
    assert ratio["value"] is None and "whole vocabulary" in ratio["note"]
    assert list(metrics) == ["verl", "NeMo-RL", "prime-rl", "slime", "open-instruct", "TRL"]


def test_a_single_token_leaves_spreads_undefined_with_a_reason():
    log = RolloutLog("one", None, np.array([-1.0]), np.array([-1.1]), np.array([0, 1]), None, np.array([1]), 0)
    metrics = {metric.name: metric for metric in framework_metrics(log)}
    assert metrics["debug/vllm_vs_local_logprob_diff_std"].value is None
    assert "two tokens" in metrics["debug/vllm_vs_local_logprob_diff_std"].note
    assert math.isclose(metrics["gen_kl_error"].value, math.exp(-0.1) - 1 + 0.1)


def test_log_probabilities_near_the_end_of_float64_give_a_value_or_the_reason():
    sampler = np.array([-1e308, -1e308, -0.5, -800.0])
    trainer = sampler + np.array([0.0, 0.25, -0.1, 0.25])
    log = RolloutLog("extreme", None, sampler, trainer, np.array([0, 2, 4]), None, np.array([1, 2]), 0)
    metrics = {metric.name: metric for metric in framework_metrics(log)}
    assert metrics["rollout_corr/training_ppl"].value is None and "beyond float64" in metrics["rollout_corr/training_ppl"].note
    assert metrics["rollout_corr/rollout_log_ppl"].value == pytest.approx((1e308 + 400.25) / 2, rel=1e-12)
    log_rho = trainer - sampler                                  # [0, 0, −0.1, 0.25]: −1e308 + 0.25 is −1e308
    assert metrics["rollout_corr/log_ppl_diff"].value == pytest.approx(-(log_rho[:2].mean() + log_rho[2:].mean()) / 2)
    assert metrics["gen_kl_error"].value == pytest.approx(np.mean(np.exp(log_rho) - 1 - log_rho), rel=1e-12)
