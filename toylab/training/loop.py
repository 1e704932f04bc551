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
an enumerated mean sums over (``toy.range_problem``), the run stops with a ValueError naming the step. An update
that is not a finite number (a loss whose ratio overflows at a large learning rate) stops that estimator's run (or
that run, in sampled mode) at its step k, the others going on: it keeps θ_k for the rest of the loop's work, its
records after k are NaN, and its Trajectory's ``stopped`` says k (``stop_notice`` in words).
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np

from toylab.analysis.montecarlo import tokens_from_uniforms
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, resolve_params
from toylab.catalogue.kl import NO_PENALTY, KLPenalty
from toylab.catalogue.replay import REPLAYS
from toylab.catalogue.updates import DEFAULT_UPDATE, LAG_DRAWS, Update
from toylab.engine.experts import Experts
from toylab.engine.recursion import FACTORS
from toylab.engine.reference import INITIAL, Reference, kl_to_reference
from toylab.engine.sampler import log_softmax
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import range_problem
from toylab.engine.versions import DEFAULT_VERSIONS, Versions
from toylab.training.exact import Population
from toylab.training.mixtures import train_hidden
from toylab.training.optimizers import OPTIMIZERS, make_optimizer
from toylab.training.policies import (
    History,
    anchor_log_probs,
    engine_policy,
    expected_updates,
    lags,
    refuses_as_weight,
    sampled_updates,
    sampled_w_spread,
    starts_at_anchor,
)
from toylab.training.reference_term import ReferenceTerm
from toylab.training.toy_rows import ToyRows

MODES = ("expected", "sampled")
REFERENCE = "on_policy"
NOISES = ("fixed", "redrawn")
NOISE_STREAM = 2**32 - 1        # the second seed word of the redrawn errors: no run number reaches it
LIMITS = {"steps": (1, 2000), "lr": (1e-4, 1e4), "N": (1, 100_000), "runs": (1, 10_000), "lag": (0, 16)}
RECORDED = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias",
            "clip_share", "ppo_kl", "w_std", "lag", "kl_ref")
UNDEFINED_BELOW = 1e-10   # shorter vectors: the cosine or relative error is undefined (NaN); rounding error ~1e-16/length


@dataclass(frozen=True)
class TrainingConfig:
    """How to train: K steps of size lr with an optimizer, in a mode; N and runs for sampled mode; the engine's
    error fixed or redrawn at every step; how each batch is used (``update``: the anchor, the loss, minibatches ×
    epochs) and how stale the engine's policy is (``lag``: s, or η when ``lag_draw`` is uniform); a KL penalty to the
    reference (``kl``: β, the estimator and where it goes, ``catalogue.kl``; β = 0 by default: none) and where π_ref
    sits (``reference``: θ_ref = θ_0 + distance·d, ``engine.reference``)."""
    steps: int = 100
    lr: float = 1.0
    optimizer: str = "sgd"
    mode: str = "expected"
    N: int = 64
    runs: int = 8
    noise: str = "fixed"
    update: Update = DEFAULT_UPDATE
    lag: int = 0
    lag_draw: str = "fixed"
    kl: KLPenalty = NO_PENALTY
    reference: Reference = INITIAL
    experts: Experts | None = None
    replay: str = "off"
    versions: Versions = DEFAULT_VERSIONS

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {', '.join(NOISES)}, got {self.noise!r}")
        if not isinstance(self.update, Update):
            raise ValueError(f"update must be an Update, got {self.update!r}")
        if not isinstance(self.kl, KLPenalty):
            raise ValueError(f"kl must be a KLPenalty, got {self.kl!r}")
        if not isinstance(self.reference, Reference):
            raise ValueError(f"reference must be a Reference, got {self.reference!r}")
        if self.lag_draw not in LAG_DRAWS:
            raise ValueError(f"lag_draw must be one of {', '.join(LAG_DRAWS)}, got {self.lag_draw!r}")
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if name != "lr" and (isinstance(value, bool) or not float(value).is_integer()):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
        if self.mode == "sampled" and self.N < self.update.minibatches:
            raise ValueError(f"N = {self.N} sequences cannot make {self.update.minibatches} minibatches")
        hidden_problem = hidden_config_problem(self)
        if hidden_problem:
            raise ValueError(hidden_problem)

    @property
    def hidden(self):
        """True when the run's batches carry hidden variables (a mixture of experts, version switches, or AReaL's
        log-linear π_prox): it trains through ``mixtures``."""
        return self.experts is not None or not self.versions.is_default

    @property
    def weights_only(self):
        return self.hidden or weights_only(self.update, self.lag, self.kl)


