"""Exact sums over sequences that carry hidden variables: a component per sequence, a hidden value per token.

Some engines draw more than tokens. A router error drawn once per sequence, a version switch, a staleness drawn per
sequence: a **component** c of the whole sequence, with probability q_c. A router error drawn per token: a hidden value
of each position, carried in its **symbol** x_t (a token together with the hidden value; S symbols per position, each
with its token ``tokens[x]``). Given the component the positions are independent, so a ``Mixture`` is C product
toys over symbols:

    P(c, x) = q_c·∏_t P_{c,t}(x_t)       (``probability``, ``log_sampled``: −∞ at a symbol never drawn)

and each symbol carries what a correction reads of its token: what the engine logged (``log_logged``, its μ under the
hidden value it drew) and the policy the correction's ratio divides it into (``log_anchor``, π_old as the trainer
computes it for that symbol: with its own routing, or the engine's replayed). ``mask`` (C, T) marks the positions in
the loss (a framework that masks a stale prefix leaves them out of the gradient and of every sequence statistic). The
reward reads tokens: r = 1[#{t: tokens[x_t] = 0} ≥ T/2].

``correction_marginals`` gives, for each correction g of the catalogue (its coefficient c_t(x) evaluated with ratios
π_old/μ_log and A = r − b, as the batch interface evaluates it), the reward-class moments an update reads,

    first[c, ρ, t, s]  = q_c·E[1[r = ρ]·c_t·1[x_t = s] | c]       second[c, ρ, t, s] = q_c·E[1[r = ρ]·c_t²·1[x_t = s] | c]

by the count recursion when the coefficient factorises over positions (``recursion.FACTORS``: the count of zero
symbols instead of token 0, ``counts.factorised_marginals`` with ``zeros``), else by enumerating each component's
sequences over the symbols it draws (``coefficients.apply`` on chunks of them, a GivenSequences with the mask), at
most ENUMERATED_LIMIT sequences in all. The gradient of a sample is Σ_t c_t·D_t·J_tᵀ(onehot(token) − π_t), D the
update's ∂L/∂log π_θ (A itself for a plain estimator), so its mean and second moment are sums of first·D and
second·D² against each symbol's score (``score_tables``).
"""

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.coefficients import apply
from toylab.engine.counts import expected_reward, factorised_marginals, reward_by_count
from toylab.engine.recursion import FACTORS, PositionFactors
from toylab.engine.recursion import on_support as factors_on_support
from toylab.engine.sequences import GivenSequences

ENUMERATED_LIMIT = 2**22          # sequences the enumeration path may visit in one call (every component's)
CHUNK = 2**15                     # sequences per enumerated chunk


@dataclass(frozen=True)
class Mixture:
    """C components of T positions over S symbols (see the module docstring): ``probability`` (C,), ``log_sampled``,
    ``log_logged`` and ``log_anchor`` (C, T, S), ``tokens`` (S,), ``mask`` (C, T) bool or None (every position) and
    ``log_hidden`` (C, T, S), the log-probability of each symbol's hidden value (None: symbols are tokens)."""
    probability: NDArray[np.float64]
    log_sampled: NDArray[np.float64]
    log_logged: NDArray[np.float64]
    log_anchor: NDArray[np.float64]
    tokens: NDArray[np.int64]
    mask: NDArray[np.bool_] | None = None
    log_hidden: NDArray[np.float64] | None = None

    @property
    def log_conditional(self):
        """log P(token | the symbol's hidden value) (C, T, S): log_sampled less the hidden value's own log-probability
        (``log_hidden``, 0 when symbols are tokens): the engine's μ under the hidden value it drew."""
        return self.log_sampled if self.log_hidden is None else self.log_sampled - self.log_hidden

    @property
    def shape(self):
        return self.log_sampled.shape

    @property
    def zeros(self):
        return self.tokens == 0

    @property
    def sampled(self):
        return np.exp(self.log_sampled)

    @property
    def kept(self):
        return np.isfinite(self.log_sampled)

    @property
    def loss_mask(self):
        C, T, _ = self.shape
        return np.ones((C, T), bool) if self.mask is None else self.mask

    def with_anchor(self, log_anchor):
        return Mixture(self.probability, self.log_sampled, self.log_logged, log_anchor, self.tokens, self.mask,
                       self.log_hidden)

    def token_marginals(self, V):
        """P_c,t(v) summed over the symbols of token v: (C, T, V)."""
        marginals = np.zeros((*self.shape[:2], V))
        np.add.at(np.moveaxis(marginals, -1, 0), self.tokens, np.moveaxis(self.sampled, -1, 0))
        return marginals

    def enumerated_size(self):
        """How many sequences the enumeration path visits: Σ_c ∏_t (symbols component c draws at t)."""
        return int(sum(np.prod(self.kept[c].sum(axis=-1).astype(float)) for c in range(self.shape[0])))


