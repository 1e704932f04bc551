"""The toy that matches a rollout log: the mismatch whose exact per-token KL(μ‖π) equals the log's k1.

At fixed T, V and seed only μ_t = softmax(θ_t + m·b_t) moves with the mismatch m, and the toy's per-token KL

    KL(m) = (1/T) Σ_t KL_t(μ_t‖π_t)

increases with m: μ_t is π_t tilted by exp(m·b_t), so KL_t = m·E_μt[b_t] − log E_πt[exp(m·b_t)] and
dKL_t/dm = m·Var_μt(b_t) ≥ 0. The match is a bisection on the page's range [0, 2] of m, from the (T, V)
tables alone. The data's k1 is an estimate, so the mismatch is too: k1 ∓ se mapped through the curve gives
an interval, and linearised, se(m) = se(k1) / KL'(m). A k1 at or below 0 matches m = 0, one beyond
KL(2) is clamped at 2; ``Match.clamped`` says which.

The toy's token χ² and tail shares are compared with the data's allowing for both uncertainties: the
data's value ± 2 se against the toy's range over the mismatches whose KL is within 2 se of k1 (a tail share
of the toy is a step function of m: a token's |log ρ| crosses the threshold at some m).
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toylab.analysis.diagnostics import token_chi2, token_kl
from toylab.engine.toy import Toy, make_toy
from toylab.state.query import MISMATCH_RANGE, PAGE_SIZE_LIMIT
from toylab.text import UNDEFINED
from toylab.your_run.statistics import SINGLE_SEQUENCE, TAIL_THRESHOLDS

BISECTION_STEPS = 60
CLOSE = 2.0                       # "close": within this many standard errors
RANGE_POINTS = 41                 # mismatches at which the toy's range is taken


@dataclass(frozen=True)
class Match:
    """The matched toy (T, V, seed, mismatch) and its exact per-token numbers at that mismatch."""
    T: int
    V: int
    seed: int
    mismatch: float
    mismatch_se: float | None     # se(k1) / KL'(mismatch); None when clamped or k1 has no se (one sequence)
    interval: tuple | None        # (KL⁻¹(k1 − se), KL⁻¹(k1 + se)), within the range; None without an se
    clamped: str | None           # None, "zero" (k1 ≤ 0) or "top" (k1 ≥ KL at the range's top)
    toy_kl: float                 # exact per-token KL(μ‖π) of the toy at the mismatch
    top_kl: float                 # exact per-token KL at the range's top
    toy_chi2_token: float         # exact mean_t χ²_t
    toy_tail_shares: dict         # c → exact mean_t P_μt(|log ρ_t| > c)
    toy_ranges: dict              # "chi2_token" or c → (lowest, highest) over the mismatches within CLOSE se

    def as_dict(self):
        return {"T": self.T, "V": self.V, "seed": self.seed, "mismatch": self.mismatch,
                "mismatch_se": self.mismatch_se,
                "mismatch_interval": None if self.interval is None else list(self.interval),
                "clamped": self.clamped, "toy_kl": self.toy_kl, "toy_chi2_token": self.toy_chi2_token,
                "toy_tail_shares": [{"threshold": c, "value": share} for c, share in self.toy_tail_shares.items()],
                "toy_ranges": {f"{key:g}" if isinstance(key, float) else key: list(bounds)
                               for key, bounds in self.toy_ranges.items()}}


def toy_curve(T, V, seed):
    """m ↦ the toy at mismatch m (θ and b drawn once from the seed; only the (T, V) tables are built)."""
    base = make_toy(T, V, 0.0, seed, max_sequences=None)
    return lambda mismatch: Toy(base.theta, base.b, float(mismatch), seed)


def per_token_kl(toy):
    """(1/T) Σ_t KL_t(μ_t‖π_t)."""
    return float(token_kl(toy).mean())


def kl_slope(toy):
    """dKL/dm = (1/T) Σ_t m·Var_μt(b_t)."""
    mean = (toy.mu * toy.b).sum(axis=1)
    variance = (toy.mu * toy.b**2).sum(axis=1) - mean**2
    return float(toy.mismatch * variance.mean())


def tail_shares(toy, thresholds=TAIL_THRESHOLDS):
    """{c: mean_t P_μt(|log ρ_t| > c)}: the share of tokens beyond c, exactly."""
    return {c: float((toy.mu * (np.abs(toy.log_rho) > c)).sum(axis=1).mean()) for c in thresholds}


def inverse_kl(curve, target, high=MISMATCH_RANGE[1]):
    """The m in [0, high] with per-token KL(m) = target (0 below, high above the range), by bisection."""
    low_m, high_m = 0.0, float(high)
    if target <= 0:
        return low_m
    if target >= per_token_kl(curve(high_m)):
        return high_m
    for _ in range(BISECTION_STEPS):
        middle = (low_m + high_m) / 2
        low_m, high_m = (middle, high_m) if per_token_kl(curve(middle)) < target else (low_m, middle)
    return (low_m + high_m) / 2


def matched_length(mean_length, V, limit=PAGE_SIZE_LIMIT):
    """The data's mean length, rounded, capped at the largest T the page enumerates at this V."""
    largest = max(T for T in range(1, 64) if V**T <= limit)
    return int(min(max(1, round(mean_length)), largest))