def hidden_config_problem(config):
    """None, or why the routing and version options do not combine with the rest of ``config``."""
    if config.experts is not None and not isinstance(config.experts, Experts):
        return f"experts must be an Experts, got {config.experts!r}"
    if not isinstance(config.versions, Versions):
        return f"versions must be a Versions, got {config.versions!r}"
    if config.replay not in REPLAYS:
        return f"replay must be one of {', '.join(REPLAYS)}, got {config.replay!r}"
    if config.replay != "off" and config.experts is None:
        return f"routing replay ({config.replay}) needs a mixture of experts: give the run its experts"
    if config.experts is not None and not config.versions.is_default:
        return "routing and version switches are separate models here: train one at a time"
    if config.hidden and config.kl.active:
        return ("a KL penalty to the reference and routing or version switches are separate models here: train one "
                "at a time")
    if config.replay == "R2" and config.update.anchor == "bypass":
        return ("R2 replays the routing recorded when the anchor is recomputed; under the bypass anchor nothing is "
                "recomputed: use R3 (the engine's routing) or another anchor")
    if config.versions.prox == "loglinear" and config.update.anchor != "recompute":
        return ("AReaL's log-linear π_prox replaces the decoupled loss's recomputed anchor (prox_logp_method applies "
                "only with use_decoupled_loss): use the anchor recompute")
    if config.versions.switch == "drawn" and config.lag_draw != "fixed":
        return ("a drawn switch draws each sequence's head lag itself (uniform on 1 … η, η the lag): use the lag "
                "draw fixed")
    if config.hidden and config.mode != "expected":
        return "routing and version-switch runs train in expected mode (their exact gradients over every hidden value)"
    return None


def weights_only(update, lag, kl=NO_PENALTY):
    """True when some update may start away from its anchor (bypass, or rollout with a lag), a batch feeds several
    updates, or a KL penalty in the reward gives each token its own advantage: the loss then reads the ratio r (or
    A_t), and the correction must be a weight g(w) (no additive term)."""
    return update.U > 1 or update.anchor == "bypass" or (update.anchor == "rollout" and lag > 0) \
        or (kl.active and kl.placement == "reward")


