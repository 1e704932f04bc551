"""Does it train? Gradient ascent on θ with each estimator's gradient, exact where the toy allows.

From the toy's θ₀, with its mismatch and sampler model: π_k = softmax(θ_k), μ_k = sampler(θ_k + mismatch·b_k)
(``engine.sampler``), and the baseline recomputed at every step. The engine's error b_k is

    fixed      b_k = b, the toy's, at every step (the engine keeps its error as the policy moves)
    redrawn    b_0 = b, and b_k ~ Student-t(3) drawn afresh at each step k ≥ 1 (a batch-variant or
               nondeterministic kernel), from default_rng([seed, NOISE_STREAM]): the same draws for every
               estimator and every run, reproducible from the seed

and the two modes step along

    expected:  θ_{k+1} = θ_k + Δ(E_{μ_k}[ĝ])      the estimator's exact mean: the flow its bias follows
    sampled:   θ_{k+1} = θ_k + Δ(ĝ_N)             ĝ_N averaged over N sequences drawn from μ_k, ``runs`` runs

Δ is SGD's or Adam's update (``optimizers``). At every step k = 0 … K the record holds θ_k and, exactly:
J(θ_k), the logged reward E_{μ_k}[r], ‖∇J‖, KL(μ_k‖π_k) and χ²_seq (over μ_k's support, as in
``analysis.diagnostics``); in expected mode the relative bias ‖E ĝ − ∇J‖/‖∇J‖, the cosine of the mean E ĝ to
∇J(θ_k) (``cosine``) and the cosine of the step Δ actually taken (``step_cosine``: the same for SGD, not for Adam,
which rescales each coordinate); in sampled mode, per run, the cosine of the step Δ taken from θ_k (``cosine``).
At k = K the step is the one the run would take next. J and ∇J come from the count recursion (``counts``); an
estimator's exact mean from the same recursion when its weight factorises over positions (``recursion.FACTORS``),
else from the O(M) formula of ``moments`` on a ``SplitGrid``, over μ_k's support. Run r of sampled mode draws its
uniforms from default_rng([seed, r]); every estimator in a run pushes the same uniforms through its own μ_k (or
π_k), so the runs do not depend on which estimators or how many runs are chosen.

A sampler with a temperature makes log ρ grow as θ moves; if W = π(y)/μ(y) would leave float64 on the sequences
an enumerated mean sums over (``toy.range_problem``), the run stops with a ValueError naming the step.
"""

from dataclasses import dataclass

import numpy as np

from toylab.analysis.diagnostics import chi2_terms, on_support
from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms, trainer_side
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, resolve_params
from toylab.engine.counts import expected_reward, factorised_means, objective_and_gradient, reward_by_count
from toylab.engine.moments import _carried_marginals
from toylab.engine.recursion import FACTORS, PositionFactors
from toylab.engine.recursion import on_support as factors_on_support
from toylab.engine.sequences import AllSequences
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import mean_ratios, range_problem, sampled_log_ratio
from toylab.training.optimizers import OPTIMIZERS, make_optimizer
from toylab.training.toy_rows import ToyRows

MODES = ("expected", "sampled")
REFERENCE = "on_policy"
NOISES = ("fixed", "redrawn")
NOISE_STREAM = 2**32 - 1        # the second seed word of the redrawn errors: no run number reaches it
LIMITS = {"steps": (1, 2000), "lr": (1e-4, 1e4), "N": (1, 100_000), "runs": (1, 10_000)}
RECORDED = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias")
UNDEFINED_BELOW = 1e-10   # shorter vectors: the cosine or relative error is undefined (NaN); rounding error ~1e-16/length
ROWS_AT_ONCE = 2**16          # M-vectors of at most this many numbers per array: rows go in chunks on large toys


@dataclass(frozen=True)
class TrainingConfig:
    """How to train: K steps of size lr with an optimizer, in a mode; N and runs for sampled mode; the engine's
    error fixed or redrawn at every step."""
    steps: int = 100
    lr: float = 1.0
    optimizer: str = "sgd"
    mode: str = "expected"
    N: int = 64
    runs: int = 8
    noise: str = "fixed"

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {', '.join(NOISES)}, got {self.noise!r}")
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
    maximum of J to within rounding). ``cosine`` is the mean's in expected mode and the step's in sampled mode;
    ``step_cosine`` (expected mode) the step's; ``rel_bias`` and ``step_cosine`` are None in sampled mode."""
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
    step_cosine: np.ndarray | None
    rel_bias: np.ndarray | None