def match_toy(k1, T, V, seed, high=MISMATCH_RANGE[1]):
    """The Match for a k1 Estimate (value, se) at T, V and seed."""
    curve = toy_curve(T, V, seed)
    top_kl = per_token_kl(curve(high))
    mismatch = inverse_kl(curve, k1.value, high)
    clamped = "zero" if k1.value <= 0 else "top" if k1.value >= top_kl else None
    toy = curve(mismatch)
    slope = kl_slope(toy)
    se = k1.se / slope if clamped is None and slope > 0 and k1.se is not None else None

    def kl_interval(width):
        if k1.se is None:
            return mismatch, mismatch
        return inverse_kl(curve, k1.value - width * k1.se, high), inverse_kl(curve, k1.value + width * k1.se, high)

    interval = kl_interval(1.0) if k1.se is not None else None
    nearby = [curve(m) for m in [mismatch, *np.linspace(*kl_interval(CLOSE), RANGE_POINTS)]]
    values = {"chi2_token": [_rounded(float(token_chi2(t).mean())) for t in nearby]}
    values |= {c: [tail_shares(t)[c] for t in nearby] for c in TAIL_THRESHOLDS}
    return Match(T, V, seed, mismatch, se, interval, clamped, per_token_kl(toy), top_kl, values["chi2_token"][0],
                 {c: values[c][0] for c in TAIL_THRESHOLDS},
                 {key: (min(found), max(found)) for key, found in values.items()})


def comparison(match, statistics):
    """Sentences: where the match lands, and how close the toy's token χ² and tail shares are to the data's."""
    k1 = statistics.k1
    where = f"T = {match.T}, V = {match.V}, seed {match.seed}"
    data_k1 = f"k1 = {k1.value:.4g} ± {_or_dash(k1.se, '{:.2g}')}"
    if match.clamped == "zero":
        lines = [f"The data's {data_k1} is not above 0: sampler and trainer agree within "
                 f"this sample, and the matching toy ({where}) has mismatch 0, where every estimator coincides."]
    elif match.clamped == "top":
        lines = [f"Even the page's largest mismatch, {match.mismatch:g}, gives the toy ({where}) a per-token KL of "
                 f"only {match.top_kl:.4g}, below the data's {data_k1}: the toy is "
                 "clamped there and understates this run's mismatch."]
    else:
        lines = [f"At mismatch {match.mismatch:.3f} ± {_or_dash(match.mismatch_se, '{:.3f}')} the toy ({where}) has "
                 f"the data's per-token KL, {data_k1}."]
    rows = [("token χ²", "chi2_token", match.toy_chi2_token, statistics.chi2_token, "{:.3g}")]
    rows += [(f"share of tokens with |log ρ| > {c:g}", c, match.toy_tail_shares[c], statistics.tail_shares[c],
              "{:.1%}") for c in TAIL_THRESHOLDS]
    close = True
    for name, key, toy_value, data, style in rows:
        low, high = match.toy_ranges[key]
        text = (f"{name}: data {style.format(data.value)} ± {_or_dash(data.se, style)}, toy "
                f"{style.format(toy_value)} ({style.format(low)} to {style.format(high)} over the mismatches within "
                f"{CLOSE:g} se)")
        margin = CLOSE * (data.se or 0.0)
        if data.value + margin >= low and data.value - margin <= high:
            lines.append(f"{text}: consistent.")
        else:
            close = False
            lines.append(f"{text}: the data's is {_times(data.value, toy_value)} the toy's.")
    heavier = statistics.tail_shares[TAIL_THRESHOLDS[-1]].value > match.toy_tail_shares[TAIL_THRESHOLDS[-1]]
    lines.append("So per token the toy is a fair stand-in for this run." if close else
                 "So the toy has this run's average mismatch but not its shape: the data's ratios have "
                 f"{'heavier' if heavier else 'lighter'} tails, so the toy's shares of clipped and masked tokens "
                 "are only indicative.")
    if k1.se is None:
        lines.append(f"— : {SINGLE_SEQUENCE}; the comparison takes the data's numbers as exact.")
    length = statistics.mean_length.value
    if length > 1.5 * match.T:
        lines.append(f"The toy's sequences have {match.T} tokens, the data's {length:.0f} on average: sequence-level "
                     "weights (W, the ESS) are far more extreme in the data than in the toy.")
    return lines


def _or_dash(value, style):
    return UNDEFINED if value is None else style.format(value)


def _rounded(value):
    """0 for rounding noise (χ² at mismatch 0 is ~1e-17)."""
    return 0.0 if abs(value) < 1e-12 else value


def _times(data, toy):
    if abs(toy) < 1e-12:
        return "above" if data > 0 else "below"
    return f"{data / toy:.2g}×"


def comparison_frame(match, statistics):
    """quantity, data (sample estimate), se, toy (exact at the matched mismatch), toy_low, toy_high (over the
    mismatches within CLOSE se): the data's and the toy's numbers side by side, never in one column."""
    rows = [("per-token KL: data k1, toy exact", statistics.k1, match.toy_kl, (match.toy_kl, match.toy_kl)),
            ("token χ²", statistics.chi2_token, match.toy_chi2_token, match.toy_ranges["chi2_token"])]
    rows += [(f"share |log ρ| > {c:g}", statistics.tail_shares[c], match.toy_tail_shares[c], match.toy_ranges[c])
             for c in TAIL_THRESHOLDS]
    return pd.DataFrame([{"quantity": name, "data": data.value, "se": data.se, "toy": toy, "toy_low": low,
                          "toy_high": high} for name, data, toy, (low, high) in rows])
