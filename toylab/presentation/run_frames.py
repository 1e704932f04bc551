"""The DataFrames behind the Your run charts: a rollout log's per-token and per-sequence ratios, binned.

Every count, mean and quantile is of the log's own tokens or sequences (a sample, not a distribution):
    token_histogram_frame      log ρ_t = log π − log μ of every response token, in equal-width bins over the
                               data's 0.1 %–99.9 % quantiles (zoomed to the data: the few tokens beyond are
                               counted in the end bins, marked ``tail``)
    position_frame             log ρ_t against the token's position in its response, positions binned
    probability_frame          log ρ_t against the sampler's probability μ(y_t) of the token, log10-binned
    sequence_histogram_frame   log W = Σ_t log ρ_t or log ρ_geo = log W / L per sequence, in bins
    *_threshold_frame          the selected estimators' thresholds on those axes and the share of the log's
                               tokens or sequences beyond each (the same rules the Ratios tab draws)
    overlaid_histogram_frame   several logs' log ρ_t on one set of bins, each bin's share of its log
    thresholds_in_view         the thresholds inside a histogram's range, and the ones beyond (listed, not drawn)
    quantile_frame             |log ρ| quantiles p50, p99, p99.9, max and the smallest and largest ρ
    steps_frame                a run's metrics against step, ± 2 se, the step where each left its early range
    affected_steps_frame       each selected estimator's share of tokens masked or clipped, against step
    steps_table                a run as a table to export: a row per step, each metric's value and se
    failed_steps_frame, frameworks_frame, frameworks_shown    the steps not read; a "frameworks" block as rows
                               (as numbers, or as the page's text)
    sequence_results_frame, token_results_frame, export_bytes    the per-sequence and per-token results, as CSV
                               or Parquet bytes
    side_by_side_frame         two (or more) logs' numbers in one table, each with its se
    beyond_view_note, worst_tokens_frame, worst_sequences_frame, applied_frame, suggested_threshold_frame,
    thresholds_outside_note    the words and tables around the histograms and the estimators applied to a log
A binned frame has per bin the token count, the mean of log ρ_t and its 10 % and 90 % quantiles.
"""

import io

import numpy as np
import pandas as pd

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation.colours import swatch
from toylab.presentation.estimates import se_text, value_text
from toylab.presentation.frames import THRESHOLD_COLUMNS, sequence_rules, token_rules
from toylab.text import percent, printable
from toylab.your_run.statistics import sequence_log_ratios
from toylab.your_run.steps import AFFECTED_SERIES, TAIL_SERIES, series_keys, value_and_se

BAND = (0.1, 0.9)


ZOOM = (0.001, 0.999)


def _zoomed(values):
    """The ``ZOOM`` quantiles, each an order statistic inside them (interpolating towards a lone outlier would
    stretch the view)."""
    return float(np.quantile(values, ZOOM[0], method="higher")), float(np.quantile(values, ZOOM[1], method="lower"))


def _histogram(values, bins, count_name, zoom=None):
    """Equal-width bins over the values' range, or over their ``zoom`` quantiles with the values beyond counted in
    the end bins (``tail`` True there); one bin of width 1 around them when they all but coincide."""
    low, high = (float(values.min()), float(values.max())) if zoom is None else _zoomed(values)
    if high - low < 1e-9 * max(1.0, abs(low)):
        low, high = float(values.min()), float(values.max())
    if high - low < 1e-9 * max(1.0, abs(low)):
        low, high, bins = low - 0.5, high + 0.5, 1
    counts, edges = np.histogram(np.clip(values, low, high), bins=bins, range=(low, high))
    tail = np.zeros(bins, bool)
    tail[0], tail[-1] = bool((values < low).any()), bool((values > high).any())
    frame = pd.DataFrame({"bin_start": edges[:-1], "bin_end": edges[1:], count_name: counts, "tail": tail})
    return frame[frame[count_name] > 0].reset_index(drop=True)


def token_histogram_frame(log, bins=60):
    """bin_start, bin_end, tokens, tail: the response tokens' log ρ_t zoomed to the data (``ZOOM`` quantiles; empty
    bins left out: the count axis is log)."""
    return _histogram(log.log_ratio, bins, "tokens", ZOOM)


