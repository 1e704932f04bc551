"""A run as a time series: one summary per step, and where each metric first left its early range.

A step's summary holds what a user watches over training, each a sample estimate of that step's batch with its
standard error (``{"value", "se"}``): sequences, tokens, mean length, k1, k3, the token χ² both ways, the
identity check mean ρ − 1, the ESS fraction of the sequence weights, the tail shares, the |log ρ| quantiles and
the smallest ρ, the selected estimators' shares of tokens and sequences touched, the frameworks' metrics, and what
the reader noticed but did not refuse (``notices``: a column that may be the reward, interleaved sequences, …).

Early range: over the first EARLY_SHARE of the steps (at least EARLY_MIN), the lowest value − 2 se to the highest
value + 2 se. A metric *leaves* it at the first later step whose value ± 2 se lies wholly outside (above or
below); that step is the one to look at before a collapse. A metric without a standard error (the ESS fraction,
the extremes) has no ± 2 se: its early range is the early values' range widened by its own width on each side.
"""

import math
import time

from toylab.your_run.applied import on_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.parity import by_framework, framework_metrics
from toylab.your_run.run_progress import RunProgress
from toylab.your_run.statistics import log_statistics

EARLY_SHARE = 0.2
EARLY_MIN = 3
SPREAD = 2.0
SERIES = ("k1", "k3", "chi2_token", "chi2_low_variance", "identity_mean_rho_minus_1", "ess_fraction", "max_abs_log_rho",
          "min_rho", "mean_reward")
TAIL_SERIES = "tail_share>"          # + a threshold: the share of tokens with |log ρ| beyond it (its list entry)
AFFECTED_SERIES = "tokens_affected:"  # + an estimator's name: its share of response tokens masked or clipped


def step_summary(step, files, log, selection):
    """The summary dict of one step's RolloutLog (see the module docstring)."""
    statistics = log_statistics(log)
    sizes = magnitudes(log, worst=0)
    summary = {
        "step": step, "files": list(files), "sequences": statistics.sequences, "tokens": statistics.tokens,
        "mean_length": statistics.mean_length.as_dict(), "k1": statistics.k1.as_dict(), "k3": statistics.k3.as_dict(),
        "chi2_token": statistics.chi2_token.as_dict(), "chi2_low_variance": sizes.chi2_low_variance.as_dict(),
        "identity_mean_rho_minus_1": sizes.identity.as_dict(), "ess_fraction": statistics.ess_fraction,
        "tail_shares": [{"threshold": c, **share.as_dict()} for c, share in statistics.tail_shares.items()],
        "abs_log_rho_quantiles": sizes.abs_log_rho_quantiles, "max_abs_log_rho": sizes.abs_log_rho_quantiles["max"],
        "min_rho": sizes.min_rho,
        "mean_reward": None if statistics.mean_reward is None else statistics.mean_reward.as_dict(),
        "estimators": [{"name": row.name, "tokens_affected": row.tokens_affected,
                        "sequences_affected": row.sequences_affected, **({"note": row.note} if row.note else {})}
                       for row in on_log(log, selection, weights=False)],
        "frameworks": by_framework(framework_metrics(log)),
        "notices": list(log.notices),
    }
    return summary


def failed_step(step, files, error):
    """The summary of a step that could not be read: its files and the one-line error."""
    return {"step": step, "files": list(files), "error": error}


def step_summaries(step_logs, steps, selection, bounds, progress=None, clock=time.monotonic):
    """(summaries, notice) of a run's StepLogs (``run.step_logs``, in step order): a ``step_summary`` per step read,
    or its ``failed_step``; at most ``bounds.steps`` of them, and those read within ``bounds.run_seconds``. ``steps``
    is how many steps the run has (as far as its paths tell); ``notice`` says how many were read when the bounds
    stopped the reading ("" when every step was). ``progress(RunProgress)`` is called before the first step and after
    each."""
    summaries, start = [], clock()
    shown = RunProgress(steps)
    if progress is not None:
        progress(shown)
    for index, step in enumerate(step_logs):
        if index == bounds.steps or clock() - start > bounds.run_seconds:
            return summaries, cut_notice(index, steps, bounds)
        summaries.append(failed_step(step.step, step.files, step.error) if step.log is None
                         else step_summary(step.step, step.files, step.log, selection))
        shown.add(summaries[-1].get("tokens", 0))
        if progress is not None:
            progress(shown)
    return summaries, ""


