"""The toy: T independent positions over V tokens, a trainer π and a sampler μ that disagree.

    π_t = softmax(θ_t),   μ_t = sampler(θ_t + mismatch·b_t),   r(y) = 1[#{t: y_t = 0} ≥ T/2]

θ ~ N(0, 0.7²) and b ~ Student-t(3) are drawn, in that order, from ``numpy.random.default_rng(seed)``,
so a seed gives the same toy as the reading groups' reference code. The sampler model (``sampler``: precision,
temperature, top-k, top-p) turns the engine's logits into μ; by default it is plain softmax. Everything per
sequence is an M-vector (M = V**T) built lazily from the (T, V) tables; the dense (M, T) and (M, T, V) arrays of
the reference dict exist only when a caller asks for them by key.

A sampler that truncates keeps a set S_t of tokens at each position (``kept``): μ_t = 0 and log ρ_t = +∞
outside it. Its sequences, S = ∏_t S_t, are the only ones it draws; the π-mass outside S (``unreachable_mass``)
is never sampled, and ∇J's part from there, ∇J − ∇J_S (``reachable_gradient``), is a bias no weight removes.
"""

import math
import numbers
from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property

import numpy as np

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


def check_toy_arguments(T, V, mismatch, seed, max_sequences=EXACT_SIZE_LIMIT):
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


def more_sequences_than(T, V, limit):
    """True if M = V**T > limit (T ≥ 1, V ≥ 2), decided in logarithms first: V**T is built only when it is
    at most about twice the limit."""
    if T > (math.log2(limit) + 1) / math.log2(V):
        return True
    return V**T > limit


def sequence_count(T, V):
    """M = V**T written out ("4,096") when it has at most 20 digits, else as the power ("4**1000")."""
    return f"{V**T:,}" if not more_sequences_than(T, V, 10**20) else f"{V}**{quoted(T)}"


def share(probability):
    """A probability clipped to [0, 1]: a sum of probabilities can round a hair outside (1.0000000000000002)."""
    return min(max(float(probability), 0.0), 1.0)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def make_toy(T=6, V=4, mismatch=0.3, seed=0, sampler=DEFAULT_SAMPLER, max_sequences=EXACT_SIZE_LIMIT, *,
             top_p=None, top_k=None, temperature=None, precision=None):
    """The toy for these arguments; ValueError if they are invalid, M = V**T > max_sequences, or (for a toy to
    enumerate) its W would leave float64 (``range_problem``).

    ``max_sequences=None`` lifts the limit: the (T, V) tables are always cheap, only the
    M-vectors (built when first used) cost memory. The sampler model (``sampler.Sampler``) is ``sampler``, with any
    of its parameters given as keywords replacing its own: ``make_toy(top_p=0.9, precision="bf16")``.
    """
    check_toy_arguments(T, V, mismatch, seed, max_sequences)
    given = {name: value for name, value in (("top_p", top_p), ("top_k", top_k), ("temperature", temperature),
                                             ("precision", precision)) if value is not None}
    if not isinstance(sampler, Sampler):
        raise ValueError(f"sampler must be a Sampler, got {quoted(sampler)}")
    sampler = replace(sampler, **given) if given else sampler
    sampler.check_vocabulary(V)
    rng = np.random.default_rng(seed)
    theta = rng.normal(loc=0.0, scale=0.7, size=(T, V))
    b = rng.standard_t(3, size=(T, V))
    toy = Toy(theta=theta, b=b, mismatch=float(mismatch), seed=int(seed), sampler=sampler)
    problem = range_problem(toy.largest_log_W) if max_sequences is not None else None
    if problem:
        raise ValueError(problem)
    return toy


def largest_log_W(log_rho, kept):
    """Σ_t max(0, max over the kept tokens of log ρ_t), over the last two axes: a bound on log W(y), and on the log
    of every product of ratios over some positions, for every sequence the sampler draws."""
    largest = np.max(log_rho, axis=-1, where=kept, initial=-np.inf)
    return np.maximum(largest, 0.0).sum(axis=-1)