def overlaid_histogram_frame(logs, bins=60):
    """log, bin_start, bin_end, tokens, share, tail: several logs' log ρ_t on one set of bins (over all their
    tokens' ``ZOOM`` quantiles), each bin's count and its share of that log's tokens."""
    values = {name: log.log_ratio for name, log in logs.items()}
    low, high = _zoomed(np.concatenate(list(values.values())))
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    frames = []
    for name, log_rho in values.items():
        counts, edges = np.histogram(np.clip(log_rho, low, high), bins=bins, range=(low, high))
        tail = np.zeros(bins, bool)
        tail[0], tail[-1] = bool((log_rho < low).any()), bool((log_rho > high).any())
        frames.append(pd.DataFrame({"log": name, "bin_start": edges[:-1], "bin_end": edges[1:], "tokens": counts,
                                    "share": counts / len(log_rho), "tail": tail}))
    frame = pd.concat(frames, ignore_index=True)
    return frame[frame["tokens"] > 0].reset_index(drop=True)


def sequence_histogram_frame(log, kind="W", bins=40):
    """bin_start, bin_end, sequences: log W (kind "W") or log ρ_geo (kind "geo") per sequence."""
    if kind not in ("W", "geo"):
        raise ValueError(f"kind must be 'W' or 'geo', got {kind!r}")
    log_W, log_rho_geo = sequence_log_ratios(log)
    return _histogram(log_W if kind == "W" else log_rho_geo, bins, "sequences")


def _binned(bin_of_token, log_rho, columns):
    """Per occupied bin: tokens, mean of log ρ, its BAND quantiles; ``columns`` maps bin → its x values."""
    grouped = pd.Series(log_rho).groupby(bin_of_token)
    quantiles = grouped.quantile(list(BAND)).unstack()
    frame = pd.DataFrame({"tokens": grouped.size(), "mean_log_rho": grouped.mean(),
                          "low": quantiles[BAND[0]], "high": quantiles[BAND[1]]})
    for name, values in columns.items():
        frame[name] = np.asarray(values)[frame.index]
    return frame.reset_index(drop=True)


def position_frame(log, bins=48):
    """log ρ_t against position (0 = the response's first token); at most ``bins`` equal-width groups of
    positions, each labelled by its first and last position and centre."""
    positions = log.positions
    width = max(1, int(np.ceil((positions.max() + 1) / bins)))
    group = positions // width
    starts = np.arange(group.max() + 1) * width
    return _binned(group, log.log_ratio, {"position_start": starts, "position_end": starts + width - 1,
                                          "position": starts + (width - 1) / 2})


def probability_frame(log, bins=30):
    """log ρ_t against log10 μ(y_t), the sampler's probability of the token, in ``bins`` equal-width bins
    from the smallest value seen to 0 (μ = 1)."""
    log10_mu = log.sampler_logprobs / np.log(10)
    edges = np.linspace(min(log10_mu.min(), -1e-3), 0.0, bins + 1)
    group = np.clip(np.searchsorted(edges, log10_mu, side="right") - 1, 0, bins - 1)
    return _binned(group, log.log_ratio, {"log10_mu_start": edges[:-1], "log10_mu_end": edges[1:],
                                          "log10_mu": (edges[:-1] + edges[1:]) / 2})


def tail_share_frame(statistics):
    """threshold, share, se: the share of response tokens with |log ρ_t| above each threshold."""
    return pd.DataFrame([{"threshold": c, "share": estimate.value, "se": estimate.se}
                         for c, estimate in statistics.tail_shares.items()])


def spread_frame(statistics):
    """One row each for log W and log ρ_geo: mean, its se, sd, quantiles, min and max over the sequences."""
    rows = []
    for name, spread in (("log W", statistics.log_W), ("log ρ_geo", statistics.log_rho_geo)):
        rows.append({"quantity": name, "mean": spread.mean.value, "se": spread.mean.se, "sd": spread.sd,
                     **{f"{q:.0%}": value for q, value in spread.quantiles.items()},
                     "min": spread.low, "max": spread.high})
    return pd.DataFrame(rows)


def _beyond(values, log_value, side):
    return float(np.mean(values > log_value if side == "above" else values < log_value))