def engine_errors(toy, noise, steps):
    """b_0, b_1, …, b_K (K = steps): the toy's b at every step (fixed), or the toy's b and then a fresh Student-t(3)
    draw at every step from default_rng([seed, NOISE_STREAM]) (redrawn)."""
    yield toy.b
    rng = np.random.default_rng([toy.seed, NOISE_STREAM]) if noise == "redrawn" else None
    for _ in range(steps):
        yield toy.b if rng is None else rng.standard_t(3, size=toy.b.shape)


def train(toy, selection, baseline="none", config=TrainingConfig(), progress=None, chunk=None):
    """{estimator id: Trajectory} from the toy's θ₀ for every estimator in ``selection`` (id → overrides);
    ``progress(k)``, if given, is called after step k = 0 … K is recorded. ``chunk``: how many estimators an
    enumerated step takes at once (``exact_means``; the cost probe's small copies take their run's).

    ValueError for an unknown baseline or an estimator that ``cannot_train`` in the config's mode.
    """
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose {', '.join(BASELINES)}")
    selection = {id: resolve_params(id, params) for id, params in selection.items()}
    problems = [f"{id}: {why}" for id in selection if (why := cannot_train(id, config.mode, config.N))]
    if problems:
        raise ValueError("; ".join(problems))
    progress = progress or (lambda k: None)
    records = _expected(toy, selection, baseline, config, progress, chunk) if config.mode == "expected" else \
        _sampled(toy, selection, baseline, config, progress)
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


def trained_ids(estimators, mode, N):
    """The estimators a run trains: REFERENCE (on_policy, the exact ascent the others are compared with) and the
    chosen ones that can train in this mode with batches of N, in registry order."""
    chosen = {REFERENCE, *estimators}
    return tuple(id for id in ESTIMATORS if id in chosen and not cannot_train(id, mode, N))


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
        """KL(μ‖π) = −Σ μ log(π/μ) and χ²_seq = ∏_t Σ_v μ (ρ/E_μ[ρ_t])² − 1 over each row's μ-support (μ the
        sampled μ_s, π the scored one, ρ = π/μ_log: ``analysis.diagnostics``); J and ∇J of the scored π."""
        J, grad = objective_and_gradient(rows.pi)
        grad = grad * rows.score_scale
        sampler = rows.sampler
        if sampler.is_default:                        # every token kept, log ρ bounded by mismatch·(max b − min b)
            second_moments = (rows.mu * rows.rho**2).sum(axis=-1)
        else:
            mean = None if sampler.logged == "processed" else \
                mean_ratios(rows.pi, rows.mu, rows.rho, rows.kept, sampler.logged)
            second_moments = 1 + chi2_terms(rows.pi, rows.mu, rows.rho, rows.kept, mean)
        with np.errstate(over="ignore"):
            chi2_seq = np.prod(second_moments, axis=-1) - 1
        log_ratio = sampled_log_ratio(rows.log_pi, rows.log_mu, rows.kept, rows.log_rho, sampler.logged)
        return cls(J, expected_reward(rows.mu), grad, np.linalg.norm(grad, axis=(-2, -1)),
                   -on_support(rows.mu, log_ratio, rows.kept).sum(axis=(-2, -1)), chi2_seq)

    def baseline(self, name):
        """b per row: none → 0, logged → E_μ[r], true → J."""
        return {"none": np.zeros_like(self.J), "logged": self.logged_reward, "true": self.J}[name]


def exact_means(rows, estimators, b, chunk=None):
    """E_p[ĝ] of estimator i = (id, params) at row i of a ToyRows with a grid, p = μ (π for on_policy): shape
    (rows, T, V). Estimators that factorise over positions (``recursion.FACTORS``) by the count recursion
    (``counts.factorised_means``), all rows at once; the others by enumeration, rows in chunks of ``chunk``
    (default ``chunk_rows(M)``)."""
    means = np.empty(rows.pi.shape)
    factorised = [index for index, (id, _) in enumerate(estimators) if id in FACTORS]
    enumerated = [index for index, (id, _) in enumerate(estimators) if id not in FACTORS]
    if factorised:
        means[factorised] = _factorised_means(rows, factorised, [estimators[i] for i in factorised], b[factorised])
    chunk = chunk or chunk_rows(rows.M)
    for start in range(0, len(enumerated), chunk):
        chosen = enumerated[start:start + chunk]
        means[chosen] = enumerated_means(rows.subset(chosen), [estimators[i] for i in chosen], b[chosen])
    return means


