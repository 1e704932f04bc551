"""The DataFrames behind the Training tab: library results (``training``, ``sga``) arranged, never re-derived.

Sampled-mode curves are per-step medians over the runs with the 10 % and 90 % quantiles as a band;
expected-mode curves are the single exact trajectory (band = line). Undefined values (an undefined cosine)
are left out of the curves, so a chart shows a gap there, and written "—" in tables, with the reason
in the caption.
"""

import math

import numpy as np
import pandas as pd

from toylab.catalogue.estimators import ESTIMATORS
from toylab.training.loop import per_step_median, summary

CURVE_COLUMNS = ["estimator", "quantity", "step", "median", "q10", "q90"]
QUANTITIES = {"J": "J = E_π[r]", "logged_reward": "logged reward E_μ[r]", "kl_mu_pi": "KL(μ‖π)",
              "chi2_seq": "χ²_seq", "cosine": "cosine to ∇J"}
BAND = (0.1, 0.9)
UNDEFINED = "—"
SAME = 1e-12


def band(values):
    """(median, q10, q90) per step: over the runs (NaN ignored) for (runs, K + 1), the values themselves for (K + 1,)."""
    if values.ndim == 1:
        return values, values, values
    defined = ~np.isnan(values)
    low, high = (np.full(values.shape[1], np.nan) for _ in range(2))
    columns = np.flatnonzero(defined.any(axis=0))
    for k in columns:
        low[k], high[k] = np.quantile(values[defined[:, k], k], BAND)
    return per_step_median(values), low, high


