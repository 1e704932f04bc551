"""The DataFrames behind the page's table and charts: library numbers, arranged, never re-derived.

Every number is a toylab result (Moments, diagnostics, Monte Carlo) or one of the few small formulas
stated in the docstrings below (iso-RMSE circles, the seq_is crossover, histogram bins), each tested
against an independent computation in tests/presentation/test_frames.py.
"""

import math
import operator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toylab.analysis.diagnostics import (
    probability_beyond,
    sequence_log_ratio,
    weighted_histogram,
    weighted_quantile,
)
from toylab.analysis.montecarlo import draw_tokens
from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation.coincidence import dashed_caption, describe
from toylab.presentation.colours import swatch
from toylab.presentation.labels import place, text_size
from toylab.text import UNDEFINED

# Per-token thresholds: where each rule sits on the log ρ_t axis, and on which side a token is masked or
# clipped (trm masks the sequence when any |log ρ_t| > ε: two rules, at ±ε).
TOKEN_THRESHOLDS = {("tok_tis", "C"): (("above", math.log),), ("tok_mis", "lo"): (("below", math.log),),
                    ("tok_mis", "hi"): (("above", math.log),), ("geo_rs_tok_tis", "C"): (("above", math.log),),
                    ("trm", "eps"): (("above", float), ("below", operator.neg))}
SEQUENCE_THRESHOLDS = {("seq_tis", "C"): ("W", "above"), ("seq_mis", "C"): ("W", "above"),
                       ("geo_rs", "lo"): ("geo", "below"), ("geo_rs", "hi"): ("geo", "above"),
                       ("geo_rs_tok_tis", "lo"): ("geo", "below"), ("geo_rs_tok_tis", "hi"): ("geo", "above")}
ERROR_GRID = np.logspace(0, 5, 81)          # N from 1 to 100,000
THRESHOLD_COLUMNS = ["estimator", "threshold", "value", "log_value", "side", "beyond"]
FONT = 16                                   # the charts' text size (``charts.FONT``), for placing labels
ROW = 22                                    # pixels per row of labels above a plot
SCATTER_HEIGHT = 400                        # the bias-versus-spread plot's height, pixels
SCATTER_WIDTH = 360                         # the narrowest plot it is drawn in: its column at 1280 px, less the axis
POINT_RADIUS, MARK_RADIUS = 9, 16           # pixels: an estimator's dot, a lesson's ring
RATIO_WIDTH = 320                           # the narrowest plot a ratio chart is drawn in, pixels
SAME = 1e-12                                # relative: numbers this close are one number (rounding, not the toy)


def params_text(params):
    """'C=2, lo=0.5' (or '–' for an estimator without thresholds)."""
    return ", ".join(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                     for name, value in params.items()) or "–"


# -- the estimator table and the bias-versus-std scatter ---------------------------------------------------

def table_frame(moments, N):
    """One row per estimator from {id: Moments}: the fields of ``toylab.exact_table`` at batch size N, and
    ``rel_plain_bias``, the error against softmax(θ)'s gradient (rel_bias when the trainer scores softmax(θ)). An
    undefined cosine is missing (NaN, pandas' missing value) and its row's ``note`` says why."""
    rows = [{"estimator": id, "label": ESTIMATORS[id].label, "params": params_text(m.params),
             "rel_bias": m.rel_bias, "rel_std": m.rel_std(N), "rel_rmse": m.rel_rmse(N),
             "cosine": math.nan if m.cosine is None else m.cosine,
             "tokens_affected": m.tokens_affected, "sequences_affected": m.sequences_affected,
             "unbiased": m.unbiased, "rel_out_of_reach": m.rel_out_of_reach, "rel_within_reach": m.rel_within_reach,
             "rel_plain_bias": m.rel_plain_bias, "note": m.note}
            for id, m in moments.items()]
    return pd.DataFrame(rows, columns=["estimator", "label", "params", "rel_bias", "rel_std", "rel_rmse",
                                       "cosine", "tokens_affected", "sequences_affected", "unbiased", "rel_out_of_reach",
                                       "rel_within_reach", "rel_plain_bias", "note"])


