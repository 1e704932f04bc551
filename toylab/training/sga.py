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

Whether mean ± 2 s.e. can be trusted: a heavy-tailed ĝ (sequence IS under a large mismatch: rare, huge W) puts
much of E[J(θ + lr·ĝ_N)] in batches so rare that R batches seldom hold one, and then the batches under-state the
spread as much as the mean. The first-order part of the gain, lr·⟨∇J, ĝ_N⟩, has an exactly known variance
lr²·Var⟨∇J, ĝ⟩/N (``SecondOrder.slope_variance``, summed over all M sequences); the batches' own variance of
⟨∇J, ĝ_N⟩ (``MonteCarloImprovement.slope_sample_variance``) below TAIL_CHECK of it says the batches have not seen
the tail, and the interval is not to be trusted. Measured at mismatch 1 (``benchmarks/sga_coverage.py``; the
docs/training.md gives the figures): where the check passed, ±2 s.e. covered the truth in 94–100 % of repeats; where it
failed (sequence IS: nearly always) it covered 23–46 % at small lr with 200 batches.

With Adam the step actually taken is not lr·ĝ_N but Adam's update from its state after k steps of on_policy's run
(``on_policy_state``), Δ = lr·m̂/(sqrt(v̂) + ε) with ĝ_N as the next gradient: about lr per coordinate, however
small ĝ_N is. ``monte_carlo_improvement(..., optimizer=…)`` also gives E[J(θ + Δ)] − J(θ) and the length of
that step as a multiple of ‖ĝ_N‖ (the lr of a plain step as long).
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms, trainer_side
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.counts import curvature, expected_reward
from toylab.engine.moments import baseline_value, exact_moments
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import Toy, range_problem, scored_probabilities
from toylab.training.exact import Population, exact_means
from toylab.training.loop import engine_errors
from toylab.training.optimizers import SGD, make_optimizer
from toylab.training.toy_rows import ToyRows

SEQUENCES_AT_ONCE = 2**16        # per-sequence estimates (n, T, V) are built in chunks of this many sequences
TAIL_CHECK = 0.5                 # batches showing less than this share of Var⟨∇J, ĝ_N⟩: their interval is not trusted


@dataclass(frozen=True)
class SecondOrder:
    """The exact pieces of one estimator's second-order improvement at batch size N."""
    estimator: str
    N: int
    slope: float             # ⟨∇J, E ĝ⟩
    mean_curvature: float    # E ĝᵀ H E ĝ
    noise_curvature: float   # tr(H Σ), one sample
    slope_variance: float    # Var⟨∇J, ĝ⟩, one sample

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
    problem = range_problem(toy.largest_log_W)
    if problem:
        raise ValueError(problem)
    hessian = curvature(toy.pi, toy.score_scale)
    mean = exact_moments(toy, estimator_id, params, baseline).mean
    slope = float(np.sum(toy.true_grad * mean))
    mean_curvature = float(hessian.quadratic(mean))
    second_moment, slope_second_moment = _expected_squares(toy, estimator_id, params, baseline_value(toy, baseline),
                                                           hessian)
    return SecondOrder(estimator_id, int(N), slope, mean_curvature, second_moment - mean_curvature,
                       max(slope_second_moment - slope**2, 0.0))


def _expected_squares(toy, estimator_id, params, b, hessian):
    """(E_p[ĝᵀ H ĝ], E_p[⟨∇J, ĝ⟩²]) over the M sequences p draws, p = μ (π for on_policy), a chunk of sequences at
    a time. ⟨∇J, ĝ(y)⟩ = Σ_t (c_t(y)·(r − b) + d_t(y_t))·u[t, y_t] with u[t, v] = ∇J[t, v] − ⟨∇J_t, π_t⟩."""
    probability = toy.p_train if ESTIMATORS[estimator_id].on_policy else toy.p_sampler
    along_gradient = toy.true_grad - (toy.pi * toy.true_grad).sum(axis=1, keepdims=True)
    quadratic = linear = 0.0
    for start in range(0, toy.M, SEQUENCES_AT_ONCE):
        chunk = probability[start:start + SEQUENCES_AT_ONCE]
        drawn = np.flatnonzero(chunk > 0)                       # a truncating sampler never draws the others
        tokens = _sequences(start + drawn, toy.T, toy.V)
        side = trainer_side(toy) if ESTIMATORS[estimator_id].on_policy else toy
        batch = Batches(side, tokens[None], np.array([len(tokens)]), b)
        weight = batch.gradient_coefficients(estimator_id, params)[0] * toy.score_scale  # (c·A + d)·scale, (n, T)
        quadratic += float(chunk[drawn] @ hessian.score_quadratic(weight, tokens, toy.pi))
        linear += float(chunk[drawn] @ (weight * along_gradient[np.arange(toy.T), tokens]).sum(axis=1) ** 2)
    return quadratic, linear