def expected_reward_of(mixture: Mixture, V: int) -> float:
    """E[r] under the mixture: Σ_c q_c·E_c[r], each by the count recursion on its token marginals."""
    return float(mixture.probability @ expected_reward(mixture.token_marginals(V)))


def mean_log_ratio(mixture: Mixture) -> float:
    """E[Σ_t (log μ_log − log π_old)(x_t)] over the mixture, on the positions in the loss: the k1 estimate of KL(μ‖π)
    a framework logs from what it has (the logged μ, its π_old), a true KL(μ‖π_old) when the logged μ is the sampled
    one and the symbols are tokens."""
    log_ratio = np.where(mixture.kept, mixture.log_logged - mixture.log_anchor, 0.0)
    per_position = np.sum(mixture.sampled * log_ratio, axis=-1) * mixture.loss_mask
    return float(mixture.probability @ per_position.sum(axis=-1))


def enumeration_problem(mixture: Mixture, estimators) -> str | None:
    """None, or why the estimators that do not factorise cannot be summed exactly here (too many sequences)."""
    if all(id in FACTORS for id, _ in estimators):
        return None
    size = mixture.enumerated_size()
    if size <= ENUMERATED_LIMIT:
        return None
    names = ", ".join(id for id, _ in estimators if id not in FACTORS)
    return (f"{names} do not factorise over positions, so their exact sums enumerate {size:,} sequences with their "
            f"hidden values, over the limit of {ENUMERATED_LIMIT:,}; use fewer draws, fewer tokens or a smaller "
            "vocabulary, or draw the router error per sequence")


def correction_marginals(mixture: Mixture, estimators, b, second=True):
    """(first, second), each (E, C, 2, T, S), for estimators [(id, params)] with baselines b (E,) (see the module
    docstring); second is None unless asked for. ValueError for a batch-coupled estimator, one with an additive term,
    or too many sequences."""
    return correction_marginals_each([mixture], estimators, b, second)[0]


def correction_marginals_each(mixtures, estimators, b, second=True):
    """``correction_marginals`` of several mixtures that draw alike (one ``probability``, ``log_sampled`` and
    ``tokens``; what each logs, its anchor and its mask its own): a list of (first, second), the enumerated estimators
    visiting the shared sequences once for all of them."""
    mixtures = list(mixtures)
    shared = mixtures[0]
    for mixture in mixtures[1:]:
        if not (np.array_equal(mixture.probability, shared.probability) and np.array_equal(mixture.tokens, shared.tokens)
                and np.array_equal(mixture.log_sampled, shared.log_sampled)):
            raise ValueError("the mixtures must draw alike: one probability, log_sampled and tokens")
    E = len(estimators)
    C, T, S = shared.shape
    for estimator_id, _ in estimators:
        if not ESTIMATORS[estimator_id].exact:
            raise ValueError(f"{estimator_id} is batch-coupled: it has no exact marginals")
    enumerated = [index for index, (id, _) in enumerate(estimators) if id not in FACTORS]
    problem = enumeration_problem(shared, [estimators[index] for index in enumerated])
    if problem:
        raise ValueError(problem)
    found = _enumerated(mixtures, [estimators[index] for index in enumerated], b[enumerated], second) \
        if enumerated else None
    weight = shared.probability[None, :, None, None, None]
    out = []
    for which, mixture in enumerate(mixtures):
        first = np.zeros((E, C, 2, T, S))
        squares = np.zeros((E, C, 2, T, S)) if second else None
        for index, (estimator_id, params) in enumerate(estimators):
            if estimator_id in FACTORS:
                first[index], factorised_squares = _factorised(mixture, estimator_id, params, second)
                if second:
                    squares[index] = factorised_squares
        if enumerated:
            first[enumerated] = found[which][0]
            if second:
                squares[enumerated] = found[which][1]
        out.append((first * weight, None if squares is None else squares * weight))
    return out


def _factorised(mixture, estimator_id, params, second=True):
    """first, second (C, 2, T, S) per component (unweighted by q_c) by the count recursion over zero symbols."""
    C, T, S = mixture.shape
    kept, mask = mixture.kept, mixture.loss_mask
    with np.errstate(invalid="ignore"):
        log_rho = np.where(kept, mixture.log_anchor - mixture.log_logged, np.inf)
    length = np.maximum(mask.sum(axis=1), 1).astype(float)[:, None, None]
    view = SimpleNamespace(log_rho=log_rho, rho=np.exp(log_rho), T=length, log_pi=mixture.log_anchor,
                           log_logged=mixture.log_logged)
    factors = factors_on_support(FACTORS[estimator_id](view, **params), kept)
    inside = mask[..., None]
    token = np.broadcast_to(np.where(inside, factors.token, 0.0), (C, T, S))
    before = np.broadcast_to(np.where(inside, factors.before, 1.0), (C, T, S))
    after = np.broadcast_to(np.where(inside, factors.after, 1.0), (C, T, S))
    p = mixture.sampled
    phi = reward_by_count(T)
    out = np.empty((2, C, 2, T, S))
    powers = ((token, before, after), (token**2, before**2, after**2))[:2 if second else 1]
    for power, (t, b, a) in enumerate(powers):
        stacked = PositionFactors(t, b, a)
        for reward, indicator in enumerate((1 - phi, phi)):
            out[power, :, reward] = factorised_marginals(p, stacked, np.broadcast_to(indicator, (C, T + 1)),
                                                         mixture.zeros)
    return out[0], out[1]


