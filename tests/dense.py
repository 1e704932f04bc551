"""The slow, obvious oracle: every sequence's (T, V) estimate materialised, then summed.

It shares nothing with toylab's exact engine but the toy's θ, b, mismatch and its pipeline's six parameters: the
three distributions are built here token by token in plain Python — what the engine samples, μ_s
(``dense_sampler_log_mu``), what it logs, μ_log (``dense_logged_log_mu``), and what the trainer scores, π
(``dense_scored_log_pi``) —, the score is (onehot − π)/τ for a trainer that divides by τ (checked against finite
differences of log π in tests/engine/test_pipeline.py), sequences come from itertools.product, rewards from
counting, ratios from indexing, coefficients from each estimator's definition written out per sequence. Sums over μ
run over the sequences μ_s can draw (``on_support``), so a truncating sampler's ∞ ratios are never touched. A verl or TRL preset takes its configuration fields from toylab's
table (tests/catalogue/test_frameworks.py checks the table against verl's and TRL's own code); what it computes
from them is written out here from the frameworks' code, independently of toylab.frameworks. Every other
framework's preset is the product of the factors its module's rules give (checked against that framework's own
code in tests/catalogue/test_framework_code.py), each factor computed here from its definition through the
framework's conventions (``through``: its clamp of each token's log ratio or of the sum, its mean's epsilon):
the oracle checks the exact engine on them, not the rules.
"""

import copy
import itertools
import math
import struct

import numpy as np
import pytest

from toylab import ESTIMATORS, exact_moments, resolve_params
from toylab.catalogue import presets as frameworks

NEW_FAMILIES = ("geo_tis", "geo_clip", "outlier_rs", "veto", "dppo", "kpop", "tv_mask", "k2_penalty", "topr", "vespo",
                "gspo_clip")


def bernoulli_kl(p, q, epsilon=0.0):
    """KL between Bernoulli(p) and Bernoulli(q), straight from its definition: Σ over the two outcomes of
    a·log(a/b), with 0·log(0/b) = 0 and a·log(a/0) = +∞ for a > 0 (a truncating sampler's μ_t(y_t) is 1 where it
    keeps one token); ``epsilon`` added to a and b in the second outcome's logarithm (SkyRL's guard)."""
    total = np.zeros(np.broadcast_shapes(np.shape(p), np.shape(q)))
    for a, b, guard in ((p, q, 0.0), (1 - p, 1 - q, epsilon)):
        a, b = np.broadcast_to(a, total.shape), np.broadcast_to(b, total.shape)
        finite = (a > 0) & (b + guard > 0)
        total[finite] += a[finite] * np.log((a[finite] + guard) / (b[finite] + guard))
        total[(a > 0) & (b + guard == 0)] = np.inf
    return total


def statistic_values(statistic, log_rho, probabilities=None):
    """A rejection statistic per token, written out from its definition (π_t(y_t), μ_t(y_t) = ``probabilities``)."""
    rho = np.exp(log_rho)
    if statistic in ("prob_diff", "kpop", "binary_kl"):
        pi, mu = probabilities
        if statistic == "binary_kl":                     # AReaL: both probabilities clamped to [1e-8, 1 − 1e-8]
            pi, mu = np.clip(pi, 1e-8, 1 - 1e-8), np.clip(mu, 1e-8, 1 - 1e-8)
        return pi - mu if statistic == "prob_diff" else np.maximum(bernoulli_kl(pi, mu), bernoulli_kl(mu, pi))
    return {"log_ratio": log_rho, "k1": -log_rho, "k2": log_rho**2 / 2, "k3": rho - 1 - log_rho,
            "k3_reverse": 1 / rho - 1 + log_rho, "mult_error": np.exp(np.abs(log_rho))}[statistic]


def rounded(x, significant_bits, smallest_quantum):
    """x (a float32 value) rounded to a binary float with ``significant_bits`` bits, to nearest with ties to even:
    x/quantum is exact (a power of two), and Python's round() rounds half to even."""
    if x == 0:
        return 0.0
    quantum = max(2.0 ** (math.frexp(x)[1] - significant_bits), smallest_quantum)
    return round(x / quantum) * quantum


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


ROUNDINGS = {"none": lambda x: x, "bf16": lambda x: rounded(as_float32(x), 8, 2.0**-133),
             "fp16": lambda x: rounded(as_float32(x), 11, 2.0**-24)}


def dense_sampler_log_mu(theta, b, mismatch, top_p=1.0, top_k=0, temperature=1.0, precision="none", **_):
    """log μ_s (T, V) written out per position: z = θ + mismatch·b, rounded, divided by τ; keep the tokens with z
    at least the k-th largest; of those, keep a token when the probability of the strictly more likely ones is
    below p; softmax over the kept, −∞ elsewhere. (What is logged and scored does not change it.)"""
    T, V = theta.shape
    log_mu = np.full((T, V), -np.inf)
    for t in range(T):
        z = [ROUNDINGS[precision](float(theta[t, v] + mismatch * b[t, v])) / temperature for v in range(V)]
        kept = list(range(V))
        if top_k:
            kth = sorted(z, reverse=True)[top_k - 1]
            kept = [v for v in kept if z[v] >= kth]
        if top_p < 1:
            top = max(z[v] for v in kept)
            total = sum(math.exp(z[v] - top) for v in kept)
            probability = {v: math.exp(z[v] - top) / total for v in kept}
            kept = [v for v in kept if sum(probability[u] for u in kept if z[u] > z[v]) < top_p]
        top = max(z[v] for v in kept)
        log_total = top + math.log(sum(math.exp(z[v] - top) for v in kept))
        for v in kept:
            log_mu[t, v] = z[v] - log_total
    return log_mu


