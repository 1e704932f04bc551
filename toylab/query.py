"""The page's controls as URL query parameters: parse a (hand-edited) query into Settings, and back.

URL names: T, V, mismatch, seed, N, baseline, est (comma-separated estimator ids, framework presets
included: ``est=naive,verl:decoupled_geo_rs``), agg (the loss aggregation) and ID.PARAM for a threshold
(``tok_tis.C=3``, ``verl:decoupled_geo_rs.rs_threshold=0.8_1.1``). A malformed or out-of-range value falls back to that control's default and
adds a notice naming the parameter and the bad value; a toy over the exact-size limit (M = V**T) falls
back to the default T and V with a notice that says how to make it fit. Only non-default values go into
the URL, so the default view is the bare address.
"""

import math

from toylab.aggregation import AGGREGATIONS
from toylab.estimators import BASELINES, ESTIMATORS, resolve_params
from toylab.settings import Settings
from toylab.toy import EXACT_SIZE_LIMIT

DEFAULTS = Settings()
PAGE_SIZE_LIMIT = EXACT_SIZE_LIMIT          # the largest M = V**T the page enumerates
INTEGER_RANGES = {"T": (1, 16), "V": (2, 8), "seed": (0, 10_000), "N": (1, 100_000)}
MISMATCH_RANGE = (0.0, 2.0)
CONTROL_NAMES = ("T", "V", "mismatch", "seed", "N", "baseline", "est", "agg")
FIELDS = {"est": "estimators", "agg": "aggregation"}     # URL name → Settings field, where they differ
TRAINING_CONTROLS = {"steps": "train_steps", "lr": "train_lr", "optimizer": "train_optimizer", "mode": "train_mode",
                     "runs": "train_runs", "pick": "train_pick", "sga_step": "sga_step"}   # Training tab → URL name
WIDGET_BOUND_NAMES = ("tab", "ratio_panels", *TRAINING_CONTROLS.values())   # kept in the URL by Streamlit itself


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
    if V**T <= limit:
        return None
    fewer_tokens = max((t for t in range(1, T) if V**t <= limit), default=None)
    smaller_vocabulary = max((v for v in range(2, V) if v**T <= limit), default=None)
    suggestions = [f"fewer tokens (T ≤ {fewer_tokens} at V = {V})" if fewer_tokens else None,
                   f"a smaller vocabulary (V ≤ {smaller_vocabulary} at T = {T})" if smaller_vocabulary else None]
    return (f"T = {T}, V = {V} gives M = V**T = {V**T:,} sequences, over the exact-size limit of "
            f"{limit:,}: every number here is a sum over all M sequences. Use "
            + " or ".join(s for s in suggestions if s) + ".")


def parse_query(params, limit=PAGE_SIZE_LIMIT):
    """(Settings, notices) from a query mapping {name: str or list of str}; never raises.

    Each control falls back to its default on its own; every fallback or ignored parameter adds a notice.
    """
    params = {name: _last(value) for name, value in params.items()}
    notices = []
    values = {}
    for name, (low, high) in INTEGER_RANGES.items():
        values[name] = _parse_number(params, name, int, low, high, notices)
    values["mismatch"] = _parse_number(params, "mismatch", float, *MISMATCH_RANGE, notices)
    values["baseline"] = _parse_baseline(params, notices)
    values["aggregation"] = _parse_aggregation(params, notices)
    values["estimators"] = _parse_estimators(params, notices)
    values["thresholds"] = _parse_thresholds(params, values["estimators"], notices)
    problem = size_problem(values["T"], values["V"], limit)
    if problem:
        notices.append(f"{problem} Showing the default toy T = {DEFAULTS.T}, V = {DEFAULTS.V} instead.")
        values["T"], values["V"] = DEFAULTS.T, DEFAULTS.V
    for name in params:
        if name not in CONTROL_NAMES and "." not in name and name not in WIDGET_BOUND_NAMES:
            notices.append(f"Unknown URL parameter {name!r} ignored.")
    return make_settings(**values), notices


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
    notices.append(f"URL parameter {name} = {raw!r} {why}; using the default {name} = {shown}.")
    return default


def _parse_number(params, name, kind, low, high, notices):
    if name not in params:
        return getattr(DEFAULTS, name)
    raw = params[name]
    try:
        number = float(raw.strip())
    except ValueError:
        return _fallback(notices, name, raw, "is not a number")
    if not math.isfinite(number) or (kind is int and not number.is_integer()):
        return _fallback(notices, name, raw, "is not " + ("an integer" if kind is int else "a finite number"))
    if not low <= number <= high:
        return _fallback(notices, name, raw, f"is outside {low:g} to {high:g}")
    return kind(number)


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
        notices.append(f"URL parameter est: unknown estimator {', '.join(map(repr, unknown))} ignored "
                       f"(known: {', '.join(ESTIMATORS)}).")
    return tuple(id for id in ids if id in ESTIMATORS)


def _parse_thresholds(params, estimators, notices):
    thresholds = {}
    for key, raw in params.items():
        if "." not in key:
            continue
        id, _, name = key.partition(".")
        if id not in ESTIMATORS or name not in ESTIMATORS[id].params:
            notices.append(f"URL parameter {key} ignored: no such estimator threshold.")
        elif id not in estimators:
            notices.append(f"URL parameter {key} ignored: {id} is not among the selected estimators.")
        else:
            try:
                resolve_params(id, {name: raw})
            except ValueError as error:
                default = ESTIMATORS[id].params[name].default
                notices.append(f"URL parameter {key} = {raw!r}: {error}; using the default {key} = {default}.")
            else:
                thresholds[(id, name)] = raw if isinstance(ESTIMATORS[id].params[name].default, str) \
                    else float(raw)
    for id in {id for id, _ in thresholds}:
        mine = {name: value for (owner, name), value in thresholds.items() if owner == id}
        try:
            resolve_params(id, mine)
        except ValueError as error:
            notices.append(f"URL thresholds of {id} ignored: {error}; using its defaults.")
            thresholds = {k: v for k, v in thresholds.items() if k[0] != id}
    return thresholds

