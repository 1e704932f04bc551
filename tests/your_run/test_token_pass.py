"""The chunked pass over a log's tokens (``token_pass.chunked_pass``) against the definition, a whole array per
quantity (``quantity``, ``whole_log_pass``, ``statistics.token_means``): each sequence's sums bit for bit, whatever
the chunks; the means and their standard errors bit for bit; |log ρ|'s quantiles bit for bit np.quantile's; the
spreads, the correlation and verl's ESS to 1e-13 (summed chunk by chunk); and a log whose sums need the scaling
taken the whole-array way."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toylab.your_run import token_pass
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.log import RolloutLog, load_log
from toylab.your_run.run import directory_files, step_logs, zip_files
from toylab.your_run.statistics import clustered_means, token_means
from toylab.your_run.token_pass import (
    SUMMED,
    TOKEN_MEANS,
    chunk_bounds,
    chunked_pass,
    quantity,
    whole_log_pass,
)

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "framework_writers" / "recorded"


def real_logs():
    """(name, RolloutLog) of the steps of the example run and of prime-rl's recorded dump, and two example logs."""
    runs = [("example_run", step_logs(zip_files("example_run.zip", str(ROOT / "examples" / "example_run.zip"),
                                                CLI_BOUNDS))),
            ("prime-rl", step_logs(directory_files(str(RECORDED / "prime_rl" / "token_exports"))))]
    logs = [(f"{run} step {step.step}", step.log) for run, steps in runs for step in steps]
    return logs + [(name, load_log(str(ROOT / "examples" / name)))
                   for name in ("rollouts_per_token.jsonl", "rollouts_per_sequence.parquet")]


LOGS = real_logs()


def random_log(seed, sequences=300, tie=False):
    """A log of ``sequences`` of 1 to 60 tokens, log ρ of several sizes (rounded to 0.1, so |log ρ| ties, if ``tie``)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, sequences)
    n = int(lengths.sum())
    sampler = -rng.exponential(1.0, n)
    gap = rng.choice([1e-4, 1e-2, 0.5, 3.0], n) * rng.normal(size=n)
    trainer = sampler + (np.round(gap, 1) if tie else gap)
    return RolloutLog("random", None, sampler, trainer, np.concatenate([[0], np.cumsum(lengths)]), None,
                      np.arange(1, sequences + 1), 0)


@pytest.fixture(params=[7, 1000, token_pass.CHUNK_TOKENS], ids=lambda size: f"chunks of {size}")
def chunks(request, monkeypatch):
    monkeypatch.setattr(token_pass, "CHUNK_TOKENS", request.param)
    monkeypatch.setattr(token_pass.chunk_bounds, "__defaults__", (request.param,))
    return request.param


def test_chunks_are_whole_sequences_of_about_the_size():
    offsets = np.array([0, 3, 4, 20, 21, 22, 40])
    assert chunk_bounds(offsets, 5) == [(0, 2), (2, 3), (3, 5), (5, 6)]      # a longer sequence is a chunk alone
    assert chunk_bounds(offsets, 100) == [(0, 6)]


@pytest.mark.parametrize("name, log", [*LOGS, ("random", random_log(1)), ("ties", random_log(2, tie=True))],
                         ids=[name for name, _ in LOGS] + ["random", "ties"])
def test_the_chunked_pass_is_the_definition(name, log, chunks):
    passed, whole = chunked_pass(log), whole_log_pass(log)
    assert passed is not None
    for summed in SUMMED:
        assert np.array_equal(passed.sums[summed], np.add.reduceat(quantity(log, summed), log.offsets[:-1])), summed
    assert clustered_means(log, [passed.sums[name] for name in TOKEN_MEANS]) == \
        token_means(log, [quantity(log, name) for name in TOKEN_MEANS])
    assert passed.abs_log_rho_quantiles == whole.abs_log_rho_quantiles
    for field in ("log_rho_low", "log_rho_high", "k3_high", "probability_gap_high"):
        assert getattr(passed, field) == getattr(whole, field), field
    for field in ("probability_gap_sd", "abs_log_rho_sd", "probability_correlation", "verl_token_ess"):
        assert getattr(passed, field) == pytest.approx(getattr(whole, field), rel=1e-13), field


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 40), st.booleans())
def test_the_quantiles_are_numpys_order_statistics_and_interpolation(seed, sequences, tie):
    log = random_log(seed, sequences, tie)
    quantiles = chunked_pass(log).abs_log_rho_quantiles
    expected = np.quantile(np.abs(log.trainer_logprobs - log.sampler_logprobs), [0.5, 0.99, 0.999])
    assert list(quantiles.values()) == expected.tolist()


def test_one_token_has_no_spread():
    log = RolloutLog("one", None, np.array([-1.0]), np.array([-1.1]), np.array([0, 1]), None, np.array([1]), 0)
    passed = chunked_pass(log)
    assert passed.probability_gap_sd is None and passed.abs_log_rho_sd is None
    assert passed.probability_correlation is None and passed.abs_log_rho_quantiles["p50"] == pytest.approx(0.1)


def test_log_probabilities_near_minus_1e308_are_taken_whole():
    sampler = np.array([-1e308, -1e308, -0.5, -800.0])
    log = RolloutLog("extreme", None, sampler, sampler + np.array([0.0, 0.25, -0.1, 0.25]), np.array([0, 2, 4]), None,
                     np.array([1, 2]), 0)
    assert chunked_pass(log) is None and token_pass.token_pass(log).sums is None


def test_a_ratio_of_e_349_is_summed_unscaled_to_the_scaled_numbers():
    """ρ² = e^698 on one token: its sequence's Σ ρ² is finite, and the means from the S_b (scaled by a power of two
    above their largest) are token_means' (scaled above the largest value), bit for bit."""
    sampler, trainer = np.array([-349.0, -0.5, -1.0, -2.0]), np.array([-0.01, -0.5, -1.0, -2.1])
    log = RolloutLog("e^349", None, sampler, trainer, np.array([0, 2, 4]), None, np.array([1, 2]), 0)
    passed = chunked_pass(log)
    assert clustered_means(log, [passed.sums[name] for name in TOKEN_MEANS]) == \
        token_means(log, [quantity(log, name) for name in TOKEN_MEANS])


def test_a_sum_beyond_float64_is_taken_whole():
    """Σ ρ² of a sequence of 20,000 tokens at log ρ = 349.99 is 20,000·1e304: beyond float64 unscaled, so the sums
    are left to ``token_means``' scaling (the χ²'s se stays finite)."""
    sampler = np.full(20_000, -349.995)
    log = RolloutLog("huge", None, np.concatenate([sampler, [-1.0, -1.0]]),
                     np.concatenate([sampler + 349.99, [-1.0, -1.1]]), np.array([0, 20_000, 20_002]), None,
                     np.array([1, 2]), 0)
    assert chunked_pass(log) is None and token_pass.token_pass(log).sums is None
    assert np.isfinite(token_means(log, [quantity(log, "rho_squared")])[0].se)


def test_a_run_and_a_log_read_from_disk_take_the_chunked_pass():
    logs = [step.log for step in step_logs(directory_files(str(RECORDED / "prime_rl" / "token_exports")))]
    logs.append(load_log(str(ROOT / "examples" / "rollouts_per_token.jsonl")))
    assert all(token_pass.token_pass(log).sums is not None for log in logs)