def cosine_text(cosine):
    """'+0.9046', or UNDEFINED ('—') for a missing cosine."""
    return UNDEFINED if math.isnan(cosine) else f"{cosine:+.4f}"


def names_note(ids):
    """'naive: naive (no correction) · tok_is: token IS · …': each id's name, for a table that shows ids alone."""
    return " · ".join(f"{id}: {ESTIMATORS[id].label}" for id in dict.fromkeys(ids))


def table_csv(table):
    """The table as CSV at full precision; an undefined number is written UNDEFINED, its reason in ``note``."""
    return table.to_csv(index=False, na_rep=UNDEFINED)


def table_notes(table):
    """'id: why' for every row with an undefined number."""
    return [f"{row.estimator}: {row.note}" for row in table.itertuples() if row.note]


def duplicates(moments):
    """{id: the first earlier id with the same exact mean gradient and variance}: estimators that are one estimator
    on this toy (geo_rs = naive while its band keeps every sequence), so charts can show both."""
    same = {}
    for index, (id, m) in enumerate(moments.items()):
        for first, earlier in list(moments.items())[:index]:
            if first not in same and _equal(m.mean, earlier.mean) and _equal(m.var, earlier.var):
                same[id] = first
                break
    return same


def _equal(a, b):
    return bool(np.allclose(a, b, rtol=SAME, atol=SAME * max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-300)))


def same_note(same):
    """'geo_rs = naive, tok_mis = tok_is' (or '' when no two are the same)."""
    return ", ".join(f"{id} = {first}" for id, first in same.items())


@dataclass(frozen=True)
class Scatter:
    """What the bias-versus-spread chart draws, on fixed domains (so its labels' places hold)."""
    points: pd.DataFrame         # estimator, label, rel_bias, rel_std, rel_rmse, ring (0: a dot; k: k-th duplicate)
    labels: pd.DataFrame         # text, x, y (its left edge and middle), anchor_x, anchor_y, leader, kind (mark,
                                 # estimator, or level: an iso-RMSE circle's, at its right end)
    iso: pd.DataFrame            # level, rel_bias, rel_std, order: the quarter circles of equal relative RMSE, inside
    x_domain: tuple
    y_domain: tuple
    same: dict
    log_y: bool = False          # the stds spread over more than LOG_SPREAD: a log axis
    before: pd.DataFrame = None  # estimator, rel_bias, rel_std, to_bias, to_std: each point at the compared setting

    @property
    def extent(self):
        """The plot's corners (rel_bias, rel_std): drawn invisibly, they make its domains (data, not spec)."""
        return pd.DataFrame({"rel_bias": list(self.x_domain), "rel_std": list(self.y_domain)})


LOG_SPREAD = 20          # the scatter's std axis is logarithmic when its largest std is over 20 × its smallest
ROOM_RIGHT, ROOM_TOP = 0.25, 0.15    # of the data's span, beyond its largest bias (names) and its largest std


def fitted_domain(values, room, log=False):
    """A plot domain that fits ``values``: on a log axis their extent widened by ``room`` of its span (in logs) on
    either side; on a linear one from 0 when 0 lies within one span of the smallest (so "unbiased" is on the
    axis), else from the smallest less a tenth of the span, up to the largest plus ``room`` of the span."""
    low, high = float(np.min(values)), float(np.max(values))
    if log:
        span = max(math.log10(high / low), 0.1)
        return low / 10 ** (room * span), high * 10 ** (room * span)
    span = high - low
    if low <= max(span, 1e-3 * high) or span == 0:
        low, span = 0.0, max(high, 1e-3)
    else:
        low -= 0.1 * span
    return low, high + room * span


