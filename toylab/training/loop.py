"""Does it train? Gradient ascent on θ with each estimator's gradient, exact where the toy allows.

From the toy's θ₀, with its b and mismatch fixed (the inference engine keeps its error as the policy moves):
π_k = softmax(θ_k), μ_k = softmax(θ_k + mismatch·b), and the baseline recomputed at every step.

    expected:  θ_{k+1} = θ_k + Δ(E_{μ_k}[ĝ])      the estimator's exact mean: the flow its bias follows
    sampled:   θ_{k+1} = θ_k + Δ(ĝ_N)             ĝ_N averaged over N sequences drawn from μ_k, ``runs`` runs

Δ is SGD's or Adam's update (``optimizers``). At every step k = 0 … K the record holds θ_k and, exactly:
J(θ_k), the logged reward E_{μ_k}[r], ‖∇J‖, KL(μ_k‖π_k) = −Σ_t Σ_v μ log ρ and χ²_seq = ∏_t Σ_v π²/μ − 1; in
expected mode the relative bias ‖E ĝ − ∇J‖/‖∇J‖ and the cosine of E ĝ to ∇J(θ_k); in sampled mode, per run,
the cosine of the step Δ taken from θ_k (at k = K the step the run would take next). J and ∇J come from the
count recursion (``counts``); an estimator's exact mean from the same recursion when its weight factorises
over positions (``recursion.FACTORS``), else from the O(M) formula of ``moments`` on a ``SplitGrid``. Run r of sampled mode draws its uniforms from default_rng([seed, r]); every
estimator in a run pushes the same uniforms through its own μ_k (or π_k), so the runs do not depend on
which estimators or how many runs are chosen.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, resolve_params
from toylab.engine.counts import expected_reward, factorised_means, objective_and_gradient, reward_by_count
from toylab.engine.moments import _carried_marginals
from toylab.engine.recursion import FACTORS, PositionFactors
from toylab.engine.sequences import AllSequences
from toylab.engine.split_grid import split_grid
from toylab.training.optimizers import OPTIMIZERS, make_optimizer
from toylab.training.toy_rows import ToyRows

MODES = ("expected", "sampled")
LIMITS = {"steps": (1, 2000), "lr": (1e-4, 1e4), "N": (1, 100_000), "runs": (1, 10_000)}
RECORDED = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "rel_bias")
UNDEFINED_BELOW = 1e-10   # shorter vectors: the cosine or relative error is undefined (NaN); rounding error ~1e-16/length
ROWS_AT_ONCE = 2**16          # M-vectors of at most this many numbers per array: rows go in chunks on large toys


@dataclass(frozen=True)
class TrainingConfig:
    """How to train: K steps of size lr with an optimizer, in a mode; N and runs for sampled mode."""
    steps: int = 100
    lr: float = 1.0
    optimizer: str = "sgd"
    mode: str = "expected"
    N: int = 64
    runs: int = 8

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if name != "lr" and (isinstance(value, bool) or not float(value).is_integer()):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")


@dataclass(frozen=True)
class Trajectory:
    """One estimator's record, K + 1 values per quantity: shape (K + 1,) in expected mode, (runs, K + 1) in
    sampled mode (θ: (…, K + 1, T, V)). NaN marks an undefined cosine or relative bias: a vector shorter than
    UNDEFINED_BELOW (an estimator whose mean is zero because it masks everything, a zero step, or ∇J at a
    maximum of J to within rounding). ``rel_bias`` is None in sampled mode (no exact mean per run)."""
    estimator: str
    params: dict
    mode: str
    theta: np.ndarray
    J: np.ndarray
    logged_reward: np.ndarray
    grad_norm: np.ndarray
    kl_mu_pi: np.ndarray
    chi2_seq: np.ndarray
    cosine: np.ndarray
    rel_bias: np.ndarray | None


def train(toy, selection, baseline="none", config=TrainingConfig(), progress=None):
    """{estimator id: Trajectory} from the toy's θ₀ for every estimator in ``selection`` (id → overrides);
    ``progress(k)``, if given, is called after step k = 0 … K is recorded.

    ValueError for an unknown baseline or an estimator that ``cannot_train`` in the config's mode.
    """
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose {', '.join(BASELINES)}")
    selection = {id: resolve_params(id, params) for id, params in selection.items()}
    problems = [f"{id}: {why}" for id in selection if (why := cannot_train(id, config.mode, config.N))]
    if problems:
        raise ValueError("; ".join(problems))
    run = _expected if config.mode == "expected" else _sampled
    records = run(toy, selection, baseline, config, progress or (lambda k: None))
    return {id: Trajectory(id, params, config.mode, *(records[name][index] if records[name] is not None else None
                                                      for name in RECORDED))
            for index, (id, params) in enumerate(selection.items())}


def cannot_train(estimator_id, mode, N):
    """Why the estimator cannot train in this mode with batches of N, or None if it can."""
    if mode == "expected" and not ESTIMATORS[estimator_id].exact:
        return "batch-coupled, no exact mean; train it in sampled mode"
    if mode == "sampled" and estimator_id == "rloo" and N < 2:
        return "needs N ≥ 2 (its baseline is the mean of the other N − 1 rewards)"
    return None


# -- the exact quantities of many θ at once -----------------------------------------------------------------

@dataclass
class Population:
    """J, E_μ[r], ∇J, ‖∇J‖, KL(μ‖π) and χ²_seq of every row of a ToyRows, exact."""
    J: np.ndarray
    logged_reward: np.ndarray
    grad: np.ndarray
    grad_norm: np.ndarray
    kl_mu_pi: np.ndarray
    chi2_seq: np.ndarray

    @classmethod
    def of(cls, rows):
        J, grad = objective_and_gradient(rows.pi)
        return cls(J, expected_reward(rows.mu), grad, np.linalg.norm(grad, axis=(-2, -1)),
                   -(rows.mu * rows.log_rho).sum(axis=(-2, -1)),
                   np.prod((rows.mu * rows.rho**2).sum(axis=-1), axis=-1) - 1)

    def baseline(self, name):
        """b per row: none → 0, logged → E_μ[r], true → J."""
        return {"none": np.zeros_like(self.J), "logged": self.logged_reward, "true": self.J}[name]


def exact_means(rows, estimators, b):
    """E_p[ĝ] of estimator i = (id, params) at row i of a ToyRows with a grid, p = μ (π for on_policy): shape
    (rows, T, V). Estimators that factorise over positions (``recursion.FACTORS``) by the count recursion
    (``counts.factorised_means``), all rows at once; the others by enumeration, rows in chunks."""
    means = np.empty(rows.pi.shape)
    factorised = [index for index, (id, _) in enumerate(estimators) if id in FACTORS]
    enumerated = [index for index, (id, _) in enumerate(estimators) if id not in FACTORS]
    if factorised:
        means[factorised] = _factorised_means(rows, factorised, [estimators[i] for i in factorised], b[factorised])
    chunk = max(1, ROWS_AT_ONCE // rows.M)
    for start in range(0, len(enumerated), chunk):
        chosen = enumerated[start:start + chunk]
        means[chosen] = enumerated_means(rows.subset(chosen), [estimators[i] for i in chosen], b[chosen])
    return means


def _factorised_means(rows, indices, estimators, b):
    factors = [FACTORS[id](rows[index], **params) for index, (id, params) in zip(indices, estimators, strict=True)]
    stacked = PositionFactors(*(np.stack([getattr(f, name) for f in factors]) for name in ("token", "before", "after")))
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])[:, None, None]
    probability = np.where(on_policy, rows.pi[indices], rows.mu[indices])
    phi = reward_by_count(rows.T)[None, :] - b[:, None]
    return factorised_means(probability, stacked, phi, rows.pi[indices])


def enumerated_means(rows, estimators, b):
    """``exact_means`` by enumerating the M sequences, for any exact estimator: ``moments``' formula, first
    moment only, with every row's M-vectors built at once on the grid,

        mean_t = m_t − π_t·Σ_v m_t[v],   m_t[v] = token[t, v]·E_p[(r − b)·sequence·∏_{s<t} carry[s, y_s]·1[y_t = v]]
                                                 + p_t[v]·additive[t, v]

    (a token class's sequences with its own token table, summed over the classes).
    """
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])
    probability = rows.grid.outer_product(np.where(on_policy[:, None, None], rows.log_pi, rows.log_mu))
    m, tokens, additive = np.empty(rows.pi.shape), np.ones(rows.pi.shape), np.zeros(rows.pi.shape)
    first = np.empty((len(estimators), rows.M))
    carried = []
    for index, (estimator_id, params) in enumerate(estimators):
        row = rows[index]
        view = AllSequences(row, b[index])
        weights = ESTIMATORS[estimator_id].weights(view, **params)
        np.multiply(probability[index], weights.sequence, out=first[index])
        first[index] *= row.R - b[index] if b[index] else row.R
        if weights.additive is not None:
            position = row.pi if on_policy[index] else row.mu
            additive[index] = position * np.where(position > 0, weights.additive, 0.0)
        if weights.classes:                              # the token factor differs by a class of sequences
            carried.append(index)
            m[index] = sum(rows.grid.marginals((first[index] * members)[None])[0] * (1.0 if token is None else token)
                           for members, token, _ in weights.token_classes())
            continue
        if weights.token is not None:
            tokens[index] = weights.token
        if weights.carry is not None:
            carried.append(index)
            m[index] = _carried_marginals(first[index], row.T, row.V, weights.carry, 1)
    if not carried:
        m = rows.grid.marginals(first)
    elif len(carried) < len(estimators):
        uncarried = np.setdiff1d(np.arange(len(estimators)), carried)
        m[uncarried] = rows.grid.marginals(first[uncarried])
    m = m * tokens + additive
    return m - rows.pi * m.sum(axis=-1, keepdims=True)


def cosine(a, b):
    """⟨a, b⟩/(‖a‖·‖b‖) over the last two axes; NaN where either is shorter than UNDEFINED_BELOW."""
    norm_a, norm_b = np.linalg.norm(a, axis=(-2, -1)), np.linalg.norm(b, axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (a * b).sum(axis=(-2, -1)) / (norm_a * norm_b)
    return np.where((norm_a >= UNDEFINED_BELOW) & (norm_b >= UNDEFINED_BELOW), value, np.nan)


def relative_error(a, reference):
    """‖a − reference‖/‖reference‖ over the last two axes; NaN where the reference is shorter than UNDEFINED_BELOW."""
    scale = np.linalg.norm(reference, axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.linalg.norm(a - reference, axis=(-2, -1)) / scale
    return np.where(scale >= UNDEFINED_BELOW, value, np.nan)


# -- the two modes ----------------------------------------------------------------------------------------

def _empty_records(theta, steps, with_bias):
    records = {name: np.empty((*theta.shape[:-2], steps + 1)) for name in RECORDED}
    records["theta"] = np.empty((*theta.shape[:-2], steps + 1, *theta.shape[-2:]))
    records["rel_bias"] = records["rel_bias"] if with_bias else None
    return records


def _record(records, k, theta, population, cosines, rel_bias=None):
    records["theta"][..., k, :, :] = theta
    for name in ("J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq"):
        records[name][..., k] = getattr(population, name)
    records["cosine"][..., k] = cosines
    if rel_bias is not None:
        records["rel_bias"][..., k] = rel_bias


def _expected(toy, selection, baseline, config, progress):
    grid = split_grid(toy.T, toy.V)
    estimators = list(selection.items())
    theta = np.repeat(toy.theta[None], len(estimators), axis=0)
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    records = _empty_records(theta, config.steps, with_bias=True)
    for k in range(config.steps + 1):
        rows = ToyRows(theta, toy.b, toy.mismatch, grid)
        population = Population.of(rows)
        means = exact_means(rows, estimators, population.baseline(baseline))
        _record(records, k, theta, population, cosine(means, population.grad), relative_error(means, population.grad))
        progress(k)
        if k < config.steps:
            theta = theta + optimizer.step(means)
    return records


def _sampled(toy, selection, baseline, config, progress):
    N, runs = config.N, config.runs
    theta = np.broadcast_to(toy.theta, (len(selection), runs, toy.T, toy.V)).copy()
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    generators = [np.random.default_rng([toy.seed, run]) for run in range(runs)]
    records = _empty_records(theta, config.steps, with_bias=False)
    for k in range(config.steps + 1):
        rows = ToyRows(theta, toy.b, toy.mismatch)
        population = Population.of(rows)
        b = population.baseline(baseline)
        uniforms = np.stack([generator.random((N, toy.T)) for generator in generators])     # (runs, N, T)
        estimates = np.empty_like(theta)
        for index, (id, params) in enumerate(selection.items()):
            mine = rows[index]
            tokens = tokens_from_uniforms(uniforms, mine.pi if ESTIMATORS[id].on_policy else mine.mu)
            estimates[index] = batch_estimates(Batches(mine, tokens, np.array([N]), b[index]), id, params)[:, 0]
        step = optimizer.step(estimates)
        _record(records, k, theta, population, cosine(step, population.grad))
        progress(k)
        if k < config.steps:
            theta = theta + step
    return records


# -- reading a run ----------------------------------------------------------------------------------------

REACHED = 0.9          # "reaches on_policy's J": 90 % of on_policy's final J


def per_step_median(values):
    """The per-step median over runs of a sampled record (runs, K + 1), ignoring undefined (NaN) values; an
    expected-mode record (K + 1,) as it is. NaN where every run is undefined."""
    if values.ndim == 1:
        return values
    defined = ~np.isnan(values)
    medians = np.full(values.shape[1], np.nan)
    columns = defined.any(axis=0)
    medians[columns] = [np.median(column[keep]) for column, keep in zip(values.T[columns], defined.T[columns],
                                                                       strict=True)]
    return medians


def largest_drop(J):
    """max over k < l of J_k − J_l: how far J fell below an earlier value (0 if it never fell)."""
    return float(np.max(np.maximum.accumulate(J) - J))


def steps_to_reach(J, target):
    """The first step k with J_k ≥ target, or None if J never gets there."""
    reached = np.flatnonzero(J >= target)
    return int(reached[0]) if len(reached) else None


def summary(trajectories, reference="on_policy"):
    """One row per estimator, on the per-step median over runs in sampled mode: final J, the step at which J
    first reaches REACHED × the reference's final J (None: never; absent without a reference), the largest drop
    of J, the final E_μ[r] and KL(μ‖π)."""
    target = REACHED * per_step_median(trajectories[reference].J)[-1] if reference in trajectories else None
    rows = []
    for id, trajectory in trajectories.items():
        J = per_step_median(trajectory.J)
        rows.append({"estimator": id, "final_J": float(J[-1]), "largest_drop": largest_drop(J),
                     "final_logged_reward": float(per_step_median(trajectory.logged_reward)[-1]),
                     "final_kl_mu_pi": float(per_step_median(trajectory.kl_mu_pi)[-1])}
                    | ({"steps_to_reach": steps_to_reach(J, target)} if target is not None else {}))
    return rows
