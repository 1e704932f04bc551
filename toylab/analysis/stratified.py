"""Monte Carlo moments for estimators that do not factorise, at any T, stratified by K = #{t: y_t = 0}.

r depends on K alone, so with φ_k = r(k) − b, X(y) = Σ_t c_t(y)·s_t and D(y) = Σ_t d[t, y_t]·s_t the additive
term of a penalty (0 for most estimators), ĝ = φ_K·X + D and

    E_μ[ĝ]   = Σ_k P_μ(K = k)·φ_k·E_μ[X | K = k] + E_μ[D],
    E_μ‖ĝ‖² = Σ_k P_μ(K = k)·E_μ[φ_k²·‖X‖² + 2φ_k·⟨X, D⟩ | K = k] + E_μ‖D‖².

E_μ[D] and E_μ‖D‖² are exact (d depends on the position and token only, and positions are independent).

P_μ(K = k) is exact (``recursion.prefix_counts``); each stratum's expectation is a sample mean over
sequences drawn from μ conditioned on K = k. Stratum k gets n·w_k/Σw samples (at least 2), w_k = P_μ(K = k)·|φ_k|,
so rare rewarded sequences are sampled as often as they matter; strata with w_k < 1e-12·Σw are skipped. Where every
w_k is 0 (a truncating sampler never reaches a count with φ_k ≠ 0), ĝ = D and the moments are exact, nothing drawn.
Standard errors: se(mean)² = Σ_k (P_k φ_k)²·tr Cov_k(X)/n_k, se(E‖ĝ‖²)² = Σ_k P_k²·Var_k(φ_k²‖X‖² + 2φ_k⟨X, D⟩)/n_k.
Since |‖m̂ − ∇J‖ − ‖m − ∇J‖| ≤ ‖m̂ − m‖, se(mean) bounds the error of the bias in RMS.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.montecarlo import Batches, draw_tokens
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.coefficients import additive_table
from toylab.engine.counts import reward_by_count
from toylab.engine.recursion import prefix_counts

NEGLIGIBLE_STRATUM = 1e-12


@dataclass(frozen=True)
class MonteCarloMoments:
    """Estimated moments of one estimator's single-sample gradient estimate, with standard errors."""
    estimator: str
    mean: np.ndarray
    bias: float
    bias_se: float
    var: float
    var_se: float
    grad_norm: float
    samples: int

    @property
    def rel_bias(self):
        return self.bias / self.grad_norm

    @property
    def rel_bias_se(self):
        return self.bias_se / self.grad_norm

    def rel_std(self, N):
        """sqrt(var/N)/‖∇J‖."""
        return float(np.sqrt(self.var / N) / self.grad_norm)


def count_distribution(position_probability):
    """P(K = k), k = 0 … T, for independent positions with the given (T, V) probabilities."""
    prefix, log_scale = prefix_counts(position_probability)
    return prefix[-1] * np.exp(log_scale[-1])


def draw_given_counts(rng, position_probability, counts):
    """Tokens (n, T): row i drawn from the product distribution conditioned on exactly counts[i] zeros.

    Position by position, P(y_t = 0 | j zeros still needed) = p_t[0]·P(K_{>t} = j − 1)/P(K_{≥t} = j). Given
    which positions are nonzero, their tokens are independent draws from p_t restricted to 1 … V − 1, made
    all at once after the loop.
    """
    T, V = position_probability.shape
    reversed_prefix, log_scale = prefix_counts(position_probability[::-1])
    suffix = (reversed_prefix * np.exp(log_scale)[:, None])[::-1]       # suffix[t, j] = P(K_{≥t} = j)
    needed = np.array(counts)
    zeros = np.empty((len(needed), T), dtype=bool)
    for t in range(T):
        later = np.append(0.0, suffix[t + 1, :-1])                      # later[j] = P(K_{>t} = j − 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            zero = position_probability[t, 0] * later[needed] / suffix[t][needed]
        zeros[:, t] = rng.random(len(needed)) < zero
        needed = needed - zeros[:, t]
    other_mass = position_probability[:, 1:].sum(axis=1, keepdims=True)
    others = np.divide(position_probability[:, 1:], other_mass, out=np.full(other_mass.shape, 1.0 / (V - 1)) *
                       np.ones((1, V - 1)), where=other_mass > 0)               # unused where only token 0 is drawn
    return np.where(zeros, 0, 1 + draw_tokens(rng, others, (len(needed),)))


def stratified_moments(toy, estimator_id, params, baseline_value, grad, samples, rng):
    """MonteCarloMoments of an exact estimator on sampler rollouts, stratified by the count of token 0."""
    return stratified_moments_many(toy, {estimator_id: params}, baseline_value, grad, samples, rng)[estimator_id]