def _enumerated(mixtures, estimators, b, second=True):
    """[(first, second) (E, C, 2, T, S)] per mixture, per estimator and component (unweighted by q_c), by visiting the
    sequences the mixtures share once for every mixture and estimator, in chunks of at most CHUNK sequences
    (``sequences_of``)."""
    shared = mixtures[0]
    C, T, S = shared.shape
    E, M = len(estimators), len(mixtures)
    first, squares = np.zeros((M, E, C * 2 * T * S)), np.zeros((M, E, C * 2 * T * S))
    positions = np.arange(T)
    for component, x in sequences_of(shared):
        reward = (2 * (shared.tokens[x] == 0).sum(axis=1) >= T).astype(float)
        rows = component[:, None]
        p = np.exp(shared.log_sampled[rows, positions, x].sum(axis=1))[:, None]
        cell = (((rows * 2 + reward[:, None].astype(int)) * T + positions) * S + x).ravel()     # (c, ρ, t, s)
        for which, mixture in enumerate(mixtures):
            log_anchor, log_logged = mixture.log_anchor[rows, positions, x], mixture.log_logged[rows, positions, x]
            mask = mixture.loss_mask[component]
            views = {}                # one view per baseline, shared by its estimators (and their memoised sums)
            for index, (estimator_id, params) in enumerate(estimators):
                key = float(b[index])
                if key not in views:
                    views[key] = GivenSequences(log_anchor, log_logged, mask, reward - key)
                coefficient, _, additive = apply(estimator_id, views[key], params)
                if np.any(additive):
                    raise ValueError(f"{estimator_id} adds a penalty term to the gradient: it is a loss, not a "
                                     "correction weight")
                weighted = p * np.broadcast_to(coefficient, x.shape)
                first[which, index] += np.bincount(cell, weights=weighted.ravel(), minlength=first.shape[-1])
                if second:
                    squares[which, index] += np.bincount(cell, weights=(weighted * coefficient).ravel(),
                                                         minlength=first.shape[-1])
    shape = (E, C, 2, T, S)
    return [(first[which].reshape(shape), squares[which].reshape(shape)) for which in range(M)]


def sequences_of(mixture):
    """(component (n,), symbols (n, T)) chunks of at most CHUNK sequences, every component's sequences over the symbols
    it draws once, in order."""
    C, T, _ = mixture.shape
    pending_c, pending_x, held = [], [], 0
    for c in range(C):
        symbols = [np.flatnonzero(row) for row in mixture.kept[c]]
        sizes = np.array([len(row) for row in symbols])
        strides = np.concatenate([np.cumprod(sizes[::-1])[::-1][1:], [1]])
        total = int(np.prod(sizes))
        for start in range(0, total, CHUNK):
            index = np.arange(start, min(start + CHUNK, total))
            pending_x.append(np.stack([symbols[t][(index // strides[t]) % sizes[t]] for t in range(T)], axis=1))
            pending_c.append(np.full(len(index), c))
            held += len(index)
            if held >= CHUNK:
                yield np.concatenate(pending_c), np.concatenate(pending_x)
                pending_c, pending_x, held = [], [], 0
    if held:
        yield np.concatenate(pending_c), np.concatenate(pending_x)


def by_route(values: NDArray[np.float64], routes: NDArray[np.int64], tokens: NDArray[np.int64], H: int,
             V: int) -> NDArray[np.float64]:
    """Sum symbol tables into route tables: values (…, C, T, S) → (…, H, T, V), symbol s of component c adding into
    route routes[c, s] (the routing the trainer differentiates under for it) at its token."""
    *lead, C, T, S = values.shape
    into = np.zeros((C * S, H * V))
    into[np.arange(C * S), (routes * V + tokens[None, :]).ravel()] = 1.0
    flat = np.moveaxis(values, -1, -2).reshape(*lead, C * S, T)
    summed = np.einsum("...kt,kh->...ht", flat, into).reshape(*lead, H, V, T)
    return np.swapaxes(summed, -1, -2)
