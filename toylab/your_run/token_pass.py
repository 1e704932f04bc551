"""One pass over a log's tokens that gives every token-level input of its statistics, magnitudes and the frameworks'
metrics: per-sequence sums, extremes, spreads and the |log ρ| quantiles.

With log ρ = log π − log μ and ρ = e^{log ρ}, the per-token quantities (``TOKEN_MEANS``, each a token mean with its
standard error clustered by sequence, ``statistics.token_mean``; ``quantity`` computes each over the whole log) are

    minus_log_rho      −log ρ                     k1; verl's kl
    k3                 ρ − 1 − log ρ
    rho_squared        ρ²                         χ²_token + 1
    tail>c             1 when |log ρ| > c          c in TAIL_THRESHOLDS
    rho                ρ                          the identity check + 1
    rho_minus_1_sq     (ρ − 1)²                   the low-variance χ²
    abs_log_rho        |log ρ|
    clamped_squared    e^{2·clamp(log ρ, ±20)}    verl's chi2_token + 1
    probability_gap    |π − μ|
    exp_abs_log_rho    e^{|log ρ|} = max(ρ, 1/ρ)
    policy_kl          1/ρ − 1 + log ρ
    js                 NeMo-RL's per-token formula (``parity``)
    reverse_kl         μ·(log μ − log π)

and the means over each sequence's tokens of log μ, log π, −log ρ, e^{|log ρ|} and |log ρ| (``SEQUENCE_MEANS``).

The log is walked a chunk of whole sequences at a time (CHUNK_TOKENS tokens, or one longer sequence), each
quantity written into one buffer and summed over each sequence by ``np.add.reduceat`` on that sequence's own tokens:
every S_b is the sum the whole log's array would give, bit for bit, and every mean is then taken from the S_b as
``statistics.token_means`` takes it (``statistics.clustered_means``), so the numbers are the ones a quantity computed
alone over the whole log gives. Only the token mean of verl's clamped weight (its ESS), the spreads of |π − μ| and
|log ρ| and the correlation of π and μ are summed in another order (chunk by chunk, combined by Chan's formulas):
sums of positive terms, or a correlation near 1, whose last bits move, not their first twelve digits. |log ρ|'s
quantiles are np.quantile's, bit for bit, from its order statistics alone: a histogram of the values' top KEY_BITS
bits says which bins hold them, and a second walk gathers those bins' values. Memory holds the log, a (B,) array per
sum and a chunk's buffers, not a copy of the log per quantity.

A log whose sums would leave float64 without the statistics' scaling (a log-probability near −1e308, a sequence's
Σ ρ² beyond 1.8e308) is computed the other way, a whole array per quantity scaled by a power of two
(``whole_log_pass``): the definition, which the tests hold the chunked pass to.
"""

import math
import weakref
from dataclasses import dataclass

import numpy as np

from toylab.your_run.bounds import LOG_RATIO_LIMIT

TAIL_THRESHOLDS = (1e-3, 1e-2, 0.1, 1.0)          # sizes real runs have: bf16 gives |log ρ| ~ 1e-3
CHUNK_TOKENS = 1 << 15            # a chunk's two dozen buffers stay in a core's cache
SAFETY_BOUND = 20.0               # verl's clamp on log ratios (rollout_corr_helper.py)
VERL_IS_THRESHOLD = 2.0           # verl's default rollout_is_threshold
ABS_LOG_RHO_QUANTILES = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999}
KEY_BITS = 16                     # |log ρ|'s bins for its quantiles: sign, exponent and 4 bits of the mantissa
KEY_BINS = 1 << (KEY_BITS - 1)    # (the sign bit is 0)
LOG_PROBABILITY_FLOOR = -(2.0**500)   # log-probabilities above it: their sequences' sums stay in float64
TAILS = tuple(f"tail>{c:g}" for c in TAIL_THRESHOLDS)
TOKEN_MEANS = ("minus_log_rho", "k3", "rho_squared", *TAILS, "rho", "rho_minus_1_sq", "abs_log_rho", "clamped_squared",
               "probability_gap", "exp_abs_log_rho", "policy_kl", "js", "reverse_kl")
