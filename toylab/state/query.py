"""The page's address: parse a (hand-edited) URL query into Settings and view values, and back.

Two kinds of URL parameter, both the app's own (no widget is bound to the URL by Streamlit: the page parses a
link once into session state, and writes the canonical link of what it shows at the end of every run):

- Controls (the sidebar): T, V, mismatch, seed, N, baseline, est (comma-separated estimator ids, framework
  presets included: ``est=naive,verl:decoupled_geo_rs``), agg (the loss aggregation), the sampler model's
  top_p, top_k, temperature and precision, the pipeline's logged and scored distributions or a framework's
  pipeline preset (``pipeline=verl``, which sets both: a link with it writes neither), and ID.PARAM for a threshold (``tok_tis.C=3``,
  ``verl:decoupled_geo_rs.rs_threshold=0.8_1.1``). The page writes them from Settings (``to_query``); only
  non-default values, so the default view is the bare address.
- View parameters (``VIEW_PARAMETERS``): which tab is open, presentation mode, the controls inside a tab, and
  the sidebar's "my framework" (``framework=verl``: that framework's presets first in the estimator picker),
  each a ``ViewParameter`` with its default and allowed values. A new tab adds its label to ``TAB_LABELS`` (the
  page's tab order, the one place a label is spelled; everything else names it, e.g. ``TRAINING_TAB``), and each
  control in the link one entry, e.g. ``"steps": ViewParameter(200, low=1, high=2000, tab=TRAINING_TAB)``; its widget's key is the parameter's name (the page puts the link's value into
  session state before the widget is drawn, and writes the widget's value back).

``CONTROL_PARAMETERS`` describes the sidebar's single-valued controls the same way, so tests can go through
every URL parameter (``URL_PARAMETERS``) at its allowed values without knowing their names.

A malformed, out-of-range or unknown value gets a notice and falls back to that parameter's default; a
toy over the exact-size limit (M = V**T) falls back to the default T and V with a notice that says how to
make it fit; a repeated parameter uses its last value, with a notice. Notices quote at most the first 40
characters of a value (``text.quoted``). The same ranges check the command line (``toylab.cli``).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from toylab.catalogue import kl_settings
from toylab.catalogue.aggregation import AGGREGATIONS
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, checked_param, resolve_params
from toylab.catalogue.kl import NO_PENALTY
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.catalogue.pipelines import CUSTOM, LOGGED, PIPELINE_IDS, PIPELINES, SCORED
from toylab.catalogue.presets import FRAMEWORKS
from toylab.catalogue.replay import REPLAY_IDS, REPLAY_PRESETS, REPLAYS
from toylab.catalogue.update_presets import UPDATE_PRESETS
from toylab.catalogue.updates import ANCHORS, LAG_DRAWS, LOSSES, WEIGHTS_AT, Update
from toylab.catalogue.version_handling import VERSION_IDS, VERSION_PRESETS
from toylab.engine.experts import DEFAULT_EXPERTS, ROUTER_ERROR_RANGE, SPREAD_RANGE, Experts
from toylab.engine.experts import DRAWS as EXPERT_DRAWS
from toylab.engine.experts import LIMITS as EXPERT_LIMITS
from toylab.engine.reference import Reference
from toylab.engine.sampler import PRECISIONS, TEMPERATURE_RANGE
from toylab.engine.toy import EXACT_SIZE_LIMIT, flat_problem, make_toy, more_sequences_than, range_problem
from toylab.engine.versions import DEFAULT_VERSIONS, PROXIES, STAMPS, SWITCHES, Versions
from toylab.state.settings import Settings
from toylab.text import listed, quoted
from toylab.training.loop import LIMITS, MODES, NOISES, TrainingConfig, trained_ids, weights_only
from toylab.training.optimizers import OPTIMIZERS

DEFAULTS = Settings()
PAGE_SIZE_LIMIT = EXACT_SIZE_LIMIT          # the largest M = V**T the page enumerates
INTEGER_RANGES = {"T": (1, 16), "V": (2, 8), "seed": (0, 10_000), "N": (1, 100_000)}
MISMATCH_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.01, 1.0)                   # the sampler's top-p (the library takes any p in (0, 1])
TOP_K_RANGE = (0, 8)                        # 0: off; at most V
CONTROL_NAMES = ("T", "V", "mismatch", "seed", "N", "baseline", "est", "agg", "top_p", "top_k", "temperature",
                 "precision", "logged", "scored", "pipeline")
FIELDS = {"est": "estimators", "agg": "aggregation"}     # URL name → Settings field, where they differ
NUMBER_LENGTH = 100                         # longer text is not read as a number
TAB_LABELS = ("Estimators", "Ratios", "Error vs batch size", "Threshold sweep", "Mismatch sweep",
              "Sequence length", "Training", "Experts & versions", "Your run", "Lessons")   # the page's tabs in order:
(ESTIMATORS_TAB, RATIOS_TAB, ERRORS_TAB, THRESHOLD_SWEEP_TAB, MISMATCH_SWEEP_TAB, LENGTH_TAB, TRAINING_TAB,    # spelled
 EXPERTS_TAB, YOUR_RUN_TAB, LESSONS_TAB) = TAB_LABELS                                                           # only here
LEARNING_RATES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)       # the Training tab's choices
TRAINING = TrainingConfig()                                          # its defaults
ANY_FRAMEWORK = "any"                                                # the picker's "my framework": none chosen
TRAINING_CONTROLS = {"steps": "train_steps", "lr": "train_lr", "optimizer": "train_optimizer", "mode": "train_mode",
                     "runs": "train_runs", "noise": "train_noise", "pick": "train_pick",
                     "sga": "sga", "sga_step": "sga_step",
                     "lag": "train_lag", "lag_draw": "train_lag_draw", "anchor": "train_anchor",
                     "loss": "train_loss", "minibatches": "train_minibatches", "epochs": "train_epochs",
                     "eps_low": "train_eps_low", "eps_high": "train_eps_high", "dual_clip": "train_dual_clip",
                     "weights_at": "train_weights", "staleness": "staleness", "seeds": "train_seeds",
                     "staleness_draw": "staleness_draw", "staleness_cap": "staleness_cap",
                     "staleness_seeds": "staleness_seeds", "update": "train_update",
                     "kl_setting": "train_kl", "beta": "train_beta", "ref_distance": "train_ref_distance",
                     "replay": "train_replay", "replay_preset": "train_replay_preset", "switch": "train_switch",
                     "switch_at": "train_switch_at", "stamp": "train_stamp", "mask_stale": "train_mask_stale",
                     "prox": "train_prox", "version_preset": "train_version_preset"}   # Training tab → URL name
CUSTOM_UPDATE = "custom"          # the Training tab's update: its own controls', or a framework's (UPDATE_PRESETS)
NO_EXPERTS = "none"                               # the Training tab's replay: the dense toy, no mixture of experts
MOE_CONTROLS = {"layers": "moe_layers", "experts": "moe_experts", "top_k": "moe_top_k", "router_error": "moe_error",
                "draws": "moe_draws", "draw": "moe_draw", "spread": "moe_spread"}   # the mixture's fields → URL name
UPDATE_CONTROLS = ("anchor", "loss", "minibatches", "epochs", "weights_at")   # the Update's fields the tab sets …
CLIP_CONTROLS = ("eps_low", "eps_high", "dual_clip")                         # … and its loss's ε and c, where it has them
DUAL_CLIPS = (0.0, 1.5, 2.0, 3.0, 5.0, 10.0)       # the tab's dual clip c: 0 is off (verl's default is 3)
STALENESS_CAPS = (0.0, 2.0, 5.0, 10.0)             # the staleness view's cap C on w: 0 is off (AReaL's old default 5)
PAGE_UPDATES_AT_MOST = 8                          # minibatches, and epochs, each at most this on the page
SWEPT = ("mismatch", "top_p", "temperature", "precision")     # what the Mismatch sweep tab can sweep (URL sweep)
SAMPLER_FIELDS = ("top_p", "top_k", "temperature", "precision", "logged", "scored", "pipeline")   # the pipeline model
NO_COMPARISON = "off"                            # the Estimators tab's compare_baseline: no second baseline drawn
COMPARED_SIZES = (0, 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)   # the Threshold sweep's compare_N (0: off)
NO_KL = "off"                                    # the Training tab's train_kl: no penalty to the reference
KL_CHOICES = (NO_KL, *kl_settings.TRAINING_SETTINGS, *KL_PRESETS)   # … or a setting, or a framework's preset
BETAS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)       # its β
TRAINING_DISTANCES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)               # π_ref at θ_0 + distance·d (0: the run's start)
VIEW_DISTANCES = (0.25, 0.5, 1.0, 2.0, 4.0)      # the Estimators tab's KL view (at θ_0 itself every ∇KL is 0)
FLIP_AXES = ("layers", "experts")                # the Experts & versions tab's flip chart: as layers or experts grow
VERSION_ANCHORS = ("rollout", "loglinear", "recompute", "bypass")   # its versions table's anchors (stamps read by two)


@dataclass(frozen=True)
class ViewParameter:
    """One URL parameter of the view (or a single-valued control) and the values a link may give it.

    Its kind is its default's: a bool (1/0, true/false, any case), an int or float within [low, high] (on
    the grid low, low + step, … when ``step`` is given), or a string among ``choices`` (a number may be
    restricted to ``choices`` too). ``choices`` and ``high`` may instead be a function of the link's Settings
    and the view parameters before this one (the Training tab offers only the estimators it trains; the SGA
    step is at most the run's steps). ``tab`` is the tab the parameter belongs to (None: every tab) and
    ``needs`` other view values it matters under (e.g. ``{"present": True}``): elsewhere it is not in the
    address, and the page keeps its value for when it matters again.
    """
    default: object
    choices: tuple | Callable = ()
    low: float | None = None
    high: float | Callable | None = None
    step: float | None = None
    tab: str | None = None
    needs: dict = field(default_factory=dict)

    def allowed(self, settings=DEFAULTS, view=None):
        """(choices, low, high) for a link with these Settings and view values (the defaults where not given)."""
        view = {**VIEW_DEFAULTS, **(view or {})}
        choices = self.choices(settings, view) if callable(self.choices) else self.choices
        high = self.high(settings, view) if callable(self.high) else self.high
        return tuple(choices), self.low, high

    def parse(self, raw, settings=DEFAULTS, view=None):
        """The value ``raw`` (a string from the URL) stands for; ValueError saying why it is not allowed."""
        choices, low, high = self.allowed(settings, view)
        if isinstance(self.default, bool):
            if raw.lower() not in BOOLEANS:
                raise ValueError("is not 1 or 0 (true or false)")
            return BOOLEANS[raw.lower()]
        if isinstance(self.default, int | float):
            low, high = (min(choices), max(choices)) if choices else (low, high)
            number = parse_number(raw, type(self.default), low, high)
            if choices and number not in choices:
                raise ValueError("is not one of " + _listed_choices([f"{choice:g}" for choice in choices]))
            if self.step and not math.isclose((number - low) / self.step, round((number - low) / self.step)):
                raise ValueError(f"is not on the steps of {self.step:g} from {low:g}")
            return number
        if raw not in choices:
            raise ValueError("is not one of " + _listed_choices(choices))
        return raw

    def to_url(self, value):
        """The value as the address writes it: 1/0, 3 for 3.0, else Python's shortest repr."""
        if isinstance(value, bool):
            return "1" if value else "0"
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

    def shown(self, view):
        """Whether the address shows this parameter under ``view``: its tab is open and its ``needs`` hold."""
        return self.tab in (None, view["tab"]) and all(view[name] == value for name, value in self.needs.items())


BOOLEANS = {"1": True, "true": True, "0": False, "false": False}
PANELS = {"threshold_panel": (THRESHOLD_SWEEP_TAB, ("rmse", "bias", "std")),       # the sweeps' panels: one at a
          "mismatch_panel": (MISMATCH_SWEEP_TAB, ("rmse", "bias", "divergence")),   # time when presenting
          "length_panel": (LENGTH_TAB, ("std_ratio", "bias", "divergence", "probability"))}
DRAWS = 1_000_000                       # the Ratios tab's resampled batches: draw 0 … DRAWS


def _trained(settings, view):
    hidden = view["train_replay_preset"] != CUSTOM or view["train_replay"] != NO_EXPERTS \
        or view["train_switch"] != "off" or view["train_prox"] != "recompute" or view["train_version_preset"] != CUSTOM
    update, lag, _ = policies_of(view)
    return trained_ids(settings.selection(), view["train_mode"], settings.N,
                       hidden or weights_only(update, lag, kl_of(view)))


def policies_of(view):
    """(Update, lag, lag draw) of the Training tab's values: a framework's update preset exactly as its module gives
    it (``train_update``), or the tab's own controls (``update_of``)."""
    preset = UPDATE_PRESETS.get(view[TRAINING_CONTROLS["update"]])
    if preset is not None:
        return preset.update, preset.lag, preset.lag_draw
    return update_of(view), view[TRAINING_CONTROLS["lag"]], view[TRAINING_CONTROLS["lag_draw"]]


def update_of(view):
    """The Update the Training tab's values set (view: URL name → value): the anchor, the loss with its ε_low,
    ε_high and dual clip c (0: off) where it has them, minibatches, epochs and where the correction is read;
    ValueError as ``Update`` raises it."""
    value = {name: view[TRAINING_CONTROLS[name]] for name in (*UPDATE_CONTROLS, *CLIP_CONTROLS)}
    params = {name: value[name] for name in CLIP_CONTROLS if name in LOSSES[value["loss"]].params}
    if "dual_clip" in params:
        params["dual_clip"] = params["dual_clip"] or None
    return Update(value["anchor"], value["loss"], params, value["minibatches"], value["epochs"], value["weights_at"])


def kl_of(view):
    """The KLPenalty the Training tab's train_kl and train_beta set (NO_PENALTY when off)."""
    chosen = view[TRAINING_CONTROLS["kl_setting"]]
    if chosen == NO_KL:
        return NO_PENALTY
    return replace(kl_settings.parse(chosen, correction_allowed=False)[0], beta=view[TRAINING_CONTROLS["beta"]])


def training_config(view, N):
    """The TrainingConfig the Training tab's values set (URL name → value), with the sidebar's batch size N."""
    named = {name: view[TRAINING_CONTROLS[name]] for name in ("steps", "lr", "optimizer", "mode", "runs", "noise",
                                                                "ref_distance")}
    update, lag, lag_draw = policies_of(view)
    experts, replay = experts_of(view)
    return TrainingConfig(named["steps"], named["lr"], named["optimizer"], named["mode"], N, named["runs"],
                          named["noise"], update, lag, lag_draw, kl_of(view), Reference(named["ref_distance"]),
                          experts, replay, versions_of(view))


def experts_model(view):
    """The mixture of experts the link's moe_ values set (shared by the Experts & versions tab and Training);
    ValueError as ``Experts`` raises it."""
    return Experts(**{field: view[name] for field, name in MOE_CONTROLS.items()})


def experts_of(view):
    """(Experts or None, replay mode) of the Training tab: None when its replay is "none" (the dense toy); a replay
    preset sets the mode."""
    preset = view[TRAINING_CONTROLS["replay_preset"]]
    replay = REPLAY_PRESETS[preset].replay if preset != CUSTOM else view[TRAINING_CONTROLS["replay"]]
    if replay == NO_EXPERTS:
        return None, "off"
    return experts_model(view), replay


def versions_of(view):
    """The Versions of the Training tab: its switch, position, stamp, mask and π_prox, or a version preset's."""
    named = {name: view[TRAINING_CONTROLS[name]] for name in ("switch", "switch_at", "stamp", "mask_stale", "prox")}
    preset = view[TRAINING_CONTROLS["version_preset"]]
    if preset != CUSTOM:
        chosen = VERSION_PRESETS[preset]
        named |= {"stamp": chosen.stamp, "mask_stale": chosen.mask_stale, "prox": chosen.prox}
    return Versions(named["switch"], named["switch_at"], named["stamp"], named["mask_stale"], named["prox"])


OWN_UPDATE = {"train_update": CUSTOM_UPDATE}       # the three policies' controls count only without a framework's update
VIEW_PARAMETERS = {
    "tab": ViewParameter(TAB_LABELS[0], choices=TAB_LABELS),
    "present": ViewParameter(False),
    "ratio_panels": ViewParameter(False, tab=RATIOS_TAB),
    "draw": ViewParameter(0, low=0, high=DRAWS, step=1, tab=RATIOS_TAB),
    "mc_dots": ViewParameter(False, tab=ERRORS_TAB),       # confirmations, off the slider's path: each
    "length_mc": ViewParameter(False, tab=LENGTH_TAB),         # costs more than the exact picture it checks
    **{name: ViewParameter(panels[0], choices=panels, tab=tab, needs={"present": True})
       for name, (tab, panels) in PANELS.items()},
    "train_mode": ViewParameter(TRAINING.mode, choices=MODES, tab=TRAINING_TAB),
    "train_optimizer": ViewParameter(TRAINING.optimizer, choices=tuple(OPTIMIZERS), tab=TRAINING_TAB),
    "train_lr": ViewParameter(TRAINING.lr, choices=LEARNING_RATES, tab=TRAINING_TAB),
    "train_steps": ViewParameter(TRAINING.steps, low=10, high=1000, step=10, tab=TRAINING_TAB),
    "train_runs": ViewParameter(TRAINING.runs, low=1, high=64, step=1, tab=TRAINING_TAB),
    "train_noise": ViewParameter(TRAINING.noise, choices=NOISES, tab=TRAINING_TAB),
    "train_update": ViewParameter(CUSTOM_UPDATE, choices=(CUSTOM_UPDATE, *UPDATE_PRESETS), tab=TRAINING_TAB),
    "train_lag": ViewParameter(TRAINING.lag, low=LIMITS["lag"][0], high=LIMITS["lag"][1], step=1, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_lag_draw": ViewParameter(TRAINING.lag_draw, choices=LAG_DRAWS, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_anchor": ViewParameter(TRAINING.update.anchor, choices=ANCHORS, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_loss": ViewParameter(TRAINING.update.loss, choices=tuple(LOSSES), tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_minibatches": ViewParameter(TRAINING.update.minibatches, low=1, high=PAGE_UPDATES_AT_MOST, step=1, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_epochs": ViewParameter(TRAINING.update.epochs, low=1, high=PAGE_UPDATES_AT_MOST, step=1, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_eps_low": ViewParameter(LOSSES["ppo"].params["eps_low"].default, low=0.0, high=1.0, step=0.01, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_eps_high": ViewParameter(LOSSES["ppo"].params["eps_high"].default, low=0.0, high=1.0, step=0.01, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_dual_clip": ViewParameter(0.0, choices=DUAL_CLIPS, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_weights": ViewParameter(TRAINING.update.weights_at, choices=WEIGHTS_AT, tab=TRAINING_TAB, needs=OWN_UPDATE),
    "train_kl": ViewParameter(NO_KL, choices=KL_CHOICES, tab=TRAINING_TAB),
    "train_beta": ViewParameter(0.1, choices=BETAS, tab=TRAINING_TAB),
    "train_ref_distance": ViewParameter(0.0, choices=TRAINING_DISTANCES, tab=TRAINING_TAB),
    "moe_layers": ViewParameter(DEFAULT_EXPERTS.layers, low=EXPERT_LIMITS["layers"][0],
                                high=EXPERT_LIMITS["layers"][1], step=1),          # the mixture: every tab's link
    "moe_experts": ViewParameter(DEFAULT_EXPERTS.experts, low=EXPERT_LIMITS["experts"][0],
                                 high=EXPERT_LIMITS["experts"][1], step=1),
    "moe_top_k": ViewParameter(DEFAULT_EXPERTS.top_k, low=1, high=lambda settings, view: view["moe_experts"] - 1,
                               step=1),
    "moe_error": ViewParameter(DEFAULT_EXPERTS.router_error, low=ROUTER_ERROR_RANGE[0], high=ROUTER_ERROR_RANGE[1],
                               step=0.05),
    "moe_draws": ViewParameter(DEFAULT_EXPERTS.draws, low=EXPERT_LIMITS["draws"][0], high=EXPERT_LIMITS["draws"][1],
                               step=1),
    "moe_draw": ViewParameter(DEFAULT_EXPERTS.draw, choices=EXPERT_DRAWS),
    "moe_spread": ViewParameter(DEFAULT_EXPERTS.spread, low=SPREAD_RANGE[0], high=SPREAD_RANGE[1], step=0.25),
    "train_replay": ViewParameter(NO_EXPERTS, choices=(NO_EXPERTS, *REPLAYS), tab=TRAINING_TAB),
    "train_replay_preset": ViewParameter(CUSTOM, choices=REPLAY_IDS, tab=TRAINING_TAB),
    "train_switch": ViewParameter(DEFAULT_VERSIONS.switch, choices=SWITCHES, tab=TRAINING_TAB),
    "train_switch_at": ViewParameter(DEFAULT_VERSIONS.at, low=1, high=lambda settings, view: max(settings.T - 1, 1),
                                     step=1, tab=TRAINING_TAB),
    "train_stamp": ViewParameter(DEFAULT_VERSIONS.stamp, choices=STAMPS, tab=TRAINING_TAB),
    "train_mask_stale": ViewParameter(False, tab=TRAINING_TAB),
    "train_prox": ViewParameter(DEFAULT_VERSIONS.prox, choices=PROXIES, tab=TRAINING_TAB),
    "train_version_preset": ViewParameter(CUSTOM, choices=VERSION_IDS, tab=TRAINING_TAB),
    "train_pick": ViewParameter("naive", choices=_trained, tab=TRAINING_TAB),
    "sga": ViewParameter(False, tab=TRAINING_TAB),
    "train_seeds": ViewParameter(False, tab=TRAINING_TAB),          # the seeds views: each its tab's takeaway over
    "staleness": ViewParameter(False, tab=TRAINING_TAB),            # 30 toys, opt-in (off the slider's path)
    "staleness_draw": ViewParameter(LAG_DRAWS[0], choices=LAG_DRAWS, tab=TRAINING_TAB, needs={"staleness": True}),
    "staleness_cap": ViewParameter(0.0, choices=STALENESS_CAPS, tab=TRAINING_TAB, needs={"staleness": True}),
    "staleness_seeds": ViewParameter(False, tab=TRAINING_TAB, needs={"staleness": True}),
    "sga_step": ViewParameter(10, low=0, high=lambda settings, view: view["train_steps"], step=1,   # default: within
                              tab=TRAINING_TAB, needs={"sga": True}),              # the shortest run (10 steps)
    "flip_axis": ViewParameter(FLIP_AXES[0], choices=FLIP_AXES, tab=EXPERTS_TAB),
    "versions_switch": ViewParameter("drawn", choices=SWITCHES[1:], tab=EXPERTS_TAB),
    "versions_at": ViewParameter(1, low=1, high=lambda settings, view: max(settings.T - 1, 1), step=1, tab=EXPERTS_TAB),
    "versions_lag": ViewParameter(2, low=1, high=8, step=1, tab=EXPERTS_TAB),
    "versions_anchor": ViewParameter("rollout", choices=VERSION_ANCHORS, tab=EXPERTS_TAB),
    "versions_step": ViewParameter(20, low=0, high=200, step=5, tab=EXPERTS_TAB),
    "versions_lr": ViewParameter(1.0, choices=LEARNING_RATES, tab=EXPERTS_TAB),
    "sweep": ViewParameter(SWEPT[0], choices=SWEPT, tab=MISMATCH_SWEEP_TAB),
    "compare_baseline": ViewParameter(NO_COMPARISON, choices=(NO_COMPARISON, *BASELINES), tab=ESTIMATORS_TAB),
    "est_seeds": ViewParameter(False, tab=ESTIMATORS_TAB),
    "kl_view": ViewParameter(False, tab=ESTIMATORS_TAB),       # the KL view, opt-in: off the slider's path
    "kl_distance": ViewParameter(1.0, choices=VIEW_DISTANCES, tab=ESTIMATORS_TAB, needs={"kl_view": True}),
    "kl_frameworks": ViewParameter(False, tab=ESTIMATORS_TAB),      # the view's rows of every framework preset
    "compare_N": ViewParameter(0, choices=COMPARED_SIZES, tab=THRESHOLD_SWEEP_TAB),
    "sweep_pipelines": ViewParameter(False, tab=MISMATCH_SWEEP_TAB),      # the same sweep under each framework pipeline
    "framework": ViewParameter(ANY_FRAMEWORK, choices=(ANY_FRAMEWORK, *FRAMEWORKS)),    # its presets first in the picker
}
VIEW_DEFAULTS = {name: parameter.default for name, parameter in VIEW_PARAMETERS.items()}
CONTROL_PARAMETERS = {
    **{name: ViewParameter(getattr(DEFAULTS, name), low=low, high=high) for name, (low, high) in INTEGER_RANGES.items()},
    "mismatch": ViewParameter(DEFAULTS.mismatch, low=MISMATCH_RANGE[0], high=MISMATCH_RANGE[1]),
    "baseline": ViewParameter(DEFAULTS.baseline, choices=BASELINES),
    "agg": ViewParameter(DEFAULTS.aggregation, choices=AGGREGATIONS),
    "top_p": ViewParameter(DEFAULTS.top_p, low=TOP_P_RANGE[0], high=TOP_P_RANGE[1]),
    "top_k": ViewParameter(DEFAULTS.top_k, low=TOP_K_RANGE[0], high=TOP_K_RANGE[1]),        # and at most V
    "temperature": ViewParameter(DEFAULTS.temperature, low=TEMPERATURE_RANGE[0], high=TEMPERATURE_RANGE[1]),
    "precision": ViewParameter(DEFAULTS.precision, choices=PRECISIONS),
    "logged": ViewParameter(DEFAULTS.logged, choices=LOGGED),
    "scored": ViewParameter(DEFAULTS.scored, choices=SCORED),
    "pipeline": ViewParameter(DEFAULTS.pipeline, choices=PIPELINE_IDS),
}
URL_PARAMETERS = CONTROL_PARAMETERS | VIEW_PARAMETERS      # every single-valued parameter a link can carry


def _listed_choices(choices, most=12):
    """The allowed values, or the first few and how many there are when the list is long."""
    choices = list(choices)
    return ", ".join(choices) if len(choices) <= most else f"the {len(choices)} allowed ({', '.join(choices[:4])}, …)"


def parse_number(raw, kind, low, high):
    """The ``kind`` (int or float) number in the text ``raw`` if it lies in [low, high]; else ValueError saying
    why ("is not a number", "is not an integer", "is outside 1 to 16"). Costs O(1): text over
    NUMBER_LENGTH characters is refused unread (no number in a range needs that many)."""
    text = raw.strip()
    if len(text) > NUMBER_LENGTH:
        raise ValueError(f"is too long to be a number (over {NUMBER_LENGTH} characters)")
    try:
        number = float(text)
    except ValueError:
        raise ValueError("is not a number") from None
    if not math.isfinite(number) or (kind is int and not number.is_integer()):
        raise ValueError("is not " + ("an integer" if kind is int else "a finite number"))
    if not low <= number <= high:
        raise ValueError(f"is outside {low:g} to {high:g}")
    return kind(number) + 0                 # + 0 turns -0.0 into 0.0


def normalised(raw, number):
    """Why the number read from ``raw`` is written differently in the address, for a notice (None if it is not): other
    numerals than 0–9 ("٣", "３" read as 3), or a sign on zero ("-0" read as 0)."""
    text = raw.strip()
    if not text.isascii():
        return "is written with characters other than ASCII digits"
    if number == 0 and text[:1] in "+-" and text:
        return "has a sign on zero"
    return None


def clean_float(value):
    """The float as the URL writes it (10 significant digits, and 0 for -0), so a link reopens the same toy."""
    return float(f"{float(value):.10g}") + 0.0


def make_settings(T=DEFAULTS.T, V=DEFAULTS.V, mismatch=DEFAULTS.mismatch, seed=DEFAULTS.seed,
                  estimators=DEFAULTS.estimators, thresholds=None, baseline=DEFAULTS.baseline, N=DEFAULTS.N,
                  aggregation=DEFAULTS.aggregation, top_p=DEFAULTS.top_p, top_k=DEFAULTS.top_k,
                  temperature=DEFAULTS.temperature, precision=DEFAULTS.precision, logged=DEFAULTS.logged,
                  scored=DEFAULTS.scored, pipeline=DEFAULTS.pipeline):
    """Canonical Settings: estimators in registry order, thresholds only for selected estimators and only
    where they differ from the default; a pipeline preset's logged and scored (``Pipeline.choices`` at the top-p)
    in place of the given ones. ``thresholds`` maps (estimator id, parameter) → value."""
    if pipeline != CUSTOM:
        logged, scored = PIPELINES[pipeline].choices(clean_float(top_p))
    chosen = tuple(id for id in ESTIMATORS if id in set(estimators))
    overrides = []
    for id in chosen:
        for name, param in ESTIMATORS[id].params.items():
            value = (thresholds or {}).get((id, name), param.default)
            value = value if isinstance(param.default, str) else clean_float(value)
            if value != param.default:
                overrides.append((id, name, value))
    return Settings(T=int(T), V=int(V), mismatch=clean_float(mismatch), seed=int(seed), estimators=chosen,
                    thresholds=tuple(overrides), baseline=baseline, N=int(N), aggregation=aggregation,
                    top_p=clean_float(top_p), top_k=int(top_k), temperature=clean_float(temperature),
                    precision=precision, logged=logged, scored=scored, pipeline=pipeline)


def controls_of(settings):
    """{control's key: its value} of a Settings, as the sidebar's widgets hold them (the keys are the URL names): a
    threshold as its control holds it, the text of a text threshold (areal's "none", verl's "0.8_1.1") and not what
    that text parses to (None, a pair). ``make_settings`` of these values gives the Settings back."""
    controls = {name: getattr(settings, FIELDS.get(name, name)) for name in CONTROL_NAMES}
    controls["est"] = list(settings.estimators)
    overrides = {(id, name): value for id, name, value in settings.thresholds}
    for id in settings.estimators:
        for name, param in ESTIMATORS[id].params.items():
            controls[f"{id}.{name}"] = overrides.get((id, name), param.default)
    return controls


def size_problem(T, V, limit=PAGE_SIZE_LIMIT):
    """None if the toy is small enough to enumerate, else the explanation with a suggestion."""
    if not more_sequences_than(T, V, limit):
        return None
    fewer_tokens = max((t for t in range(1, T) if not more_sequences_than(t, V, limit)), default=None)
    smaller_vocabulary = max((v for v in range(2, V) if not more_sequences_than(T, v, limit)), default=None)
    suggestions = [f"fewer tokens (T ≤ {fewer_tokens} at V = {V})" if fewer_tokens else None,
                   f"a smaller vocabulary (V ≤ {smaller_vocabulary} at T = {T})" if smaller_vocabulary else None]
    return (f"T = {T}, V = {V} gives M = V**T = {V**T:,} sequences, over the exact-size limit of "
            f"{limit:,}: every number here is a sum over all M sequences. Use "
            + " or ".join(s for s in suggestions if s) + ".")


def float_range_problem(settings):
    """None, or why the Settings' toy cannot be summed exactly (its pipeline makes W leave float64,
    ``toy.range_problem``, or the scored objective flat, ``toy.flat_problem``). Builds only the (T, V) tables."""
    if settings.sampler.is_default:                 # plain softmax: log ρ_t ≤ mismatch·(max b − min b), far inside
        return None
    toy = make_toy(*settings.toy_key, max_sequences=None)
    return range_problem(toy.largest_log_W) or flat_problem(toy)


def toy_problem(settings, limit=PAGE_SIZE_LIMIT):
    """None if the page can enumerate the Settings' toy, else why not, in sentences: too many sequences, or its
    sampler makes W leave float64."""
    size = size_problem(settings.T, settings.V, limit)
    if size:
        return f"This toy is too large to enumerate. {size}"
    float_range = float_range_problem(settings)
    return float_range and f"This sampler and pipeline cannot be summed exactly: {float_range}."


def threshold_problem(settings):
    """None if every chosen estimator's thresholds are ones it (and its framework's code) accepts, else why not: a
    threshold typed in the sidebar is checked here, a link's when it is parsed."""
    try:
        settings.selection()
    except ValueError as error:
        return f"A threshold cannot be used: {error}."
    return None


def parse_query(params, limit=PAGE_SIZE_LIMIT):
    """(Settings, notices) from a query mapping {name: str or list of str}; never raises. See ``parse_link``."""
    settings, _, notices = parse_link(params, limit)
    return settings, notices


def parse_link(params, limit=PAGE_SIZE_LIMIT):
    """(Settings, view, notices) from a query mapping {name: str or list of str}; never raises.

    ``view`` maps every name in VIEW_PARAMETERS to its value (its default where the link has none or a bad
    one). Each parameter falls back to its default on its own; every fallback, repetition or ignored
    parameter adds a notice.
    """
    notices = []
    repeated = [name for name, value in params.items() if not isinstance(value, str) and len(value) > 1]
    if repeated:
        notices.append(f"URL parameter{'s' if len(repeated) > 1 else ''} {listed(repeated)} given more than "
                       "once: using the last value.")
    params = {name: _last(value) for name, value in params.items()}
    values = {FIELDS.get(name, name): _parse_control(params, name, notices) for name in CONTROL_PARAMETERS}
    values["estimators"] = _parse_estimators(params, notices)
    values["thresholds"] = _parse_thresholds(params, values["estimators"], notices)
    _fit_toy_and_sampler(params, values, limit, notices)
    settings = make_settings(**values)
    view = {}
    for name in VIEW_PARAMETERS:
        view[name] = _parse_view(params, name, settings, view, notices)
    _check_hidden_presets(params, view, notices)
    unknown = [name for name in params if name not in CONTROL_NAMES and name not in VIEW_PARAMETERS
               and "." not in name]
    if unknown:
        notices.append(f"Unknown URL parameter{'s' if len(unknown) > 1 else ''} {listed(unknown)} ignored.")
    return settings, view, notices


def _fit_toy_and_sampler(params, values, limit, notices):
    """Each value on its own may be fine and the whole not: a toy over the size ``limit`` falls back to the default
    T and V, a top_k above V to off, a pipeline preset overrides logged and scored, and a sampler whose numbers
    overflow to plain softmax — each with a notice (``values`` changed in place)."""
    problem = size_problem(values["T"], values["V"], limit)
    if problem:
        notices.append(f"{problem} Showing the default toy T = {DEFAULTS.T}, V = {DEFAULTS.V} instead.")
        values["T"], values["V"] = DEFAULTS.T, DEFAULTS.V
    if values["top_k"] > values["V"]:
        notices.append(f"URL parameter top_k = {values['top_k']} is above V = {values['V']} (top_k keeps the k most "
                       f"likely tokens of V); using the default top_k = {DEFAULTS.top_k} (off).")
        values["top_k"] = DEFAULTS.top_k
    _check_pipeline(params, values, notices)
    problem = float_range_problem(make_settings(**values))
    if problem:
        notices.append(f"URL sampler parameters: {problem}. Showing the sampler as plain softmax (top_p = 1, "
                       "top_k = 0, temperature = 1, precision none), logged as sampled and scored plain, instead.")
        values |= {name: getattr(DEFAULTS, name) for name in SAMPLER_FIELDS}


PRESET_CONTROLS = {"train_replay_preset": ("train_replay",),
                   "train_version_preset": ("train_stamp", "train_mask_stale", "train_prox")}   # what each preset sets


def _check_hidden_presets(params, view, notices):
    """A replay or version preset sets the controls it names (as a pipeline preset sets logged and scored): a link
    that names one and gives any of those otherwise gets a notice (the preset's values are used)."""
    replay = view["train_replay_preset"]
    if replay != CUSTOM:
        _preset_overrides(params, view, notices, "train_replay_preset", {"train_replay": REPLAY_PRESETS[replay].replay})
    versions = view["train_version_preset"]
    if versions != CUSTOM:
        chosen = VERSION_PRESETS[versions]
        _preset_overrides(params, view, notices, "train_version_preset",
                          {"train_stamp": chosen.stamp, "train_mask_stale": chosen.mask_stale, "train_prox": chosen.prox})


def _preset_overrides(params, view, notices, preset, sets):
    overridden = [name for name, value in sets.items() if name in params and view[name] != value]
    if overridden:
        to_url = {name: VIEW_PARAMETERS[name].to_url(sets[name]) for name in overridden}
        notices.append(f"URL parameter {preset} = {view[preset]} sets "
                       + " and ".join(f"{name} = {to_url[name]}" for name in overridden)
                       + "; the link's " + " and ".join(f"{name} = {quoted(params[name])}" for name in overridden)
                       + " ignored.")


def dropped_link_notice(parameters, characters, most_parameters, most_characters):
    """The notice for a link the server dropped unread: over its most parameters or characters."""
    return (f"This link has {parameters:,} parameters in {characters:,} characters, over the {most_parameters:,} "
            f"parameters or {most_characters:,} characters the server reads: it read none of them, and the page shows "
            "the default view. A link the page writes holds one parameter per control changed from its default.")


def _check_pipeline(params, values, notices):
    """A pipeline preset sets logged and scored: a link that names one and gives either otherwise gets a notice."""
    if values["pipeline"] == CUSTOM:
        return
    preset = PIPELINES[values["pipeline"]]
    chosen = dict(zip(("logged", "scored"), preset.choices(clean_float(values["top_p"])), strict=True))
    overridden = [name for name in chosen if name in params and values[name] != chosen[name]]
    if overridden:
        notices.append(f"URL parameter pipeline = {preset.id} sets "
                       + " and ".join(f"{name} = {chosen[name]}" for name in overridden)
                       + "; the link's " + " and ".join(f"{name} = {quoted(params[name])}" for name in overridden)
                       + " ignored.")
    values |= chosen


def view_query(view):
    """{URL name: string} of the view parameters the address shows: those that differ from their default and
    belong to every tab or to the open one (``ViewParameter.shown``), but not the controls a replay or version preset
    sets while it is chosen (the preset's values count: the link names the preset)."""
    preset_set = {name for preset, names in PRESET_CONTROLS.items() if view[preset] != CUSTOM for name in names}
    return {name: parameter.to_url(view[name]) for name, parameter in VIEW_PARAMETERS.items()
            if view[name] != parameter.default and parameter.shown(view) and name not in preset_set}


def to_query(settings):
    """{URL name: string} for every control whose value differs from its default."""
    query = {}
    names = ("T", "V", "mismatch", "seed", "N", "baseline", "top_p", "top_k", "temperature", "precision", "pipeline") \
        + (("logged", "scored") if settings.pipeline == CUSTOM else ())
    for name in names:
        value = getattr(settings, name)
        if value != getattr(DEFAULTS, name):
            query[name] = f"{value:.10g}" if isinstance(value, float) else str(value)
    if settings.estimators != DEFAULTS.estimators:
        query["est"] = ",".join(settings.estimators)
    if settings.aggregation != DEFAULTS.aggregation:
        query["agg"] = settings.aggregation
    for id, name, value in settings.thresholds:
        query[f"{id}.{name}"] = value if isinstance(value, str) else f"{value:.10g}"
    return query


def _last(value):
    if isinstance(value, str):
        return value
    value = list(value)
    return value[-1] if value else ""


def _fallback(notices, name, raw, why):
    default = getattr(DEFAULTS, FIELDS.get(name, name))
    shown = ",".join(default) if name == "est" else default
    notices.append(f"URL parameter {name} = {quoted(raw)} {why}; using the default {name} = {shown}.")
    return default


def _parse_control(params, name, notices):
    if name not in params:
        return CONTROL_PARAMETERS[name].default
    try:
        value = CONTROL_PARAMETERS[name].parse(params[name])
    except ValueError as why:
        return _fallback(notices, name, params[name], why)
    _notice_normalised(notices, name, params[name], value, CONTROL_PARAMETERS[name])
    return value


def _notice_normalised(notices, name, raw, value, parameter):
    """A notice when a number's text is not as the address writes it (``normalised``)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and (why := normalised(raw, value)):
        notices.append(f"URL parameter {name} = {quoted(raw)} {why}: read as {parameter.to_url(value)}.")


def _parse_view(params, name, settings, view, notices):
    """The view parameter's value from the link, checked against the Settings and the view values before it."""
    parameter = VIEW_PARAMETERS[name]
    if name not in params:
        return parameter.default
    try:
        value = parameter.parse(params[name], settings, view)
    except ValueError as why:
        notices.append(f"URL parameter {name} = {quoted(params[name])} {why}; using the default "
                       f"{name} = {parameter.to_url(parameter.default)}.")
        return parameter.default
    _notice_normalised(notices, name, params[name], value, parameter)
    unmet = [f"{need} = {VIEW_PARAMETERS[need].to_url(wanted)}" for need, wanted in parameter.needs.items()
             if view[need] != wanted]
    if unmet:                           # the page would show nothing of it: say so (the page keeps the value)
        notices.append(f"URL parameter {name} = {quoted(params[name])} takes effect only with {' and '.join(unmet)}, "
                       "which this link does not set: kept for when it does.")
    return value


def _parse_estimators(params, notices):
    if "est" not in params:
        return DEFAULTS.estimators
    raw = params["est"]
    ids = [id.strip() for id in raw.split(",") if id.strip()]
    unknown = [id for id in ids if id not in ESTIMATORS]
    if unknown and len(unknown) == len(ids):
        return _fallback(notices, "est", raw, "names no known estimator")
    if unknown:
        notices.append(f"URL parameter est: unknown estimator{'s' if len(unknown) > 1 else ''} {listed(unknown)} "
                       f"ignored (the sidebar's estimator list names every known one).")
    return tuple(id for id in ids if id in ESTIMATORS)


def _parse_thresholds(params, estimators, notices):
    """{(id, name): value} of the link's ``id.name`` parameters for the selected ``estimators``; a notice for each
    value refused or normalised, for the names that are no threshold or not selected, and for an estimator whose
    thresholds together are refused (it keeps its defaults)."""
    thresholds, no_such, unselected = {}, [], []
    for key, raw in params.items():
        if "." not in key:
            continue
        id, _, name = key.partition(".")
        if id not in ESTIMATORS or name not in ESTIMATORS[id].params:
            no_such.append(key)
        elif id not in estimators:
            unselected.append(key)
        else:
            value = _threshold_value(key, id, name, raw, notices)
            if value is not None:
                thresholds[(id, name)] = value
    for keys, why in ((no_such, "no such estimator threshold"), (unselected, "not among the selected estimators")):
        if keys:
            notices.append(f"URL parameter{'s' if len(keys) > 1 else ''} {listed(keys)} ignored: {why}.")
    return _consistent_thresholds(thresholds, notices)


def _threshold_value(key, id, name, raw, notices):
    """The value of one threshold from the link (text, or a float as ``clean_float`` writes it), or None with a
    notice when its estimator refuses it; a notice too when the value was read normalised."""
    try:
        checked_param(id, name, raw)
    except ValueError as error:
        default = ESTIMATORS[id].params[name].default
        notices.append(f"URL parameter {key} = {quoted(raw)}: {error}; using the default {key} = {default}.")
        return None
    if isinstance(ESTIMATORS[id].params[name].default, str):
        return raw
    if why := normalised(raw, clean_float(raw)):
        notices.append(f"URL parameter {key} = {quoted(raw)} {why}: read as {clean_float(raw):g}.")
    return clean_float(raw)


def _consistent_thresholds(thresholds, notices):
    """``thresholds`` without those of an estimator that refuses them together (e.g. lo above hi), with a notice."""
    for id in {id for id, _ in thresholds}:
        mine = {name: value for (owner, name), value in thresholds.items() if owner == id}
        try:
            resolve_params(id, mine)
        except ValueError as error:
            notices.append(f"URL thresholds of {id} ignored: {error}; using its defaults.")
            thresholds = {k: v for k, v in thresholds.items() if k[0] != id}
    return thresholds
