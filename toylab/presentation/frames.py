"""The DataFrames behind the page's table and charts: library numbers, arranged, never re-derived.

Every number is a toylab result (Moments, diagnostics, Monte Carlo) or one of the few small formulas
stated in the docstrings below (iso-RMSE circles, the seq_is crossover, histogram bins), each tested
against an independent computation in tests/presentation/test_frames.py.
"""

import math
import operator

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


def params_text(params):
    """'C=2, lo=0.5' (or '–' for an estimator without thresholds)."""
    return ", ".join(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                     for name, value in params.items()) or "–"


# -- the estimator table and the bias-versus-std scatter ---------------------------------------------------

def table_frame(moments, N):
    """One row per estimator from {id: Moments}: the fields of ``toylab.exact_table`` at batch size N. An
    undefined cosine is missing (NaN, pandas' missing value) and its row's ``note`` says why."""
    rows = [{"estimator": id, "label": ESTIMATORS[id].label, "params": params_text(m.params),
             "rel_bias": m.rel_bias, "rel_std": m.rel_std(N), "rel_rmse": m.rel_rmse(N),
             "cosine": math.nan if m.cosine is None else m.cosine,
             "tokens_affected": m.tokens_affected, "sequences_affected": m.sequences_affected,
             "unbiased": m.unbiased, "rel_floor": m.rel_floor, "rel_rest": m.rel_rest, "note": m.note}
            for id, m in moments.items()]
    return pd.DataFrame(rows, columns=["estimator", "label", "params", "rel_bias", "rel_std", "rel_rmse",
                                       "cosine", "tokens_affected", "sequences_affected", "unbiased", "rel_floor",
                                       "rel_rest", "note"])


def cosine_text(cosine):
    """'+0.9046', or UNDEFINED ('—') for a missing cosine."""
    return UNDEFINED if math.isnan(cosine) else f"{cosine:+.4f}"


def table_csv(table):
    """The table as CSV at full precision; an undefined number is written UNDEFINED, its reason in ``note``."""
    return table.to_csv(index=False, na_rep=UNDEFINED)


def table_notes(table):
    """'id: why' for every row with an undefined number."""
    return [f"{row.estimator}: {row.note}" for row in table.itertuples() if row.note]


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
    levels = nice_levels(table["rel_rmse"].min() * 0.7, table["rel_rmse"].max() * 1.3)
    angle = np.linspace(0, np.pi / 2, points)
    return pd.DataFrame([{"level": level, "rel_bias": level * np.cos(a), "rel_std": level * np.sin(a),
                          "order": i} for level in levels for i, a in enumerate(angle)])


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
    """Exact relative error sqrt(bias² + var/N)/‖∇J‖ on a grid of N, with the bias floor bias/‖∇J‖."""
    return pd.DataFrame([{"estimator": id, "N": float(n), "rel_rmse": m.rel_rmse(n), "rel_bias": m.rel_bias}
                         for id, m in moments.items() for n in grid],
                        columns=["estimator", "N", "rel_rmse", "rel_bias"])


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
    """For every biased estimator: the N beyond which the reference (seq_is) has the lower RMSE, and the
    common relative RMSE there."""
    rows = []
    for id, m in moments.items():
        if m.unbiased or id == reference.estimator:
            continue
        n = crossover_n(reference.bias, reference.var, m.bias, m.var)
        rows.append({"estimator": id, "crossover_N": n,
                     "rel_rmse": reference.rel_rmse(n) if math.isfinite(n) else math.nan})
    return pd.DataFrame(rows, columns=["estimator", "crossover_N", "rel_rmse"])


def monte_carlo_frame(summary_rows):
    """``montecarlo.summarise`` rows as a frame: estimator, N, rms, q10, median, q90."""
    return pd.DataFrame(summary_rows, columns=["estimator", "N", "rms", "q10", "median", "q90"])
