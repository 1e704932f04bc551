"""Monte Carlo: replicate batches drawn from the sampler, every estimator's relative error per batch size.

Each replicate draws max(N) sequences token by token (μ is a product over positions, so no M-vector is
needed and any toy size works); the batch of size N is its first N sequences. For each replicate and N
the batch estimate ĝ_N is compared with ∇J:  error = ‖ĝ_N − ∇J‖ / ‖∇J‖.
For an exact estimator  E[error²] = (bias² + var/N)/‖∇J‖²,  which the tests check. A sample's estimate is
Σ_t (c_t·A + d_t)·s_t, d the additive term of a penalty (0 for most estimators).

An exact estimator's coefficients come from ``toylab.coefficients`` on the sampled tokens' log-probabilities
(the one code path that applies an estimator to given sequences); the batch's loss aggregation
(``aggregation``: seq-mean-token-sum by default) turns them into ĝ_N.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue import aggregation as loss_aggregation
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.coefficients import apply
from toylab.engine.moments import baseline_value
from toylab.engine.sequences import GivenSequences
from toylab.engine.toy import Toy

POWERS_OF_TWO = tuple(2**k for k in range(13))      # 1 … 4096
SAMPLES_PER_CHUNK = 500_000                           # tokens held at once: bounds the memory (about 40 MB)


def draw_tokens(rng, position_probabilities, shape):
    """Tokens of shape (*shape, T), position t drawn from position_probabilities[t] by inverse CDF."""
    return tokens_from_uniforms(rng.random((*shape, len(position_probabilities))), position_probabilities)


def tokens_from_uniforms(uniforms, position_probabilities):
    """token = #{inner CDF edges ≤ u} for uniforms (..., n, T); probabilities (T, V), or (..., T, V): one
    table per leading index (each training run its own π or μ). A token of probability 0 is never drawn: its
    edges coincide, and an edge followed only by such tokens is +∞ (a cumulative sum a hair below 1 would
    otherwise hand them u ∈ [sum, 1))."""
    inner_edges = np.cumsum(position_probabilities, axis=-1)[..., :-1]         # (..., T, V − 1)
    nothing_after = np.cumsum(position_probabilities[..., ::-1], axis=-1)[..., ::-1][..., 1:] == 0
    if nothing_after.any():
        inner_edges = np.where(nothing_after, np.inf, inner_edges)
    tokens = np.zeros(uniforms.shape, dtype=np.intp)
    for j in range(inner_edges.shape[-1]):
        tokens += uniforms >= inner_edges[..., None, :, j]
    return tokens


def trainer_side(toy):
    """The toy as batches drawn from π see it (on_policy's): the sampler is the trainer, so log μ = log π (sampled
    and logged) and every ratio is 1. Those batches hold tokens a truncating μ never draws (log μ = −∞ there), which
    on_policy never reads; tables (T, V) or (..., T, V) as the toy's."""
    return SimpleNamespace(V=toy.V, pi=toy.pi, log_pi=toy.log_pi, log_mu=toy.log_pi, log_logged=toy.log_pi,
                           log_rho=np.zeros_like(toy.log_pi), rho=np.ones_like(toy.pi), score_scale=toy.score_scale)