def log_softmax_over(values, kept):
    """log softmax of the kept entries of a list, −∞ at the others, written out."""
    top = max(values[v] for v in kept)
    log_total = top + math.log(sum(math.exp(values[v] - top) for v in kept))
    return [values[v] - log_total if v in kept else -math.inf for v in range(len(values))]


def dense_logged_log_mu(theta, b, mismatch, log_mu, temperature=1.0, precision="none", logged="processed", **_):
    """log μ_log (T, V) per position: ``log_mu`` (μ_s) itself (processed); softmax of the rounded logits (raw), or of
    them over τ (temperature), over every token."""
    if logged == "processed":
        return log_mu
    T, V = theta.shape
    divisor = 1.0 if logged == "raw" else temperature
    return np.array([log_softmax_over([ROUNDINGS[precision](float(theta[t, v] + mismatch * b[t, v])) / divisor
                                       for v in range(V)], range(V)) for t in range(T)])


def dense_scored_log_pi(theta, log_mu, temperature=1.0, scored="plain", **_):
    """log π (T, V) per position: softmax(θ) (plain), softmax(θ/τ) (temperature), or softmax(θ/τ) over the tokens μ_s
    keeps (log μ > −∞), −∞ at the others (keep_mask)."""
    T, V = theta.shape
    divisor = 1.0 if scored == "plain" else temperature
    return np.array([log_softmax_over([float(theta[t, v]) / divisor for v in range(V)],
                                      [v for v in range(V) if scored != "keep_mask" or log_mu[t, v] > -math.inf])
                     for t in range(T)])