SEQUENCE_MEANS = ("log_mu", "log_pi", "minus_log_rho", "exp_abs_log_rho", "abs_log_rho")
SUMMED = (*TOKEN_MEANS, "log_mu", "log_pi")


@dataclass(frozen=True, eq=False)
class TokenPass:
    """What the statistics read of a log's tokens (see the module docstring)."""
    sums: dict | None                 # name in SUMMED → (B,) Σ over each sequence's tokens; None: take them scaled
    log_rho_low: float
    log_rho_high: float
    k3_high: float
    probability_gap_high: float
    abs_log_rho_quantiles: dict       # "p50", "p99", "p99.9" → value
    probability_gap_sd: float | None  # None: one token
    abs_log_rho_sd: float | None
    probability_correlation: float | None    # Pearson's r of π and μ; None when either is constant
    verl_token_ess: float             # verl's rollout_is_eff_sample_size (rollout_is=token)


_PASSES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def token_pass(log) -> TokenPass:
    """The log's TokenPass, computed once per RolloutLog (chunked, or ``whole_log_pass`` when its sums need the
    scaling)."""
    found = _PASSES.get(log)
    if found is None:
        found = chunked_pass(log) or whole_log_pass(log)
        _PASSES[log] = found
    return found


def chunk_bounds(offsets, size=CHUNK_TOKENS):
    """[(first sequence, last sequence + 1)] of consecutive whole sequences holding about ``size`` tokens each."""
    bounds, start, B = [], 0, len(offsets) - 1
    while start < B:
        stop = int(np.searchsorted(offsets, offsets[start] + size, side="right")) - 1
        stop = min(max(stop, start + 1), B)
        bounds.append((start, stop))
        start = stop
    return bounds


def chunked_pass(log) -> TokenPass | None:
    """The TokenPass from one walk over the log's chunks; None if a sum leaves float64 unscaled (or could)."""
    offsets, B, n = log.offsets, log.sequences, log.tokens
    sums = {name: np.empty(B) for name in SUMMED}
    histogram = np.zeros(KEY_BINS, np.int64)
    low, high, k3_high, gap_high, lowest_logprob = math.inf, -math.inf, -math.inf, -math.inf, 0.0
    moments = _Moments()
    buffers = _Buffers(min(n, max(CHUNK_TOKENS, int(log.lengths.max()))))
    with np.errstate(over="ignore", invalid="ignore"):       # a sum beyond float64: taken whole (below)
        for first, last in chunk_bounds(offsets):
            start, stop = int(offsets[first]), int(offsets[last])
            starts = offsets[first:last] - start
            size = stop - start
            mu_log, pi_log = log.sampler_logprobs[start:stop], log.trainer_logprobs[start:stop]
            values = buffers.of(size)
            log_rho = np.subtract(pi_log, mu_log, out=values["log_rho"])
            low, high = min(low, float(log_rho.min())), max(high, float(log_rho.max()))
            lowest_logprob = min(lowest_logprob, float(mu_log.min()), float(pi_log.min()))
            if max(-low, high) > LOG_RATIO_LIMIT or lowest_logprob < LOG_PROBABILITY_FLOOR:
                return None
            quantities = _quantities(mu_log, pi_log, log_rho, values)
            histogram += np.bincount(_keys(quantities["abs_log_rho"], values["keys"]), minlength=KEY_BINS)
            for name in SUMMED:
                np.add.reduceat(quantities[name], starts, out=sums[name][first:last], dtype=np.float64)
            k3_high = max(k3_high, float(quantities["k3"].max()))
            gap_high = max(gap_high, float(quantities["probability_gap"].max()))
            moments.add(quantities, (values["deviation"], values["scratch"], values["rho_minus_1"]))
    if not all(np.isfinite(values).all() for values in sums.values()):
        return None
    return TokenPass(
        sums=sums, log_rho_low=low, log_rho_high=high, k3_high=k3_high,
        probability_gap_high=gap_high, abs_log_rho_quantiles=_selected_quantiles(log, histogram, buffers),
        probability_gap_sd=moments.sd("probability_gap"), abs_log_rho_sd=moments.sd("abs_log_rho"),
        probability_correlation=moments.correlation(), verl_token_ess=moments.verl_ess())