def bias_std_frames(table, same, marks=None, height=SCATTER_HEIGHT, width=SCATTER_WIDTH, before=None):
    """The scatter's points, rings for duplicates, and one name per group of equal estimators ("naive = geo_rs"),
    placed by ``labels.place`` so that none overprints another or a dot; a lesson's ``marks`` (``mark_frame``) get
    their numbers placed first, beside their rings; ``before``: the table at a compared setting (another baseline),
    each estimator's point there drawn hollow with a line to where it is now. Domains fit the points
    (``fitted_domain``), the std axis logarithmic when the stds spread over LOG_SPREAD. The iso-RMSE circles' levels
    are named at their right ends, placed with the rest."""
    points = table[["estimator", "label", "rel_bias", "rel_std", "rel_rmse"]].copy()
    points["ring"] = [_ring(id, same) for id in points["estimator"]]
    x_domain, y_domain, log_y = _scatter_domains(points, before)
    iso = iso_rmse_frame(table)
    iso = iso[iso["rel_bias"].between(*x_domain) & iso["rel_std"].between(*y_domain)].reset_index(drop=True)
    anchors, texts, kinds, radii = _scatter_labels(points, same, marks, iso)
    along_y = (lambda y: math.log10(y), lambda y: 10**y) if log_y else (float, float)
    placed = place([(x, along_y[0](y)) for x, y in anchors], texts, x_domain, tuple(map(along_y[0], y_domain)),
                   width, height, FONT, radii)
    labels = pd.DataFrame({"text": texts, "x": [p.x for p in placed], "y": [along_y[1](p.y) for p in placed],
                           "anchor_x": [a[0] for a in anchors], "anchor_y": [a[1] for a in anchors],
                           "leader": [p.leader for p in placed], "kind": kinds})
    moved = None
    if before is not None:
        moved = before[["estimator", "rel_bias", "rel_std"]].merge(
            points[["estimator", "rel_bias", "rel_std"]].rename(columns={"rel_bias": "to_bias", "rel_std": "to_std"}),
            on="estimator")
    return Scatter(points, labels, iso, x_domain, y_domain, same, log_y, moved)


def _scatter_domains(points, before):
    """(x domain, y domain, log y): fitted to the points and the compared ones (``before``), the std axis
    logarithmic when the stds spread over LOG_SPREAD."""
    biases, stds = list(points["rel_bias"]), list(points["rel_std"])
    if before is not None:
        biases += list(before["rel_bias"])
        stds += list(before["rel_std"])
    log_y = min(stds) > 0 and max(stds) > LOG_SPREAD * min(stds)
    return fitted_domain(biases, ROOM_RIGHT), fitted_domain(stds, ROOM_TOP, log_y), log_y


def _scatter_labels(points, same, marks, iso):
    """(anchors, texts, kinds, radii) of the scatter's labels, in the order they are placed: a lesson's mark
    numbers, one name per group of equal estimators at its first one's point, each iso-RMSE circle's level at its
    right end."""
    anchors, texts, kinds, radii = [], [], [], []
    if marks is not None:
        anchors += [(row.x, row.y) for row in marks.itertuples()]
        texts += list(marks["number"])
        kinds, radii = ["mark"] * len(marks), [MARK_RADIUS] * len(marks)
    groups, where = {}, dict(zip(points["estimator"], zip(points["rel_bias"], points["rel_std"], strict=True),
                                 strict=True))
    for id in points["estimator"]:
        groups.setdefault(same.get(id, id), []).append(id)
    anchors += [where[first] for first in groups]
    texts += [" = ".join(ids) for ids in groups.values()]
    kinds, radii = kinds + ["estimator"] * len(groups), radii + [POINT_RADIUS] * len(groups)
    ends = iso.loc[iso.groupby("level")["rel_bias"].idxmax()]      # each circle's level, at its right end
    anchors += list(zip(ends["rel_bias"], ends["rel_std"], strict=True))
    texts += [f"{level:g}" for level in ends["level"]]
    return anchors, texts, kinds + ["level"] * len(ends), radii + [0] * len(ends)