@dataclass
class Batches:
    """R replicate batches of tokens (R, n, T) with their sequence statistics and batch-sum helpers.

    ``toy`` is a Toy, or anything with V, score_scale and the tables pi, log_pi, log_logged, log_rho: of shape (T, V),
    or (R, T, V) with one toy per replicate (training's runs), and then ``advantage_baseline`` may be one b per
    replicate. The tokens were drawn from the sampled μ_s; the correction sees the scored π and the logged μ_log.
    ``score_sum(x)`` is, for every replicate and N, Σ_{i<N} x_{i,t}·(onehot(y_{i,t}) − π_t)·score_scale: shape
    (R, K, T, V).
    ``cumulative(x)`` is Σ_{i<N} x_i: shape (R, K).
    ``aggregated(c, kept)`` applies the loss aggregation: ĝ_N = score_sum(scaled c·A)[N] / D_N.
    """
    toy: object
    tokens: np.ndarray
    N: np.ndarray
    advantage_baseline: float | np.ndarray
    aggregation: str = loss_aggregation.DEFAULT_AGGREGATION

    def __post_init__(self):
        R, n, T = self.tokens.shape
        V, K = self.toy.V, len(self.N)
        self.T = T
        cell = self.tokens + V * np.arange(T)                                  # index into a flattened (T, V) table
        own_cell = cell + T * V * np.arange(R)[:, None, None]                  # … into flattened (R, T, V) tables
        self._gather = lambda table: np.take(table, cell if np.ndim(table) == 2 else own_cell)
        self.log_W = self._gather(self.toy.log_rho).sum(axis=2)
        self.reward = (2 * (self.tokens == 0).sum(axis=2) >= T).astype(float)
        self.advantage = self.reward - np.reshape(self.advantage_baseline, (-1, 1))
        block = np.searchsorted(self.N, np.arange(n), side="right")        # sample i is in block k if N_{k-1} ≤ i < N_k
        self._block_of_sample = (np.arange(R)[:, None] * K + block).ravel()
        self._flat_index = (self._block_of_sample.reshape(R, n, 1) * (T * V) + cell).ravel()

    @cached_property
    def sequences(self):
        """The sampled sequences as ``toylab.coefficients`` sees them: their tokens' log-probabilities, (R·n, T)."""
        R, n, T = self.tokens.shape
        return GivenSequences(self._gather(self.toy.log_pi).reshape(R * n, T),
                              self._gather(self.toy.log_logged).reshape(R * n, T),
                              advantages=self.advantage.reshape(R * n))

    def terms(self, estimator_id, params=None):
        """(c, kept, d) of an exact estimator for every sampled sequence, each (R, n, T), by ``toylab.coefficients``:
        sample i's estimate is Σ_t (c_{i,t}·A_i + d_{i,t})·s_{i,t}."""
        coefficient, kept, additive = apply(estimator_id, self.sequences, resolve_params(estimator_id, params))
        shape = self.tokens.shape
        return np.broadcast_to(coefficient, kept.shape).reshape(shape), kept.reshape(shape), additive.reshape(shape)

    def coefficients_and_kept(self, estimator_id, params=None):
        """(c, kept) of an exact estimator for every sampled sequence, shape (R, n, T)."""
        return self.terms(estimator_id, params)[:2]

    def gradient_coefficients(self, estimator_id, params=None):
        """c_{i,t}·A_i + d_{i,t} of an exact estimator for every sampled sequence: shape (R, n, T)."""
        coefficient, _, additive = self.terms(estimator_id, params)
        return coefficient * self.advantage[..., None] + additive

    def aggregated(self, coefficient, kept):
        return loss_aggregation.aggregated(self, coefficient, kept)

    @staticmethod
    def divided(sums, denominator):
        """sums (R, K, T, V) / denominator (R, K), 0 where the denominator is 0 (no kept token)."""
        safe = np.where(denominator > 0, denominator, 1.0)
        return np.where((denominator > 0)[..., None, None], sums / safe[..., None, None], 0.0)

    def score_sum(self, x):
        R, n, T = self.tokens.shape
        K, V = len(self.N), self.toy.V
        x = np.broadcast_to(x[..., None] if np.ndim(x) == 2 else x, (R, n, T))
        sums = np.bincount(self._flat_index, weights=x.ravel(), minlength=R * K * T * V)
        sums = np.cumsum(sums.reshape(R, K, T, V), axis=1)
        pi = self.toy.pi if np.ndim(self.toy.pi) == 2 else self.toy.pi[:, None]
        return (sums - pi * sums.sum(axis=3, keepdims=True)) * self.toy.score_scale

    def cumulative(self, x):
        R, K = self.tokens.shape[0], len(self.N)
        blocks = np.bincount(self._block_of_sample, weights=np.broadcast_to(x, self.tokens.shape[:2]).ravel(),
                             minlength=R * K)
        return np.cumsum(blocks.reshape(R, K), axis=1)


