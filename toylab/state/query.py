"""The page's address: parse a (hand-edited) URL query into Settings and view values, and back.

Two kinds of URL parameter:

- Controls (the sidebar): T, V, mismatch, seed, N, baseline, est (comma-separated estimator ids, framework
  presets included: ``est=naive,verl:decoupled_geo_rs``), agg (the loss aggregation) and ID.PARAM for a
  threshold (``tok_tis.C=3``, ``verl:decoupled_geo_rs.rs_threshold=0.8_1.1``). The page writes them from Settings (``to_query``); only
  non-default values, so the default view is the bare address.
- View parameters (``VIEW_PARAMETERS``): which tab is open, the controls inside a tab, and the sidebar's "my
  framework" (``framework=verl``: that framework's presets first in the estimator picker). Streamlit keeps
  them in the URL itself (widgets with ``bind="query-params"`` and the parameter's name as key); this
  module only checks a link's values. A new tab adds its label to ``TAB_LABELS`` (the page's tab order),
  and each URL-bound control one entry, e.g. ``"steps": ViewParameter(200, low=1, high=2000,
  tab="Training")``. Its widget takes no ``value=``: where the widget's own default differs from the
  entry's, call ``st.session_state.setdefault(name, VIEW_PARAMETERS[name].default)`` before it (the page
  puts a closed tab's linked value into session state, and Streamlit warns when both set a value).

A malformed, out-of-range or unknown value gets a notice and falls back to that parameter's default; a
toy over the exact-size limit (M = V**T) falls back to the default T and V with a notice that says how to
make it fit; a repeated parameter uses its last value, with a notice. Notices quote at most the first 40
characters of a value (``text.quoted``). The same ranges check the command line (``toylab.cli``).
"""

import math
from dataclasses import dataclass

from toylab.catalogue.aggregation import AGGREGATIONS
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, resolve_params
from toylab.catalogue.presets import FRAMEWORKS
from toylab.engine.toy import EXACT_SIZE_LIMIT, more_sequences_than
from toylab.state.settings import Settings
from toylab.text import listed, quoted
from toylab.training.loop import MODES, TrainingConfig
from toylab.training.optimizers import OPTIMIZERS

DEFAULTS = Settings()
PAGE_SIZE_LIMIT = EXACT_SIZE_LIMIT          # the largest M = V**T the page enumerates
INTEGER_RANGES = {"T": (1, 16), "V": (2, 8), "seed": (0, 10_000), "N": (1, 100_000)}
MISMATCH_RANGE = (0.0, 2.0)
CONTROL_NAMES = ("T", "V", "mismatch", "seed", "N", "baseline", "est", "agg")
FIELDS = {"est": "estimators", "agg": "aggregation"}     # URL name → Settings field, where they differ
NUMBER_LENGTH = 100                         # longer text is not read as a number
TAB_LABELS = ("Estimators", "Ratios", "Error vs batch size", "Threshold sweep", "Mismatch sweep",
              "Sequence length", "Training", "Your run", "Lessons")
LEARNING_RATES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)       # the Training tab's choices
TRAINING = TrainingConfig()                                          # its defaults
ANY_FRAMEWORK = "any"                                                # the picker's "my framework": none chosen
TRAINING_CONTROLS = {"steps": "train_steps", "lr": "train_lr", "optimizer": "train_optimizer", "mode": "train_mode",
                     "runs": "train_runs", "pick": "train_pick", "sga_step": "sga_step"}   # Training tab → URL name


@dataclass(frozen=True)
class ViewParameter:
    """A URL parameter Streamlit keeps for one widget (``bind="query-params"``, key = the parameter's name).

    Its kind is its default's: a bool ("true"/"false", any case), an int or float within [low, high], or a
    string among ``choices`` (a number may be restricted to ``choices`` too). ``tab`` is the tab the widget lives in (None: every tab); while another tab is
    open the parameter is not in the address (Streamlit drops it too, and restores it with the tab).
    """
    default: object
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    tab: str | None = None

    def parse(self, raw):
        """The value ``raw`` (a string from the URL) stands for; ValueError saying why it is not allowed."""
        if isinstance(self.default, bool):
            if raw.lower() not in ("true", "false"):
                raise ValueError("is not true or false")
            return raw.lower() == "true"
        if isinstance(self.default, int | float):
            low, high = (min(self.choices), max(self.choices)) if self.choices else (self.low, self.high)
            number = parse_number(raw, type(self.default), low, high)
            if self.choices and number not in self.choices:
                raise ValueError("is not one of " + _listed_choices([f"{choice:g}" for choice in self.choices]))
            return number
        if raw not in self.choices:
            raise ValueError("is not one of " + _listed_choices(self.choices))
        return raw

    def to_url(self, value):
        """The value as Streamlit writes it in the URL: true/false, 5 for 5.0, else Python's shortest repr."""
        if isinstance(value, bool):
            return str(value).lower()
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


VIEW_PARAMETERS = {
    "tab": ViewParameter(TAB_LABELS[0], choices=TAB_LABELS),
    "ratio_panels": ViewParameter(False, tab="Ratios"),
    "train_mode": ViewParameter(TRAINING.mode, choices=MODES, tab="Training"),
    "train_optimizer": ViewParameter(TRAINING.optimizer, choices=tuple(OPTIMIZERS), tab="Training"),
    "train_lr": ViewParameter(TRAINING.lr, choices=LEARNING_RATES, tab="Training"),
    "train_steps": ViewParameter(TRAINING.steps, low=10, high=1000, tab="Training"),
    "train_runs": ViewParameter(TRAINING.runs, low=1, high=64, tab="Training"),
    "train_pick": ViewParameter("naive", choices=tuple(ESTIMATORS), tab="Training"),
    "sga_step": ViewParameter(30, low=0, high=1000, tab="Training"),
    "framework": ViewParameter(ANY_FRAMEWORK, choices=(ANY_FRAMEWORK, *FRAMEWORKS)),    # its presets first in the picker
}


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


