"""Thresholds that would touch a chosen share of this log: for each selected estimator with a threshold, the value
at which it masks or clips 0.1 %, 1 % and 10 % of the log's tokens (a per-token threshold) or sequences (a
threshold on a per-sequence statistic).

Each threshold below touches a token or sequence exactly when one statistic of it is beyond the threshold, on
one side: above (the estimator clips or masks ratios above C) or below (below lo). For a share q of n items, the
suggestion is a value with m = round(q·n) items beyond it: halfway between the m-th and (m + 1)-th most extreme
values (in logs, for a ratio), so that no value sits on it; for m = 0 (below one item: nothing is touched), as far
beyond the most extreme as half the gap to the next. ``touched`` is then m/n (ties can make it smaller); a value beyond float64 (W above e^709) is None; ``in_range`` says whether the value is one the estimator
accepts (tok_tis.C ≥ 1, say: a C below 1 would clip most tokens). These are counts on this sample, as every number
of a log.

    tok_tis.C, geo_rs_tok_tis.C, tok_mis.hi, tok_clip.C_max    tokens, ρ_t above
    tok_mis.lo, tok_clip.C_min                                 tokens, ρ_t below
    seq_tis.C, seq_mis.C, seq_clip.C_max, seq_band.C_max       sequences, W above
    seq_clip.C_min, seq_band.C_min                             sequences, W below
    geo_rs.hi, geo_rs_tok_tis.hi   /   geo_rs.lo, geo_rs_tok_tis.lo    sequences, ρ_geo above / below
    k3_rs.delta                                                sequences, mean_t (ρ_t − 1 − log ρ_t) above
    trm.eps                                                    sequences, max_t |log ρ_t| above
"""

import numpy as np

from toylab.catalogue.estimators import ESTIMATORS, resolve_params

TARGET_SHARES = (0.001, 0.01, 0.1)
LARGEST_LOG = float(np.log(np.finfo(float).max))      # 709.78: e^x is finite below it
RULES = {
    ("tok_tis", "C"): ("tokens", "rho", "above"), ("geo_rs_tok_tis", "C"): ("tokens", "rho", "above"),
    ("tok_mis", "hi"): ("tokens", "rho", "above"), ("tok_clip", "C_max"): ("tokens", "rho", "above"),
    ("tok_mis", "lo"): ("tokens", "rho", "below"), ("tok_clip", "C_min"): ("tokens", "rho", "below"),
    ("seq_tis", "C"): ("sequences", "W", "above"), ("seq_mis", "C"): ("sequences", "W", "above"),
    ("seq_clip", "C_max"): ("sequences", "W", "above"), ("seq_band", "C_max"): ("sequences", "W", "above"),
    ("seq_clip", "C_min"): ("sequences", "W", "below"), ("seq_band", "C_min"): ("sequences", "W", "below"),
    ("geo_rs", "hi"): ("sequences", "rho_geo", "above"), ("geo_rs_tok_tis", "hi"): ("sequences", "rho_geo", "above"),
    ("geo_rs", "lo"): ("sequences", "rho_geo", "below"), ("geo_rs_tok_tis", "lo"): ("sequences", "rho_geo", "below"),
    ("k3_rs", "delta"): ("sequences", "mean_k3", "above"), ("trm", "eps"): ("sequences", "max_abs_log_rho", "above"),
}


def statistic(log, name):
    """A rule's statistic per token (rho) or per sequence (the others), in log space where it is a ratio."""
    log_rho = log.log_ratio
    if name == "rho":
        return log_rho
    if name in ("W", "rho_geo"):
        log_W = log.sequence_sums(log_rho)
        return log_W if name == "W" else log_W / log.lengths
    if name == "mean_k3":
        return log.sequence_sums(log.ratio - 1 - log_rho) / log.lengths
    return np.maximum.reduceat(np.abs(log_rho), log.offsets[:-1])


def value_beyond(values, share, side):
    """(threshold, touched): the value with round(share·n) of ``values`` strictly beyond it on ``side``, and the
    share of values beyond it."""
    ordered = np.sort(values)[::-1] if side == "above" else np.sort(values)
    m = min(int(round(share * len(values))), len(values) - 1)
    if len(values) == 1:
        threshold = ordered[0]
    elif m == 0:
        threshold = ordered[0] + (ordered[0] - ordered[1]) / 2
    else:
        threshold = (ordered[m - 1] + ordered[m]) / 2
    beyond = values > threshold if side == "above" else values < threshold
    return threshold, float(beyond.mean())


def _ratio(log_value):
    """e^log_value, or None beyond float64 (a sequence weight W can reach e^709 and more)."""
    return float(np.exp(log_value)) if log_value < LARGEST_LOG else None


def suggestions(log, selection, shares=TARGET_SHARES):
    """[{estimator, parameter, counts ("tokens"|"sequences"), side, current, at: [{share, value, touched}]}] for the
    thresholds of ``selection`` ({id: params}) that RULES covers."""
    rows, computed = [], {}
    for (id, parameter), (counts, name, side) in RULES.items():
        if id not in selection:
            continue
        params = resolve_params(id, selection[id])
        if name not in computed:
            computed[name] = statistic(log, name)
        values = computed[name]
        at = []
        for share in shares:
            threshold, touched = value_beyond(values, share, side)
            value = float(threshold) if name in ("mean_k3", "max_abs_log_rho") else _ratio(threshold)
            spec = ESTIMATORS[id].params[parameter]
            at.append({"share": share, "value": value, "touched": touched,
                       "in_range": value is not None and spec.low <= value <= spec.high})
        rows.append({"estimator": id, "parameter": parameter, "counts": counts, "side": side,
                     "current": params[parameter], "at": at})
    order = list(selection)
    return sorted(rows, key=lambda row: order.index(row["estimator"]))