class _Buffers:
    """A chunk's per-token buffers, allocated once for the largest chunk and viewed at each chunk's size."""
    NAMES = ("log_rho", "rho", "abs_log_rho", "minus_log_rho", "k3", "rho_squared", "rho_minus_1", "rho_minus_1_sq",
             "pi", "mu", "probability_gap", "inverse", "exp_abs_log_rho", "clamped", "clamped_squared", "policy_kl",
             "one_plus_rho", "log_half_sum", "js", "js_other", "reverse_kl", "verl_weight", "deviation", "scratch", "keys",
             *TAILS)

    def __init__(self, size):
        self.arrays = {name: np.empty(size) for name in self.NAMES}

    def of(self, size):
        return {name: array[:size] for name, array in self.arrays.items()}


def _quantities(mu_log, pi_log, log_rho, out):
    """Every per-token quantity of a chunk, each computed as its definition writes it (the same operations in the
    same order: ``whole_log_pass``), into ``out``'s buffers."""
    rho = np.exp(log_rho, out=out["rho"])
    abs_log_rho = np.abs(log_rho, out=out["abs_log_rho"])
    minus_log_rho = np.negative(log_rho, out=out["minus_log_rho"])
    rho_minus_1 = np.subtract(rho, 1, out=out["rho_minus_1"])
    k3 = np.subtract(rho_minus_1, log_rho, out=out["k3"])                            # ρ − 1 − log ρ
    quantities = {"log_rho": log_rho, "rho": rho, "abs_log_rho": abs_log_rho, "minus_log_rho": minus_log_rho,
                  "k3": k3, "rho_squared": np.square(rho, out=out["rho_squared"]),
                  "rho_minus_1_sq": np.square(rho_minus_1, out=out["rho_minus_1_sq"]), "log_mu": mu_log,
                  "log_pi": pi_log}
    for name, c in zip(TAILS, TAIL_THRESHOLDS, strict=True):
        quantities[name] = np.greater(abs_log_rho, c, out=out[name].view(bool)[: len(log_rho)])
    pi = np.exp(pi_log, out=out["pi"])
    mu = np.exp(mu_log, out=out["mu"])
    gap = np.abs(np.subtract(pi, mu, out=out["probability_gap"]), out=out["probability_gap"])
    inverse = np.divide(1, rho, out=out["inverse"])
    exp_abs = np.maximum(rho, inverse, out=out["exp_abs_log_rho"])
    if float(abs_log_rho.max()) <= SAFETY_BOUND:
        clamped = rho
    else:
        clamped = np.exp(np.clip(log_rho, -SAFETY_BOUND, SAFETY_BOUND, out=out["clamped"]), out=out["clamped"])
    policy = np.add(np.subtract(inverse, 1, out=out["policy_kl"]), log_rho, out=out["policy_kl"])
    one_plus = np.add(1, rho, out=out["one_plus_rho"])
    log_half_sum = np.subtract(np.log1p(rho, out=out["log_half_sum"]), math.log(2), out=out["log_half_sum"])
    # 0.5 * (2 * rho / (1 + rho) - 1 - (log_rho - log_half_sum)) + 0.5 * (2 / (1 + rho) - 1 + log_half_sum)
    js, other, scratch = out["js"], out["js_other"], out["scratch"]
    np.multiply(2, rho, out=js)
    np.divide(js, one_plus, out=js)
    np.subtract(js, 1, out=js)
    np.subtract(js, np.subtract(log_rho, log_half_sum, out=scratch), out=js)
    np.multiply(0.5, js, out=js)
    np.divide(2, one_plus, out=other)
    np.subtract(other, 1, out=other)
    np.add(other, log_half_sum, out=other)
    np.multiply(0.5, other, out=other)
    np.add(js, other, out=js)
    quantities |= {"pi": pi, "mu": mu, "probability_gap": gap, "exp_abs_log_rho": exp_abs,
                   "clamped_squared": np.square(clamped, out=out["clamped_squared"]), "policy_kl": policy, "js": js,
                   "reverse_kl": np.multiply(mu, minus_log_rho, out=out["reverse_kl"]),
                   "verl_weight": np.clip(clamped, 1 / VERL_IS_THRESHOLD, VERL_IS_THRESHOLD, out=out["verl_weight"])}
    return quantities