def chunk_rows(M):
    """Rows an enumerated step takes at once on a toy of M sequences: M-vectors of about ROWS_AT_ONCE numbers."""
    return max(1, ROWS_AT_ONCE // M)


def _factorised_means(rows, indices, estimators, b):
    factors = [FACTORS[id](rows[index], **params) for index, (id, params) in zip(indices, estimators, strict=True)]
    factors = [f if ESTIMATORS[id].on_policy or not rows.truncates[index] else factors_on_support(f, rows.kept[index])
               for f, index, (id, _) in zip(factors, indices, estimators, strict=True)]
    stacked = PositionFactors(*(np.stack([getattr(f, name) for f in factors]) for name in ("token", "before", "after")))
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])[:, None, None]
    probability = np.where(on_policy, rows.pi[indices], rows.mu[indices])
    phi = reward_by_count(rows.T)[None, :] - b[:, None]
    return factorised_means(probability, stacked, phi, rows.pi[indices]) * rows.score_scale


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
        weights = weights if on_policy[index] else view.on_support(weights)
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
    return (m - rows.pi * m.sum(axis=-1, keepdims=True)) * rows.score_scale


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

def _empty_records(theta, steps, expected):
    records = {name: np.empty((*theta.shape[:-2], steps + 1)) for name in RECORDED}
    records["theta"] = np.empty((*theta.shape[:-2], steps + 1, *theta.shape[-2:]))
    for name in ("rel_bias", "step_cosine"):
        records[name] = records[name] if expected else None
    return records


def _record(records, k, theta, population, cosines, rel_bias=None, step_cosines=None):
    records["theta"][..., k, :, :] = theta
    for name in ("J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq"):
        records[name][..., k] = getattr(population, name)
    records["cosine"][..., k] = cosines
    if rel_bias is not None:
        records["rel_bias"][..., k] = rel_bias
        records["step_cosine"][..., k] = step_cosines


def check_range(rows, k):
    """ValueError if some row's W could leave float64 on the sequences an enumerated mean sums over."""
    problem = range_problem(float(np.max(rows.largest_log_W)), where=f"step {k} of the run")
    if problem:
        raise ValueError(f"training stopped: {problem}")


def _expected(toy, selection, baseline, config, progress, chunk):
    grid = split_grid(toy.T, toy.V)
    estimators = list(selection.items())
    enumerated = any(id not in FACTORS for id, _ in estimators)
    theta = np.repeat(toy.theta[None], len(estimators), axis=0)
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    records = _empty_records(theta, config.steps, expected=True)
    for k, b in enumerate(engine_errors(toy, config.noise, config.steps)):
        rows = ToyRows(theta, b, toy.mismatch, grid, toy.sampler)
        if enumerated:
            check_range(rows, k)
        population = Population.of(rows)
        means = exact_means(rows, estimators, population.baseline(baseline), chunk)
        step = optimizer.step(means)
        _record(records, k, theta, population, cosine(means, population.grad), relative_error(means, population.grad),
                cosine(step, population.grad))
        progress(k)
        if k < config.steps:
            theta = theta + step
    return records


def _sampled(toy, selection, baseline, config, progress):
    N, runs = config.N, config.runs
    theta = np.broadcast_to(toy.theta, (len(selection), runs, toy.T, toy.V)).copy()
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    generators = [np.random.default_rng([toy.seed, run]) for run in range(runs)]
    records = _empty_records(theta, config.steps, expected=False)
    for k, b in enumerate(engine_errors(toy, config.noise, config.steps)):
        rows = ToyRows(theta, b, toy.mismatch, sampler=toy.sampler)
        population = Population.of(rows)
        b = population.baseline(baseline)
        uniforms = np.stack([generator.random((N, toy.T)) for generator in generators])     # (runs, N, T)
        estimates = np.empty_like(theta)
        for index, (id, params) in enumerate(selection.items()):
            mine = rows[index]
            on_policy = ESTIMATORS[id].on_policy
            tokens = tokens_from_uniforms(uniforms, mine.pi if on_policy else mine.mu)
            side = trainer_side(mine) if on_policy else mine
            estimates[index] = batch_estimates(Batches(side, tokens, np.array([N]), b[index]), id, params)[:, 0]
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