def token_threshold_frame(log, selection):
    """The selected per-token thresholds (as log ρ) and the share of the log's response tokens beyond each."""
    log_rho = log.log_ratio
    rows = [{"estimator": id, "threshold": threshold, "value": value, "log_value": log_value, "side": side,
             "beyond": _beyond(log_rho, log_value, side)}
            for id, threshold, value, log_value, side in token_rules(selection)]
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def sequence_threshold_frame(log, selection, kind="W"):
    """The selected thresholds on W (kind "W") or ρ_geo (kind "geo") and the share of the log's sequences beyond."""
    values = sequence_log_ratios(log)[0 if kind == "W" else 1]
    rows = [{"estimator": id, "threshold": threshold, "value": value, "log_value": log_value, "side": side,
             "beyond": _beyond(values, log_value, side)}
            for id, threshold, value, log_value, side in sequence_rules(selection, kind)]
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def thresholds_in_view(thresholds, histogram):
    """(the thresholds inside the histogram's range, the ones beyond it): a rule far outside the data would stretch
    the axis until the data is one spike, so those are listed instead of drawn."""
    if thresholds is None or not len(thresholds):
        return thresholds, thresholds
    low, high = histogram["bin_start"].min(), histogram["bin_end"].max()
    inside = thresholds["log_value"].between(low, high)
    return thresholds[inside].reset_index(drop=True), thresholds[~inside].reset_index(drop=True)


def quantile_frame(sizes):
    """quantity, value: the |log ρ| quantiles p50, p99, p99.9, the maximum and the smallest ρ of a log's tokens."""
    rows = [{"quantity": f"|log ρ| {name}", "value": value} for name, value in sizes.abs_log_rho_quantiles.items()]
    return pd.DataFrame(rows + [{"quantity": "smallest ρ", "value": sizes.min_rho},
                                {"quantity": "largest ρ", "value": sizes.max_rho}])


# -- a run: its metrics against step -------------------------------------------------------------------------

STEP_METRICS = {"k1": "k1 = mean(log μ − log π)", "k3": "k3 = mean(ρ − 1 − log ρ)",
                "chi2_low_variance": "χ² = mean((ρ − 1)²)", "identity_mean_rho_minus_1": "mean ρ − 1 (≈ 0)",
                "ess_fraction": "ESS fraction of W", "max_abs_log_rho": "max |log ρ|", "min_rho": "smallest ρ",
                "mean_reward": "mean reward E_μ[r]"}


def step_labels(keys):
    """{key: panel title} of the run's metrics among ``keys`` (``steps.series_keys``): STEP_METRICS's, then each
    tail share; the estimators' shares have their own chart (``affected_steps_frame``)."""
    labels = {key: label for key, label in STEP_METRICS.items() if key in keys}
    return labels | {key: f"share |log ρ| > {key[len(TAIL_SERIES):]}" for key in keys if key.startswith(TAIL_SERIES)}


def steps_frame(summaries, departures, metrics=None):
    """metric, step, value, low, high, left: each readable step's metrics (``metrics``: {key: label}, by default
    ``step_labels`` of the run's series; low/high = value ± 2 se where it has one), ``left`` True at the step where
    the metric first left its early range (``steps.departures``)."""
    metrics = step_labels(series_keys(summaries)) if metrics is None else metrics
    rows = []
    for summary in summaries:
        if "error" in summary:
            continue
        for key, label in metrics.items():
            value, se = value_and_se(summary, key)
            if value != value:
                continue
            spread = 0.0 if se != se else 2 * se
            rows.append({"metric": label, "step": summary["step"], "value": value, "low": value - spread,
                         "high": value + spread, "left": departures.get(key) == summary["step"]})
    return pd.DataFrame(rows, columns=["metric", "step", "value", "low", "high", "left"])


def constant_metrics(frame):
    """(the steps frame without its constant metrics, {label: value}): a metric with one value and no spread at every
    step (e.g. a share of 0 throughout) is a sentence, not a panel."""
    constant = {}
    for metric, rows in frame.groupby("metric", sort=False):
        if len(rows) > 1 and rows["value"].nunique() == 1 and (rows["low"] == rows["high"]).all():
            constant[metric] = float(rows["value"].iloc[0])
    return frame[~frame["metric"].isin(list(constant))].reset_index(drop=True), constant