@dataclass(frozen=True)
class Trajectory:
    """One estimator's record, K + 1 values per quantity: shape (K + 1,) in expected mode, (runs, K + 1) in
    sampled mode (θ: (…, K + 1, T, V)). NaN marks an undefined cosine or relative bias: a vector shorter than
    UNDEFINED_BELOW (an estimator whose mean is zero because it masks everything, a zero step, or ∇J at a
    maximum of J to within rounding). ``cosine`` is the mean's in expected mode (the first update's gradient, G⁰)
    and the step's in sampled mode; ``step_cosine`` (expected mode) the step's (all U updates of the batch);
    ``rel_bias`` and ``step_cosine`` are None in sampled mode. ``clip_share``, ``ppo_kl`` (the token mean of −log r)
    and ``w_std`` (w's spread) are the frameworks' metrics (``policies``), the first two averaged over the batch's U
    updates; ``lag`` is the age s_k of the engine's policy. ``stopped`` (shape () expected, (runs,) sampled): the
    step k whose update was not a finite number, where the run stopped (its records after k are NaN), or −1; ``kl_ref`` is KL(π_k‖π_ref), exact."""
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
    clip_share: np.ndarray
    ppo_kl: np.ndarray
    w_std: np.ndarray
    lag: np.ndarray
    kl_ref: np.ndarray
    stopped: np.ndarray


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
    selection = _checked(selection, baseline, config)
    progress = progress or (lambda k: None)
    log_ref = config.reference.log_probabilities(toy.theta, toy.seed, toy.sampler)
    reference = ReferenceTerm(config.kl, log_ref)
    with np.errstate(over="ignore", invalid="ignore"):        # an update that overflows stops its run, said there
        if config.hidden:
            records = _hidden_records(train_hidden(toy, selection, baseline, config, progress), log_ref,
                                      toy.sampler.score_scale)
        else:
            records = _expected([toy], selection, baseline, config, progress, chunk, reference) \
                if config.mode == "expected" else _sampled(toy, selection, baseline, config, progress, reference)
    return _trajectories(records, selection, config.mode, 0, 1)


def train_population(toys, selection, baseline="none", config=TrainingConfig(), progress=None, chunk=None):
    """[``train(toy, selection, baseline, config)`` for each toy of ``toys``], in one expected-mode loop: the toys
    share T, V, the mismatch and the sampler; each keeps its own θ₀, b and seed (its redrawn errors and drawn lags).
    Every step takes a row per (estimator, toy) at once, so thirty toys cost a few times one; a row's numbers are
    the lone run's up to rounding (the same arithmetic on a wider array, the rollout anchor at a drawn lag of 0
    through the general update). Each toy's π_ref is its own (from its θ₀ and seed); a run with an active KL penalty
    (its reference term takes one π_ref) or hidden variables (``mixtures``) trains the toys one by one."""
    if config.mode != "expected":
        raise ValueError("a population of toys trains in expected mode")
    shapes = {(toy.T, toy.V, toy.mismatch, toy.sampler) for toy in toys}
    if len(shapes) != 1:
        raise ValueError("the toys of a population share T, V, the mismatch and the sampler")
    if config.kl.active or config.hidden:
        return [train(toy, selection, baseline, config, progress, chunk) for toy in toys]
    selection = _checked(selection, baseline, config)
    log_ref = np.stack([config.reference.log_probabilities(toy.theta, toy.seed, toy.sampler) for toy in toys])
    reference = ReferenceTerm(config.kl, np.tile(log_ref, (len(selection), 1, 1)))     # rows: estimator-major
    with np.errstate(over="ignore", invalid="ignore"):
        records = _expected(list(toys), selection, baseline, config, progress or (lambda k: None), chunk, reference)
    return [_trajectories(records, selection, config.mode, index, len(toys)) for index in range(len(toys))]


def _hidden_records(records, log_ref, scale):
    """A hidden run's records (``mixtures.train_hidden``) with KL(π_k‖π_ref) of its trainer's logits, and where a
    row's θ left float64 (its step before, as ``_advanced`` records it; −1: never), its records NaN from there."""
    records = {name: values.astype(float) for name, values in records.items()}     # the lag is drawn as integers
    theta = records["theta"]
    with np.errstate(over="ignore", invalid="ignore"):
        kl_ref = kl_to_reference(log_softmax(theta * scale), log_ref)
    finite = np.isfinite(theta).all(axis=(-2, -1))
    stopped = np.where(finite.all(axis=-1), -1, np.argmin(finite, axis=-1) - 1)
    return _stopped_records(records | {"kl_ref": kl_ref}, stopped)


def _checked(selection, baseline, config):
    """The selection with every estimator's parameters resolved; ValueError for an unknown baseline or an estimator
    that ``cannot_train`` in the config's mode."""
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose {', '.join(BASELINES)}")
    selection = {id: resolve_params(id, params) for id, params in selection.items()}
    problems = [f"{id}: {why}" for id, params in selection.items()
                if (why := cannot_train(id, config.mode, config.N, config.weights_only, params))]
    if problems:
        raise ValueError("; ".join(problems))
    return selection


