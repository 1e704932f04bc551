"""How much staleness is safe: J at every step against the engine's lag, for three or four objectives, exact.

For each lag in LAGS (the engine samples from the policy s steps old, ``policies``; with the draw "uniform", s is drawn
from 0 … η for each batch and the lag named is η, AReaL's max_head_offpolicyness), expected mode, the run's steps,
learning rate, optimizer, engine error, loss and U = minibatches × epochs:

    bypass        PPO centred on μ: the anchor is the engine's μ, no correction (AReaL's "naive PPO", verl's bypass)
    decoupled     the anchor recomputed, π_old = π_{θ_k}, and the behaviour weight w = π_old/μ as a weight (tok_is:
                  AReaL's decoupled PPO with no cap)
    recompute     the anchor recomputed, no correction: the lag and the mismatch left uncorrected
    capped        (given a cap C) decoupled with AReaL's cap on w: a token whose w exceeds C is dropped from the loss
                  (``CAPPED``: areal:token_mask, w·1[w ≤ C])

and on_policy (the trainer sampling itself, no engine, no lag) as the reference. Every run is kept whole: J at steps
0 … K at each lag (``curves``), so a run that has long since reached the top of J is seen as one. Two readings of a
run: its J after the K steps (``J``), and the first step at which it reaches the target, REACHED × on_policy's J
after K steps (``steps_to_target``; the Training table's "steps to 90 %"). A run has saturated at step K when its J
is within SATURATED of 1, the most J can be: J after K steps then no longer tells such runs apart.

AReaL's cap, read at inclusionAI/AReaL 61d1bbb (areal/utils/functional/functional.py, ppo_actor_loss_fn, lines
205–213): behav_imp_weight = exp(proximal_logprobs − old_logprobs) = π_prox/μ; behav_mask = (behav_imp_weight ≤
behav_imp_weight_cap) ∧ loss_mask; the weight is set to 0 outside the mask and multiplies the clipped loss, whose sum is
still divided by the loss mask's count. Its help (areal/api/cli_args.py, PPOActorConfig.behav_imp_weight_cap, lines
1063–1068) says as much, "Filter out tokens where behav_imp_weight exceeds behav_imp_weight_cap": a mask, though the
name says cap. AReaL has since replaced it by rejection_sampling {level token, action mask, metric ratio, upper C}
(cli_args.py's migration message at 4aef98d, _LEGACY_MIGRATION_MESSAGE), which is toylab's areal:token_mask preset.

The shape of AReaL's table of accuracy against its max_head_offpolicyness η for naive and decoupled PPO (its v0.3
blog, Table 3), as learning curves.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from toylab.training.loop import REACHED, steps_to_reach, train_population

LAGS = (0, 1, 2, 4, 8, 16)
OBJECTIVES = {"bypass": ("bypass", "naive"), "decoupled": ("recompute", "tok_is"), "recompute": ("recompute", "naive")}
CAPPED = ("recompute", "areal:token_mask")       # the fourth objective, given a cap: its anchor and correction
LABELS = {"bypass": "PPO centred on μ, no correction (AReaL's naive PPO)",
          "decoupled": "π_old recomputed, w = π_old/μ as a weight (AReaL's decoupled PPO)",
          "recompute": "π_old recomputed, no weight", "capped": "decoupled, tokens with w > C dropped",
          "on_policy": "on_policy (no engine, no lag)"}
SATURATED = 0.02          # a run within this of J = 1 after its K steps has saturated


@dataclass(frozen=True, eq=False)
class Staleness:
    """The runs of one toy: ``curves[objective]`` J at steps 0 … K, one row per lag of ``lags`` (η when ``draw`` is
    uniform), ``on_policy_curve`` the reference's; ``cap`` the capped objective's C (None: not run). A run whose
    update stopped being a finite number has NaN after its stop: ``stopped`` maps its (objective, lag) to the step
    where it stopped (on_policy's lag: None)."""
    lags: tuple
    curves: dict
    on_policy_curve: np.ndarray
    draw: str = "fixed"
    cap: float | None = None
    stopped: dict = field(default_factory=dict)

    def stopped_text(self):
        """The runs whose lines end early because they stopped, in words ('' when none did)."""
        if not self.stopped:
            return ""
        runs = "; ".join(f"{LABELS[objective]} at lag {lag} (step {step})" if objective != "on_policy" else
                         f"{LABELS[objective]} (step {step})" for (objective, lag), step in self.stopped.items())
        return (f"Ended early: {runs}, where the run's update stopped being a finite number (θ would have left "
                "float64): it has no J after that step")

    @property
    def J(self):
        """{objective: J after the K steps at each lag}."""
        return {objective: tuple(float(J) for J in curves[:, -1]) for objective, curves in self.curves.items()}

    @property
    def on_policy(self):
        """on_policy's J after the K steps."""
        return float(self.on_policy_curve[-1])

    @property
    def steps(self):
        return len(self.on_policy_curve) - 1

    @property
    def target(self):
        """REACHED × on_policy's J after the K steps: the J a run must reach."""
        return REACHED * self.on_policy

    def steps_to_target(self):
        """{objective: at each lag, the first step whose J ≥ ``target``, or None: not within the K steps}."""
        return {objective: tuple(steps_to_reach(curve, self.target) for curve in curves)
                for objective, curves in self.curves.items()}

    def saturated(self):
        """{objective: at each lag, whether the run ends within SATURATED of J = 1}, and on_policy's."""
        return {objective: tuple(bool(J >= 1 - SATURATED) for J in curves[:, -1])
                for objective, curves in self.curves.items()}, bool(self.on_policy >= 1 - SATURATED)


def read_config(config):
    """``config`` as ``staleness`` reads it: expected mode (so one run, N unused), the lag and the anchor left to the
    view (set to one value here), the rest kept: two configs that differ only in what it ignores give the same key."""
    return replace(config, mode="expected", runs=1, N=1, lag=0, lag_draw="fixed",
                   update=replace(config.update, anchor="recompute"))


def objectives(cap=None):
    """{objective: (anchor, correction, its parameters)} of the runs: OBJECTIVES, and CAPPED at ``cap`` if given."""
    runs = {objective: (anchor, id, {}) for objective, (anchor, id) in OBJECTIVES.items()}
    return runs | ({"capped": (*CAPPED, {"upper": float(cap)})} if cap else {})


def staleness(toy, baseline, config, lags=LAGS, draw="fixed", cap=None):
    """The Staleness of the toy under ``config`` as ``read_config`` reads it, at each of ``lags`` (s, or η when
    ``draw`` is uniform) and both anchors."""
    return staleness_population([toy], baseline, config, lags, draw, cap)[0]


def staleness_population(toys, baseline, config, lags=LAGS, draw="fixed", cap=None):
    """[Staleness] of each of ``toys`` (``training.train_population``: the same T, V, mismatch and sampler), trained
    together: one loop per lag and anchor whatever the number of toys."""
    config = read_config(config)
    runs = objectives(cap)
    curves = {objective: [] for objective in runs}
    reference, stopped = None, [{} for _ in toys]
    for lag in lags:
        for anchor in dict.fromkeys(anchor for anchor, _, _ in runs.values()):
            chosen = {objective: run for objective, run in runs.items() if run[0] == anchor}
            selection = {id: params for _, id, params in chosen.values()} | ({"on_policy": {}} if reference is None
                                                                            else {})
            trained = train_population(toys, selection, baseline, replace(
                config, update=replace(config.update, anchor=anchor), lag=lag, lag_draw=draw))
            if reference is None:
                reference = [run["on_policy"].J for run in trained]
                _note_stops(stopped, trained, "on_policy", "on_policy", None)
            for objective, (_, id, _) in chosen.items():
                curves[objective].append([run[id].J for run in trained])
                _note_stops(stopped, trained, objective, id, lag)
    return [Staleness(tuple(lags), {objective: np.array([at_lag[index] for at_lag in values])
                                    for objective, values in curves.items()}, reference[index], draw, cap,
                      stopped[index])
            for index in range(len(toys))]


def _note_stops(stopped, trained, objective, id, lag):
    """Each toy's ``stopped[(objective, lag)]`` = the step where its run of ``id`` stopped, if it did."""
    for notes, runs in zip(stopped, trained, strict=True):
        if runs[id].stopped >= 0:
            notes[objective, lag] = int(runs[id].stopped)


# -- what a reader takes from the runs -------------------------------------------------------------------------

VISIBLE = 1 / 150         # of J's axis (0 to 1): lines this far apart are about 2 pixels apart on a 300-pixel plot


@dataclass(frozen=True)
class Reading:
    """What the view reads of one toy's runs of K steps (``run_steps``), per objective and lag: ``steps`` to the
    target (None: not within the run), and ``lead``: how far the run at each lag after the first gets ahead of the
    first lag's at any step, max_k (J_k at this lag − J_k at the first; 0 if never above)."""
    lags: tuple
    run_steps: int
    steps: dict
    lead: dict
    on_policy: float

    def ahead(self, objective):
        """At each lag after the first, whether the run is ahead of the first lag's run (no lag, or η = 0): it reaches
        the target sooner, or its J is visibly higher (by more than VISIBLE) at some step — what a reader would take
        from the charts as "staleness helps"."""
        steps = self.steps[objective]
        return tuple(later(steps[0], steps[index]) or self.lead[objective][index - 1] > VISIBLE
                     for index in range(1, len(self.lags)))

    def behind_at_largest(self, objective):
        """Whether the run at the largest lag reaches the target later than at the first (never: later)."""
        steps = self.steps[objective]
        return later(steps[-1], steps[0])

    def ordered(self, index, order=("decoupled", "recompute", "bypass")):
        """Whether at lag ``lags[index]`` each objective of ``order`` reaches the target no later than the next."""
        steps = [self.steps[objective][index] for objective in order]
        return not any(later(a, b) for a, b in zip(steps, steps[1:], strict=False))


def later(a, b):
    """Whether reaching the target at step ``a`` is later than at ``b`` (None: never within the run, later than any)."""
    return (a is None and b is not None) or (a is not None and b is not None and a > b)


def reading(result):
    """The Reading of a Staleness."""
    return Reading(result.lags, result.steps, result.steps_to_target(),
                   {objective: tuple(float(max(0.0, np.max(curve - curves[0]))) for curve in curves[1:])
                    for objective, curves in result.curves.items()}, result.on_policy)


@dataclass(frozen=True)
class Tally:
    """How often what the view reads of one toy holds over ``toys`` Readings: per objective, how many are ahead of
    their first lag at some lag (``ahead``) and behind it at the largest (``behind``); per lag, how many order the
    objectives decoupled, recompute, bypass by the steps they take (``ordered``)."""
    toys: int
    ahead: dict
    behind: dict
    ordered: tuple


def tally(readings):
    """The Tally of a population's Readings (one per toy, the same lags and objectives)."""
    first = readings[0]
    return Tally(len(readings),
                 {objective: sum(any(r.ahead(objective)) for r in readings) for objective in first.steps},
                 {objective: sum(r.behind_at_largest(objective) for r in readings) for objective in first.steps},
                 tuple(sum(r.ordered(index) for r in readings) for index in range(len(first.lags))))