def range_problem(log_W_bound, where="this toy"):
    """None, or why the exact sums over the sequences would leave float64 (W up to e^log_W_bound > e^LOG_W_LIMIT)."""
    if log_W_bound <= LOG_W_LIMIT:
        return None
    return (f"on {where} the sequence ratio W = π(y)/μ(y) reaches e^{log_W_bound:.0f} on sequences the sampler "
            f"almost never draws, beyond float64's range (e^709.8), so the exact sums over the sequences would "
            f"overflow; use a temperature nearer 1, a smaller mismatch or fewer tokens")


def sampler_tables(theta, b, mismatch, sampler):
    """(log μ, μ, kept) for logits θ + mismatch·b (any leading axes): kept = μ > 0, the tokens the sampler can draw,
    and log μ = −∞ elsewhere (a probability that underflows to 0 counts as outside, so that log ρ = +∞ there)."""
    log_mu = sampler.log_probabilities(theta + mismatch * b)
    mu = np.exp(log_mu)
    kept = mu > 0
    return (log_mu if kept.all() else np.where(kept, log_mu, -np.inf)), mu, kept


class Toy(Mapping):
    """One toy. Attributes are the (T, V) tables and lazy M-vectors; ``toy[key]`` gives the reference dict."""

    def __init__(self, theta, b, mismatch, seed, sampler=DEFAULT_SAMPLER):
        self.theta, self.b, self.mismatch, self.seed, self.sampler = theta, b, mismatch, seed, sampler
        self.T, self.V = theta.shape
        self.M = self.V**self.T
        self.log_pi = log_softmax(theta)                       # (T, V) trainer log-probabilities
        self.log_mu, self.mu, self.kept = sampler_tables(theta, b, mismatch, sampler)   # (T, V) sampler's
        self.pi = np.exp(self.log_pi)
        self.truncates = not self.kept.all()                   # some token is outside the sampler's support
        self.log_rho = self.log_pi - self.log_mu               # (T, V) per-token log ratio log π/μ (+∞ outside)
        self.rho = np.exp(self.log_rho)
        self.memo = {}                                         # arrays several estimators share (see moments)

    # -- per-sequence M-vectors ---------------------------------------------------------------------------
    # A toy keeps two: μ(y) (every estimator on sampler rollouts sums against it) and r(y) as booleans, 9 bytes
    # per sequence (36 MB at the largest toy). The others are rebuilt from the (T, V) tables on each use
    # (an outer sum: a few tens of ms at M = 4,194,304), so several users' toys fit in memory together.
    @cached_property
    def p_sampler(self):
        """μ(y) = ∏_t μ_t(y_t)."""
        log_mu = outer_sum(self.log_mu)
        return np.exp(log_mu, out=log_mu)

    @cached_property
    def rewarded(self):
        """r(y) = 1 as a boolean: at least half of the tokens are token 0 (#zeros from an outer sum of 1[v = 0])."""
        is_zero = np.zeros((self.T, self.V), dtype=np.int8)       # int8 counts: T < 128 for any M that fits in memory
        is_zero[:, 0] = 1
        return outer_sum(is_zero) >= self.T / 2

    @property
    def R(self):
        """r(y) ∈ {0, 1} as floats (the reference dict's array)."""
        return self.rewarded.astype(float)

    @property
    def p_train(self):
        """π(y) = ∏_t π_t(y_t)."""
        log_pi = outer_sum(self.log_pi)
        return np.exp(log_pi, out=log_pi)

    @cached_property
    def J(self):
        """J = E_π[r], the objective the trainer climbs: from the distribution of the count of token 0 under π
        (``counts``, O(T²)), a probability clipped to [0, 1] against rounding."""
        return share(expected_reward(self.pi))

    @cached_property
    def logged_reward(self):
        """E_μ[r], the mean reward a rollout log shows, from the count of token 0 under μ (clipped to [0, 1])."""
        return share(expected_reward(self.mu))

    @property
    def log_W(self):
        """log W(y) = Σ_t log ρ_t(y_t), the log sequence ratio log π(y)/μ(y)."""
        return outer_sum(self.log_rho)

    @property
    def mean_k3(self):
        """(1/T) Σ_t k3_t(y_t) with k3 = ρ − 1 − log ρ ≥ 0."""
        return outer_sum(STATISTICS["k3"](self)) / self.T

    @property
    def max_abs_log_rho(self):
        """max_t |log ρ_t(y_t)|."""
        return outer_max(np.abs(self.log_rho))

    @cached_property
    def true_grad(self):
        """∇J with J = E_π[r]: J depends on θ only through q_t = π_t(0), so ∇J = Σ_t ∂J/∂q_t·∇q_t with ∂J/∂q_t
        from the count of token 0 without position t (``counts.objective_and_gradient``, O(T³))."""
        return objective_and_gradient(self.pi)[1]

    @cached_property
    def largest_log_W(self):
        """A bound on log W(y) over the sequences the sampler draws (``largest_log_W``)."""
        return float(largest_log_W(self.log_rho, self.kept))

    @cached_property
    def unreachable_mass(self):
        """π(y ∉ S) = 1 − ∏_t π_t(S_t): the trainer's probability of the sequences the sampler never draws (0 when it
        keeps every token), from log1p/expm1 so that a small mass keeps its digits."""
        if not self.truncates:
            return 0.0
        outside = np.sum(self.pi, axis=1, where=~self.kept)
        return share(-np.expm1(np.log1p(-outside).sum()))

    def reachable_gradient(self, b):
        """∇J_S = E_π[(r − b)·s·1[y ∈ S]]: the part of ∇J = E_π[(r − b)·s] that the sequences the sampler draws carry,
        by the count recursion (``counts.reachable_gradient``); ∇J itself when nothing is truncated."""
        key = ("reachable gradient", float(b))
        if key not in self.memo:
            self.memo[key] = reachable_gradient(self.pi, self.kept, b) if self.truncates else self.true_grad
        return self.memo[key]

    def nbytes(self):
        """Bytes of the arrays the toy holds now (tables, kept M-vectors, memo), for byte-bounded caches."""
        arrays = [value for value in vars(self).values() if isinstance(value, np.ndarray)]
        arrays += [array for value in self.memo.values() for array in (value if isinstance(value, tuple) else (value,))]
        return sum(array.nbytes for array in arrays)

    # -- the reference dict's dense arrays, only on request -------------------------------------------
    @cached_property
    def Y(self):
        return token_grid(self.T, self.V)

    @property
    def logp_train(self):
        return self.log_pi[np.arange(self.T), self.Y]

    @property
    def logp_sampler(self):
        return self.log_mu[np.arange(self.T), self.Y]

    @property
    def score(self):
        """score[m, t] = onehot(y_t) − π_t, shape (M, T, V)."""
        return np.eye(self.V)[self.Y] - self.pi[None]

    # -- Mapping interface, so code written against the reference dict runs unchanged ------------------
    def __getitem__(self, key):
        if key not in DICT_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(DICT_KEYS)

    def __len__(self):
        return len(DICT_KEYS)

    def __repr__(self):
        sampler = "" if self.sampler.is_default else f", sampler={self.sampler.describe()}"
        return f"Toy(T={self.T}, V={self.V}, mismatch={self.mismatch}, seed={self.seed}{sampler}, M={self.M})"


def sample_from_sampler(toy, n, rng):
    """n sequence indices drawn from μ with ``rng.choice``: the reference sampler, draw for draw."""
    probabilities = toy["p_sampler"] / toy["p_sampler"].sum()
    return rng.choice(len(probabilities), size=n, p=probabilities)


def estimator_moments(toy, per_seq_estimate):
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
