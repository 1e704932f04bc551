"""The toy that matches a rollout log: the mismatch whose exact per-token KL(μ‖π) equals the log's estimate of it.

At fixed T, V and seed only μ_t = softmax(θ_t + m·b_t) moves with the mismatch m, and the toy's per-token KL

    KL(m) = (1/T) Σ_t KL_t(μ_t‖π_t)

increases with m: μ_t is π_t tilted by exp(m·b_t), so KL_t = m·E_μt[b_t] − log E_πt[exp(m·b_t)] and
dKL_t/dm = m·Var_μt(b_t) ≥ 0. The match is a bisection on the page's range [0, 2] of m, from the (T, V)
tables alone. The data's KL is an estimate — k3 or k1, whichever has the smaller standard error
(``matching_estimate``) — so the mismatch is too: the estimate ∓ se mapped through the curve gives an interval,
and linearised, se(m) = se / KL'(m). An estimate at or below 0 matches m = 0, one beyond KL(2) is clamped at 2;
``Match.clamped`` says which.

The toy's token χ² and tail shares are compared with the data's allowing for both uncertainties: the data's
low-variance χ² = mean((ρ − 1)²) and its tail shares ± 2 se against the toy's range over the mismatches whose KL
is within 2 se of the estimate (a tail share of the toy is a step function of m: a token's |log ρ| crosses the
threshold at some m); a verdict only where the sample can tell (``shape_checks``), and what the verdicts say of the
tails (shares beyond TAIL_FROM) and of the bulk apart (``shape_of``). The words are the presentation layer's
(``toylab.presentation.run_verdict``).
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.diagnostics import on_support, token_chi2, token_kl
from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.engine.toy import Toy, make_toy
from toylab.state.query import MISMATCH_RANGE, PAGE_SIZE_LIMIT
from toylab.your_run.statistics import TAIL_THRESHOLDS

BISECTION_STEPS = 60
CLOSE = 2.0                       # "close": within this many standard errors
APART = 3.0                       # a shape verdict: the data's value this many standard errors beyond the toy's range
                                  # (five quantities are compared: at 2 se one would differ by chance one time in five)
RANGE_POINTS = 41                 # mismatches at which the toy's range is taken
TAIL_FROM = 1e-2                  # a share beyond this |log ρ| speaks for the tail; below it (and χ²), for the bulk


@dataclass(frozen=True)
class Match:
    """The matched toy (T, V, seed, mismatch) and its exact per-token numbers at that mismatch."""
    T: int
    V: int
    seed: int
    mismatch: float
    mismatch_se: float | None     # se(KL) / KL'(mismatch); None when clamped or the estimate has no se (one sequence)
    interval: tuple | None        # (KL⁻¹(KL − se), KL⁻¹(KL + se)), within the range; None without an se
    clamped: str | None           # None, "zero" (KL ≤ 0) or "top" (KL ≥ the toy's KL at the range's top)
    toy_kl: float                 # exact per-token KL(μ‖π) of the toy at the mismatch
    top_kl: float                 # exact per-token KL at the range's top
    toy_chi2_token: float         # exact mean_t χ²_t
    toy_tail_shares: dict         # c → exact mean_t P_μt(|log ρ_t| > c)
    toy_ranges: dict              # "chi2_token" or c → (lowest, highest) over the mismatches within CLOSE se
    sampler: object = DEFAULT_SAMPLER

    def as_dict(self):
        return {"T": self.T, "V": self.V, "seed": self.seed, **self.sampler.parameters(), "mismatch": self.mismatch,
                "mismatch_se": self.mismatch_se,
                "mismatch_interval": None if self.interval is None else list(self.interval),
                "clamped": self.clamped, "toy_kl": self.toy_kl, "toy_chi2_token": self.toy_chi2_token,
                "toy_tail_shares": [{"threshold": c, "value": share} for c, share in self.toy_tail_shares.items()],
                "toy_ranges": {f"{key:g}" if isinstance(key, float) else key: list(bounds)
                               for key, bounds in self.toy_ranges.items()}}


def toy_curve(T, V, seed, sampler=DEFAULT_SAMPLER):
    """m ↦ the toy at mismatch m with this sampler model (θ and b drawn once from the seed; only the (T, V) tables
    are built). With a sampler other than plain softmax KL need not start at 0 nor rise with m, and it jumps where a
    token leaves top-k/top-p's kept set or a rounded logit changes step: the bisection then finds a crossing (within
    the jump), and the slope is a central difference."""
    base = make_toy(T, V, 0.0, seed, sampler, max_sequences=None)
    return lambda mismatch: Toy(base.theta, base.b, float(mismatch), seed, sampler)


def per_token_kl(toy, statistic="k1"):
    """(1/T) Σ_t KL_t(μ_t‖π_t): what the log's k1 and k3 estimate when it logs the μ it sampled from. A pipeline that
    logs another μ (``Sampler.logged``) makes them estimate E_μs[−log ρ_t] (k1) and E_μs[ρ_t − 1 − log ρ_t] (k3),
    which are not a KL: then the toy's value is that of the ``statistic`` the data is matched on."""
    if toy.sampler.logged == "processed":
        return float(token_kl(toy).mean())
    k1 = -float(on_support(toy.mu, toy.log_rho, toy.kept).sum(axis=1).mean())
    return k1 if statistic == "k1" else k1 + float(toy.identity_tokens.mean()) - 1