def _ring(id, same):
    """0 for an estimator drawn as a dot; k for the k-th duplicate of the same one (a ring, larger with k)."""
    if id not in same:
        return 0
    return [other for other, first in same.items() if first == same[id]].index(id) + 1


def nice_levels(low, high, most=6):
    """Values 1, 1.5, 2, 3, 5, 7 × 10^k in [low, high] (at most ``most``, spread evenly), for iso-RMSE curves."""
    if not (np.isfinite(low) and np.isfinite(high)) or high <= 0:
        return []
    low = max(low, high * 1e-3)
    exponents = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    levels = [round(m * 10.0**k, 12) for k in exponents for m in (1, 1.5, 2, 3, 5, 7) if low <= m * 10.0**k <= high]
    if len(levels) > most:
        levels = [levels[round(i)] for i in np.linspace(0, len(levels) - 1, most)]
    return levels


def iso_rmse_frame(table, points=60):
    """Quarter circles rel_bias² + rel_std² = level² (level = rel RMSE at N) through the table's range."""
    if table.empty:
        return pd.DataFrame(columns=["level", "rel_bias", "rel_std", "order"])
    levels = np.repeat(nice_levels(table["rel_rmse"].min() * 0.7, table["rel_rmse"].max() * 1.3), points)
    angle = np.tile(np.linspace(0, np.pi / 2, points), len(levels) // points)
    return pd.DataFrame({"level": levels, "rel_bias": levels * np.cos(angle), "rel_std": levels * np.sin(angle),
                         "order": np.tile(np.arange(points), len(levels) // points)})


# -- per-token ratios -----------------------------------------------------------------------------------

def token_ratio_frame(toy, sampled_tokens=None):
    """Every (position, token) the sampler draws: log ρ_t, its exact μ-probability and, given a sampled batch (N, T),
    the fraction of the batch with that token at that position."""
    T, V = toy.T, toy.V
    frame = pd.DataFrame({"position": np.repeat(np.arange(T), V), "token": np.tile(np.arange(V), T),
                          "log_rho": toy.log_rho.ravel(), "probability": toy.mu.ravel()})
    if sampled_tokens is not None:
        counts = np.stack([np.bincount(sampled_tokens[:, t], minlength=V) for t in range(T)])
        frame["batch"] = (counts / len(sampled_tokens)).ravel()
    return frame[toy.kept.ravel()].reset_index(drop=True) if toy.truncates else frame


def token_rules(selection):
    """(estimator, threshold name, value, log ρ_t of the rule, side) for each selected per-token threshold."""
    for (id, name), rules in TOKEN_THRESHOLDS.items():
        if id in selection:
            for side, to_log_rho in rules:
                yield id, f"{id}.{name}", selection[id][name], to_log_rho(selection[id][name]), side


def token_threshold_frame(toy, selection, per_position=False):
    """The selected estimators' per-token ratio thresholds (as log ρ) and the μ-probability beyond each:
    per position, or pooled over positions (a uniformly chosen position: the mean over t)."""
    rows = []
    for id, threshold, value, log_value, side in token_rules(selection):
        beyond = [probability_beyond(toy.log_rho[t], toy.mu[t], log_value, side) for t in range(toy.T)]
        where = list(enumerate(beyond)) if per_position else [(None, float(np.mean(beyond)))]
        for position, probability in where:
            rows.append({"estimator": id, "threshold": threshold, "value": value, "log_value": log_value,
                         "side": side, "position": position, "beyond": probability})
    return pd.DataFrame(rows, columns=["estimator", "threshold", "value", "log_value", "side", "position",
                                       "beyond"])


def pooled_token_frame(token_frame):
    """The ratio frame for a uniformly chosen position: each probability (and batch fraction) divided by T."""
    T = token_frame["position"].nunique()
    pooled = token_frame.copy()
    for column in ("probability", "batch"):
        if column in pooled:
            pooled[column] = pooled[column] / T
    return pooled


def threshold_rule_frame(thresholds):
    """The thresholds with ``overlap``: 0, 1, … among those at the same value (their rules are dashed in turn, so
    that every colour shows)."""
    counts, overlap = {}, []
    for value in thresholds["log_value"]:
        key = round(value, 12)
        overlap.append(counts.get(key, 0))
        counts[key] = overlap[-1] + 1
    return thresholds.assign(overlap=overlap)


def ratio_domain(values, thresholds, margin=0.04):
    """The x domain of a ratio chart: its values and thresholds, with ``margin`` of the span on either side."""
    low = min(float(np.min(values)), *thresholds["log_value"]) if len(thresholds) else float(np.min(values))
    high = max(float(np.max(values)), *thresholds["log_value"]) if len(thresholds) else float(np.max(values))
    pad = margin * (high - low) if high > low else 1.0
    return low - pad, high + pad


def threshold_label_frame(thresholds, x_domain, measure="P", width=RATIO_WIDTH):
    """One label per distinct threshold value, each in its own row above the plot (``row_y``: pixels, negative
    upwards): "seq_tis.C = seq_mis.C · P(above) = 0.210" — what lies beyond it, under μ (``measure`` "P") or in a
    sample ("share"). It starts at its rule (``align`` "left") if it fits to the right of it on a plot ``width``
    pixels wide over ``x_domain`` (the narrowest the page draws: wider only leaves more room), ends there ("right")
    if it fits to the left, and otherwise is centred on it, moved only as far as it takes to stay inside the plot."""
    at_value = {}                           # rounded value → {side: ([threshold names], beyond)}, in value order
    for name, value, side, beyond in zip(thresholds["threshold"], thresholds["log_value"], thresholds["side"],
                                         thresholds["beyond"], strict=True):
        sides = at_value.setdefault(round(value, 12), {"value": value, "sides": {}})["sides"]
        sides.setdefault(side, ([], beyond))[0].append(name)
    rows = []
    for row, key in enumerate(sorted(at_value)):
        value, sides = at_value[key]["value"], at_value[key]["sides"]
        text = "; ".join(f"{' = '.join(names)} · {measure}({side}) = {beyond:.3f}" for side, (names, beyond) in sides.items())
        at = (value - x_domain[0]) / (x_domain[1] - x_domain[0]) * width
        text_width, _ = text_size(text, FONT)
        if at + text_width <= width:
            where, align = value, "left"
        elif at >= text_width:
            where, align = value, "right"
        else:
            left = max(min(at - text_width / 2, width - text_width), 0.0)
            where, align = x_domain[0] + left / width * (x_domain[1] - x_domain[0]), "left"
        rows.append({"log_value": where, "text": text, "align": align, "row_y": -ROW * (row + 1) + ROW / 2})
    return pd.DataFrame(rows, columns=["log_value", "text", "align", "row_y"])


def mark_frame(marks):
    """A lesson's marks (``toylab.lessons.lesson.Mark``) as rows: x, y (missing for a mark at an x alone), number,
    sentence ("1 · …"), and the panel it is on (None on a chart of one)."""
    rows = [{"x": mark.x, "y": math.nan if mark.y is None else mark.y, "number": str(number),
             "sentence": f"{number} · {mark.text}", "panel": mark.panel} for number, mark in enumerate(marks, start=1)]
    return pd.DataFrame(rows, columns=["x", "y", "number", "sentence", "panel"])


# -- the sequence ratio ---------------------------------------------------------------------------------

def sampled_batch(toy, N, seed):
    """N sequences drawn from μ (tokens of shape (N, T)) and their log W = Σ_t log ρ_t(y_t)."""
    tokens = draw_tokens(np.random.default_rng(seed), toy.mu, (N,))
    return tokens, toy.log_rho[np.arange(toy.T), tokens].sum(axis=1)


def sequence_histogram_frame(toy, kind="W", bins=60, sampled_log_W=None):
    """μ-probability of log W (kind "W") or log ρ_geo = log W / T (kind "geo") per bin; with a sampled
    batch's log W, also the fraction of the batch in each bin."""
    values, probabilities = sequence_log_ratio(toy, kind)
    edges, mass = weighted_histogram(values, probabilities, bins)
    frame = pd.DataFrame({"bin_start": edges[:-1], "bin_end": edges[1:], "probability": mass})
    if sampled_log_W is not None:
        sample = sampled_log_W if kind == "W" else sampled_log_W / toy.T
        counts, _ = np.histogram(sample, bins=edges)
        frame["batch"] = counts / len(sample)
    return frame


def sequence_rules(selection, kind="W"):
    """(estimator, threshold name, value, its log, side) for each selected threshold on W (kind "W") or ρ_geo."""
    for (id, name), (target, side) in SEQUENCE_THRESHOLDS.items():
        if id in selection and target == kind:
            yield id, f"{id}.{name}", selection[id][name], math.log(selection[id][name]), side


def sequence_threshold_frame(toy, selection, kind="W"):
    """The selected sequence-level thresholds on W (kind "W") or ρ_geo (kind "geo"), as logs, with the
    μ-probability beyond each."""
    values, probabilities = sequence_log_ratio(toy, kind)
    rows = [{"estimator": id, "threshold": threshold, "value": value, "log_value": log_value, "side": side,
             "beyond": probability_beyond(values, probabilities, log_value, side)}
            for id, threshold, value, log_value, side in sequence_rules(selection, kind)]
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def sequence_facts(toy):
    """E_μ[W] (= 1, or π(S) = 1 − the π-mass out of reach of a truncating sampler), the median of W under μ (below 1
    when the toys differ), E_μ[log W] (= −KL(μ‖π)), and P_μ(W > 1)."""
    log_W, probabilities = sequence_log_ratio(toy, "W")
    return {"mean_W": float(probabilities @ np.exp(log_W)),
            "median_W": math.exp(weighted_quantile(log_W, probabilities, 0.5)),
            "mean_log_W": float(probabilities @ log_W),
            "above_one": probability_beyond(log_W, probabilities, 0.0, "above")}


# -- error versus batch size ----------------------------------------------------------------------------

def error_curve_frame(moments, grid=ERROR_GRID):
    """Exact relative error sqrt(bias² + var/N)/‖∇J‖ on a grid of N, with the relative bias bias/‖∇J‖ (below the error
    at every N: its limit as N grows)."""
    return pd.DataFrame([{"estimator": id, "N": float(n), "rel_rmse": m.rel_rmse(n), "rel_bias": m.rel_bias}
                         for id, m in moments.items() for n in grid],
                        columns=["estimator", "N", "rel_rmse", "rel_bias"])


def first_winning_n(reference_bias, reference_var, bias, var):
    """The smallest integer batch size N ≥ 1 at which the reference's RMSE is strictly below the other's, or None if
    there is none: the reference wins exactly when N > Δv/Δb (``crossover_n``), so from floor(Δv/Δb) + 1 on."""
    n = crossover_n(reference_bias, reference_var, bias, var)
    if math.isinf(n):
        return None
    gap_var, gap_bias = reference_var - var, bias**2 - reference_bias**2
    return max(math.floor(gap_var / gap_bias) + 1, 1)


def crossover_n(reference_bias, reference_var, bias, var):
    """Smallest real N from which the reference's RMSE is strictly below the other estimator's.

    rmse² = b² + v/N for each, so the reference wins when (v_ref − v)/N < b² − b_ref². With Δb = b² − b_ref²
    and Δv = v_ref − v: Δb > 0 → N* = max(Δv/Δb, 1) (1: it wins at every N ≥ 1); Δb ≤ 0 → it never wins
    from some N on (inf).
    """
    gap_bias = bias**2 - reference_bias**2
    gap_var = reference_var - var
    if gap_bias <= 0:
        return math.inf
    return max(gap_var / gap_bias, 1.0)


def crossover_frame(moments, reference):
    """For every biased estimator: the real N beyond which the reference (seq_is) has the lower RMSE, the first
    integer batch size at which it does (``first_N``, missing if none), and the reference's relative RMSE there."""
    rows = []
    for id, m in moments.items():
        if m.unbiased or id == reference.estimator:
            continue
        n = crossover_n(reference.bias, reference.var, m.bias, m.var)
        first = first_winning_n(reference.bias, reference.var, m.bias, m.var)
        rows.append({"estimator": id, "crossover_N": n, "first_N": math.nan if first is None else first,
                     "rel_rmse": reference.rel_rmse(first) if first is not None else math.nan})
    return pd.DataFrame(rows, columns=["estimator", "crossover_N", "first_N", "rel_rmse"])


def monte_carlo_frame(summary_rows):
    """``montecarlo.summarise`` rows as a frame: estimator, N, rms, q10, median, q90."""
    return pd.DataFrame(summary_rows, columns=["estimator", "N", "rms", "q10", "median", "q90"])


def _from_first(first):
    """The batch sizes from ``first`` (an integer, or NaN for none) on, in words."""
    if math.isnan(first):
        return "no N"
    return f"every N ≥ {int(first):,}"


def crossover_table(crossovers):
    """``crossover_frame`` as the page's table: each biased estimator and the batch sizes at which seq_is has the
    lower RMSE, in words ("every N ≥ 1,234", or "no N")."""
    return pd.DataFrame({"estimator": crossovers["estimator"],
                         "seq_is has the lower RMSE for": [_from_first(n) for n in crossovers["first_N"]]})


def evidence_table(numbers):
    """A lesson's evidence ({quantity: value}) as a two-column table, each value to six significant digits."""
    return pd.DataFrame({"quantity": list(numbers), "value": [f"{value:.6g}" for value in numbers.values()]})


def shown_table(table):
    """``table_frame`` as the Estimators tab shows it: each estimator's colour as a swatch (``colours.swatch``) and
    its cosine in words (``cosine_text``)."""
    return table.assign(swatch=[swatch(ESTIMATORS[id].colour) for id in table["estimator"].tolist()],
                        cosine=[cosine_text(cosine) for cosine in table["cosine"].tolist()])


def error_chart_caption(dots, replicates, sampled_only, lying):
    """Under the error-versus-batch-size chart: what the lines, dots (with the Monte Carlo check on, over
    ``replicates`` batches), dashes and diamonds are; the batch-coupled estimators ``sampled_only`` that have dots
    only; the lines drawn over others (``lying``, ``coincidence.coincidences`` of the curves, against N)."""
    if dots:
        monte_carlo = (f"Dots: Monte Carlo rms over {replicates} batches, bars its 10–90 % range (batch-coupled "
                       "estimators have dots only). ")
    else:
        monte_carlo = ("Turn on the Monte Carlo check above for sampled dots"
                       + (f" (the batch-coupled {', '.join(sampled_only)} have only those)" if sampled_only else "")
                       + ". ")
    return ("Lines: exact sqrt(bias² + var/N)/‖∇J‖. " + monte_carlo
            + "Dashed: each biased estimator's relative bias, the level its error tends to as N grows (no batch size "
            "goes below it). Diamonds: where "
            "seq_is (unbiased unless the sampler truncates) overtakes it, at the first whole batch size where it does. "
            "Click a legend entry to highlight one estimator."
            + (" " + dashed_caption(describe(lying, "N")) if lying else ""))


def undefined_monte_carlo_notes(undefined):
    """One sentence per estimator with batch sizes at which it is undefined (``{id: [N, …]}``), saying when."""
    return [f"No Monte Carlo point for {id} at N = {', '.join(map(str, sizes))}: it is undefined "
            f"{ESTIMATORS[id].undefined}." for id, sizes in undefined.items()]