class DenseToy:
    def __init__(self, toy):
        pipeline = toy.sampler.parameters()
        log_mu = dense_sampler_log_mu(toy.theta, toy.b, toy.mismatch, **pipeline)
        self.build(toy.T, toy.V, log_mu, dense_logged_log_mu(toy.theta, toy.b, toy.mismatch, log_mu, **pipeline),
                   dense_scored_log_pi(toy.theta, log_mu, **pipeline), np.exp(dense_scored_log_pi(toy.theta, log_mu)),
                   1.0 if pipeline["scored"] == "plain" else 1.0 / pipeline["temperature"])

    @classmethod
    def of_tables(cls, log_mu, log_logged, log_pi, scale=1.0):
        """The oracle of given (T, V) tables: the sampled μ_s, the logged μ_log and the π the correction divides
        by (the three-policy oracle passes π_old there)."""
        dense = cls.__new__(cls)
        dense.build(*log_mu.shape, log_mu, log_logged, log_pi, np.exp(log_pi), scale)
        return dense

    def build(self, T, V, log_mu, log_logged, log_pi, plain_pi, scale):
        self.T, self.V = T, V
        self.log_mu, self.log_logged, self.log_pi = log_mu, log_logged, log_pi
        self.pi = np.exp(self.log_pi)
        self.plain_pi = plain_pi
        self.Y = np.array(list(itertools.product(range(V), repeat=T)))
        positions = np.arange(T)
        self.log_pi_tokens = self.log_pi[positions, self.Y]          # (M, T), −∞ where keep_mask's π is 0
        self.log_mu_tokens = self.log_mu[positions, self.Y]         # −∞ where μ_s never draws the token
        self.log_logged_tokens = self.log_logged[positions, self.Y]
        self.p_train = np.exp(self.log_pi_tokens.sum(axis=1))
        self.p_sampler = np.exp(self.log_mu_tokens.sum(axis=1))
        self.R = ((self.Y == 0).sum(axis=1) * 2 >= T).astype(float)
        self.score = (np.eye(V)[self.Y] - self.pi[None]) * scale          # (M, T, V)
        self.true_grad = np.einsum("m,m,mtv->tv", self.p_train, self.R, self.score)
        with np.errstate(divide="ignore"):
            plain_tokens = np.log(self.plain_pi)[positions, self.Y]
        self.plain_grad = np.einsum("m,m,mtv->tv", np.exp(plain_tokens.sum(axis=1)), self.R,
                                    np.eye(V)[self.Y] - self.plain_pi[None])
        drawn = np.isfinite(self.log_mu_tokens)
        self.rho = np.full(drawn.shape, np.inf)                          # (M, T), +∞ outside μ_s's support
        self.rho[drawn] = np.exp(self.log_pi_tokens[drawn] - self.log_logged_tokens[drawn])
        self.pi_tokens, self.mu_tokens = np.exp(self.log_pi_tokens), np.exp(self.log_logged_tokens)
        self.W = self.rho.prod(axis=1)
        with np.errstate(divide="ignore"):
            log_rho = np.log(self.rho)
        self.log_sum = log_rho.sum(axis=1, keepdims=True)             # a sequence's Σ_t log ρ_t, as reduced
        self.mean_divisor = T                                           # its token count (+ a framework's ε)
        self.log_mean = self.log_sum / T                                # log ρ_geo
        self.live = np.ones(self.rho.shape, bool)                       # tokens whose ratio has a gradient
        self.supported = drawn.all(axis=1)                              # the sequences μ_s can draw
        self.baselines = {"none": 0.0, "logged": self.p_sampler @ self.R, "true": self.p_train @ self.R}
        self.on_support = self if self.supported.all() else self._rows(self.supported)

    def population(self):
        """{J, plain_J, identity E_μs[W], KL(μ_s‖π), χ²_seq = E_μs[W²]/(E_μs W)² − 1, π-mass out of reach, objective
        shift ‖∇J − ∇J_plain‖/‖∇J_plain‖}, each a sum over the sequences."""
        rows = self.on_support
        identity = rows.p_sampler @ rows.W
        with np.errstate(divide="ignore"):
            log_pi = rows.log_pi_tokens.sum(axis=1)
        plain = np.exp(np.log(self.plain_pi)[np.arange(self.T), self.Y].sum(axis=1))
        return {"J": self.p_train @ self.R, "plain_J": plain @ self.R, "identity": identity,
                "kl_mu_pi": rows.p_sampler @ (rows.log_mu_tokens.sum(axis=1) - log_pi),
                "chi2_seq": (rows.p_sampler @ rows.W**2) / identity**2 - 1, "unreachable_mass": self.unreachable_mass(),
                "objective_shift": np.linalg.norm(self.true_grad - self.plain_grad) / np.linalg.norm(self.plain_grad)}

    def _rows(self, rows):
        """The same oracle restricted to some sequences (for sums over μ: those it can draw)."""
        restricted = copy.copy(self)
        for name in ("Y", "log_pi_tokens", "log_mu_tokens", "log_logged_tokens", "p_train", "p_sampler", "R", "score",
                     "rho", "W", "pi_tokens", "mu_tokens", "log_sum", "log_mean", "live"):
            setattr(restricted, name, getattr(self, name)[rows])
        restricted.on_support = restricted
        return restricted

    def through(self, rules):
        """The oracle as a framework's code sees it (``Rules``): each token's log ratio clamped to ±clamp, W the
        exp of the clamped raw sum, a sequence's sum and mean of log ratios those of the clamped tokens or, with
        clamp_sums, the clamp of the raw ones; means over T + mean_epsilon; a clamped ratio has no gradient."""
        seen = copy.copy(self)
        seen.mean_divisor = self.T + rules.mean_epsilon
        with np.errstate(divide="ignore"):
            log_rho = np.log(self.rho)
        raw_sum = log_rho.sum(axis=1, keepdims=True)
        if rules.clamp is None:
            seen.log_sum, seen.log_mean = raw_sum, raw_sum / seen.mean_divisor
            return seen
        bound = rules.clamp
        clamped = np.clip(log_rho, -bound, bound)
        seen.rho = np.exp(clamped)
        seen.W = np.exp(np.clip(raw_sum[:, 0], -bound, bound))
        seen.live = np.abs(log_rho) <= bound
        if rules.clamp_sums:
            seen.log_sum = np.clip(raw_sum, -bound, bound)
            seen.log_mean = np.clip(raw_sum / seen.mean_divisor, -bound, bound)
        else:
            seen.log_sum = clamped.sum(axis=1, keepdims=True)
            seen.log_mean = seen.log_sum / seen.mean_divisor
        return seen

    def baseline(self, name):
        return self.baselines[name]

    def reachable_gradient(self, baseline):
        """Σ over the sequences μ can draw of π(y)·(r(y) − b)·s(y)."""
        rows = self.on_support
        return np.einsum("m,m,mtv->tv", rows.p_train, rows.R - self.baseline(baseline), rows.score)

    def unreachable_mass(self):
        return float(self.p_train[~self.supported].sum())

    def coefficients(self, estimator, params, baseline="none"):
        """c (M, T) for one estimator, straight from its definition (A = r − b for those that read it)."""
        advantage = (self.R - self.baseline(baseline))[:, None]
        if ":" in estimator:
            return self.preset(estimator, params, advantage, baseline)
        if estimator in NEW_FAMILIES:
            return self.new_family(estimator, params, advantage, baseline)
        if estimator in ("rs", "opsm"):
            return self.rejecting(estimator, params, advantage, baseline)
        if estimator == "ppo_clip":
            return self.ppo_clip(params, advantage)
        return self.closed_form(estimator, params)

    def rejecting(self, estimator, p, advantage, baseline):
        """A weight estimator times a rejection mask: ``rs``'s statistic in [lo, hi], or OPSM's keep-if-A ≥ 0 or
        mean k1 ≤ δ."""
        weight = self.coefficients(p["weight"], resolve_params(p["weight"]), baseline)
        if estimator == "rs":
            return weight * self.rejection_kept(p["statistic"], p["scope"], p["lo"], p["hi"])
        mean_k1 = (-np.log(self.rho)).mean(axis=1, keepdims=True)
        return weight * ((advantage >= 0) | (mean_k1 <= p["delta"]))

    def ppo_clip(self, p, advantage):
        """ρ where PPO's clipped objective keeps the gradient (dual clip for A < 0), 0 where it clips."""
        rho = self.rho
        keep_positive = rho <= 1 + p["eps_high"]
        keep_negative = (rho >= 1 - p["eps_low"]) & (rho <= p["C_dual"])
        tie = np.where(rho == p["C_dual"], 0.5, 1.0)      # torch.min's tie at the dual clip: half the gradient
        return rho * np.where(advantage < 0, keep_negative * tie, keep_positive) * self.live

    def closed_form(self, estimator, p):
        """The estimators that are one closed form in ρ, W = ∏ρ and the geometric mean, one line each."""
        rho, W = self.rho, self.W[:, None]
        ones = np.ones_like(rho)
        geo = np.exp(self.log_mean)
        forms = {
            "tok_clip": lambda: np.clip(rho, p["C_min"], p["C_max"]),
            "seq_clip": lambda: np.clip(W, p["C_min"], p["C_max"]) * ones,
            "seq_band": lambda: W * ((W >= p["C_min"]) & (W <= p["C_max"])) * ones,
            "on_policy": lambda: ones,
            "naive": lambda: ones,
            "tok_is": lambda: rho,
            "tok_tis": lambda: np.minimum(rho, p["C"]),
            "tok_mis": lambda: rho * ((rho >= p["lo"]) & (rho <= p["hi"])),
            "prefix_is": lambda: np.cumprod(rho, axis=1),
            "seq_is": lambda: W * ones,
            "seq_tis": lambda: np.minimum(W, p["C"]) * ones,
            "seq_mis": lambda: W * (W <= p["C"]) * ones,
            "geo_rs": lambda: ((geo >= p["lo"]) & (geo <= p["hi"])) * ones,
            "geo_rs_tok_tis": lambda: ((geo >= p["lo"]) & (geo <= p["hi"])) * np.minimum(rho, p["C"]),
            "k3_rs": lambda: ((rho - 1 - np.log(rho)).mean(axis=1, keepdims=True) <= p["delta"]) * ones,
            "trm": lambda: (np.abs(np.log(rho)).max(axis=1, keepdims=True) <= p["eps"]) * ones,
            "gspo_geo": lambda: geo * ones,
        }
        return forms[estimator]()

    def rejection_kept(self, statistic, scope, lo, hi, log_rho=None, mean_divisor=None):
        """1[lo ≤ statistic ≤ hi] (M, T): per token, or the sequence's sum / mean / max broadcast to its tokens (a
        mean divides by ``mean_divisor``, by default the token count + a framework's ε); the log ratio's sum and
        mean as the framework reduces them (``through``)."""
        log_rho = np.log(self.rho) if log_rho is None else log_rho
        divisor = self.mean_divisor if mean_divisor is None else mean_divisor
        if (statistic, scope) == ("log_ratio", "seq_sum") and mean_divisor is None:
            value = self.log_sum
        elif (statistic, scope) == ("log_ratio", "seq_mean") and mean_divisor is None:
            value = self.log_mean
        else:
            value = statistic_values(statistic, log_rho, (self.pi_tokens, self.mu_tokens))
            reduce = {"token": lambda x: x, "seq_sum": lambda x: x.sum(axis=1, keepdims=True),
                      "seq_mean": lambda x: x.sum(axis=1, keepdims=True) / divisor,
                      "seq_max": lambda x: x.max(axis=1, keepdims=True)}[scope]
            value = reduce(value)
        kept = np.ones(value.shape, bool)
        if lo is not None:
            kept &= value >= lo
        if hi is not None:
            kept &= value <= hi
        return np.broadcast_to(kept, log_rho.shape)

    def preset(self, estimator, params, advantage, baseline="none"):
        """A verl or TRL preset, as the framework's code computes it (see the module docstring)."""
        preset = next(p for p in frameworks.PRESETS if p.id == estimator)
        config = preset.resolved(params)
        log_rho = np.log(self.rho)
        if not estimator.startswith(("trl:", "verl:")):
            return self.factors(preset, params, advantage, baseline)
        if estimator.startswith("trl:"):
            ratio = self.rho if config["mode"].startswith("token") else self.W[:, None] * np.ones_like(self.rho)
            if config["mode"].endswith("truncate"):
                return np.clip(ratio, config["clip_min"], config["clip_max"])
            return ratio * ((ratio >= config["clip_min"]) & (ratio <= config["clip_max"]))
        safe = np.clip(log_rho, -20, 20)                       # verl's SAFETY_BOUND, per token
        ppo = config["bypass_mode"] and config["loss_type"] == "ppo_clip"
        coefficient = np.ones_like(log_rho)
        threshold = str(config.get("rollout_is_threshold", 2.0))
        if config["rollout_is"] and not ppo:
            total = np.clip(log_rho.sum(axis=1, keepdims=True), -20, 20)   # the sum is clamped, not the tokens
            weight = np.exp(safe) if config["rollout_is"] == "token" else np.exp(total) * coefficient
            if "_" in threshold:                               # IcePop: zero outside [lower, upper]
                lower, upper = (float(x) for x in threshold.split("_", 1))
                coefficient = weight * ((weight >= lower) & (weight <= upper))
            else:
                coefficient = np.minimum(weight, float(threshold))
        if config["rollout_rs"]:
            option = config["rollout_rs"]
            scope, statistic = option.rsplit("_", 1)
            threshold = config["rollout_rs_threshold"]
            if statistic == "k1":
                bounds = [float(x) for x in str(threshold).split("_")]
                lower, upper = bounds if len(bounds) == 2 else (1 / bounds[0], bounds[0])
                kept = self.rejection_kept("k1", scope, math.log(lower), math.log(upper), safe, self.T + 1e-8)
            else:
                kept = self.rejection_kept(statistic, scope, None, float(threshold), safe, self.T + 1e-8)
            coefficient = coefficient * kept
        if ppo:
            ratio = np.exp(safe)
            live = np.abs(log_rho) <= 20                       # a clamped ratio is a constant: no gradient
            keep_positive = (ratio <= 1 + config["clip_ratio_high"]) & live
            keep_negative = (ratio >= 1 - config["clip_ratio_low"]) & (ratio <= config["clip_ratio_c"]) & live
            tie = np.where(ratio == config["clip_ratio_c"], 0.5, 1.0)   # torch.min's tie: half the gradient
            coefficient = coefficient * ratio * np.where(advantage < 0, keep_negative * tie, keep_positive)
        return coefficient

    def factors(self, preset, params, advantage, baseline):
        """The product of the preset's factors, each from its definition above, seen through the framework's
        conventions (``through``)."""
        rules = frameworks.rules(preset, params)
        seen = self.through(rules)
        coefficient = np.ones_like(self.rho)
        for id, factor, *_ in rules.factors:
            factor = {"weight": "naive", **factor} if "weight" in ESTIMATORS[id].params else dict(factor)
            coefficient = coefficient * seen.coefficients(id, factor, baseline)
        return coefficient

    def new_family(self, estimator, p, advantage, baseline):
        """The families added for issue 19, each from its framework's code (sources in toylab's docstrings)."""
        rho, ones = self.rho, np.ones_like(self.rho)
        log_rho = np.log(rho)
        geo = np.exp(self.log_mean)
        if estimator == "geo_tis":
            return np.minimum(geo, p["C"]) * ones
        if estimator == "geo_clip":
            decided_by = {"mean": geo, "sum": np.exp(self.log_sum), "max": rho.max(axis=1, keepdims=True)}[
                p.get("decided_by", "mean")]
            out = (decided_by < p["C_min"]) | (decided_by > p["C_max"])
            return np.where(out, np.clip(geo, p["C_min"], p["C_max"]), geo) * ones
        if estimator == "outlier_rs":
            return ((rho >= p["lo"]) & (rho <= p["hi"])).all(axis=1, keepdims=True) * ones
        if estimator == "veto":
            return (rho >= p["C_v"]).all(axis=1, keepdims=True) * ones
        pi, mu = self.pi_tokens, self.mu_tokens
        if estimator == "dppo":
            up = pi - mu
            if p["dppo_type"] == "binary_tv":
                keep_positive, keep_negative = up <= p["delta_high"], -up <= p["delta_low"]
            else:
                kl = bernoulli_kl(mu, pi, p.get("kl_epsilon", 0.0))   # μ log(μ/π) + (1 − μ) log((1 − μ + ε)/(1 − π + ε))
                keep_positive = ~((up > 0) & (kl > p["delta_high"]))
                keep_negative = ~((up < 0) & (kl > p["delta_low"]))
            return rho * np.where(advantage > 0, keep_positive, keep_negative) * self.live
        if estimator == "kpop":
            return (statistic_values("kpop", log_rho, (pi, mu)) <= p["delta"]) * 1.0
        weight = self.coefficients(p["weight"], resolve_params(p["weight"]), baseline) if "weight" in p else None
        if estimator == "tv_mask":
            gap = np.abs(rho - 1).mean(axis=1, keepdims=True)
            dropped = ((gap < p["lo"]) | (gap > p["hi"])) & (np.sign(log_rho) * advantage > 0)
            return weight * ~dropped
        if estimator == "k2_penalty":
            return weight
        if estimator == "topr":
            return np.where(advantage > 0, p["positive_weight"] * ones, p["negative_weight"] * np.minimum(rho, 1))
        if estimator == "vespo":
            if p["mode"] == "token_truncate":
                ratio = np.clip(rho, p["clip_min"], p["clip_max"])
            else:
                ratio = rho * ((rho >= p["clip_min"]) & (rho <= p["clip_max"]))
            with np.errstate(divide="ignore"):
                log_r = np.clip(np.log(ratio), math.log(1e-8), 20.0)
            log_w = np.clip(log_r.sum(axis=1, keepdims=True), math.log(1e-8), 20.0)
            k = np.where(advantage >= 0, p["k_pos"], p["k_neg"])
            lam = np.where(advantage >= 0, p["lambda_pos"], p["lambda_neg"])
            return np.exp(lam) * np.exp(log_w) ** k * np.exp(-lam * np.exp(log_w)) * ones
        if estimator == "gspo_clip":
            positive = geo <= 1 + p["eps_high"]
            negative = (geo >= 1 - p["eps_low"]) & (geo <= p["C_dual"])
            return geo * np.where(advantage < 0, negative, positive) * ones
        raise KeyError(estimator)

    def additive(self, estimator, params):
        """d (M, T): the part of the estimate Σ_t (c_t·A + d_t)·s_t that does not depend on A (k2_penalty's penalty)."""
        if estimator == "k2_penalty":
            return -2 * params["tau"] * np.log(self.rho) + self.additive(params["weight"], resolve_params(params["weight"]))
        if estimator in ("rs", "opsm", "tv_mask"):
            return self.additive(params["weight"], resolve_params(params["weight"]))
        return np.zeros_like(self.rho)

    def preset_additive(self, estimator, params):
        """d (M, T) of a preset: the sum of its factors' (verl's and TRL's have none)."""
        if estimator.startswith(("trl:", "verl:")):
            return np.zeros_like(self.rho)
        preset = next(p for p in frameworks.PRESETS if p.id == estimator)
        rules = frameworks.rules(preset, params)
        seen = self.through(rules)
        return sum((seen.additive(id, {"weight": "naive", **factor}) for id, factor, *_ in rules.factors),
                   np.zeros_like(self.rho))

    def moments(self, estimator, params, baseline):
        """mean, bias, var of the single-sample estimate, summed over all M sequences (on_policy, y ~ π) or over
        those μ can draw."""
        rows = self if estimator == "on_policy" else self.on_support
        coefficient = rows.coefficients(estimator, params, baseline)
        advantage = rows.R - self.baseline(baseline)
        additive = rows.preset_additive(estimator, params) if ":" in estimator else rows.additive(estimator, params)
        gradient = advantage[:, None] * coefficient + additive
        estimate = gradient[:, :, None] * rows.score     # (M, T, V)
        probability = rows.p_train if estimator == "on_policy" else rows.p_sampler
        mean = np.einsum("m,mtv->tv", probability, estimate)
        var = np.einsum("m,m->", probability, ((estimate - mean) ** 2).sum(axis=(1, 2)))
        return mean, float(np.linalg.norm(mean - self.true_grad)), float(var)