def kl_slope(toy, curve=None, step=1e-4, statistic="k1"):
    """dKL/dm = (1/T) Σ_t m·Var_μt(b_t) for plain softmax; otherwise the central difference of ``curve`` at the
    toy's mismatch (of ``per_token_kl`` with the ``statistic``)."""
    if not toy.sampler.is_default:
        low, high = max(toy.mismatch - step, 0.0), toy.mismatch + step
        return (per_token_kl(curve(high), statistic) - per_token_kl(curve(low), statistic)) / (high - low)
    mean = (toy.mu * toy.b).sum(axis=1)
    variance = (toy.mu * toy.b**2).sum(axis=1) - mean**2
    return float(toy.mismatch * variance.mean())


def tail_shares(toy, thresholds=TAIL_THRESHOLDS):
    """{c: mean_t P_μt(|log ρ_t| > c)}: the share of tokens beyond c, exactly."""
    return {c: float((toy.mu * (np.abs(toy.log_rho) > c)).sum(axis=1).mean()) for c in thresholds}


def inverse_kl(curve, target, high=MISMATCH_RANGE[1], statistic="k1"):
    """The m in [0, high] with per-token KL(m) = target (0 below, high above the range), by bisection
    (``per_token_kl`` with the ``statistic``)."""
    low_m, high_m = 0.0, float(high)
    if target <= 0:
        return low_m
    if target >= per_token_kl(curve(high_m), statistic):
        return high_m
    for _ in range(BISECTION_STEPS):
        middle = (low_m + high_m) / 2
        low_m, high_m = (middle, high_m) if per_token_kl(curve(middle), statistic) < target else (low_m, middle)
    return (low_m + high_m) / 2


def matched_length(mean_length, V, limit=PAGE_SIZE_LIMIT):
    """The data's mean length, rounded, capped at the largest T the page enumerates at this V."""
    largest = max(T for T in range(1, 64) if V**T <= limit)
    return int(min(max(1, round(mean_length)), largest))


def match_toy(kl, T, V, seed, high=MISMATCH_RANGE[1], sampler=DEFAULT_SAMPLER, statistic="k1"):
    """The Match for an Estimate (value, se) of the per-token KL (``matching_estimate``: its ``statistic``, k1 or
    k3) at T, V, seed and the pipeline model (the sampler, what it logs, what the trainer scores)."""
    curve = toy_curve(T, V, seed, sampler)
    top_kl = per_token_kl(curve(high), statistic)
    mismatch = inverse_kl(curve, kl.value, high, statistic)
    clamped = "zero" if kl.value <= 0 else "top" if kl.value >= top_kl else None
    toy = curve(mismatch)
    slope = kl_slope(toy, curve, statistic=statistic)
    se = kl.se / slope if clamped is None and slope > 0 and kl.se is not None else None

    def kl_interval(width):
        if kl.se is None:
            return mismatch, mismatch
        return inverse_kl(curve, kl.value - width * kl.se, high, statistic), \
            inverse_kl(curve, kl.value + width * kl.se, high, statistic)

    interval = kl_interval(1.0) if kl.se is not None else None
    nearby = [curve(m) for m in [mismatch, *np.linspace(*kl_interval(CLOSE), RANGE_POINTS)]]
    values = {"chi2_token": [_rounded(float(token_chi2(t).mean())) for t in nearby]}
    values |= {c: [tail_shares(t)[c] for t in nearby] for c in TAIL_THRESHOLDS}
    return Match(T, V, seed, mismatch, se, interval, clamped, per_token_kl(toy, statistic), top_kl,
                 values["chi2_token"][0],
                 {c: values[c][0] for c in TAIL_THRESHOLDS},
                 {key: (min(found), max(found)) for key, found in values.items()}, sampler)


