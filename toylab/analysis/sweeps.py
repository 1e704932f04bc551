"""Exact sweeps: every number as a threshold, or the mismatch, moves with the rest of the setting held.

Threshold sweep: for each thresholded estimator, its relative bias, std and RMSE at batch size N,

    rel_bias = ‖E ĝ − ∇J‖/‖∇J‖,   rel_std = sqrt(var/N)/‖∇J‖,   rel_rmse = sqrt(rel_bias² + rel_std²),

on a log-spaced grid of one threshold (the others held at their chosen values), plus the chosen value.
Every point is a full exact pass over the M sequences, so large toys get a coarser grid (``grid_points``).
The rule of thumb of Li et al. (2025) for sequence truncation is C* = sqrt(2(1 + χ²_seq)).

Mismatch sweep: the same numbers for every selected exact estimator on the toys with mismatch in [0, 2];
θ and b come from the seed alone, so only the sampler moves.
"""

import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.moments import exact_moments_many, exact_moments_of
from toylab.engine.toy import make_toy

SWEPT_PARAMETER = {"tok_tis": "C", "tok_mis": "hi", "seq_tis": "C", "seq_mis": "C", "geo_rs": "hi",
                   "k3_rs": "delta", "trm": "eps"}


def grid_points(M):
    """Points per sweep: 41 up to M = 65,536 sequences, 21 up to 1,048,576, 11 beyond (seconds, not minutes)."""
    return 41 if M <= 2**16 else 21 if M <= 2**20 else 11


def threshold_grid(estimator_id, chosen, points):
    """``points`` log-spaced values over the parameter's allowed range, plus the chosen value."""
    param = ESTIMATORS[estimator_id].params[SWEPT_PARAMETER[estimator_id]]
    grid = np.geomspace(param.low, param.high, points)
    return np.unique(np.append(grid, chosen))


def mismatch_grid(M):
    """Evenly spaced mismatches from 0 to 2."""
    return np.linspace(0.0, 2.0, grid_points(M))


def moments_row(moments, N):
    """The relative numbers of one Moments at batch size N."""
    return {"rel_bias": moments.rel_bias, "rel_std": moments.rel_std(N), "rel_rmse": moments.rel_rmse(N)}


def threshold_sweep(toy, selection, baseline, N):
    """Rows (estimator, parameter, threshold, chosen, rel_bias, rel_std, rel_rmse) for each thresholded
    estimator in ``selection`` ({id: chosen parameters}); the other parameters of a band stay as chosen."""
    points = [(estimator_id, params | {SWEPT_PARAMETER[estimator_id]: float(value)}, bool(value == params[name]))
              for estimator_id, params in selection.items() if (name := SWEPT_PARAMETER.get(estimator_id))
              for value in threshold_grid(estimator_id, params[name], grid_points(toy.M))]
    moments = exact_moments_of(toy, [(estimator_id, params) for estimator_id, params, _ in points], baseline)
    return [{"estimator": estimator_id, "parameter": SWEPT_PARAMETER[estimator_id],
             "threshold": params[SWEPT_PARAMETER[estimator_id]], "chosen": chosen} | moments_row(point, N)
            for (estimator_id, params, chosen), point in zip(points, moments, strict=True)]


def best_thresholds(rows):
    """{estimator: its row with the lowest rel_rmse (first on ties) and "edge": "lower" or "upper" when that is the
    lowest or highest threshold swept — the optimum may then lie beyond the parameter's allowed range — else None}."""
    best, swept = {}, {}
    for row in rows:
        swept.setdefault(row["estimator"], []).append(row["threshold"])
        if row["estimator"] not in best or row["rel_rmse"] < best[row["estimator"]]["rel_rmse"]:
            best[row["estimator"]] = row
    return {id: row | {"edge": "lower" if row["threshold"] == min(swept[id]) else
                       "upper" if row["threshold"] == max(swept[id]) else None} for id, row in best.items()}


def rule_of_thumb(toy):
    """C* = sqrt(2(1 + χ²_seq)), the sequence-truncation threshold proposed by Li et al. (2025)."""
    return float(np.sqrt(2 * (1 + diagnostics(toy).chi2_seq)))


def mismatch_sweep(T, V, seed, chosen_mismatch, selection, baseline, N):
    """(estimator rows, divergence rows) for mismatch in [0, 2] and the chosen one: per toy, each selected
    exact estimator's rel_bias/rel_std/rel_rmse at N, and the toy's KL(μ‖π) and χ²_seq."""
    estimator_rows, divergence_rows = [], []
    for mismatch in np.unique(np.append(mismatch_grid(V**T), chosen_mismatch)):
        toy = make_toy(T, V, float(mismatch), seed)
        exact = {id: params for id, params in selection.items() if ESTIMATORS[id].exact}
        for estimator_id, moments in exact_moments_many(toy, exact, baseline).items():
            estimator_rows.append({"mismatch": float(mismatch), "estimator": estimator_id} | moments_row(moments, N))
        population = diagnostics(toy)
        divergence_rows.append({"mismatch": float(mismatch), "kl_mu_pi": population.kl_mu_pi,
                                "chi2_seq": population.chi2_seq})
    return estimator_rows, divergence_rows
