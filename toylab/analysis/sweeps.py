"""Exact sweeps: every number as a threshold, or the mismatch, moves with the rest of the setting held.

Threshold sweep: for each thresholded estimator, its relative bias, std and RMSE at batch size N,

    rel_bias = ‖E ĝ − ∇J‖/‖∇J‖,   rel_std = sqrt(var/N)/‖∇J‖,   rel_rmse = sqrt(rel_bias² + rel_std²),

on a log-spaced grid of one threshold (the others held at their chosen values), plus the chosen value.
Every point is a full exact pass over the M sequences, so large toys get a coarser grid (``grid_points``).
The rule of thumb of Li et al. (2025) for sequence truncation is C* = sqrt(2(1 + χ²_seq)).

Sampler sweep: the same numbers for every selected exact estimator as one parameter of the sampler moves — the
mismatch in [0, 2], top-p in (0, 1], the temperature in [0.25, 4] or the precision the logits are rounded to (none,
fp16, bf16: ever coarser) — the others held; θ and b come from the seed alone, so only μ moves. Per toy also KL(μ‖π), χ²_seq, the π-mass out of reach and ∇J's part out of reach
‖∇J − ∇J_S‖/‖∇J‖ at the baseline (``engine.moments``). A point whose W would leave float64
(``toy.range_problem``), or whose scored objective is flat (``toy.flat_problem``), is left out and listed.

Pipeline sweep: the same sweep once per pipeline — each distinct (logged, scored) of the frameworks' pipeline presets
at the sampler's top-p (``PIPELINES``), named by the presets that use it —: every selected exact estimator's relative
bias and RMSE, and per toy the identity check E_μs[W] and how far the scored objective moved.
"""

from dataclasses import replace

import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.catalogue.estimators import ESTIMATORS
from toylab.catalogue.pipelines import PIPELINES
from toylab.engine.moments import baseline_value, exact_moments_many, exact_moments_of
from toylab.engine.sampler import TEMPERATURE_RANGE
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


SWEEP_GRIDS = {
    "mismatch": lambda points: np.linspace(0.0, 2.0, points),                           # evenly spaced
    "top_p": lambda points: np.append(1 - np.geomspace(0.95, 1e-3, points - 1), 1.0),   # dense near 1, where it cuts
    "temperature": lambda points: np.geomspace(*TEMPERATURE_RANGE, points),             # log-spaced around 1
}
PRECISION_ORDER = ("none", "fp16", "bf16")          # the precision sweep's values, from no rounding to the coarsest


def sweep_grid(parameter, M):
    """The values a sampler sweep visits (``SWEEP_GRIDS``), ``grid_points(M)`` of them; the precisions in
    PRECISION_ORDER."""
    return PRECISION_ORDER if parameter == "precision" else SWEEP_GRIDS[parameter](grid_points(M))


def sweep_values(parameter, M, chosen):
    """The grid and the chosen value, in order (a number as a float; a precision as its name)."""
    if parameter == "precision":
        return list(PRECISION_ORDER)
    return [float(value) for value in np.unique(np.append(sweep_grid(parameter, M), chosen))]


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


def swept_toys(T, V, seed, mismatch, sampler, parameter, left_out):
    """(value, toy) as ``parameter`` (mismatch, top_p, temperature or precision) runs over its grid and its chosen
    value (the mismatch, or the Sampler's: ``sweep_values``); a value whose toy is refused (``make_toy``'s
    ValueError) is appended to ``left_out``."""
    chosen = mismatch if parameter == "mismatch" else getattr(sampler, parameter)
    for value in sweep_values(parameter, V**T, chosen):
        try:
            yield value, (make_toy(T, V, value, seed, sampler) if parameter == "mismatch" else
                          make_toy(T, V, mismatch, seed, replace(sampler, **{parameter: value})))
        except ValueError:
            left_out.append(value)


def sampler_sweep(T, V, seed, mismatch, sampler, parameter, selection, baseline, N):
    """(estimator rows, divergence rows, left out) as ``parameter`` (mismatch, top_p, temperature or precision) runs
    over its grid and its chosen value (``swept_toys``): per toy, each selected exact estimator's
    rel_bias/rel_std/rel_rmse at N; the toy's KL(μ‖π), χ²_seq, unreachable_mass and rel_out_of_reach; and the values left out
    because W would leave float64 there (or the scored objective is flat)."""
    exact = {id: params for id, params in selection.items() if ESTIMATORS[id].exact}
    estimator_rows, divergence_rows, left_out = [], [], []
    for value, toy in swept_toys(T, V, seed, mismatch, sampler, parameter, left_out):
        for estimator_id, moments in exact_moments_many(toy, exact, baseline).items():
            estimator_rows.append({parameter: value, "estimator": estimator_id} | moments_row(moments, N))
        population = diagnostics(toy)
        out_of_reach = np.linalg.norm(toy.true_grad - toy.reachable_gradient(baseline_value(toy, baseline)))
        divergence_rows.append({parameter: value, "kl_mu_pi": population.kl_mu_pi, "chi2_seq": population.chi2_seq,
                                "unreachable_mass": population.unreachable_mass,
                                "rel_out_of_reach": float(out_of_reach / population.grad_norm)})
    return estimator_rows, divergence_rows, left_out


def pipeline_combinations(top_p):
    """{(logged, scored): [preset ids]} of the frameworks' pipeline presets at this top-p, in their order."""
    combinations = {}
    for id, pipeline in PIPELINES.items():
        combinations.setdefault(pipeline.choices(top_p), []).append(id)
    return combinations


def pipeline_sweep(T, V, seed, mismatch, sampler, parameter, selection, baseline, N):
    """(estimator rows, pipeline rows, left out) of ``sampler_sweep`` once per pipeline (``pipeline_combinations`` at
    the sampler's top-p, whatever it logs and scores itself): estimator rows (logged, scored, parameter value,
    estimator, rel_bias, rel_std, rel_rmse); pipeline rows (logged, scored, presets, value, identity,
    objective_shift); left out: {(logged, scored): values refused}."""
    exact = {id: params for id, params in selection.items() if ESTIMATORS[id].exact}
    estimator_rows, pipeline_rows, left_out = [], [], {}
    for (logged, scored), presets in pipeline_combinations(sampler.top_p).items():
        pipeline = replace(sampler, logged=logged, scored=scored)
        key = {"logged": logged, "scored": scored}
        for value, toy in swept_toys(T, V, seed, mismatch, pipeline, parameter, left_out.setdefault((logged, scored),
                                                                                                     [])):
            for estimator_id, moments in exact_moments_many(toy, exact, baseline).items():
                estimator_rows.append(key | {parameter: value, "estimator": estimator_id} | moments_row(moments, N))
            pipeline_rows.append(key | {"presets": tuple(presets), parameter: value, "identity": toy.identity,
                                        "objective_shift": toy.objective_shift})
    return estimator_rows, pipeline_rows, {key: values for key, values in left_out.items() if values}
