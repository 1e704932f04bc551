"""The toy: T independent positions over V tokens, a trainer π and a sampler μ that disagree.

    π_t = softmax(θ_t),   μ_t = sampler(θ_t + mismatch·b_t),   r(y) = 1[#{t: y_t = 0} ≥ T/2]

Three distributions (``sampler``: ``Sampler.logged``, ``Sampler.scored``). Sequences are drawn from what the engine
samples, μ_s (``mu``, ``log_mu``, ``kept``, ``p_sampler``); the correction divides by what it logs, μ_log
(``log_logged``); the trainer scores π (``pi``, ``log_pi``: softmax(θ), softmax(θ/τ) or the latter over the kept
tokens), so ρ_t = π_t/μ_log,t (``rho``, +∞ outside μ_s's support), the score is (onehot − π)·``score_scale`` and
the objective is J = E_π[r] of the scored π, with ∇J (``true_grad``) its gradient in θ. ``plain_J`` and
``plain_grad`` are J and ∇J of softmax(θ), the objective before the trainer's choice moved it; ``identity`` is
E_μs[W] = ∏_t Σ_{v kept} μ_s·π/μ_log. The default pipeline (logged = sampled, scored = softmax(θ)) is the special
case μ_log = μ_s, π = softmax(θ), and its numbers are those of the two-distribution toy bit for bit.

θ ~ N(0, 0.7²) and b ~ Student-t(3) are drawn, in that order, from ``numpy.random.default_rng(seed)``,
so a seed gives the same toy as the reading groups' reference code. The sampler model (``sampler``: precision,
temperature, top-k, top-p) turns the engine's logits into μ; by default it is plain softmax. Everything per
sequence is an M-vector (M = V**T) built lazily from the (T, V) tables; the dense (M, T) and (M, T, V) arrays of
the reference dict exist only when a caller asks for them by key.

A sampler that truncates keeps a set S_t of tokens at each position (``kept``): μ_t = 0 and log ρ_t = +∞
outside it. Its sequences, S = ∏_t S_t, are the only ones it draws; the π-mass outside S (``unreachable_mass``)
is never sampled, and ∇J's part from there, ∇J − ∇J_S (``reachable_gradient``), is a bias no weight removes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.statistics import STATISTICS
from toylab.engine.counts import expected_reward, objective_and_gradient, reachable_gradient
from toylab.engine.grid import outer_max, outer_sum, token_grid
from toylab.engine.sampler import DEFAULT_SAMPLER, Sampler, log_softmax
from toylab.text import quoted

EXACT_SIZE_LIMIT = 2**22
TABLE_LIMIT = 2**22          # entries of each (T, V) table: T·V at most this, even with the size limit lifted
LOG_W_LIMIT = 700.0          # the largest log W the exact sums allow: float64 ends at e^709.8, and sums need room

DICT_KEYS = ("Y", "logp_train", "logp_sampler", "p_train", "p_sampler", "R", "score", "true_grad",
             "theta", "b", "mismatch", "T", "V")


def check_toy_arguments(T: int, V: int, mismatch: float, seed: int,
                        max_sequences: int | None = EXACT_SIZE_LIMIT) -> None:
    """Raise ValueError, naming the rule broken, unless the arguments describe a toy we can enumerate.

    Costs O(1) whatever the arguments: the size is checked in logarithms, never by building V**T.
    """
    if not _is_int(T) or T < 1:
        raise ValueError(f"T must be an integer ≥ 1 (number of tokens), got {quoted(T)}")
    if not _is_int(V) or V < 2:
        raise ValueError(f"V must be an integer ≥ 2 (vocabulary size), got {quoted(V)}")
    if isinstance(mismatch, bool) or not isinstance(mismatch, numbers.Real) or not math.isfinite(mismatch) \
            or mismatch < 0:
        raise ValueError(f"mismatch must be a finite number ≥ 0, got {quoted(mismatch)}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {quoted(seed)}")
    if max_sequences is not None and more_sequences_than(T, V, max_sequences):
        raise ValueError(
            f"T={quoted(T)}, V={quoted(V)} has M = V**T = {sequence_count(T, V)} sequences, over the exact-size "
            f"limit of {max_sequences:,}; use fewer tokens or a smaller vocabulary (or raise max_sequences)")
    if int(T) * int(V) > TABLE_LIMIT:
        raise ValueError(f"T={quoted(T)}, V={quoted(V)} needs (T, V) tables of T·V entries, over the limit of "
                         f"{TABLE_LIMIT:,}; use fewer tokens or a smaller vocabulary")


def more_sequences_than(T: int, V: int, limit: int) -> bool:
    """True if M = V**T > limit (T ≥ 1, V ≥ 2), decided in logarithms first: V**T is built only when it is
    at most about twice the limit."""
    if T > (math.log2(limit) + 1) / math.log2(V):
        return True
    return V**T > limit


def sequence_count(T: int, V: int) -> str:
    """M = V**T written out ("4,096") when it has at most 20 digits, else as the power ("4**1000")."""
    return f"{V**T:,}" if not more_sequences_than(T, V, 10**20) else f"{V}**{quoted(T)}"


def share(probability: float) -> float:
    """A probability clipped to [0, 1]: a sum of probabilities can round a hair outside (1.0000000000000002)."""
    return min(max(float(probability), 0.0), 1.0)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def make_toy(T: int = 6, V: int = 4, mismatch: float = 0.3, seed: int = 0, sampler: Sampler = DEFAULT_SAMPLER,
             max_sequences: int | None = EXACT_SIZE_LIMIT, *, top_p: float | None = None, top_k: int | None = None,
             temperature: float | None = None, precision: str | None = None, logged: str | None = None,
             scored: str | None = None) -> Toy:
    """The toy for these arguments; ValueError if they are invalid, M = V**T > max_sequences, or (for a toy to
    enumerate) its W would leave float64 (``range_problem``) or its scored objective is flat (``flat_problem``).

    ``max_sequences=None`` lifts the limit: the (T, V) tables are always cheap, only the
    M-vectors (built when first used) cost memory. The pipeline model (``sampler.Sampler``) is ``sampler``, with any
    of its parameters given as keywords replacing its own: ``make_toy(top_p=0.9, precision="bf16", logged="raw")``.
    """
    check_toy_arguments(T, V, mismatch, seed, max_sequences)
    given: dict[str, Any] = {
        name: value for name, value in (("top_p", top_p), ("top_k", top_k), ("temperature", temperature),
                                        ("precision", precision), ("logged", logged), ("scored", scored))
        if value is not None}
    if not isinstance(sampler, Sampler):
        raise ValueError(f"sampler must be a Sampler, got {quoted(sampler)}")
    sampler = replace(sampler, **given) if given else sampler
    sampler.check_vocabulary(V)
    rng = np.random.default_rng(seed)
    theta = rng.normal(loc=0.0, scale=0.7, size=(T, V))
    b = rng.standard_t(3, size=(T, V))
    toy = Toy(theta=theta, b=b, mismatch=float(mismatch), seed=int(seed), sampler=sampler)
    problem = (range_problem(toy.largest_log_W) or flat_problem(toy)) if max_sequences is not None else None
    if problem:
        raise ValueError(problem)
    return toy


def flat_problem(toy: Toy) -> str | None:
    """None, or why no relative error is defined: a trainer that keeps the sampler's mask can have a J that does not
    depend on θ (the kept tokens fix the reward, e.g. token 0 cut at too many positions), so ∇J = 0."""
    if toy.sampler.scored != "keep_mask" or np.linalg.norm(toy.true_grad) > 0:
        return None
    return (f"with the trainer keeping the sampler's mask, J = E_π[r] = {toy.J:.4g} does not depend on θ here (the "
            "tokens the sampler keeps fix the reward), so ∇J = 0 and no relative error is defined; use a larger "
            "top-p or top-k, or another scored π")


def largest_log_W(log_rho: NDArray[np.float64], kept: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Σ_t max(0, max over the kept tokens of log ρ_t), over the last two axes: a bound on log W(y), and on the log
    of every product of ratios over some positions, for every sequence the sampler draws."""
    largest = np.max(log_rho, axis=-1, where=kept, initial=-np.inf)
    return np.maximum(largest, 0.0).sum(axis=-1)