class _Moments:
    """Count, means and centred sums of squares of |π − μ|, |log ρ|, π and μ and of (π − π̄)(μ − μ̄), chunk by chunk
    (each chunk's about its own means, combined by Chan's formulas); Σ w and Σ w² of verl's clamped weight."""
    NAMES = ("probability_gap", "abs_log_rho", "pi", "mu")

    def __init__(self):
        self.count = 0
        self.mean = dict.fromkeys(self.NAMES, 0.0)
        self.squares = dict.fromkeys(self.NAMES, 0.0)
        self.product = 0.0
        self.weight = self.weight_squares = 0.0

    def add(self, quantities, deviations):
        """Add a chunk's ``quantities``; ``deviations`` are three free buffers of its size (no BLAS ``dot``: under load
        OpenBLAS's threads made one of 32k values take 20 ms)."""
        size = len(quantities["pi"])
        total = self.count + size
        share = self.count * size / total
        delta = {}
        for name in self.NAMES:
            values = quantities[name]
            mean = float(values.sum()) / size
            into = deviations[1] if name == "mu" else deviations[0]
            deviation = np.subtract(values, mean, out=into)
            self.squares[name] += float(np.square(deviation, out=deviations[2]).sum())
            delta[name] = mean - self.mean[name]
            self.squares[name] += delta[name] ** 2 * share
            self.mean[name] += delta[name] * size / total
        self.product += float(np.multiply(deviations[0], deviations[1], out=deviations[2]).sum()) + \
            delta["pi"] * delta["mu"] * share
        weights = quantities["verl_weight"]
        self.weight += float(weights.sum())
        self.weight_squares += float(np.square(weights, out=deviations[2]).sum())
        self.count = total

    def sd(self, name):
        return math.sqrt(self.squares[name] / (self.count - 1)) if self.count > 1 else None

    def correlation(self):
        denominator = math.sqrt(self.squares["pi"] * self.squares["mu"])
        return self.product / denominator if self.count > 1 and denominator > 0 else None

    def verl_ess(self):
        mean = self.weight / self.count
        return 1.0 / (self.weight_squares / (mean * mean) / self.count)


def _keys(abs_log_rho, out):
    """Each |log ρ|'s bin: its float64 bits' top KEY_BITS (a nonnegative float's bits order it as the float does)."""
    return np.right_shift(abs_log_rho.view(np.int64), 64 - KEY_BITS, out=out.view(np.int64))


def _selected_quantiles(log, histogram, buffers):
    """np.quantile's |log ρ| quantiles (linear: v = (n − 1)·q, between the order statistics ⌊v⌋ and ⌊v⌋ + 1, as
    ``_lerp`` weighs them) from the order statistics alone: the bins' counts say which bin holds each, and a second
    walk over the chunks gathers only those bins' values."""
    n = log.tokens
    virtual = (n - 1) * np.array(list(ABS_LOG_RHO_QUANTILES.values()))
    below = np.floor(virtual).astype(np.int64)
    ranks = sorted({int(rank) for rank in below} | {min(int(rank) + 1, n - 1) for rank in below})
    ends = np.cumsum(histogram)
    bins = {rank: int(np.searchsorted(ends, rank, side="right")) for rank in ranks}
    found = {bin: [] for bin in set(bins.values())}
    for first, last in chunk_bounds(log.offsets):
        start, stop = int(log.offsets[first]), int(log.offsets[last])
        values = buffers.of(stop - start)
        abs_log_rho = np.abs(np.subtract(log.trainer_logprobs[start:stop], log.sampler_logprobs[start:stop],
                                         out=values["log_rho"]), out=values["abs_log_rho"])
        keys = _keys(abs_log_rho, values["keys"])
        for bin, parts in found.items():
            parts.append(abs_log_rho[keys == bin])
    ordered = {bin: np.sort(np.concatenate(parts)) for bin, parts in found.items()}
    order = {rank: float(ordered[bins[rank]][rank - (ends[bins[rank] - 1] if bins[rank] else 0)]) for rank in ranks}
    result = {}
    for name, point, rank in zip(ABS_LOG_RHO_QUANTILES, virtual.tolist(), below.tolist(), strict=True):
        low, high, gamma = order[rank], order[min(rank + 1, n - 1)], point - rank
        difference = high - low
        result[name] = high - difference * (1 - gamma) if gamma >= 0.5 else low + difference * gamma
    return result