def curve_frame(trajectories, quantities=tuple(QUANTITIES)):
    """Long frame: one row per (estimator, quantity, step) with median, q10, q90; undefined steps left out."""
    parts = []
    for id, trajectory in trajectories.items():
        for name in quantities:
            median, low, high = band(getattr(trajectory, name))
            steps = np.arange(len(median))
            keep = ~np.isnan(median)
            parts.append(pd.DataFrame({"estimator": id, "quantity": QUANTITIES[name], "step": steps[keep],
                                       "median": median[keep], "q10": low[keep], "q90": high[keep]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CURVE_COLUMNS)


def duplicates(trajectories):
    """{id: the first earlier id whose run is the same, step for step}: J, the logged reward and the cosine equal to
    rounding (1e-12 relative), so one line hides the other unless the chart shows both."""
    same = {}
    items = list(trajectories.items())
    for index, (id, run) in enumerate(items):
        for first, earlier in items[:index]:
            if first not in same and all(np.allclose(getattr(run, name), getattr(earlier, name), rtol=SAME, atol=SAME,
                                                     equal_nan=True) for name in ("J", "logged_reward", "cosine")):
                same[id] = first
                break
    return same


def same_note(same):
    """'k3_rs = trm' for each run identical to an earlier one."""
    return ", ".join(f"{id} = {first}" for id, first in same.items())


def quantity_curves(curves, quantity, sampled):
    """One quantity's rows of a ``curve_frame`` with only the columns its chart draws: estimator, step, median,
    and the band's q10 and q90 in sampled mode (in expected mode they repeat the median)."""
    columns = ["estimator", "step", "median"] + (["q10", "q90"] if sampled else [])
    return curves.loc[curves["quantity"] == QUANTITIES[quantity], columns]


def logged_frame(trajectory):
    """J and the logged reward E_μ[r] of one estimator's run, per step (medians in sampled mode), wide and long:
    columns step, J, logged_reward, gap = E_μ[r] − J."""
    J, logged = per_step_median(trajectory.J), per_step_median(trajectory.logged_reward)
    return pd.DataFrame({"step": np.arange(len(J)), "J": J, "logged_reward": logged, "gap": logged - J})


def summary_frame(trajectories):
    """The summary table (``training.summary``, on the per-step medians in sampled mode) with names, the step at
    which J first reaches REACHED × on_policy's final J ("never" if it does not), and the final cosine ("—" if
    undefined)."""
    rows = []
    for row in summary(trajectories):
        id = row["estimator"]
        final_cosine = per_step_median(trajectories[id].cosine)[-1]
        rows.append({"estimator": id, "label": ESTIMATORS[id].label, "final_J": row["final_J"],
                     "steps_to_reach": "never" if row["steps_to_reach"] is None else str(row["steps_to_reach"]),
                     "largest_drop": row["largest_drop"], "final_logged_reward": row["final_logged_reward"],
                     "final_kl_mu_pi": row["final_kl_mu_pi"],
                     "final_cosine": UNDEFINED if math.isnan(final_cosine) else f"{final_cosine:+.3f}"})
    return pd.DataFrame(rows, columns=["estimator", "label", "final_J", "steps_to_reach", "largest_drop",
                                       "final_logged_reward", "final_kl_mu_pi", "final_cosine"])


# -- the SGA view --------------------------------------------------------------------------------------------

def second_order_frame(results, lrs, J):
    """Second-order improvement per (estimator, lr) from {id: SecondOrder}, kept only where it is possible at all
    (−J ≤ improvement ≤ 1 − J, since 0 ≤ J ≤ 1): beyond that the quadratic has certainly left the truth."""
    rows = [{"estimator": id, "lr": float(lr), "improvement": float(value)}
            for id, result in results.items() for lr, value in zip(lrs, result.improvement(lrs), strict=True)
            if -J <= value <= 1 - J]
    return pd.DataFrame(rows, columns=["estimator", "lr", "improvement"])


def monte_carlo_frame(results, second_order, z=2.0):
    """Monte Carlo improvement per (estimator, lr) from {id: MonteCarloImprovement}: mean, mean ± z·se, and whether
    the second-order value (if the estimator has one) lies within z standard errors."""
    rows = []
    for id, result in results.items():
        predicted = second_order[id].improvement(result.lr) if id in second_order else [math.nan] * len(result.lr)
        for lr, mean, se, value in zip(result.lr, result.mean, result.se, predicted, strict=True):
            rows.append({"estimator": id, "lr": float(lr), "mean": float(mean), "se": float(se),
                         "low": float(mean - z * se), "high": float(mean + z * se),
                         "agrees": "—" if math.isnan(value) else ("yes" if abs(value - mean) <= z * se else "no")})
    return pd.DataFrame(rows, columns=["estimator", "lr", "mean", "se", "low", "high", "agrees"])


def sga_table(estimators, second_order, monte_carlo, lr):
    """One row per estimator at the chosen lr: the second-order pieces (bias term ⟨∇J, E ĝ⟩, E ĝᵀ H E ĝ,
    tr(H Σ)/N), its best lr, the second-order improvement and the Monte Carlo one ± s.e. Text cells: "—" where a
    value does not exist (batch-coupled: no second order; no finite best lr)."""
    rows = []
    for id in estimators:
        result, sampled = second_order.get(id), monte_carlo[id]
        at = int(np.argmin(np.abs(np.log(sampled.lr / lr))))
        exact = {} if result is None else {
            "slope": f"{result.slope:.4g}", "mean_curvature": f"{result.mean_curvature:.3g}",
            "noise_curvature": f"{result.noise_curvature / result.N:.3g}",
            "best_lr": f"{result.best_lr:.3g}" if math.isfinite(result.best_lr) else UNDEFINED,
            "second_order": f"{float(result.improvement(lr)):+.4f}"}
        rows.append({"estimator": id, "label": ESTIMATORS[id].label} | {name: exact.get(name, UNDEFINED) for name in (
            "slope", "mean_curvature", "noise_curvature", "best_lr", "second_order")}
                    | {"monte_carlo": f"{sampled.mean[at]:+.4f} ± {sampled.se[at]:.4f}"})
    return pd.DataFrame(rows, columns=["estimator", "label", "slope", "mean_curvature", "noise_curvature", "best_lr",
                                       "second_order", "monte_carlo"])

