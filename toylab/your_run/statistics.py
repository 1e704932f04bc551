"""Sample statistics of a rollout log, each an estimate with its standard error (never an exact number).

Per response token, with ρ_t = π(y_t)/μ(y_t) and y_t drawn by the sampler μ:

    k1 = mean_t (log μ − log π) = −mean_t log ρ_t      estimates the per-token KL(μ‖π)
    k3 = mean_t (ρ_t − 1 − log ρ_t)                     also unbiased for it (E_μ[ρ_t − 1] = 0), and ≥ 0 term by term
    χ²_token = mean_t ρ_t² − 1                          estimates E_μ[ρ²] − 1 = χ²(π‖μ) per token
    share of tokens with |log ρ_t| > c, c = 1e-3, 1e-2, 0.1, 1

A token mean is Σ_b S_b / Σ_b L_b over sequences b (S_b the sum over its L_b tokens). Its standard error
treats the B sequences as independent draws and allows any correlation between the tokens of one
sequence (cluster-robust, clustered by sequence, the ratio estimator's linearisation):

    se² = B/(B − 1) · Σ_b (S_b − k·L_b)² / (Σ_b L_b)²,   k the token mean

which is the usual s/√n when every sequence has one token. One sequence has no standard error (None, shown
"—" with SINGLE_SEQUENCE as the reason). Token means are taken on values scaled by a power of two, so sums of
up to millions of ρ_t² ≤ e^700 (``bounds.LOG_RATIO_LIMIT``) stay finite and ordinary logs are not rounded at all.
A log's per-sequence sums S_b come from one chunked pass over its tokens (``token_pass``), scaled after the sum
(``clustered_means``: the same numbers, since scaling by a power of two is exact).
Per sequence: log W = Σ_t log ρ_t and
log ρ_geo = log W / L (mean ± s/√B, spread, quantiles), the mean length and, with rewards, the logged mean
reward E_μ[r] (mean ± s/√B). The sample ESS fraction (Σ_b W_b)² / (B·Σ_b W_b²) describes these B weights
(what sequence-level IS keeps of this batch); it has no standard error here: its population value
1/(1 + χ²_seq) is dominated by rare huge weights, which a sample rarely shows.
"""

import math
from dataclasses import dataclass

import numpy as np

from toylab.your_run.token_pass import TAIL_THRESHOLDS, TAILS, quantity, token_pass

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
STANDARD_ERRORS = ("standard errors clustered by sequence: sequences are independent draws, the tokens of "
                   "one sequence may be correlated")
SINGLE_SEQUENCE = "a log of one sequence has no standard error (and no spread): they need two sequences at least"


@dataclass(frozen=True)
class Estimate:
    """A sample estimate and its standard error (None when undefined: a single sequence)."""
    value: float
    se: float | None

    def as_dict(self):
        return {"value": self.value, "se": self.se}


@dataclass(frozen=True)
class Spread:
    """A per-sequence quantity's distribution over the log's sequences."""
    mean: Estimate
    sd: float | None         # None: a single sequence
    quantiles: dict          # q → value
    low: float
    high: float

    def as_dict(self):
        return {"mean": self.mean.as_dict(), "sd": self.sd,
                "quantiles": {f"{q:g}": value for q, value in self.quantiles.items()}, "min": self.low,
                "max": self.high}


@dataclass(frozen=True)
class LogStatistics:
    sequences: int
    tokens: int
    dropped: int                     # sequences without a response token, left out
    mean_length: Estimate
    k1: Estimate
    k3: Estimate
    chi2_token: Estimate
    tail_shares: dict                # c → Estimate of the share of tokens with |log ρ_t| > c
    log_W: Spread
    log_rho_geo: Spread
    ess_fraction: float
    mean_reward: Estimate | None     # E_μ[r], when the log has rewards


def token_mean(log, per_token):
    """The mean over the log's response tokens with its standard error, clustered by sequence."""
    return token_means(log, [per_token])[0]


def token_means(log, per_token):
    """[token_mean of each (n,) array in ``per_token``], from one reduction over the log for all of them: a row per
    array, each scaled by its own power of two; every sum is the one a single array's would be, bit for bit."""
    values = np.stack(per_token)
    tops = np.maximum(values.max(axis=1), -values.min(axis=1)).tolist()
    scales = [power_of_two_above(top) for top in tops]
    return _clustered(log, np.add.reduceat(values / np.array(scales)[:, None], log.offsets[:-1], axis=1), scales)


def clustered_means(log, sums):
    """[token_mean of a quantity, from its per-sequence sums S_b] for each (B,) array of ``sums``: the same numbers
    as ``token_means`` of the quantities, the S_b scaled by a power of two (at or above their largest |S_b|) instead
    of the values (scaling by a power of two is exact, so only the headroom differs)."""
    sums = np.stack(sums)
    tops = np.abs(sums).max(axis=1).tolist()
    scales = [power_of_two_above(top) for top in tops]
    return _clustered(log, sums / np.array(scales)[:, None], scales)