def _quantiles(abs_log_rho):
    return dict(zip(ABS_LOG_RHO_QUANTILES, map(float, np.quantile(abs_log_rho, list(ABS_LOG_RHO_QUANTILES.values()))),
                    strict=True))


def quantity(log, name):
    """The (n,) values of a quantity of ``SUMMED`` over the whole log: its definition (module docstring)."""
    log_rho, rho = log.log_ratio, log.ratio
    if name.startswith("tail>"):
        return (np.abs(log_rho) > float(name[len("tail>"):])).astype(float)
    if name in ("log_mu", "log_pi"):
        return log.sampler_logprobs if name == "log_mu" else log.trainer_logprobs
    if name == "probability_gap":
        return np.abs(np.exp(log.trainer_logprobs) - np.exp(log.sampler_logprobs))
    if name == "js":
        log_half_sum = np.log1p(rho) - math.log(2)
        return 0.5 * (2 * rho / (1 + rho) - 1 - (log_rho - log_half_sum)) + 0.5 * (2 / (1 + rho) - 1 + log_half_sum)
    return {"minus_log_rho": lambda: -log_rho, "k3": lambda: rho - 1 - log_rho, "rho_squared": lambda: rho**2,
            "rho": lambda: rho, "rho_minus_1_sq": lambda: (rho - 1) ** 2, "abs_log_rho": lambda: np.abs(log_rho),
            "clamped_squared": lambda: _clamped(log_rho, rho) ** 2,
            "exp_abs_log_rho": lambda: np.maximum(rho, 1 / rho), "policy_kl": lambda: 1 / rho - 1 + log_rho,
            "reverse_kl": lambda: np.exp(log.sampler_logprobs) * -log_rho}[name]()


def _clamped(log_rho, rho):
    """verl's token weight e^{clamp(log ρ, ±20)}: ρ itself when no token is beyond the clamp."""
    return rho if np.abs(log_rho).max() <= SAFETY_BOUND else np.exp(np.clip(log_rho, -SAFETY_BOUND, SAFETY_BOUND))


def whole_log_pass(log) -> TokenPass:
    """The TokenPass from whole arrays, without the sums (the statistics then take each quantity's token mean on its
    values scaled by a power of two: ``statistics.token_means``)."""
    log_rho = log.log_ratio
    abs_log_rho = np.abs(log_rho)
    pi, mu = np.exp(log.trainer_logprobs), np.exp(log.sampler_logprobs)
    probability_gap = np.abs(pi - mu)
    weights = np.clip(_clamped(log_rho, log.ratio), 1 / VERL_IS_THRESHOLD, VERL_IS_THRESHOLD)
    mean_weight = np.average(weights)
    return TokenPass(
        sums=None, log_rho_low=float(log_rho.min()), log_rho_high=float(log_rho.max()),
        k3_high=float(quantity(log, "k3").max()), probability_gap_high=float(probability_gap.max()),
        abs_log_rho_quantiles=_quantiles(abs_log_rho), probability_gap_sd=_sd(probability_gap),
        abs_log_rho_sd=_sd(abs_log_rho), probability_correlation=_correlation(pi, mu),
        verl_token_ess=float(1.0 / np.average((weights / mean_weight) ** 2)))


def _sd(values):
    return float(values.std(ddof=1)) if len(values) > 1 else None


def _correlation(x, y):
    """Pearson's r = Σ(x − x̄)(y − ȳ) / √(Σ(x − x̄)²·Σ(y − ȳ)²) (torch.corrcoef's), None when either is constant."""
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if len(x) > 1 and denominator > 0 else None