def batch_estimates(batches, estimator_id, params=None):
    """ĝ_N for every replicate and batch size: shape (R, K, T, V)."""
    estimator = ESTIMATORS[estimator_id]
    params = resolve_params(estimator_id, params)
    if estimator.exact:
        coefficient, kept, additive = batches.terms(estimator_id, params)
        scaled, denominator = batches.aggregated(coefficient * batches.advantage[..., None] + additive, kept)
        return batches.divided(batches.score_sum(scaled), denominator)
    return estimator.batch_estimate(batches, **params)


def monte_carlo(toy: Toy, selection: Mapping[str, Mapping[str, object] | None], baseline: str = "none",
                batch_sizes: Iterable[int] = POWERS_OF_TWO, replicates: int = 200, seed: int = 0,
                aggregation: str = loss_aggregation.DEFAULT_AGGREGATION) -> dict[str, NDArray[np.float64]]:
    """{estimator id: relative errors of shape (K, R)} for batch sizes N_1 < … < N_K.

    ``selection`` maps estimator id → parameter overrides; ``aggregation`` is the loss aggregation.
    Replicates are processed in chunks so that memory stays bounded; each chunk continues the same random
    stream, so the draws depend only on the seed and the toy, not on the chunk size.
    """
    loss_aggregation.check_aggregation(aggregation)
    N = np.asarray(sorted(set(int(n) for n in batch_sizes)))
    if N[0] < 1:
        raise ValueError("batch sizes must be ≥ 1")
    b = baseline_value(toy, baseline)
    grad = toy.true_grad
    grad_norm = np.linalg.norm(grad)
    chunk = max(1, min(replicates, SAMPLES_PER_CHUNK // (int(N[-1]) * toy.T)))
    rng = np.random.default_rng(seed)
    errors: dict[str, list[NDArray[np.float64]]] = {estimator_id: [] for estimator_id in selection}
    for start in range(0, replicates, chunk):
        shape = (min(chunk, replicates - start), int(N[-1]))
        uniforms_state = rng.bit_generator.state
        batches = {False: Batches(toy, draw_tokens(rng, toy.mu, shape), N, b, aggregation)}
        if any(ESTIMATORS[e].on_policy for e in selection):
            rng.bit_generator.state = uniforms_state            # the same uniforms, pushed through π
            batches[True] = Batches(trainer_side(toy), draw_tokens(rng, toy.pi, shape), N, b, aggregation)
        for estimator_id, overrides in selection.items():
            estimate = batch_estimates(batches[ESTIMATORS[estimator_id].on_policy], estimator_id, overrides)
            error = np.linalg.norm((estimate - grad).reshape(*estimate.shape[:2], -1), axis=2) / grad_norm
            errors[estimator_id].append(error.T)
    return {estimator_id: np.concatenate(chunks, axis=1) for estimator_id, chunks in errors.items()}


def summarise(errors: Mapping[str, NDArray[np.float64]], batch_sizes: Iterable[int]) -> list[dict[str, Any]]:
    """Rows (estimator, N, rms, q10, median, q90) from ``monte_carlo``'s errors; NaN errors (undefined N) dropped."""
    N = sorted(set(int(n) for n in batch_sizes))
    rows = []
    for estimator_id, per_size in errors.items():
        for n, error in zip(N, per_size, strict=True):
            error = error[np.isfinite(error)]
            if error.size:
                q10, median, q90 = np.quantile(error, [0.1, 0.5, 0.9])
                rows.append({"estimator": estimator_id, "N": n, "rms": float(np.sqrt(np.mean(error**2))),
                             "q10": float(q10), "median": float(median), "q90": float(q90)})
    return rows


def undefined_sizes(errors: Mapping[str, NDArray[np.float64]], batch_sizes: Iterable[int]) -> dict[str, list[int]]:
    """{estimator id: [N, …]} for the batch sizes at which no replicate's error is finite (``summarise`` has no
    row there): rloo at N = 1, see the registry's ``undefined``."""
    N = sorted(set(int(n) for n in batch_sizes))
    undefined = {estimator_id: [n for n, error in zip(N, per_size, strict=True) if not np.isfinite(error).any()]
                 for estimator_id, per_size in errors.items()}
    return {estimator_id: sizes for estimator_id, sizes in undefined.items() if sizes}
