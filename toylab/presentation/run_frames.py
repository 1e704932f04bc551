"""The DataFrames behind the Your run charts: a rollout log's per-token and per-sequence ratios, binned.

Every count, mean and quantile is of the log's own tokens or sequences (a sample, not a distribution):
    token_histogram_frame      log ρ_t = log π − log μ of every response token, in equal-width bins
    position_frame             log ρ_t against the token's position in its response, positions binned
    probability_frame          log ρ_t against the sampler's probability μ(y_t) of the token, log10-binned
    sequence_histogram_frame   log W = Σ_t log ρ_t or log ρ_geo = log W / L per sequence, in bins
    *_threshold_frame          the selected estimators' thresholds on those axes and the share of the log's
                               tokens or sequences beyond each (the same rules the Ratios tab draws)
A binned frame has per bin the token count, the mean of log ρ_t and its 10 % and 90 % quantiles.
"""

import numpy as np
import pandas as pd

from toylab.presentation.frames import THRESHOLD_COLUMNS, sequence_rules, token_rules
from toylab.your_run.statistics import sequence_log_ratios

BAND = (0.1, 0.9)


def _histogram(values, bins, count_name):
    """Equal-width bins over the values' range (one bin of width 1 around them when they all but coincide)."""
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9 * max(1.0, abs(low)):
        low, high, bins = low - 0.5, high + 0.5, 1
    counts, edges = np.histogram(values, bins=bins, range=(low, high))
    frame = pd.DataFrame({"bin_start": edges[:-1], "bin_end": edges[1:], count_name: counts})
    return frame[frame[count_name] > 0].reset_index(drop=True)


def token_histogram_frame(log, bins=60):
    """bin_start, bin_end, tokens: the response tokens' log ρ_t (empty bins left out: the count axis is log)."""
    return _histogram(log.log_ratio, bins, "tokens")


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