def cut_notice(index, steps, bounds):
    """What a run's reading stopped at ``index`` by the bounds says: how many steps of how many, and which bound."""
    limit = f"at most {bounds.steps:,} steps" if index == bounds.steps else \
        f"as many steps as {bounds.run_seconds:,} s allow"
    return f"The first {index:,} steps of {max(steps, index + 1):,} were read: {limit} of a run are read here."


def series_keys(summaries):
    """The metrics followed over a run: SERIES, then a tail share per threshold (``tail_share>0.001``, …), then each
    estimator's share of tokens affected (``tokens_affected:tok_tis``, …), in the order the summaries list them."""
    readable = [summary for summary in summaries if "error" not in summary]
    tails = dict.fromkeys(f"{TAIL_SERIES}{row['threshold']:g}" for summary in readable
                          for row in summary.get("tail_shares", []))
    affected = dict.fromkeys(f"{AFFECTED_SERIES}{row['name']}" for summary in readable
                             for row in summary.get("estimators", []))
    return (*SERIES, *tails, *affected)


def _entry(summary, key):
    if key.startswith(TAIL_SERIES):
        threshold = float(key[len(TAIL_SERIES):])
        return next(({"value": row["value"], "se": row["se"]} for row in summary.get("tail_shares", [])
                     if row["threshold"] == threshold), None)
    if key.startswith(AFFECTED_SERIES):
        name = key[len(AFFECTED_SERIES):]
        return next((row["tokens_affected"] for row in summary.get("estimators", []) if row["name"] == name), None)
    return summary.get(key)


def value_and_se(summary, key):
    """(value, se) of a summary's metric (a SERIES key, or a ``series_keys`` tail share or estimator share); se NaN
    when it has none; (NaN, NaN) when the step has no such value."""
    entry = _entry(summary, key)
    if isinstance(entry, dict):
        se = entry.get("se")
        return float(entry["value"]), math.nan if se is None else float(se)
    return (math.nan, math.nan) if entry is None else (float(entry), math.nan)


def early_range(points):
    """(low, high) of the first EARLY_SHARE of ``points`` [(value, se)] (at least EARLY_MIN), each ± SPREAD se;
    for values without a standard error, their range widened by its own width on each side."""
    count = max(EARLY_MIN, math.ceil(EARLY_SHARE * len(points)))
    early = points[:count]
    if all(math.isnan(se) for _, se in early):
        low, high = min(v for v, _ in early), max(v for v, _ in early)
        return low - (high - low), high + (high - low)
    early = [(value, 0.0 if math.isnan(se) else se) for value, se in early]
    return min(v - SPREAD * s for v, s in early), max(v + SPREAD * s for v, s in early)


def first_departure(points):
    """The index of the first point after the early ones whose value ± SPREAD se lies wholly outside the early
    range, or None (also when there are too few points to have an early range and a later one)."""
    points = [(value, se) for value, se in points if not math.isnan(value)]
    count = max(EARLY_MIN, math.ceil(EARLY_SHARE * len(points)))
    if len(points) <= count:
        return None
    low, high = early_range(points)
    for index in range(count, len(points)):
        value, se = points[index]
        se = 0.0 if math.isnan(se) else se
        if value - SPREAD * se > high or value + SPREAD * se < low:
            return index
    return None


def departures(summaries, keys=None):
    """{metric: the step at which it first left its early range (None: it did not)} over the readable steps, for
    ``keys`` (by default ``series_keys``)."""
    readable = [summary for summary in summaries if "error" not in summary]
    keys = series_keys(readable) if keys is None else keys
    result = {}
    for key in keys:
        series = [(summary["step"], *value_and_se(summary, key)) for summary in readable]
        series = [(step, value, se) for step, value, se in series if not math.isnan(value)]
        index = first_departure([(value, se) for _, value, se in series])
        result[key] = None if index is None else series[index][0]
    return result