def _sequences(indices, T, V):
    """Tokens (n, T) of the sequences with these grid indices (``grid.token_grid``'s rows)."""
    return np.asarray(indices)[:, None] // V ** np.arange(T - 1, -1, -1) % V


@dataclass(frozen=True)
class MonteCarloImprovement:
    """E[J(θ + lr·ĝ_N)] − J(θ) by Monte Carlo at each lr: mean and standard error over the batches; the batches'
    variance of ⟨∇J, ĝ_N⟩ (for the tail check); with Adam, E[J(θ + Δ)] − J(θ) of its actual step Δ at the training
    lr (mean, se) and the median of ‖Δ‖/‖ĝ_N‖ (None with SGD)."""
    estimator: str
    lr: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    batches: int = 0
    slope_sample_variance: float = float("nan")
    actual_mean: float | None = None
    actual_se: float | None = None
    actual_lr: float | None = None

    def trusted(self, second_order):
        """Whether ±2 s.e. can be trusted: the batches show at least TAIL_CHECK of the exact Var⟨∇J, ĝ_N⟩ (None: no
        exact variance to check against — a batch-coupled estimator — or nothing to check, ĝ = 0)."""
        if second_order is None or second_order.slope_variance == 0:
            return None
        return bool(self.slope_sample_variance >= TAIL_CHECK * second_order.slope_variance / second_order.N)


def _gains(toy, steps):
    """J(θ + step) − J(θ) for steps (..., T, V), J of the scored π by the count recursion."""
    return expected_reward(scored_probabilities(toy.theta + steps, toy.b, toy.mismatch, toy.sampler)) - toy.J


def monte_carlo_improvement(toy, selection, baseline="none", N=64, lrs=(1.0,), batches=400, seed=0, optimizer=None):
    """{id: MonteCarloImprovement} for every estimator in ``selection`` (id → overrides), from ``batches`` batches
    of N drawn with the same uniforms for every estimator (π for on_policy, μ otherwise). ``optimizer``: the Adam
    whose actual step to measure too (its state is left as it is)."""
    lrs = np.asarray(lrs, dtype=float)
    uniforms = np.random.default_rng(seed).random((batches, N, toy.T))
    b = baseline_value(toy, baseline)
    results = {}
    for estimator_id, params in selection.items():
        on_policy = ESTIMATORS[estimator_id].on_policy
        sampling = toy.pi if on_policy else toy.mu
        samples = Batches(trainer_side(toy) if on_policy else toy, tokens_from_uniforms(uniforms, sampling),
                          np.array([N]), b)
        step = batch_estimates(samples, estimator_id, params)[:, 0]                      # (batches, T, V)
        gain = _gains(toy, lrs[:, None, None, None] * step)                              # (lrs, batches)
        actual = {}
        if optimizer is not None and not isinstance(optimizer, SGD):
            taken = optimizer.proposed(step)
            actual_gain = _gains(toy, taken)
            lengths = np.linalg.norm(step, axis=(1, 2))
            moved = lengths > 0
            actual = {"actual_mean": float(actual_gain.mean()),
                      "actual_se": float(actual_gain.std(ddof=1) / np.sqrt(batches)),
                      "actual_lr": float(np.median(np.linalg.norm(taken, axis=(1, 2))[moved] / lengths[moved]))
                      if moved.any() else None}
        results[estimator_id] = MonteCarloImprovement(
            estimator_id, lrs, gain.mean(axis=1), gain.std(axis=1, ddof=1) / np.sqrt(batches), batches,
            float(np.var((step * toy.true_grad).sum(axis=(1, 2)), ddof=1)), **actual)
    return results


def on_policy_state(toy, baseline, config, step):
    """(θ_k, b_k, optimizer) at step k of on_policy's expected-mode run under ``config``'s optimizer, lr and noise:
    the same steps as ``loop.train`` takes (a test checks θ), the optimizer holding its state after k steps."""
    grid = split_grid(toy.T, toy.V)
    theta = toy.theta[None]
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    errors = engine_errors(toy, config.noise, step)
    for _, b in zip(range(step), errors, strict=False):                  # b_0 … b_{k−1}; b_k is left
        rows = ToyRows(theta, b, toy.mismatch, grid, toy.sampler)
        theta = theta + optimizer.step(exact_means(rows, [("on_policy", {})], Population.of(rows).baseline(baseline)))
    return theta[0], next(errors), optimizer


def toy_at(toy, baseline, config, step):
    """(the Toy at θ_k of on_policy's expected run, with b_k; the optimizer's state there)."""
    theta, b, optimizer = on_policy_state(toy, baseline, config, step)
    return Toy(theta, b, toy.mismatch, toy.seed, toy.sampler), optimizer