def assert_exact_equals_dense(toy, dense, estimator, params, baseline):
    """The O(M) engine's mean, bias and variance, its bias split (out of reach, within reach) and its error against
    softmax(θ)'s gradient equal the dense sums to 1e-10; returns the engine's Moments."""
    mean, bias, var = dense.moments(estimator, params, baseline)
    moments = exact_moments(toy, estimator, params, baseline)
    scale = np.linalg.norm(dense.true_grad)
    np.testing.assert_allclose(moments.mean, mean, rtol=0, atol=1e-10 * max(np.abs(mean).max(), scale))
    assert moments.bias == pytest.approx(bias, rel=1e-10, abs=1e-10 * scale)
    assert moments.var == pytest.approx(var, rel=1e-10, abs=1e-14)
    assert moments.grad_norm == pytest.approx(scale, rel=1e-12)
    reachable = dense.true_grad if estimator == "on_policy" else dense.reachable_gradient(baseline)
    out_of_reach, within_reach = np.linalg.norm(dense.true_grad - reachable), np.linalg.norm(mean - reachable)
    assert moments.rel_out_of_reach * scale == pytest.approx(out_of_reach, rel=1e-10, abs=1e-10 * scale)
    assert moments.rel_within_reach * scale == pytest.approx(within_reach, rel=1e-10, abs=1e-10 * scale)
    plain_scale = np.linalg.norm(dense.plain_grad)
    assert moments.rel_plain_bias == pytest.approx(np.linalg.norm(mean - dense.plain_grad) / plain_scale, rel=1e-9,
                                                   abs=1e-10)
    return moments


