"""The SGA view of one step (Li et al. 2025, "A Trial of Gradient Estimators", part 1): how much J is
expected to improve after one step θ + lr·ĝ_N, per estimator, at the toy's θ.

To second order in lr, with H the exact Hessian of J (``counts.curvature``) and Σ the covariance of one
sample ĝ,

    E[J(θ + lr·ĝ_N)] − J(θ) ≈ lr·⟨∇J, E ĝ⟩ + (lr²/2)·(E ĝᵀ H E ĝ + tr(H Σ)/N)
    tr(H Σ) = E[ĝᵀ H ĝ] − E ĝᵀ H E ĝ

The first term is what the bias does (E ĝ ≠ ∇J tilts it), the tr(H Σ)/N term what the variance does (J is
concave along most noise directions near a good θ, so noise costs J). Every piece is exact for an exact
estimator: E ĝ from the exact engine, and E[ĝᵀ H ĝ] as the sum over all M sequences of p(y)·ĝ(y)ᵀ H ĝ(y),
ĝ(y) = Σ_t (c_t(y)·(r(y) − b) + d_t(y))·s_t(y) with c and d from the batch interface (``montecarlo.Batches.coefficients``).
When the lr² coefficient is negative the quadratic peaks at lr* = −⟨∇J, E ĝ⟩ / (E ĝᵀ H E ĝ + tr(H Σ)/N).

Monte Carlo, for every estimator (batch-coupled ones included): R batches of N drawn from μ (the same
uniforms for every estimator), and for each batch J(θ + lr·ĝ_N) − J(θ) evaluated exactly by the count
recursion; the mean over batches with its standard error, at each lr of the grid.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.counts import curvature, expected_reward
from toylab.engine.moments import baseline_value, exact_moments
from toylab.engine.toy import log_softmax

SEQUENCES_AT_ONCE = 2**16        # per-sequence estimates (n, T, V) are built in chunks of this many sequences


@dataclass(frozen=True)
class SecondOrder:
    """The exact pieces of one estimator's second-order improvement at batch size N."""
    estimator: str
    N: int
    slope: float             # ⟨∇J, E ĝ⟩
    mean_curvature: float    # E ĝᵀ H E ĝ
    noise_curvature: float   # tr(H Σ), one sample

    @property
    def curvature(self):
        """E[ĝ_Nᵀ H ĝ_N] = E ĝᵀ H E ĝ + tr(H Σ)/N."""
        return self.mean_curvature + self.noise_curvature / self.N

    def improvement(self, lr):
        """lr·⟨∇J, E ĝ⟩ + (lr²/2)·E[ĝ_Nᵀ H ĝ_N]."""
        lr = np.asarray(lr, dtype=float)
        return lr * self.slope + 0.5 * lr**2 * self.curvature

    @property
    def best_lr(self):
        """The lr where the quadratic peaks, or inf if it never turns down (or never goes up)."""
        return -self.slope / self.curvature if self.curvature < 0 < self.slope else np.inf


def second_order(toy, estimator_id, params=None, baseline="none", N=64):
    """SecondOrder of an exact estimator at the toy's θ."""
    estimator = ESTIMATORS[estimator_id]
    if not estimator.exact:
        raise ValueError(f"{estimator_id} is batch-coupled: its improvement is Monte Carlo only")
    params = resolve_params(estimator_id, params)
    hessian = curvature(toy.pi)
    mean = exact_moments(toy, estimator_id, params, baseline).mean
    mean_curvature = float(hessian.quadratic(mean))
    second_moment = _expected_quadratic(toy, estimator_id, params, baseline_value(toy, baseline), hessian)
    return SecondOrder(estimator_id, int(N), float(np.sum(toy.true_grad * mean)), mean_curvature,
                       second_moment - mean_curvature)


def _expected_quadratic(toy, estimator_id, params, b, hessian):
    """E_p[ĝᵀ H ĝ] over all M sequences, p = μ (π for on_policy), a chunk of sequences at a time."""
    probability = toy.p_train if ESTIMATORS[estimator_id].on_policy else toy.p_sampler
    total = 0.0
    for start in range(0, toy.M, SEQUENCES_AT_ONCE):
        tokens = _sequences(start, min(start + SEQUENCES_AT_ONCE, toy.M), toy.T, toy.V)
        batch = Batches(toy, tokens[None], np.array([len(tokens)]), b)
        weight = batch.gradient_coefficients(estimator_id, params)[0]                       # c·A + d, (n, T)
        total += float(probability[start:start + len(tokens)] @ hessian.score_quadratic(weight, tokens, toy.pi))
    return total


def _sequences(start, stop, T, V):
    """Tokens (stop − start, T) of sequences start … stop − 1 in the grid's order (``grid.token_grid``'s rows)."""
    return np.arange(start, stop)[:, None] // V ** np.arange(T - 1, -1, -1) % V


@dataclass(frozen=True)
class MonteCarloImprovement:
    """E[J(θ + lr·ĝ_N)] − J(θ) by Monte Carlo at each lr: mean and standard error over the batches."""
    estimator: str
    lr: np.ndarray
    mean: np.ndarray
    se: np.ndarray


def monte_carlo_improvement(toy, selection, baseline="none", N=64, lrs=(1.0,), batches=400, seed=0):
    """{id: MonteCarloImprovement} for every estimator in ``selection`` (id → overrides), from ``batches`` batches
    of N drawn with the same uniforms for every estimator (π for on_policy, μ otherwise)."""
    lrs = np.asarray(lrs, dtype=float)
    uniforms = np.random.default_rng(seed).random((batches, N, toy.T))
    b = baseline_value(toy, baseline)
    results = {}
    for estimator_id, params in selection.items():
        sampling = toy.pi if ESTIMATORS[estimator_id].on_policy else toy.mu
        samples = Batches(toy, tokens_from_uniforms(uniforms, sampling), np.array([N]), b)
        step = batch_estimates(samples, estimator_id, params)[:, 0]                      # (batches, T, V)
        moved = toy.theta + lrs[:, None, None, None] * step                             # (lrs, batches, T, V)
        gain = expected_reward(np.exp(log_softmax(moved))) - toy.J                      # (lrs, batches)
        results[estimator_id] = MonteCarloImprovement(estimator_id, lrs, gain.mean(axis=1),
                                                      gain.std(axis=1, ddof=1) / np.sqrt(batches))
    return results
