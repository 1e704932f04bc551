"""How much staleness is safe: J after K steps against the engine's lag s, for three objectives, exact.

For each lag s in LAGS (the engine samples from the policy s steps old, ``policies``), expected mode, the run's
steps, learning rate, optimizer, engine error, loss and U = minibatches × epochs:

    bypass        PPO centred on μ: the anchor is the engine's μ, no correction (AReaL's "naive PPO", verl's bypass)
    decoupled     the anchor recomputed, π_old = π_{θ_k}, and the correction w = π_old/μ as a weight (tok_is: AReaL's
                  decoupled PPO, its behaviour weight π_prox/μ uncapped)
    recompute     the anchor recomputed, no correction: the lag and the mismatch left uncorrected

and on_policy (the trainer sampling itself, no engine, no lag) as the reference. The shape of AReaL's table of
accuracy against its max_head_offpolicyness η for naive and decoupled PPO (its v0.3 blog, Table 3), with a fixed
lag s in place of a lag drawn up to η.
"""

from dataclasses import dataclass, field, replace

from toylab.training.loop import train

LAGS = (0, 1, 2, 4, 8, 16)
OBJECTIVES = {"bypass": ("bypass", "naive"), "decoupled": ("recompute", "tok_is"), "recompute": ("recompute", "naive")}
LABELS = {"bypass": "PPO centred on μ (bypass; AReaL's naive PPO)", "decoupled": "decoupled: recompute, w as a weight",
          "recompute": "recompute without w", "on_policy": "on_policy (no engine, no lag)"}


@dataclass(frozen=True)
class Staleness:
    """J after the run's K steps: ``J[objective]`` a tuple over ``lags``; ``on_policy`` the reference's. A run whose
    update stopped being a finite number has no J after K steps (NaN): ``stopped`` maps its (objective, lag) to the
    step where it stopped."""
    lags: tuple
    J: dict
    on_policy: float
    stopped: dict = field(default_factory=dict)

    def stopped_text(self):
        """The points not drawn because their run stopped, in words ('' when none did)."""
        if not self.stopped:
            return ""
        runs = "; ".join(f"{LABELS[objective]} at lag {lag} (step {step})" if objective != "on_policy" else
                         f"{LABELS[objective]} (step {step})" for (objective, lag), step in self.stopped.items())
        return (f"Not drawn: {runs}, where the run's update stopped being a finite number (θ would have left "
                "float64): it has no J after all the steps")


def read_config(config):
    """``config`` as ``staleness`` reads it: expected mode (so one run, N unused), the lag and the anchor left to the
    view (set to one value here), the rest kept: two configs that differ only in what it ignores give the same key."""
    return replace(config, mode="expected", runs=1, N=1, lag=0, lag_draw="fixed",
                   update=replace(config.update, anchor="recompute"))


def staleness(toy, baseline, config, lags=LAGS):
    """The Staleness of the toy under ``config`` as ``read_config`` reads it, at each of ``lags`` and both anchors."""
    config = read_config(config)
    J = {objective: [] for objective in OBJECTIVES}
    reference, stopped = None, {}
    for lag in lags:
        for anchor in ("bypass", "recompute"):
            ids = [id for objective, (their, id) in OBJECTIVES.items() if their == anchor]
            selection = {id: {} for id in ids} | ({"on_policy": {}} if reference is None else {})
            runs = train(toy, selection, baseline, replace(config, update=replace(config.update, anchor=anchor),
                                                           lag=lag))
            if reference is None:
                reference = float(runs["on_policy"].J[-1])
                if runs["on_policy"].stopped >= 0:
                    stopped["on_policy", None] = int(runs["on_policy"].stopped)
            for objective, (their, id) in OBJECTIVES.items():
                if their == anchor:
                    J[objective].append(float(runs[id].J[-1]))
                    if runs[id].stopped >= 0:
                        stopped[objective, lag] = int(runs[id].stopped)
    return Staleness(tuple(lags), {objective: tuple(values) for objective, values in J.items()}, reference, stopped)