def _trajectories(records, selection, mode, toy, toys):
    """{id: Trajectory} of toy ``toy`` from records whose rows are (estimator, toy) pairs, estimator-major."""
    return {id: Trajectory(id, params, mode, *(records[name][index * toys + toy] if records[name] is not None
                                               else None for name in RECORDED),
                           stopped=np.asarray(records["stopped"][index * toys + toy]))
            for index, (id, params) in enumerate(selection.items())}


def cannot_train(estimator_id, mode, N, weights_only=False, params=None):
    """Why the estimator cannot train in this mode with batches of N (and as a weight g(w) of an update, when
    ``weights_only``), or None if it can."""
    if mode == "expected" and not ESTIMATORS[estimator_id].exact:
        return "batch-coupled, no exact mean; train it in sampled mode"
    if mode == "sampled" and estimator_id == "rloo" and N < 2:
        return "needs N ≥ 2 (its baseline is the mean of the other N − 1 rewards)"
    if weights_only:
        return refuses_as_weight(estimator_id, resolve_params(estimator_id, params))
    return None


def trained_ids(selection, mode, N, weights_only=False):
    """The estimators a run trains: REFERENCE (on_policy, the exact ascent the others are compared with) and those of
    ``selection`` ({id: parameters}) that can train in this mode with batches of N, with their parameters, in
    registry order."""
    chosen = {REFERENCE: {}} | dict(selection)
    return tuple(id for id in ESTIMATORS if id in chosen and not cannot_train(id, mode, N, weights_only, chosen[id]))


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


def _advanced(theta, step, stopped, k):
    """θ_{k+1} = θ_k + step where that is finite; a row whose θ would leave float64 is stopped at k (``stopped``, −1
    until then, is set) and, like every row stopped before, keeps its θ, so no NaN enters the next steps' work."""
    following = theta + step
    stopped[~np.isfinite(following).all(axis=(-2, -1)) & (stopped < 0)] = k
    return np.where((stopped >= 0)[..., None, None], theta, following)


def _stopped_records(records, stopped):
    """The records with each stopped row's values after its step k made NaN (undefined), and ``stopped`` itself."""
    for row in zip(*np.nonzero(stopped >= 0), strict=True):
        for values in records.values():
            if values is not None:
                values[row][stopped[row] + 1:] = np.nan
    return records | {"stopped": stopped}


def _record_update(records, k, lag, on_policy, clipped, kl, spread, kl_ref):
    records["clip_share"][..., k], records["ppo_kl"][..., k], records["w_std"][..., k] = clipped, kl, spread
    records["lag"][..., k] = np.where(on_policy, 0, lag).reshape(-1, *[1] * (clipped.ndim - 1))   # on_policy: none
    records["kl_ref"][..., k] = kl_ref


def check_range(rows, k):
    """ValueError if some row's W could leave float64 on the sequences an enumerated mean sums over."""
    problem = range_problem(float(np.max(rows.largest_log_W)), where=f"step {k} of the run")
    if problem:
        raise ValueError(f"training stopped: {problem}")


def _steps(toy, config):
    """(k, b_k, s_k) for k = 0 … K: the engine's error and the age of its policy at each step."""
    return zip(itertools.count(), engine_errors(toy, config.noise, config.steps),
               lags(toy.seed, config.lag, config.lag_draw, config.steps))


def _population_steps(toys, config, estimators):
    """(k, b_k, s_k) of ``_steps`` for rows of (estimator, toy) pairs, estimator-major: one toy's as they are; of
    several, each row's b_k (rows, T, V) and s_k (an int where every toy's is the same, else per row)."""
    if len(toys) == 1:
        yield from _steps(toys[0], config)
        return
    for k, *steps in zip(itertools.count(), *(_steps(toy, config) for toy in toys)):
        b = np.tile(np.stack([b for _, b, _ in steps]), (estimators, 1, 1))
        s = np.array([s for _, _, s in steps])
        yield k, b, int(s[0]) if (s == s[0]).all() else np.tile(s, estimators)