def stratified_moments_many(toy, selection, baseline_value, grad, samples, rng):
    """{id: MonteCarloMoments} for ``selection`` ({id: parameter overrides}) from one stratified draw.

    The strata and their sizes depend on P_μ(K = k) and φ_k only, not on the estimator, so every estimator
    is evaluated on the same sequences (its standard errors are each its own; the estimates are correlated).
    """
    for estimator_id in selection:
        if ESTIMATORS[estimator_id].on_policy or not ESTIMATORS[estimator_id].exact:
            raise ValueError(f"{estimator_id}: stratified Monte Carlo covers single-sample estimators on μ")
    probability = count_distribution(toy.mu)
    phi = reward_by_count(toy.T) - baseline_value
    weight = probability * np.abs(phi)
    if not weight.sum() > 0:
        return {id: _additive_only(toy, id, params, grad) for id, params in selection.items()}
    used = np.flatnonzero(weight >= NEGLIGIBLE_STRATUM * weight.sum())
    per_stratum = np.maximum(2, np.round(samples * weight[used] / weight[used].sum())).astype(int)
    strata = np.repeat(np.arange(len(used)), per_stratum)
    tokens = draw_given_counts(rng, toy.mu, used[strata])
    batches = Batches(toy, tokens[None], np.array([len(tokens)]), baseline_value)
    first = probability[used] * phi[used]
    stratum_sums = _StratumSums(toy, tokens, strata, len(used))
    moments = {}
    for estimator_id, params in selection.items():
        params = resolve_params(estimator_id, params)
        coefficient, _, additive = (x[0] for x in batches.terms(estimator_id, params))          # (n, T) each
        X_sum, X_norm2, X_dot_D = stratum_sums(coefficient, additive)
        X_mean = X_sum / per_stratum[:, None, None]
        phi_i = phi[used][strata]
        Q = phi_i**2 * X_norm2 + 2 * phi_i * X_dot_D                      # ‖ĝ‖² − ‖D‖² of each sample
        Q_mean = np.bincount(strata, Q) / per_stratum
        Q_var = np.bincount(strata, (Q - Q_mean[strata]) ** 2) / (per_stratum - 1)
        trace_cov = (np.bincount(strata, X_norm2) / per_stratum - (X_mean**2).sum(axis=(1, 2))) \
            * per_stratum / (per_stratum - 1)
        D_mean, D_norm2 = exact_additive(toy, estimator_id, params)
        mean = np.tensordot(first, X_mean, axes=1) + D_mean
        mean_se2 = float(np.sum(first**2 * np.maximum(trace_cov, 0) / per_stratum))
        second_moment = float(probability[used] @ Q_mean) + D_norm2
        second_se2 = float(np.sum(probability[used]**2 * Q_var / per_stratum))
        mean_norm = float(np.linalg.norm(mean))
        moments[estimator_id] = MonteCarloMoments(
            estimator=estimator_id, mean=mean, bias=float(np.linalg.norm(mean - grad)), bias_se=np.sqrt(mean_se2),
            var=max(second_moment - mean_norm**2 + mean_se2, 0.0),
            var_se=float(np.sqrt(second_se2 + 4 * mean_norm**2 * mean_se2)),
            grad_norm=float(np.linalg.norm(grad)), samples=len(tokens))
    return moments


def _additive_only(toy, estimator_id, params, grad):
    """The moments where φ_K = 0 on every sequence μ draws (a truncating sampler that never reaches a count with
    r ≠ b): ĝ = D, whose moments are exact, so nothing is drawn and every standard error is 0."""
    mean, second_moment = exact_additive(toy, estimator_id, resolve_params(estimator_id, params))
    return MonteCarloMoments(estimator=estimator_id, mean=mean, bias=float(np.linalg.norm(mean - grad)), bias_se=0.0,
                             var=max(second_moment - float(np.sum(mean**2)), 0.0), var_se=0.0,
                             grad_norm=float(np.linalg.norm(grad)), samples=0)


def exact_additive(toy, estimator_id, params):
    """(E_μ[D], E_μ‖D‖²) of the additive term D = Σ_t d[t, y_t]·s_t, exact: positions are independent under μ."""
    d = np.where(toy.mu > 0, additive_table(estimator_id, toy.log_pi, toy.log_logged, params), 0.0)
    weighted = toy.mu * d
    squared_score = 1 - 2 * toy.pi + (toy.pi**2).sum(axis=1, keepdims=True)
    scale = toy.score_scale
    return (weighted - toy.pi * weighted.sum(axis=1, keepdims=True)) * scale, \
        float(np.sum(weighted * d * squared_score)) * scale**2


class _StratumSums:
    """Per stratum Σ_i X_i (S, T, V) with X_i = Σ_t c_{i,t}·s_{i,t}, s = (onehot(y_{i,t}) − π_t)·score_scale, and per
    sample ‖X_i‖² = Σ_t c_{i,t}²·‖s_{i,t}‖² and ⟨X_i, D_i⟩ = Σ_t c_{i,t}·d_{i,t}·‖s_{i,t}‖² (the rows of X are
    separate positions), for any coefficients c and additive terms d on one draw: the indices are built once."""

    def __init__(self, toy, tokens, strata, n_strata):
        T, V = toy.T, toy.V
        cell = tokens + V * np.arange(T)
        self.pi, self.shape, self.scale = toy.pi, (n_strata, T, V), toy.score_scale
        self.stratum_cell = (strata[:, None] * T * V + cell).ravel()
        self.squared_score = np.take(1 - 2 * toy.pi + (toy.pi**2).sum(axis=1, keepdims=True), cell) * self.scale**2

    def __call__(self, coefficient, additive):
        onehot_sums = np.bincount(self.stratum_cell, coefficient.ravel(),
                                  minlength=int(np.prod(self.shape))).reshape(self.shape)
        X_sum = (onehot_sums - self.pi * onehot_sums.sum(axis=2, keepdims=True)) * self.scale
        weighted = coefficient * self.squared_score
        return X_sum, np.einsum("it,it->i", weighted, coefficient), np.einsum("it,it->i", weighted, additive)
