"""The sizes a real run's mismatch has: small means with their standard errors, tails, extremes, the worst tokens.

A bf16 or int8 sampler against a float32 trainer gives per-token KL near 1e-4 and |log ρ| mostly below 1e-2: the
numbers that matter are small, and the estimators that show them must not drown them in noise. With ρ = π/μ and
tokens drawn from μ (every mean a token mean with its clustered standard error, ``statistics.token_mean``):

    chi2_low_variance  = mean (ρ − 1)²     unbiased for χ²(π‖μ) = E_μ[ρ²] − 1, like mean ρ² − 1, because E_μ[ρ] = 1;
                                           but a sum of squares, not a difference of two numbers near 1, so its
                                           standard error is of the order of χ² itself, not of √χ²
    identity           = mean ρ − 1        0 in expectation when the sampler's log-probs are those of the
                                           distribution it sampled from and μ > 0 wherever π > 0. Below 0 (beyond
                                           its se): the sampler's log-probs miss mass the trainer has — top-p or
                                           top-k truncation; above 0: the pattern of raw (pre-temperature)
                                           log-probs with a trainer that divides by τ (``your_run.signature``)
    |log ρ| quantiles  p50, p99, p99.9 and the maximum; the smallest ρ (the low tail) and the largest
    worst tokens       the response tokens with the largest |log ρ|: sequence, row, position, μ(y_t), π(y_t), log ρ
    worst sequences    the sequences with the largest |log W|: row, length, log W, their largest |log ρ|

k3 = mean(ρ − 1 − log ρ) is the low-variance estimate of the KL itself, and the tail shares at |log ρ| > 1e-3, 1e-2,
0.1 and 1 are among the statistics (``statistics``).
"""

from dataclasses import dataclass

import numpy as np

from toylab.your_run.statistics import Estimate, log_token_means
from toylab.your_run.token_pass import token_pass

WORST = 10


@dataclass(frozen=True)
class Magnitudes:
    chi2_low_variance: Estimate
    identity: Estimate
    abs_log_rho_quantiles: dict       # "p50", "p99", "p99.9", "max" → value
    min_rho: float
    max_rho: float
    worst_tokens: list                # dicts: sequence, row, position, sampler_probability, trainer_probability, log_rho
    worst_sequences: list             # dicts: sequence, row, length, log_W, max_abs_log_rho

    def as_dict(self):
        return {"chi2_low_variance": self.chi2_low_variance.as_dict(), "identity_mean_rho_minus_1": self.identity.as_dict(),
                "abs_log_rho_quantiles": self.abs_log_rho_quantiles, "min_rho": self.min_rho,
                "max_rho": self.max_rho, "worst_tokens": self.worst_tokens, "worst_sequences": self.worst_sequences}


def magnitudes(log, worst=WORST):
    """The Magnitudes of a RolloutLog (the worst tokens and sequences only when ``worst`` > 0: they read the whole
    log's |log ρ|)."""
    passed = token_pass(log)
    identity, chi2_low_variance = log_token_means(log, ["rho", "rho_minus_1_sq"])
    largest = max(-passed.log_rho_low, passed.log_rho_high)
    return Magnitudes(
        chi2_low_variance=chi2_low_variance,
        identity=Estimate(identity.value - 1.0, identity.se),
        abs_log_rho_quantiles=passed.abs_log_rho_quantiles | {"max": largest},
        min_rho=float(np.exp(passed.log_rho_low)), max_rho=float(np.exp(passed.log_rho_high)),
        worst_tokens=_worst_tokens(log, np.abs(log.log_ratio), worst) if worst else [],
        worst_sequences=_worst_sequences(log, log.log_ratio, np.abs(log.log_ratio), worst) if worst else [])


def _largest(values, count):
    """Indices of the ``count`` largest values, largest first (ties in index order)."""
    count = min(count, len(values))
    if count == 0:
        return np.zeros(0, np.int64)
    chosen = np.argpartition(-values, count - 1)[:count] if count < len(values) else np.arange(len(values))
    return chosen[np.lexsort((chosen, -values[chosen]))]


def _worst_tokens(log, abs_log_rho, count):
    rows = []
    for token in _largest(abs_log_rho, count):
        sequence = int(np.searchsorted(log.offsets, token, side="right")) - 1
        rows.append({"sequence": sequence, "row": int(log.rows[sequence]),
                     "position": int(token - log.offsets[sequence]),
                     "sampler_probability": float(np.exp(log.sampler_logprobs[token])),
                     "trainer_probability": float(np.exp(log.trainer_logprobs[token])),
                     "log_rho": float(log.trainer_logprobs[token] - log.sampler_logprobs[token])})
    return rows


def _worst_sequences(log, log_rho, abs_log_rho, count):
    log_W = log.sequence_sums(log_rho)
    largest = np.maximum.reduceat(abs_log_rho, log.offsets[:-1])
    return [{"sequence": int(b), "row": int(log.rows[b]), "length": int(log.lengths[b]), "log_W": float(log_W[b]),
             "max_abs_log_rho": float(largest[b])} for b in _largest(np.abs(log_W), count)]