def range_problem(log_W_bound: float, where: str = "this toy") -> str | None:
    """None, or why the exact sums over the sequences would leave float64 (W up to e^log_W_bound > e^LOG_W_LIMIT, or
    a bound that is not a number: θ itself left float64)."""
    if log_W_bound <= LOG_W_LIMIT:
        return None
    if math.isnan(log_W_bound):
        return (f"on {where} the sequence ratio W = π(y)/μ(y) is not a number: θ has left float64's range; use a "
                "smaller learning rate")
    return (f"on {where} the sequence ratio W = π(y)/μ(y) reaches e^{log_W_bound:.0f} on sequences the sampler "
            f"almost never draws, beyond float64's range (e^709.8), so the exact sums over the sequences would "
            f"overflow; use a temperature nearer 1, a smaller mismatch or fewer tokens")


def pipeline_tables(theta: NDArray[np.float64], b: NDArray[np.float64], mismatch: float, sampler: Sampler,
                    engine_theta: NDArray[np.float64] | None = None
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                               NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    """(log π, log μ_log, log μ_s, μ_s, kept, log ρ) of the pipeline for θ and logits θ_e + mismatch·b (any leading
    axes): the scored π, the logged μ_log (``sampler.Sampler``), the sampled μ_s with its kept tokens
    (``sampler_tables``) and log ρ = log π − log μ_log on the kept tokens, +∞ at the others (never drawn). The engine's
    θ_e is θ unless ``engine_theta`` gives the policy it holds (a stale one, in asynchronous training): π is scored
    at θ over the kept tokens of the engine's μ."""
    logits = (theta if engine_theta is None else engine_theta) + mismatch * b
    log_mu, mu, kept = sampler_tables(theta, b, mismatch, sampler, logits)
    log_logged = sampler.logged_log_probabilities(logits, log_mu)
    log_pi = sampler.scored_log_probabilities(theta, kept)
    if sampler.logged == "processed" and sampler.scored != "keep_mask":
        log_rho = log_pi - log_mu                               # +∞ where log μ_s = −∞
    else:
        log_rho = np.subtract(log_pi, log_logged, out=np.full(log_pi.shape, np.inf), where=kept)
    return log_pi, log_logged, log_mu, mu, kept, log_rho


def scored_probabilities(theta: NDArray[np.float64], b: NDArray[np.float64], mismatch: float,
                         sampler: Sampler) -> NDArray[np.float64]:
    """π (…, T, V) the trainer scores at θ (any leading axes), its kept set (keep_mask) the sampler's at θ + mismatch·b."""
    if sampler.scored == "plain":
        return np.exp(log_softmax(theta))
    return np.exp(pipeline_tables(theta, b, mismatch, sampler)[0])


def sampler_tables(theta: NDArray[np.float64], b: NDArray[np.float64], mismatch: float, sampler: Sampler,
                   logits: NDArray[np.float64] | None = None
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """(log μ, μ, kept) for logits θ + mismatch·b (any leading axes): kept = μ > 0, the tokens the sampler can draw,
    and log μ = −∞ elsewhere (a probability that underflows to 0 counts as outside, so that log ρ = +∞ there)."""
    log_mu = sampler.log_probabilities(theta + mismatch * b if logits is None else logits)
    mu = np.exp(log_mu)
    kept = mu > 0
    return (log_mu if kept.all() else np.where(kept, log_mu, -np.inf)), mu, kept


def mean_ratios(pi: NDArray[np.float64], mu: NDArray[np.float64], rho: NDArray[np.float64],
                kept: NDArray[np.bool_], logged: str) -> NDArray[np.float64]:
    """E_μs[ρ_t] = Σ_{v kept} μ_s·π/μ_log per position, tables (..., T, V) → (..., T): π_t(S_t) when the logged μ is
    the sampled one (``logged`` "processed"; so computed), else the sum itself."""
    if logged == "processed":
        return np.sum(pi, axis=-1, where=kept)
    return np.sum(mu * np.where(kept, rho, 0.0), axis=-1)


def sampled_log_ratio(log_pi: NDArray[np.float64], log_mu: NDArray[np.float64], kept: NDArray[np.bool_],
                      log_rho: NDArray[np.float64], logged: str) -> NDArray[np.float64]:
    """log π − log μ_s on the kept tokens, +∞ elsewhere (tables (..., T, V)): ``log_rho`` itself when μ_log = μ_s."""
    if logged == "processed":
        return log_rho
    return np.subtract(log_pi, log_mu, out=np.full(np.shape(log_pi), np.inf), where=kept)


class Toy(Mapping[str, Any]):
    """One toy. Attributes are the (T, V) tables and lazy M-vectors; ``toy[key]`` gives the reference dict."""

    def __init__(self, theta: NDArray[np.float64], b: NDArray[np.float64], mismatch: float, seed: int,
                 sampler: Sampler = DEFAULT_SAMPLER) -> None:
        self.theta, self.b, self.mismatch, self.seed, self.sampler = theta, b, mismatch, seed, sampler
        self.T, self.V = theta.shape
        self.M = self.V**self.T
        # (T, V) tables: the scored π, the logged μ_log, the sampled μ_s and its support, log ρ = log π/μ_log
        self.log_pi, self.log_logged, self.log_mu, self.mu, self.kept, self.log_rho = pipeline_tables(
            theta, b, mismatch, sampler)
        self.pi = np.exp(self.log_pi)
        self.truncates = not self.kept.all()                   # some token is outside the sampler's support
        self.rho = np.exp(self.log_rho)
        self.score_scale = sampler.score_scale                 # ∇_θ log π(v) = score_scale·(onehot(v) − π)
        self.memo: dict[tuple[str, float], NDArray[np.float64]] = {}     # arrays several estimators share

    # -- per-sequence M-vectors ---------------------------------------------------------------------------
    # A toy keeps two: μ(y) (every estimator on sampler rollouts sums against it) and r(y) as booleans, 9 bytes
    # per sequence (36 MB at the largest toy). The others are rebuilt from the (T, V) tables on each use
    # (an outer sum: a few tens of ms at M = 4,194,304), so several users' toys fit in memory together.
    @cached_property
    def p_sampler(self) -> NDArray[np.float64]:
        """μ(y) = ∏_t μ_t(y_t)."""
        log_mu = outer_sum(self.log_mu)
        return np.exp(log_mu, out=log_mu)

    @cached_property
    def rewarded(self) -> NDArray[np.bool_]:
        """r(y) = 1 as a boolean: at least half of the tokens are token 0 (#zeros from an outer sum of 1[v = 0])."""
        is_zero = np.zeros((self.T, self.V), dtype=np.int8)       # int8 counts: T < 128 for any M that fits in memory
        is_zero[:, 0] = 1
        return outer_sum(is_zero) >= self.T / 2

    @property
    def R(self) -> NDArray[np.float64]:
        """r(y) ∈ {0, 1} as floats (the reference dict's array)."""
        return self.rewarded.astype(float)

    @property
    def p_train(self) -> NDArray[np.float64]:
        """π(y) = ∏_t π_t(y_t)."""
        log_pi = outer_sum(self.log_pi)
        return np.exp(log_pi, out=log_pi)

    @cached_property
    def J(self) -> float:
        """J = E_π[r], the objective the trainer climbs: from the distribution of the count of token 0 under π
        (``counts``, O(T²)), a probability clipped to [0, 1] against rounding."""
        return share(expected_reward(self.pi))

    @cached_property
    def logged_reward(self) -> float:
        """E_μ[r], the mean reward a rollout log shows, from the count of token 0 under μ (clipped to [0, 1])."""
        return share(expected_reward(self.mu))

    @property
    def log_W(self) -> NDArray[np.float64]:
        """log W(y) = Σ_t log ρ_t(y_t), the log sequence ratio log π(y)/μ(y)."""
        return outer_sum(self.log_rho)

    @property
    def mean_k3(self) -> NDArray[np.float64]:
        """(1/T) Σ_t k3_t(y_t) with k3 = ρ − 1 − log ρ ≥ 0."""
        return outer_sum(STATISTICS["k3"](self)) / self.T

    @property
    def max_abs_log_rho(self) -> NDArray[np.float64]:
        """max_t |log ρ_t(y_t)|."""
        return outer_max(np.abs(self.log_rho))

    @cached_property
    def true_grad(self) -> NDArray[np.float64]:
        """∇J with J = E_π[r]: J depends on θ only through q_t = π_t(0), so ∇J = Σ_t ∂J/∂q_t·∇q_t with ∂J/∂q_t
        from the count of token 0 without position t (``counts.objective_and_gradient``, O(T³)); ∇q_t carries the
        score's scale (1/τ for a trainer that divides by τ; the kept set of keep_mask is fixed, so its π has no
        gradient where it is 0)."""
        grad = objective_and_gradient(self.pi)[1]
        return grad if self.score_scale == 1 else grad * self.score_scale

    @cached_property
    def plain_pi(self) -> NDArray[np.float64]:
        """softmax(θ): the trainer's π before its choice of what to score."""
        return self.pi if self.sampler.scored == "plain" else np.exp(log_softmax(self.theta))

    @cached_property
    def plain_J(self) -> float:
        """J of softmax(θ), E_softmax(θ)[r]: the objective the scored π's J stands in for (J itself when plain)."""
        return self.J if self.sampler.scored == "plain" else share(expected_reward(self.plain_pi))

    @cached_property
    def plain_grad(self) -> NDArray[np.float64]:
        """∇J of softmax(θ) (``true_grad`` itself when the trainer scores softmax(θ))."""
        return self.true_grad if self.sampler.scored == "plain" else objective_and_gradient(self.plain_pi)[1]

    @cached_property
    def objective_shift(self) -> float:
        """‖∇J − ∇J_plain‖/‖∇J_plain‖: how far the scored π's objective gradient is from softmax(θ)'s (0 when plain)."""
        if self.sampler.scored == "plain":
            return 0.0
        return float(np.linalg.norm(self.true_grad - self.plain_grad) / np.linalg.norm(self.plain_grad))

    @cached_property
    def identity_tokens(self) -> NDArray[np.float64]:
        """E_μs[ρ_t] per position (T,): ``mean_ratios``."""
        return mean_ratios(self.pi, self.mu, self.rho, self.kept, self.sampler.logged)

    @property
    def sampled_log_ratio(self) -> NDArray[np.float64]:
        """log π − log μ_s (T, V) on the kept tokens, +∞ at the others: the log ratio of the distributions themselves
        (log ρ when the logged μ is the sampled one)."""
        return sampled_log_ratio(self.log_pi, self.log_mu, self.kept, self.log_rho, self.sampler.logged)

    @cached_property
    def identity(self) -> float:
        """The identity check E_μs[W] = E_μs[∏_t π/μ_log] = ∏_t E_μs[ρ_t]: 1 when the logged μ is the sampled one and
        the scored π puts all its mass where μ_s draws. Necessary, not sufficient: raw logging with a plain trainer
        at mismatch 0 reads 1 (every weight is 1) while the draws come from a tempered, truncated μ_s."""
        return float(np.prod(self.identity_tokens))

    @property
    def has_out_of_reach(self) -> bool:
        """True when the scored π has mass on sequences μ_s never draws (part of ∇J is out of the sampler's reach):
        the sampler truncates and the trainer does not keep its mask."""
        return self.truncates and self.sampler.scored != "keep_mask"

    @cached_property
    def largest_log_W(self) -> float:
        """A bound on log W(y) over the sequences the sampler draws (``largest_log_W``)."""
        return float(largest_log_W(self.log_rho, self.kept))

    @cached_property
    def unreachable_mass(self) -> float:
        """π(y ∉ S) = 1 − ∏_t π_t(S_t): the trainer's probability of the sequences the sampler never draws (0 when it
        keeps every token, or the trainer keeps its mask), from log1p/expm1 so that a small mass keeps its digits."""
        if not self.has_out_of_reach:
            return 0.0
        outside = np.sum(self.pi, axis=1, where=~self.kept)
        return share(-np.expm1(np.log1p(-outside).sum()))

    def reachable_gradient(self, b: float) -> NDArray[np.float64]:
        """∇J_S = E_π[(r − b)·s·1[y ∈ S]]: the part of ∇J = E_π[(r − b)·s] that the sequences the sampler draws carry,
        by the count recursion (``counts.reachable_gradient``); ∇J itself when nothing is truncated."""
        key = ("reachable gradient", float(b))
        if key not in self.memo:
            self.memo[key] = reachable_gradient(self.pi, self.kept, b) * self.score_scale if self.has_out_of_reach \
                else self.true_grad
        return self.memo[key]

    def nbytes(self) -> int:
        """Bytes of the arrays the toy holds now (tables, kept M-vectors, memo), each counted once (the logged μ is
        the sampled one's array when they agree), for byte-bounded caches."""
        arrays = [value for value in vars(self).values() if isinstance(value, np.ndarray)]
        arrays += [array for value in self.memo.values() for array in (value if isinstance(value, tuple) else (value,))]
        return sum(array.nbytes for array in {id(array): array for array in arrays}.values())

    # -- the reference dict's dense arrays, only on request -------------------------------------------
    @cached_property
    def Y(self) -> NDArray[np.int_]:
        return token_grid(self.T, self.V)

    @property
    def logp_train(self) -> NDArray[np.float64]:
        return self.log_pi[np.arange(self.T), self.Y]

    @property
    def logp_sampler(self) -> NDArray[np.float64]:
        return self.log_mu[np.arange(self.T), self.Y]

    @property
    def score(self) -> NDArray[np.float64]:
        """score[m, t] = (onehot(y_t) − π_t)·score_scale, shape (M, T, V)."""
        return (np.eye(self.V)[self.Y] - self.pi[None]) * self.score_scale

    # -- Mapping interface: the reading groups' reference code indexes the toy as a dict (toy["p_sampler"], …), and
    # the spec (its README) asks that such code run unchanged; DICT_KEYS are that dict's names (tests/engine/test_toy.py)
    def __getitem__(self, key: str) -> Any:
        if key not in DICT_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(DICT_KEYS)

    def __len__(self) -> int:
        return len(DICT_KEYS)

    def __repr__(self) -> str:
        sampler = "" if self.sampler.is_default else f", sampler={self.sampler.describe()}"
        return f"Toy(T={self.T}, V={self.V}, mismatch={self.mismatch}, seed={self.seed}{sampler}, M={self.M})"


def sample_from_sampler(toy: Mapping[str, Any], n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """n sequence indices drawn from μ with ``rng.choice``: the reference sampler, draw for draw."""
    probabilities = toy["p_sampler"] / toy["p_sampler"].sum()
    return rng.choice(len(probabilities), size=n, p=probabilities)


def estimator_moments(toy: Mapping[str, Any], per_seq_estimate: NDArray[np.float64]) -> dict[str, Any]:
    """Exact moments of a single-sample estimator given densely as an (M, T, V) array, y ~ μ.

    mean = Σ_m μ_m·ĝ_m;  bias = ‖mean − ∇J‖;  var = Σ_m μ_m·‖ĝ_m − mean‖²;
    rel_bias = bias/‖∇J‖;  rel_rmse(N) = sqrt(bias² + var/N)/‖∇J‖.
    """
    weights = toy["p_sampler"]
    mean = np.tensordot(weights, per_seq_estimate, axes=1)
    grad_norm = float(np.linalg.norm(toy["true_grad"]))
    bias = float(np.linalg.norm(toy["true_grad"] - mean))
    spread = ((per_seq_estimate - mean) ** 2).reshape(len(weights), -1).sum(axis=1)
    var = float(weights @ spread)
    return {"mean": mean, "bias": bias, "var": var, "rel_bias": bias / grad_norm,
            "rel_rmse": lambda N: float(np.sqrt(bias**2 + var / N) / grad_norm)}