def _clustered(log, sums, scales):
    """Estimates of token means from per-sequence sums ``sums`` (a row per quantity, divided by its ``scales``)."""
    lengths, tokens, B = log.lengths, log.tokens, log.sequences
    means = sums.sum(axis=1) / tokens
    if B < 2:
        return [Estimate(mean * scale, None) for mean, scale in zip(means.tolist(), scales, strict=True)]
    squares = np.sum((sums - means[:, None] * lengths) ** 2, axis=1)
    return [Estimate(mean * scale, math.sqrt(B / (B - 1) * square) / tokens * scale)
            for mean, square, scale in zip(means.tolist(), squares.tolist(), scales, strict=True)]


def log_token_means(log, names):
    """[token_mean of each quantity of ``token_pass.SUMMED`` named], from the log's one pass over its tokens
    (``token_pass``), or from its whole arrays scaled (``token_means``) when the pass leaves the sums to them."""
    sums = token_pass(log).sums
    if sums is None:
        return token_means(log, [quantity(log, name) for name in names])
    return clustered_means(log, [sums[name] for name in names])


def log_sequence_sums(log, name):
    """(B,) Σ_t of a quantity of ``token_pass.SUMMED`` over each sequence's tokens."""
    sums = token_pass(log).sums
    return log.sequence_sums(quantity(log, name)) if sums is None else sums[name]


def ratio_of_sums(numerators, denominators):
    """Σ_b x_b / Σ_b y_b over the sequences b with its standard error, clustered by sequence (the ratio estimator's
    linearisation: se² = B/(B − 1) · Σ_b (x_b − R·y_b)² / (Σ_b y_b)²; a token mean is the case y_b = L_b)."""
    total = float(np.sum(denominators))
    ratio = float(np.sum(numerators)) / total
    B = len(numerators)
    if B < 2:
        return Estimate(ratio, None)
    return Estimate(ratio, float(math.sqrt(B / (B - 1) * np.sum((numerators - ratio * denominators) ** 2)) / total))


def power_of_two_above(top):
    """1, or the power of two at or above ``top`` (a largest |value|) when that is over 1 (dividing by it is exact)."""
    return 1.0 if top <= 1 else 2.0 ** math.ceil(math.log2(top))


def sequence_mean(values):
    """The mean over sequences with its standard error s/√B."""
    return sequence_means([values])[0]


def sequence_means(arrays):
    """[sequence_mean of each (B,) array], taken together (a row each: every sum the one an array's own would be)."""
    values = np.stack(arrays).astype(float, copy=False)
    B = values.shape[1]
    means = values.mean(axis=1).tolist()
    if B < 2:
        return [Estimate(mean, None) for mean in means]
    errors = (values.std(axis=1, ddof=1) / math.sqrt(B)).tolist()
    return [Estimate(mean, error) for mean, error in zip(means, errors, strict=True)]


def spread(values):
    values = np.asarray(values, dtype=float)
    return Spread(sequence_mean(values), float(values.std(ddof=1)) if len(values) > 1 else None,
                  dict(zip(QUANTILES, map(float, np.quantile(values, QUANTILES)), strict=True)),
                  float(values.min()), float(values.max()))


def ess_fraction(log_weights):
    """(Σ w)² / (B·Σ w²) from log w, without overflow: exp(2·lse(log w) − lse(2·log w) − log B)."""
    return float(np.exp(2 * _log_sum_exp(log_weights) - _log_sum_exp(2 * log_weights) - math.log(len(log_weights))))


def _log_sum_exp(values):
    top = values.max()
    return top + math.log(np.exp(values - top).sum())


def sequence_log_ratios(log):
    """(log W, log ρ_geo) per sequence: Σ_t log ρ_t (−Σ_t (−log ρ_t): negation is exact) and its mean over the
    sequence's tokens."""
    log_W = -log_sequence_sums(log, "minus_log_rho")
    return log_W, log_W / log.lengths


def log_statistics(log):
    """The LogStatistics of a RolloutLog."""
    log_W, log_rho_geo = sequence_log_ratios(log)
    k1, k3, rho_squared, *tail_shares = log_token_means(log, ["minus_log_rho", "k3", "rho_squared", *TAILS])
    return LogStatistics(
        sequences=log.sequences, tokens=log.tokens, dropped=log.dropped,
        mean_length=sequence_mean(log.lengths),
        k1=k1, k3=k3, chi2_token=_shifted(rho_squared, -1.0),
        tail_shares=dict(zip(TAIL_THRESHOLDS, tail_shares, strict=True)),
        log_W=spread(log_W), log_rho_geo=spread(log_rho_geo),
        ess_fraction=ess_fraction(log_W),
        mean_reward=None if log.rewards is None else sequence_mean(log.rewards))


def _shifted(estimate, offset):
    return Estimate(estimate.value + offset, estimate.se)