def clean_float(value):
    """The float as the URL writes it (10 significant digits), so a link reopens the same toy."""
    return float(f"{float(value):.10g}")


def make_settings(T=DEFAULTS.T, V=DEFAULTS.V, mismatch=DEFAULTS.mismatch, seed=DEFAULTS.seed,
                  estimators=DEFAULTS.estimators, thresholds=None, baseline=DEFAULTS.baseline, N=DEFAULTS.N,
                  aggregation=DEFAULTS.aggregation):
    """Canonical Settings: estimators in registry order, thresholds only for selected estimators and only
    where they differ from the default. ``thresholds`` maps (estimator id, parameter) → value."""
    chosen = tuple(id for id in ESTIMATORS if id in set(estimators))
    overrides = []
    for id in chosen:
        for name, param in ESTIMATORS[id].params.items():
            value = (thresholds or {}).get((id, name), param.default)
            value = value if isinstance(param.default, str) else clean_float(value)
            if value != param.default:
                overrides.append((id, name, value))
    return Settings(T=int(T), V=int(V), mismatch=clean_float(mismatch), seed=int(seed), estimators=chosen,
                    thresholds=tuple(overrides), baseline=baseline, N=int(N), aggregation=aggregation)


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
    values = {}
    for name, (low, high) in INTEGER_RANGES.items():
        values[name] = _parse_control(params, name, int, low, high, notices)
    values["mismatch"] = _parse_control(params, "mismatch", float, *MISMATCH_RANGE, notices)
    values["baseline"] = _parse_baseline(params, notices)
    values["aggregation"] = _parse_aggregation(params, notices)
    values["estimators"] = _parse_estimators(params, notices)
    values["thresholds"] = _parse_thresholds(params, values["estimators"], notices)
    problem = size_problem(values["T"], values["V"], limit)
    if problem:
        notices.append(f"{problem} Showing the default toy T = {DEFAULTS.T}, V = {DEFAULTS.V} instead.")
        values["T"], values["V"] = DEFAULTS.T, DEFAULTS.V
    view = {name: _parse_view(params, name, notices) for name in VIEW_PARAMETERS}
    unknown = [name for name in params if name not in CONTROL_NAMES and name not in VIEW_PARAMETERS
               and "." not in name]
    if unknown:
        notices.append(f"Unknown URL parameter{'s' if len(unknown) > 1 else ''} {listed(unknown)} ignored.")
    return make_settings(**values), view, notices


def view_query(view):
    """{URL name: string} of the view parameters the address shows: those that differ from their default and
    belong to every tab or to the open one."""
    return {name: parameter.to_url(view[name]) for name, parameter in VIEW_PARAMETERS.items()
            if view[name] != parameter.default and parameter.tab in (None, view["tab"])}


def to_query(settings):
    """{URL name: string} for every control whose value differs from its default."""
    query = {}
    for name in ("T", "V", "mismatch", "seed", "N", "baseline"):
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


def _parse_control(params, name, kind, low, high, notices):
    if name not in params:
        return getattr(DEFAULTS, name)
    try:
        return parse_number(params[name], kind, low, high)
    except ValueError as why:
        return _fallback(notices, name, params[name], why)


def _parse_view(params, name, notices):
    parameter = VIEW_PARAMETERS[name]
    if name not in params:
        return parameter.default
    try:
        return parameter.parse(params[name])
    except ValueError as why:
        notices.append(f"URL parameter {name} = {quoted(params[name])} {why}; using the default "
                       f"{name} = {parameter.to_url(parameter.default)}.")
        return parameter.default


def _parse_baseline(params, notices):
    raw = params.get("baseline", DEFAULTS.baseline)
    if raw in BASELINES:
        return raw
    return _fallback(notices, "baseline", raw, "is not one of " + ", ".join(BASELINES))


def _parse_aggregation(params, notices):
    raw = params.get("agg", DEFAULTS.aggregation)
    if raw in AGGREGATIONS:
        return raw
    return _fallback(notices, "agg", raw, "is not one of " + ", ".join(AGGREGATIONS))


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
            try:
                resolve_params(id, {name: raw})
            except ValueError as error:
                default = ESTIMATORS[id].params[name].default
                notices.append(f"URL parameter {key} = {quoted(raw)}: {error}; using the default {key} = {default}.")
            else:
                thresholds[(id, name)] = raw if isinstance(ESTIMATORS[id].params[name].default, str) \
                    else float(raw)
    for keys, why in ((no_such, "no such estimator threshold"), (unselected, "not among the selected estimators")):
        if keys:
            notices.append(f"URL parameter{'s' if len(keys) > 1 else ''} {listed(keys)} ignored: {why}.")
    for id in {id for id, _ in thresholds}:
        mine = {name: value for (owner, name), value in thresholds.items() if owner == id}
        try:
            resolve_params(id, mine)
        except ValueError as error:
            notices.append(f"URL thresholds of {id} ignored: {error}; using its defaults.")
            thresholds = {k: v for k, v in thresholds.items() if k[0] != id}
    return thresholds
