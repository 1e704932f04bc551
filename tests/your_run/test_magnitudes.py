"""Realistic magnitudes: the low-variance estimates against numpy and the toy's exact values, the identity check
catching a truncated sampler, the tails and extremes, and the threshold suggestions through the batch interface."""

import numpy as np
import pytest

from toylab import make_toy
from toylab.analysis.diagnostics import token_chi2, token_kl
from toylab.analysis.montecarlo import draw_tokens
from toylab.your_run.applied import on_log
from toylab.your_run.log import RolloutLog
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.signature import logging_signature
from toylab.your_run.statistics import log_statistics, token_mean
from toylab.your_run.suggestions import suggestions, value_beyond


def toy_log(mismatch, sequences, seed, top_k=None, T=6, V=8, repeats=4):
    """Sequences of T·repeats tokens from the toy's sampler (token t from position t mod T). With ``top_k``, the
    sampler keeps only its k likeliest tokens per position (renormalised) and logs those log-probabilities."""
    toy = make_toy(T=T, V=V, mismatch=mismatch, seed=seed)
    mu = toy.mu
    if top_k is not None:
        keep = np.argsort(-mu, axis=1)[:, :top_k]
        truncated = np.zeros_like(mu)
        np.put_along_axis(truncated, keep, np.take_along_axis(mu, keep, axis=1), axis=1)
        mu = truncated / truncated.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    position = np.arange(T * repeats) % T
    tokens = draw_tokens(rng, mu[position], (sequences,))
    with np.errstate(divide="ignore"):
        log_mu = np.log(mu)
    sampler = log_mu[position, tokens].ravel()
    trainer = toy.log_pi[position, tokens].ravel()
    offsets = np.arange(sequences + 1) * T * repeats
    return toy, RolloutLog("toy", None, sampler, trainer, offsets, None, np.arange(1, sequences + 1), 0)


def test_low_variance_chi2_and_identity_against_numpy():
    _, log = toy_log(0.3, 200, seed=1)
    sizes = magnitudes(log)
    rho = np.exp(log.log_ratio)
    direct = token_mean(log, (rho - 1) ** 2)
    assert sizes.chi2_low_variance == direct
    assert sizes.identity.value == pytest.approx(rho.mean() - 1, abs=1e-15)
    quantiles = sizes.abs_log_rho_quantiles
    assert quantiles["p99"] == pytest.approx(np.quantile(np.abs(log.log_ratio), 0.99))
    assert quantiles["max"] == np.abs(log.log_ratio).max()
    assert sizes.min_rho == pytest.approx(rho.min()) and sizes.max_rho == pytest.approx(rho.max())


def test_both_chi2_estimates_find_the_exact_value_and_the_low_variance_one_is_far_steadier():
    toy, log = toy_log(0.02, 2000, seed=2)
    exact_chi2 = float(token_chi2(toy).mean())
    low = magnitudes(log).chi2_low_variance
    plain = log_statistics(log).chi2_token
    assert abs(low.value - exact_chi2) < 4 * low.se       # Monte Carlo, fixed seed: within 4 standard errors
    assert abs(plain.value - exact_chi2) < 4 * plain.se
    assert plain.se > 10 * low.se
    k3 = log_statistics(log).k3
    assert abs(k3.value - float(token_kl(toy).mean())) < 4 * k3.se


def test_the_identity_check_catches_a_top_k_sampler():
    """Processed log-probabilities of a top-k sampler against a trainer without the mask: the mean ratio is the kept
    mass, below 1 (``signature``: truncated); without top-k it is 1 within its standard errors (consistent)."""
    _, honest = toy_log(0.3, 400, seed=3)
    _, truncated = toy_log(0.3, 400, seed=3, top_k=3)
    assert logging_signature(magnitudes(honest).identity).verdict == "consistent"
    sizes = magnitudes(truncated)
    assert logging_signature(sizes.identity).verdict == "truncated" and sizes.identity.value < 0


def test_the_worst_tokens_and_sequences_are_the_most_extreme():
    _, log = toy_log(0.5, 50, seed=4)
    sizes = magnitudes(log, worst=3)
    abs_log_rho = np.abs(log.log_ratio)
    first = sizes.worst_tokens[0]
    token = log.offsets[first["sequence"]] + first["position"]
    assert abs(first["log_rho"]) == abs_log_rho.max() == abs_log_rho[token]
    assert first["sampler_probability"] == pytest.approx(np.exp(log.sampler_logprobs[token]))
    log_W = np.add.reduceat(log.log_ratio, log.offsets[:-1])
    assert [row["sequence"] for row in sizes.worst_sequences] == list(np.argsort(-np.abs(log_W), kind="stable")[:3])


@pytest.mark.parametrize("estimator, parameter, counts", [("tok_tis", "C", "tokens"), ("tok_mis", "lo", "tokens"),
                                                          ("seq_tis", "C", "sequences"), ("geo_rs", "lo", "sequences"),
                                                          ("k3_rs", "delta", "sequences"), ("trm", "eps", "sequences")])
def test_a_suggested_threshold_touches_that_share_through_the_batch_interface(estimator, parameter, counts):
    _, tied = toy_log(0.1, 300, seed=5)          # the toy's ratios take T·V values: jitter them apart
    jitter = np.random.default_rng(5).normal(0, 1e-3, tied.tokens)
    log = RolloutLog("jittered", None, tied.sampler_logprobs, np.minimum(tied.trainer_logprobs + jitter, 0.0),
                     tied.offsets, None, tied.rows, 0)
    rows = suggestions(log, {estimator: {}})
    row = next(row for row in rows if row["parameter"] == parameter)
    assert row["counts"] == counts
    for at in row["at"]:
        applied = on_log(log, {estimator: {parameter: at["value"]}})[0]
        touched = applied.tokens_affected if counts == "tokens" else applied.sequences_affected
        assert touched == pytest.approx(at["touched"], abs=1e-12)
        n = log.tokens if counts == "tokens" else log.sequences
        assert at["touched"] == round(at["share"] * n) / n


def test_value_beyond_below_one_item_touches_nothing():
    values = np.array([3.0, 1.0, 2.0])
    assert value_beyond(values, 0.001, "above") == (3.5, 0.0)
    assert value_beyond(values, 0.4, "below") == (1.5, pytest.approx(1 / 3))