def _expected(toys, selection, baseline, config, progress, chunk, reference):
    toy = toys[0]
    grid = split_grid(toy.T, toy.V)
    estimators = [item for item in selection.items() for _ in toys]
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])
    enumerated = any(id not in FACTORS for id, _ in estimators) or reference.in_reward
    theta = np.tile(np.stack([toy.theta for toy in toys]), (len(selection), 1, 1))
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    records = _empty_records(theta, config.steps, expected=True)
    history, update = History(config.lag), config.update
    stopped = np.full(theta.shape[:-2], -1)
    for k, b, s in _population_steps(toys, config, len(selection)):
        history.push(theta)
        stale = history.ago(s)
        rows = ToyRows(theta, b, toy.mismatch, grid, toy.sampler, engine_policy(theta, stale, on_policy))
        log_old = anchor_log_probs(update.anchor, rows, stale, on_policy)
        if enumerated:
            check_range(rows if update.anchor == "recompute" else rows.anchored(log_old), k)
        population = Population.of(rows)
        first, step, clipped, kl, spread = expected_updates(
            rows, log_old, on_policy, estimators, population.baseline(baseline), update, optimizer,
            starts_at_anchor(update.anchor, s), chunk, reference)
        _record(records, k, theta, population, cosine(first, population.grad), relative_error(first, population.grad),
                cosine(step, population.grad))
        _record_update(records, k, s, on_policy, clipped, kl, spread, kl_to_reference(rows.log_pi, reference.log_ref))
        progress(k)
        if k < config.steps:
            theta = _advanced(theta, step, stopped, k)
    return _stopped_records(records, stopped)


def _sampled(toy, selection, baseline, config, progress, reference):
    N, runs = config.N, config.runs
    estimators = list(selection.items())
    on_policy = np.array([ESTIMATORS[id].on_policy for id, _ in estimators])
    theta = np.broadcast_to(toy.theta, (len(selection), runs, toy.T, toy.V)).copy()
    optimizers = [make_optimizer(config.optimizer, config.lr, theta.shape[1:]) for _ in estimators]
    generators = [np.random.default_rng([toy.seed, run]) for run in range(runs)]
    records = _empty_records(theta, config.steps, expected=False)
    history, update = History(config.lag), config.update
    stopped = np.full(theta.shape[:-2], -1)
    for k, b, s in _steps(toy, config):
        history.push(theta)
        stale = history.ago(s)
        rows = ToyRows(theta, b, toy.mismatch, sampler=toy.sampler, engine_theta=engine_policy(theta, stale, on_policy))
        log_old = anchor_log_probs(update.anchor, rows, stale, on_policy)
        population = Population.of(rows)
        b = population.baseline(baseline)
        uniforms = np.stack([generator.random((N, toy.T)) for generator in generators])     # (runs, N, T)
        step = np.empty_like(theta)
        clipped, kl = np.empty(theta.shape[:2]), np.empty(theta.shape[:2])
        tokens = np.empty((*theta.shape[:2], N, toy.T), dtype=np.intp)
        for index, (id, params) in enumerate(estimators):
            mine = rows[index]
            tokens[index] = tokens_from_uniforms(uniforms, mine.pi if on_policy[index] else mine.mu)
            step[index], clipped[index], kl[index] = sampled_updates(
                id, params, mine, tokens[index], log_old[index], b[index], update, optimizers[index],
                starts_at_anchor(update.anchor, s), reference)
        _record(records, k, theta, population, cosine(step, population.grad))
        _record_update(records, k, s, on_policy, clipped, kl, sampled_w_spread(rows, log_old, on_policy, tokens),
                       kl_to_reference(rows.log_pi, reference.log_ref))
        progress(k)
        if k < config.steps:
            theta = _advanced(theta, step, stopped, k)
    return _stopped_records(records, stopped)


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
    """max over k < l of J_k − J_l over the steps where J is defined: how far J fell below an earlier value (0 if it
    never fell)."""
    J = J[~np.isnan(J)]
    return float(np.max(np.maximum.accumulate(J) - J)) if J.size else math.nan