# -- three policies: π_θ, the anchor π_old and the engine's stale μ -----------------------------------------

def dense_token_derivative(loss, log_pi, log_old, advantage, p):
    """(∂L/∂log π_θ, clipped or masked) per token (M, T) of an update's loss, written out case by case from each loss's
    definition (the derivative of the branch that is active; at the dual clip's tie r = c the gradient is halved,
    as torch splits a tied min): PPO with A > 0 keeps r·A while r ≤ 1 + ε_h, with A < 0 while 1 − ε_l ≤ r (≤ c);
    CISPO's is clip(r)·A; REINFORCE's A; prime-rl's keep·A·r − 2τ·log r with keep read from the probabilities."""
    A = np.broadcast_to(advantage, log_pi.shape)
    x = log_pi - log_old
    passes = np.ones(x.shape, bool)
    if p.get("clamp") is not None:
        passes = np.abs(x) <= p["clamp"]
        x = np.clip(x, -p["clamp"], p["clamp"])
    r = np.exp(x)
    if loss == "reinforce":
        return A.copy(), np.zeros(x.shape, bool)
    if loss in ("ppo", "cispo"):
        lo, hi = 1 - p["eps_low"], 1 + p["eps_high"]
        if loss == "cispo":
            return np.minimum(np.maximum(r, lo), hi) * A, (r < lo) | (r > hi)
        c = p["dual_clip"]
        keep_negative = r >= lo
        share = np.ones(x.shape)
        if c is not None:
            keep_negative &= r <= c
            share = np.where(r == c, 0.5, 1.0)
        derivative = np.where(A > 0, r * A * (r <= hi), np.where(A < 0, r * A * keep_negative * share, 0.0))
        held = ((A > 0) & (r > hi)) | ((A < 0) & (r < lo)) | ((A < 0) & (r > c) if c is not None else False)
        return derivative * passes, held
    rise = np.exp(log_pi) - np.exp(log_old)
    if loss == "dppo_kl":
        keep = np.where(A > 0, rise <= p["delta_high"], rise >= -p["delta_low"])
    else:
        keep = np.abs(rise) <= p["delta"]
    return keep * A * r - 2 * p["tau"] * (log_pi - log_old), ~keep