def matching_estimate(statistics):
    """(name, Estimate) of the per-token KL the toy is matched on: k3 or k1, whichever has the smaller standard
    error (both estimate KL(μ‖π); at a realistic mismatch k1's terms ±log ρ cancel and its error is 30–100× k3's).
    k1 when neither has a standard error (one sequence)."""
    k1, k3 = statistics.k1, statistics.k3
    if k3.se is not None and (k1.se is None or k3.se < k1.se):
        return "k3", k3
    return "k1", k1


@dataclass(frozen=True)
class ShapeCheck:
    """One quantity of the data against the toy: the data's estimate, the toy's exact value and its range over the
    mismatches within CLOSE se, the verdict — "consistent", "heavier", "lighter" or "cannot tell" — and the part of
    the ratios' distribution it speaks for: "tail" (a share beyond TAIL_FROM or more) or "bulk" (the token χ², the
    share beyond 1e-3: what the many small ratios do)."""
    quantity: str
    data: object                      # Estimate
    toy: float
    toy_low: float
    toy_high: float
    verdict: str
    part: str = "bulk"


@dataclass(frozen=True)
class Shape:
    """What the checks say, per part: "heavier", "lighter", "mixed" (some each way), "same" (every check of the part
    consistent or undecided with one consistent at least) or "unknown" (none decided)."""
    tails: str
    bulk: str


def shape_of(checks):
    """The Shape of a list of ShapeChecks: a part differs when one of its checks is heavier or lighter."""
    def part(name):
        verdicts = {check.verdict for check in checks if check.part == name}
        differ = verdicts & {"heavier", "lighter"}
        if differ:
            return differ.pop() if len(differ) == 1 else "mixed"
        return "same" if "consistent" in verdicts else "unknown"
    return Shape(part("tail"), part("bulk"))


def shape_checks(match, statistics, sizes):
    """ShapeChecks of the token χ² (the data's low-variance mean((ρ − 1)²), ``magnitudes``) and the tail shares.

    The data's interval is its value ± APART se (a share with no token beyond reaches up to 3/n, the rule of
    three); it is "heavier" or "lighter" when wholly above or below the toy's range, "consistent" when it overlaps
    that range and lies within a factor 2 of the toy's value — and otherwise the sample is too small to tell."""
    rows = [("token χ²", sizes.chi2_low_variance, match.toy_chi2_token, match.toy_ranges["chi2_token"], "bulk")]
    rows += [(f"share |log ρ| > {c:g}", statistics.tail_shares[c], match.toy_tail_shares[c], match.toy_ranges[c],
              "tail" if c >= TAIL_FROM else "bulk") for c in TAIL_THRESHOLDS]
    checks = []
    for quantity, data, toy, (low, high), part in rows:
        checks.append(ShapeCheck(quantity, data, toy, low, high,
                                 _verdict(data, toy, low, high, statistics.tokens, quantity.startswith("share")), part))
    return checks


def _verdict(data, toy, low, high, tokens, share):
    if data.se is None:
        return "cannot tell"
    data_low, data_high = data.value - APART * data.se, data.value + APART * data.se
    if share:
        data_low, data_high = max(data_low, 0.0), max(data_high, 3 / tokens)
    if data_low > high:
        return "heavier"
    if data_high < low:
        return "lighter"
    if toy > 0 and data_low >= toy / 2 and data_high <= 2 * toy:
        return "consistent"
    return "cannot tell"


def _rounded(value):
    """0 for rounding noise (χ² at mismatch 0 is ~1e-17)."""
    return 0.0 if abs(value) < 1e-12 else value