def defined_mean(values):
    """The mean over the steps where the values are defined (NaN if none is)."""
    values = values[~np.isnan(values)]
    return float(np.mean(values)) if values.size else math.nan


def steps_to_reach(J, target):
    """The first step k with J_k ≥ target, or None if J never gets there."""
    reached = np.flatnonzero(J >= target)
    return int(reached[0]) if len(reached) else None


def summary(trajectories, reference="on_policy"):
    """One row per estimator, on the per-step median over runs in sampled mode: final J, the step at which J
    first reaches REACHED × the reference's final J (None: never; absent without a reference), the largest drop
    of J, the final E_μ[r] and KL(μ‖π), the clipped share and PPO KL averaged over the steps, and the step where
    its run stopped (the first of its runs'; None: it did not) with how many runs did. A run's values after its stop
    are undefined: the final values are NaN if every run stopped, and the drop and means are over the defined
    steps; and the final KL(π‖π_ref)."""
    target = REACHED * per_step_median(trajectories[reference].J)[-1] if reference in trajectories else None
    rows = []
    for id, trajectory in trajectories.items():
        J = per_step_median(trajectory.J)
        stops = trajectory.stopped[trajectory.stopped >= 0]
        rows.append({"estimator": id, "final_J": float(J[-1]), "largest_drop": largest_drop(J),
                     "final_logged_reward": float(per_step_median(trajectory.logged_reward)[-1]),
                     "final_kl_mu_pi": float(per_step_median(trajectory.kl_mu_pi)[-1]),
                     "mean_clip_share": defined_mean(per_step_median(trajectory.clip_share)),
                     "mean_ppo_kl": defined_mean(per_step_median(trajectory.ppo_kl)),
                     "stopped_at": int(stops.min()) if stops.size else None, "runs_stopped": int(stops.size),
                     "final_kl_ref": float(per_step_median(trajectory.kl_ref)[-1])}
                    | ({"steps_to_reach": steps_to_reach(J, target)} if target is not None else {}))
    return rows


def reached_in_words(row):
    """A summary row's steps to REACHED in words: the step, 'never' (not within the run), or 'stopped at step k' when
    it did not get there before every run of it stopped."""
    if row["steps_to_reach"] is not None:
        return str(row["steps_to_reach"])
    return "never" if row["stopped_at"] is None or not math.isnan(row["final_J"]) else f"stopped at step {row['stopped_at']}"


def stop_notice(trajectory):
    """Why an estimator's curves end early, in words, or None when none of its runs stopped."""
    stops = np.sort(trajectory.stopped[trajectory.stopped >= 0].ravel())
    if not stops.size:
        return None
    why = ("its update was not a finite number (θ would have left float64: a smaller learning rate, or a loss "
           "that clips its ratio, keeps it finite)")
    if trajectory.mode == "expected":
        return f"{trajectory.estimator} stopped at step {stops[0]}: {why}; its values after step {stops[0]} are undefined"
    runs = trajectory.stopped.size
    if stops.size == runs:
        return (f"{trajectory.estimator}: every one of its {runs} runs stopped, the first at step {stops[0]}, the "
                f"last at step {stops[-1]}: {why}; its values after step {stops[-1]} are undefined")
    return (f"{trajectory.estimator}: {stops.size} of its {runs} runs stopped, the first at step {stops[0]}: {why}; "
            "from there on its medians and bands are over the runs still going")