def dense_weight(correction, params, baseline, b, tables, on_policy):
    """g (M', T) on μ's sequences: the correction's coefficient on the oracle of ``tables`` (log μ_s, log μ_log, the
    log π its ratio divides μ into, the score's scale), A = r − b; 1 for on_policy."""
    seen = DenseToy.of_tables(*tables).on_support
    if on_policy:
        return np.ones(seen.rho.shape)
    seen.baselines = {name: b for name in seen.baselines}
    return seen.coefficients(correction, resolve_params(correction, params), baseline)


def dense_three_policies(toy, correction, params, baseline, update, steps, lr, optimizer="sgd", lag=0,
                         lag_draw="fixed", kl=None, log_ref=None):
    """Training with three policies by brute force, every sequence materialised: {record: list over k = 0 … K}.

    At step k the engine holds θ_{k−s} (θ_0 before the run; s fixed, or the k-th draw of
    default_rng([seed, 2**32 − 2]).integers(0, lag + 1)); μ_s, μ_log from it, π scored at θ_k over the tokens μ_s
    keeps; the anchor log π_old the scored π at θ_k, at θ_{k−s}, or μ_log; g the correction's coefficient on the
    oracle of (μ_s, μ_log, π_old), so its ρ is w = π_old/μ_log (or sg(π_θ)/μ_log at each update when the update's
    weights are at the current policy); then U updates, each the gradient Σ_y μ(y)·Σ_t g·∂L/∂log π_θ·∇log π_θ(y_t)
    of textbook SGD or Adam (its count of steps over every update). on_policy: μ = π_old = π_θ_k, g = 1.

    ``kl`` (a KLPenalty, with ``log_ref``): in the loss, each update's gradient gains −β·Σ_y μ(y)·Σ_t ∂ℓ/∂log π·s_t,
    ∂ℓ/∂log π by complex step of the frameworks' formula (``dense_kl_derivative``; full: −β times the sequences' sum
    for ∇KL); in the reward, A_t(y) = r − b − β·K_t(y) with k at π_old; the record ``kl_ref`` is
    Σ_y π(y)·log(π(y)/π_ref(y)).
    """
    p = update.loss_params
    rng = np.random.default_rng([toy.seed, 2**32 - 2]) if lag_draw == "uniform" else None
    pipeline = toy.sampler.parameters()
    scale = 1.0 if pipeline["scored"] == "plain" else 1.0 / pipeline["temperature"]
    thetas, theta = [], toy.theta.copy()
    m = v = 0.0
    count = 0
    out = {name: [] for name in ("theta", "J", "logged_reward", "kl_mu_pi", "clip_share", "ppo_kl", "w_std", "lag",
                                 "first", "step", "grad", "kl_ref")}
    on_policy = correction == "on_policy"
    for k in range(steps + 1):
        thetas.append(theta)
        drawn = lag if rng is None else int(rng.integers(0, lag + 1))
        s = 0 if on_policy else min(drawn, k)
        engine = thetas[k - s]
        log_mu = dense_sampler_log_mu(engine, toy.b, toy.mismatch, **pipeline)
        log_logged = dense_logged_log_mu(engine, toy.b, toy.mismatch, log_mu, **pipeline)
        log_pi = dense_scored_log_pi(theta, log_mu, **pipeline)
        here = DenseToy.of_tables(log_mu, log_logged, log_pi, scale)
        J, logged = here.p_train @ here.R, here.p_sampler @ here.R
        b = {"none": 0.0, "logged": logged, "true": J}[baseline]
        rows = here.on_support
        kl_mu_pi = rows.p_sampler @ (rows.log_mu_tokens.sum(axis=1) - rows.log_pi_tokens.sum(axis=1))
        if on_policy:
            log_mu = log_logged = log_old = log_pi
        else:
            log_old = {"recompute": log_pi, "bypass": log_logged,
                       "rollout": dense_scored_log_pi(engine, log_mu, **pipeline)}[update.anchor]
        sampled = DenseToy.of_tables(log_mu, log_logged, log_old, scale).on_support    # μ's sequences, π := π_old

        positions = np.arange(toy.T)
        old_tokens, logged_tokens = sampled.log_pi_tokens, sampled.log_logged_tokens
        w = np.exp(old_tokens - logged_tokens)
        w_mean = sampled.p_sampler @ w.mean(axis=1)
        out["w_std"].append(np.sqrt(sampled.p_sampler @ ((w - w_mean) ** 2).mean(axis=1)))
        g = dense_weight(correction, params, baseline, b, (log_mu, log_logged, log_old, scale), on_policy)
        advantage = (sampled.R - b)[:, None]
        penalised = kl is not None and kl.beta > 0
        ref_tokens = log_ref[positions, sampled.Y] if penalised else None
        if penalised and kl.placement == "reward":
            values = dense_kl_values(kl, old_tokens, ref_tokens)
            K = {"sequence": np.repeat(values.sum(axis=1, keepdims=True), toy.T, axis=1),
                 "to_go": np.cumsum(values[:, ::-1], axis=1)[:, ::-1], "token": values}[kl.reward_sum]
            advantage = advantage - kl.beta * K
        current, total, held_total, kl_total = theta, 0.0, 0.0, 0.0
        for u in range(update.U):
            log_pi_u = dense_scored_log_pi(current, log_mu, **pipeline)
            if update.weights_at == "current" and not on_policy:
                g = dense_weight(correction, params, baseline, b, (log_mu, log_logged, log_pi_u, scale), on_policy)
            tokens_u = log_pi_u[positions, sampled.Y]
            derivative, held = dense_token_derivative(update.loss, tokens_u, old_tokens, advantage, p)
            score = (np.eye(toy.V)[sampled.Y] - np.exp(log_pi_u)[None]) * scale
            gradient = np.einsum("m,mt,mtv->tv", sampled.p_sampler, g * derivative, score)
            if penalised and kl.placement == "loss" and kl.estimator == "full":
                gradient = gradient - kl.beta * dense_reference_gradients(
                    DenseToy.of_tables(log_mu, log_logged, log_pi_u, scale), log_ref)[0]
            elif penalised and kl.placement == "loss":
                kl_derivative = dense_kl_derivative(kl, tokens_u.astype(complex), old_tokens, logged_tokens, ref_tokens)
                gradient = gradient - kl.beta * np.einsum("m,mt,mtv->tv", sampled.p_sampler, kl_derivative, score)
            held_total += (sampled.p_sampler @ held.mean(axis=1)) / update.U
            kl_total += (sampled.p_sampler @ (old_tokens - tokens_u).mean(axis=1)) / update.U
            count += 1
            if optimizer == "sgd":
                step = lr * gradient
            else:
                m = 0.9 * m + 0.1 * gradient
                v = 0.999 * v + 0.001 * gradient * gradient
                step = lr * (m / (1 - 0.9**count)) / (np.sqrt(v / (1 - 0.999**count)) + 1e-8)
            if u == 0:
                out["first"].append(gradient)
            total, current = total + step, current + step
        ref_sequences = log_ref[positions, here.Y].sum(axis=1) if log_ref is not None else None
        kl_ref = 0.0
        if log_ref is not None:
            reached = here.p_train > 0
            kl_ref = here.p_train[reached] @ (here.log_pi_tokens.sum(axis=1)[reached] - ref_sequences[reached])
        for name, value in (("theta", theta), ("J", J), ("logged_reward", logged), ("kl_mu_pi", kl_mu_pi),
                            ("clip_share", held_total), ("ppo_kl", kl_total), ("lag", s), ("step", total),
                            ("grad", here.true_grad), ("kl_ref", kl_ref)):
            out[name].append(value)
        theta = theta + total if k < steps else theta
    return {name: np.array(values) for name, values in out.items()}