def affected_steps_frame(summaries, departures):
    """estimator, step, value, left: each selected estimator's share of response tokens masked or clipped at each
    readable step (an estimator left out of a step, e.g. one that needs rewards, has no row there); ``left`` True at
    the step where that share first left its early range."""
    keys = [key for key in series_keys(summaries) if key.startswith(AFFECTED_SERIES)]
    rows = []
    for summary in summaries:
        if "error" in summary:
            continue
        for key in keys:
            value, _ = value_and_se(summary, key)
            if value == value:
                rows.append({"estimator": key[len(AFFECTED_SERIES):], "step": summary["step"], "value": value,
                             "left": departures.get(key) == summary["step"]})
    return pd.DataFrame(rows, columns=["estimator", "step", "value", "left"])


def steps_table(summaries):
    """A row per step (read or not): step, files, sequences, tokens, then for every followed metric
    (``steps.series_keys``) its value and, where it has one, its se (``k1``, ``k1_se``, …, ``tail_share>0.01``,
    ``tokens_affected:tok_tis``), and the error of a step that could not be read."""
    keys = series_keys(summaries)
    rows = []
    for summary in summaries:
        row = {"step": summary["step"], "files": " ".join(summary["files"]), "sequences": summary.get("sequences"),
               "tokens": summary.get("tokens")}
        for key in keys:
            value, se = value_and_se(summary, key) if "error" not in summary else (np.nan, np.nan)
            row[key], row[f"{key}_se"] = value, se
        rows.append(row | {"error": summary.get("error", "")})
    table = pd.DataFrame(rows)
    return table.drop(columns=[column for column in table.columns if column.endswith("_se") and
                               table[column].isna().all()])


def failed_steps_frame(summaries):
    """step, files, error: the steps that could not be read (the files' names and the error as ``text.printable``
    writes them: a name may hold a control or a bidirectional override)."""
    return pd.DataFrame([{"step": summary["step"], "files": printable(", ".join(summary["files"])),
                          "error": printable(summary["error"])}
                         for summary in summaries if "error" in summary], columns=["step", "files", "error"])


def frameworks_frame(block):
    """framework, metric, value, se, note: a "frameworks" block (``parity.by_framework``) as rows."""
    return pd.DataFrame([{"framework": framework, "metric": row["name"], "value": row["value"], "se": row.get("se"),
                          "note": row.get("note", "")} for framework, rows in block.items() for row in rows],
                        columns=["framework", "metric", "value", "se", "note"])


def frameworks_shown(block):
    """``frameworks_frame`` as the page shows it: each value and se as text (``value_text``, ``se_text``)."""
    frame = frameworks_frame(block)
    return frame.assign(value=frame["value"].map(value_text), se=frame["se"].map(se_text))


# -- the per-sequence and per-token results, for export ------------------------------------------------------

def sequence_results_frame(log):
    """One row per sequence: sequence, row (in the file), tokens, log_W, log_rho_geo, max_abs_log_rho, mean_k3 and
    the reward where the log has one."""
    log_rho = log.log_ratio
    log_W = log.sequence_sums(log_rho)
    frame = pd.DataFrame({"sequence": np.arange(log.sequences), "row": log.rows, "tokens": log.lengths,
                          "log_W": log_W, "log_rho_geo": log_W / log.lengths,
                          "max_abs_log_rho": np.maximum.reduceat(np.abs(log_rho), log.offsets[:-1]),
                          "mean_k3": log.sequence_sums(np.exp(log_rho) - 1 - log_rho) / log.lengths})
    if log.rewards is not None:
        frame["reward"] = log.rewards
    return frame


def token_results_frame(log):
    """One row per response token: sequence, position, sampler_logprob (log μ), trainer_logprob (log π), log_rho."""
    return pd.DataFrame({"sequence": np.repeat(np.arange(log.sequences), log.lengths), "position": log.positions,
                         "sampler_logprob": log.sampler_logprobs, "trainer_logprob": log.trainer_logprobs,
                         "log_rho": log.log_ratio})


def export_bytes(frame, format):
    """A frame as the bytes of a CSV ("csv") or Parquet ("parquet") file."""
    if format == "csv":
        return frame.to_csv(index=False).encode()
    if format == "parquet":
        sink = io.BytesIO()
        frame.to_parquet(sink, index=False)
        return sink.getvalue()
    raise ValueError(f"format must be 'csv' or 'parquet', got {format!r}")


