"""What a log's ratios say about what it logged as μ: the identity check, read from a sample.

With the logged μ the one the tokens were drawn from, every token's ratio has mean E_μ[ρ_t] = Σ_v μ_t·π_t/μ_t = 1
exactly, whatever the mismatch. A pipeline that logs another μ breaks that (``engine.sampler``, the three
distributions): raw log-probabilities with a trainer that divides by a temperature τ ≠ 1 give, at no logit error,
E_μs[ρ_t] = Σ_v π_τ²/μ_raw = 1 + χ²(π_τ‖μ_raw) > 1, and stay above 1 while the logit error is small (at τ < 1 a larger
one can pull it below: tests/your_run/test_signature.py); logged μ truncated by top-k/top-p with a trainer that keeps
mass on the cut tokens gives the kept mass, below 1. So the direction is a pattern, not a proof. The log's mean ratio − 1
(``magnitudes.Magnitudes.identity``, an estimate with its standard error) is compared with 0:

    raw          mean ratio − 1 > APART·se: the log-probabilities look pre-temperature (raw)
    truncated    1 − mean ratio > APART·se: they look truncated, the trainer's π not (or raw at τ < 1 under a larger
                 logit error)
    consistent   within APART·se of 1 — necessary for logged = sampled, not sufficient (raw logging at τ = 1, or at
                 mismatch 0 with a plain trainer, reads 1 as well)
    unknown      no standard error (one sequence)
"""

from dataclasses import dataclass

APART = 3.0             # standard errors: the mean ratio is this far from 1 before a verdict is given


@dataclass(frozen=True)
class Signature:
    verdict: str            # "raw", "truncated", "consistent" or "unknown"
    mean_ratio: float
    se: float | None
    distance: float | None  # (mean ratio − 1)/se

    def as_dict(self):
        return {"verdict": self.verdict, "mean_ratio": self.mean_ratio, "se": self.se, "standard_errors": self.distance}


def logging_signature(identity):
    """The Signature of the log's mean ratio − 1 (an Estimate: ``magnitudes.Magnitudes.identity``)."""
    mean_ratio = identity.value + 1
    if identity.se is None or not identity.se > 0:
        return Signature("unknown" if identity.se is None else "consistent", mean_ratio, identity.se, None)
    distance = identity.value / identity.se
    verdict = "raw" if distance > APART else "truncated" if distance < -APART else "consistent"
    return Signature(verdict, mean_ratio, identity.se, distance)