# -- the reference π_ref: every KL penalty's estimate by brute force -----------------------------------------

def _real_clamp(z, bound):
    """torch.clamp of a (complex-stepped) value: ±bound beyond it by its real part, z itself at and inside."""
    return np.where(z.real > bound, bound, np.where(z.real < -bound, -bound, z))


def dense_kl_term(penalty, log_pi, log_old, log_mu, log_ref):
    """ℓ per token written out from the frameworks' formulas (verl kl_penalty_forward, slime and Miles
    compute_approx_kl, NeMo-RL calculate_kl), on complex log π so that its derivative comes by complex step: a
    detached quantity is a real part, a straight-through estimator (verl's "+") is its base's real value plus the
    imaginary part of ½(log π − log π_ref)²."""
    x = log_pi - log_ref
    clamp_x = penalty.log_ratio_clamp
    clamped = x if clamp_x is None else _real_clamp(x, clamp_x)
    base = penalty.estimator.rstrip("+")
    value = {"k1": clamped, "abs": np.sign(clamped.real) * clamped, "k2": clamped**2 / 2,
             "k3": np.exp(-clamped) - 1 + clamped}[base]
    if penalty.estimator.endswith("+"):
        forward = value.real if penalty.value_clamp is None else np.clip(value.real, -penalty.value_clamp,
                                                                          penalty.value_clamp)
        backward = x**2 / 2
        return forward + (backward - backward.real)
    ratio = {"none": np.ones_like(x), "current": np.exp(log_pi - log_pi.real), "anchor": np.exp(log_pi - log_old),
             "engine": np.exp(log_pi - log_mu)}[penalty.ratio]
    if penalty.ratio_held_by_clamp and clamp_x is not None:
        ratio = np.where(np.abs(x.real) > clamp_x, ratio.real, ratio)
    term = ratio * value
    return term if penalty.value_clamp is None else _real_clamp(term, penalty.value_clamp)