# -- two logs side by side ------------------------------------------------------------------------------------

def side_by_side_frame(named):
    """quantity, then per log its value and se: {name: (LogStatistics, Magnitudes)} side by side."""
    rows = []
    first = next(iter(named.values()))
    quantities = [("sequences", lambda st, sz: (st.sequences, None)), ("response tokens", lambda st, sz: (st.tokens, None)),
                  ("k1", lambda st, sz: (st.k1.value, st.k1.se)), ("k3", lambda st, sz: (st.k3.value, st.k3.se)),
                  ("χ² = mean((ρ − 1)²)", lambda st, sz: (sz.chi2_low_variance.value, sz.chi2_low_variance.se)),
                  ("mean ρ − 1", lambda st, sz: (sz.identity.value, sz.identity.se)),
                  ("ESS fraction of W", lambda st, sz: (st.ess_fraction, None))]
    quantities += [(f"share |log ρ| > {c:g}", lambda st, sz, c=c: (st.tail_shares[c].value, st.tail_shares[c].se))
                   for c in first[0].tail_shares]
    quantities += [(f"|log ρ| {name}", lambda st, sz, name=name: (sz.abs_log_rho_quantiles[name], None))
                   for name in first[1].abs_log_rho_quantiles]
    quantities.append(("smallest ρ", lambda st, sz: (sz.min_rho, None)))
    for label, get in quantities:
        row = {"quantity": label}
        for name, (statistics, sizes) in named.items():
            value, se = get(statistics, sizes)
            row[f"{name}"], row[f"{name} ± se"] = value, se
        rows.append(row)
    return pd.DataFrame(rows)


# -- the words and tables around the histograms and the estimators applied -----------------------------------

def beyond_view_note(beyond):
    """The thresholds beyond a zoomed histogram (``thresholds_in_view``'s second part), each with its log ρ and the
    share of tokens beyond it, in one sentence."""
    return ("Zoomed to the data (0.1 %–99.9 % of its tokens; the outlined end bins hold the rest). Beyond this view: "
            + "; ".join(f"{row.threshold} at log ρ = {value_text(row.log_value)} ({percent(row.beyond)} of tokens "
                        "beyond)" for row in beyond.itertuples()))


def worst_tokens_frame(sizes):
    """The log's tokens with the largest |log ρ_t| (``Magnitudes.worst_tokens``): row, position, μ(y_t), π(y_t),
    log ρ_t."""
    return pd.DataFrame(sizes.worst_tokens)


def worst_sequences_frame(sizes):
    """The log's sequences with the largest |log W| (``Magnitudes.worst_sequences``): row, length, log W, largest
    |log ρ_t|."""
    return pd.DataFrame(sizes.worst_sequences)


def applied_frame(rows):
    """One row per estimator applied to the log (``applied.on_log`` rows with their shares measured), its fields
    and its colour as a swatch (``colours.swatch``)."""
    applied = [row for row in rows if row.tokens_affected is not None]
    return pd.DataFrame([row.as_dict() | {"swatch": swatch(ESTIMATORS[row.name].colour)} for row in applied])


def suggested_threshold_frame(suggested):
    """Per selected threshold: its value now, what it counts (tokens or sequences, ratio side) and the value at
    which it would touch each share of the log (``touches 0.1 %``, …)."""
    return pd.DataFrame([{"threshold": f"{row['estimator']}.{row['parameter']}", "now": row["current"],
                          "counts": f"{row['counts']}, ratio {row['side']}",
                          **{f"touches {percent(point['share'])}": point["value"] for point in row["at"]}}
                         for row in suggested])


def thresholds_outside_note(suggested):
    """The sentence under ``suggested_threshold_frame``: what it shows, and which suggested values fall outside
    their estimator's allowed range."""
    outside = [f"{row['estimator']}.{row['parameter']} at {percent(point['share'])}" for row in suggested
               for point in row["at"] if not point["in_range"]]
    return ("The value of each selected threshold at which it would mask or clip 0.1 %, 1 % and 10 % of this "
            "log's tokens (a per-token threshold) or sequences (a sequence-level one)"
            + (f"; outside the estimator's range: {', '.join(outside)}." if outside else "."))