COMPLEX_STEP = 1e-20


def dense_kl_derivative(penalty, log_pi, log_old, log_mu, log_ref):
    """∂ℓ/∂log π per token by complex step: Im ℓ(log π + ih)/h, exact to rounding for every branch."""
    return dense_kl_term(penalty, log_pi + 1j * COMPLEX_STEP, log_old, log_mu, log_ref).imag / COMPLEX_STEP


def dense_kl_values(penalty, log_policy, log_ref):
    """k per token (a reward's: at the anchor's log-probabilities, no ratio, real)."""
    return dense_kl_term(penalty, np.asarray(log_policy, dtype=complex), 0.0, 0.0, log_ref).real


def dense_reference_gradients(dense, log_ref):
    """(∇KL(π‖π_ref), ∇KL(π_ref‖π)) summed over all M sequences: Σ_y π(y)·log(π(y)/π_ref(y))·s(y) and
    −Σ_y π_ref(y)·s(y)."""
    positions = np.arange(dense.T)
    log_ref_sequences = log_ref[positions, dense.Y].sum(axis=1)
    with np.errstate(invalid="ignore"):
        log_ratio = np.where(dense.p_train > 0, dense.log_pi_tokens.sum(axis=1) - log_ref_sequences, 0.0)
    forward = np.einsum("m,m,mtv->tv", dense.p_train, log_ratio, dense.score)
    reverse = -np.einsum("m,mtv->tv", np.exp(log_ref_sequences), dense.score)
    return forward, reverse


def dense_kl_estimates(dense, penalty, log_ref, correction="naive"):
    """ĝ(y) (M', T, V) on the sequences μ draws: the loss term's Σ_t ∂ℓ/∂log π·s_t, full's ∇KL itself, or a reward
    penalty's Σ_t c_t·K_t·s_t with c = 1, ρ_t or W; π_old = π."""
    rows = dense.on_support
    positions = np.arange(dense.T)
    ref_tokens = log_ref[positions, rows.Y]
    if penalty.placement == "loss":
        if penalty.estimator == "full":
            forward = dense_reference_gradients(dense, log_ref)[0]
            return np.broadcast_to(forward, rows.score.shape)
        derivative = dense_kl_derivative(penalty, rows.log_pi_tokens.astype(complex), rows.log_pi_tokens,
                                         rows.log_logged_tokens, ref_tokens)
        return derivative[:, :, None] * rows.score
    k = dense_kl_values(penalty, rows.log_pi_tokens, ref_tokens)
    K = {"sequence": np.repeat(k.sum(axis=1, keepdims=True), dense.T, axis=1),
         "to_go": np.cumsum(k[:, ::-1], axis=1)[:, ::-1], "token": k}[penalty.reward_sum]
    c = {"naive": np.ones_like(k), "tok_is": rows.rho, "seq_is": np.repeat(rows.W[:, None], dense.T, axis=1)}[
        correction]
    return (c * K)[:, :, None] * rows.score


def dense_kl_moments(dense, penalty, log_ref, correction="naive"):
    """(E ĝ, E‖ĝ‖², ∇KL(π‖π_ref), ∇KL(π_ref‖π)) summed over the sequences μ draws."""
    estimates = dense_kl_estimates(dense, penalty, log_ref, correction)
    rows = dense.on_support
    mean = np.einsum("m,mtv->tv", rows.p_sampler, estimates)
    second = float(rows.p_sampler @ (estimates**2).sum(axis=(1, 2)))
    return (mean, second, *dense_reference_gradients(dense, log_ref))
