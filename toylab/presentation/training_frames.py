"""The DataFrames behind the Training tab: library results (``training``, ``sga``) arranged, never re-derived.

Sampled-mode curves are per-step medians over the runs with a band from the 10th to the 90th percentile of the
R runs at each step (numpy's linear interpolation between the sorted runs: with 8 runs the band runs from between
the lowest two to between the highest two, so it holds 6 of the 8); expected-mode curves are the single exact
trajectory (band = line). Undefined values (an undefined cosine)
are left out of the curves, so a chart shows a gap there, and written "—" in tables, with the reason
in the caption.
"""

import math

import numpy as np
import pandas as pd

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import coincidence
from toylab.training.loop import per_step_median, reached_in_words, summary

CURVE_COLUMNS = ["estimator", "quantity", "step", "median", "q10", "q90"]
QUANTITIES = {"J": "J = E_π[r]", "logged_reward": "logged reward E_μ[r]", "kl_mu_pi": "KL(μ‖π)",
              "chi2_seq": "χ²_seq", "cosine": "cosine to ∇J", "step_cosine": "cosine to ∇J of the step",
              "clip_share": "clipped share of tokens", "ppo_kl": "PPO KL (mean of −log r)",
              "w_std": "spread of w = π_old/μ", "kl_ref": "KL(π‖π_ref)"}
CURVES = ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine")      # every run's curves …
POLICY_CURVES = ("clip_share", "ppo_kl", "w_std")      # … and what the frameworks log of the three policies
REFERENCE_CURVES = ("kl_ref",)                         # … and how far from the reference
BAND = (0.1, 0.9)
UNDEFINED = "—"


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


def band_description(runs):
    """What the sampled-mode band is, in words, for R runs."""
    low, high = (q * (runs - 1) for q in BAND)
    inside = sum(low < k < high for k in range(runs))
    return (f"bands: the {BAND[0]:.0%} and {BAND[1]:.0%} percentiles of the {runs} runs at each step, linear "
            f"interpolation between the sorted runs (positions {low:.1f} and {high:.1f} of 0 … {runs - 1}), so "
            f"{inside} of the {runs} runs lie inside")


def curve_frame(trajectories, quantities=CURVES):
    """Long frame: one row per (estimator, quantity, step) with median, q10, q90; undefined steps left out, and
    quantities a trajectory does not record (step_cosine in sampled mode). Built as one frame from its columns (a
    frame per curve and a concatenation cost 40 ms a run for nine estimators)."""
    columns = {name: [] for name in CURVE_COLUMNS}
    for id, trajectory in trajectories.items():
        for name in quantities:
            if getattr(trajectory, name) is None:
                continue
            median, low, high = band(getattr(trajectory, name))
            keep = np.flatnonzero(~np.isnan(median))
            for column, values in zip(CURVE_COLUMNS, ([id] * len(keep), [QUANTITIES[name]] * len(keep), keep,
                                                      median[keep], low[keep], high[keep]), strict=True):
                columns[column].append(values)
    if not columns["step"]:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.DataFrame({name: np.concatenate(parts) if name in ("step", "median", "q10", "q90")
                         else [value for part in parts for value in part] for name, parts in columns.items()})


ROUNDING = 1e-12          # values this close are one value: a sum's last bits (R3's PPO KL, ±1e-17 about 0)


def constant_value(curves, quantity):
    """The one value every step of every estimator's ``quantity`` takes, to within ``ROUNDING`` (e.g. w's spread 0
    when w ≡ 1), rounded to it; or None when it varies (or is not recorded): such a chart is a flat line, its axis
    ticks rounding's digits, better said in words."""
    values = curves.loc[curves["quantity"] == QUANTITIES[quantity], ["median", "q10", "q90"]].to_numpy()
    if not values.size or np.isnan(values).any() or np.abs(values - values.flat[0]).max() > ROUNDING:
        return None
    return round(float(values.flat[0]), 12) + 0.0          # + 0.0: −0.0 written as 0


def coincident(curves, quantity, sampled, log=False):
    """The lines of one quantity's chart that lie on others (``coincidence.coincidences`` on its median lines)."""
    return coincidence.coincidences(quantity_curves(curves, quantity, sampled, log), "step", "median", log=log)


def coincident_note(curves, sampled):
    """What lies on what on the J chart, in words ('' if nothing): 'seq_is = on_policy; tok_tis ≈ tok_is (…)'."""
    return coincidence.describe(coincident(curves, "J", sampled), "step")


def quantity_curves(curves, quantity, sampled, log=False):
    """One quantity's rows of a ``curve_frame`` with only the columns its chart draws: estimator, step, median,
    and the band's q10 and q90 in sampled mode (in expected mode they repeat the median). For a ``log`` axis the
    steps where a drawn value is not positive are left out, a gap (χ²_seq is exactly 0 once π and μ agree on the
    sequences a truncating sampler still draws)."""
    columns = ["estimator", "step", "median"] + (["q10", "q90"] if sampled else [])
    rows = curves.loc[curves["quantity"] == QUANTITIES[quantity], columns]
    return rows[(rows[columns[2:]] > 0).all(axis=1)] if log else rows


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
                     "steps_to_reach": reached_in_words(row),
                     "largest_drop": row["largest_drop"], "final_logged_reward": row["final_logged_reward"],
                     "final_kl_mu_pi": row["final_kl_mu_pi"], "final_kl_ref": row["final_kl_ref"],
                     "final_cosine": UNDEFINED if math.isnan(final_cosine) else f"{final_cosine:+.3f}"})
    return pd.DataFrame(rows, columns=["estimator", "label", "final_J", "steps_to_reach", "largest_drop",
                                       "final_logged_reward", "final_kl_mu_pi", "final_kl_ref", "final_cosine"])


# -- the SGA view --------------------------------------------------------------------------------------------

def second_order_frame(results, lrs, J):
    """Second-order improvement per (estimator, lr) from {id: SecondOrder}, kept only where it is possible at all
    (−J ≤ improvement ≤ 1 − J, since 0 ≤ J ≤ 1): beyond that the quadratic has certainly left the truth."""
    rows = [{"estimator": id, "lr": float(lr), "improvement": float(value)}
            for id, result in results.items() for lr, value in zip(lrs, result.improvement(lrs), strict=True)
            if -J <= value <= 1 - J]
    return pd.DataFrame(rows, columns=["estimator", "lr", "improvement"])


TRUST = {True: "yes", False: "no: heavy tail", None: "unchecked"}


def monte_carlo_frame(results, second_order, z=2.0):
    """Monte Carlo improvement per (estimator, lr) from {id: MonteCarloImprovement}: mean, mean ± z·se, whether
    the second-order value (if the estimator has one) lies within z standard errors, and whether the interval can be
    trusted (``MonteCarloImprovement.trusted``: "yes", "no: heavy tail", "unchecked" for batch-coupled ones)."""
    rows = []
    for id, result in results.items():
        predicted = second_order[id].improvement(result.lr) if id in second_order else [math.nan] * len(result.lr)
        trusted = TRUST[result.trusted(second_order.get(id))]
        for lr, mean, se, value in zip(result.lr, result.mean, result.se, predicted, strict=True):
            rows.append({"estimator": id, "lr": float(lr), "mean": float(mean), "se": float(se),
                         "low": float(mean - z * se), "high": float(mean + z * se),
                         "agrees": "—" if math.isnan(value) else ("yes" if abs(value - mean) <= z * se else "no"),
                         "trusted": trusted})
    return pd.DataFrame(rows, columns=["estimator", "lr", "mean", "se", "low", "high", "agrees", "trusted"])


def adam_frame(results, z=2.0):
    """Adam's actual step per estimator: at lr = the median ‖Δ‖/‖ĝ_N‖ (a plain step as long), its Monte Carlo
    improvement and mean ± z·se; empty with SGD."""
    rows = [{"estimator": id, "lr": result.actual_lr, "mean": result.actual_mean, "se": result.actual_se,
             "low": result.actual_mean - z * result.actual_se, "high": result.actual_mean + z * result.actual_se}
            for id, result in results.items() if result.actual_lr is not None]
    return pd.DataFrame(rows, columns=["estimator", "lr", "mean", "se", "low", "high"])


def sga_table(estimators, second_order, monte_carlo, lr):
    """One row per estimator at the chosen lr: the second-order pieces (bias term ⟨∇J, E ĝ⟩, E ĝᵀ H E ĝ,
    tr(H Σ)/N), its best lr, the second-order improvement, the Monte Carlo one ± s.e., whether that interval can be
    trusted (with the share of the exact Var⟨∇J, ĝ_N⟩ the batches show), and with Adam its actual step's improvement
    ± s.e. and length (as a plain step's lr). Text cells: "—" where a value does not exist (batch-coupled: no
    second order; no finite best lr; SGD: no other step)."""
    rows = []
    for id in estimators:
        result, sampled = second_order.get(id), monte_carlo[id]
        at = int(np.argmin(np.abs(np.log(sampled.lr / lr))))
        exact = {} if result is None else {
            "slope": f"{result.slope:.4g}", "mean_curvature": f"{result.mean_curvature:.3g}",
            "noise_curvature": f"{result.noise_curvature / result.N:.3g}",
            "best_lr": f"{result.best_lr:.3g}" if math.isfinite(result.best_lr) else UNDEFINED,
            "second_order": f"{float(result.improvement(lr)):+.4f}"}
        trusted = sampled.trusted(result)
        shown = "" if trusted is None else \
            f" ({sampled.slope_sample_variance / (result.slope_variance / result.N):.0%} of Var⟨∇J, ĝ_N⟩ seen)"
        rows.append({"estimator": id, "label": ESTIMATORS[id].label} | {name: exact.get(name, UNDEFINED) for name in (
            "slope", "mean_curvature", "noise_curvature", "best_lr", "second_order")}
                    | {"monte_carlo": f"{sampled.mean[at]:+.4f} ± {sampled.se[at]:.4f}",
                       "trusted": TRUST[trusted] + shown,
                       "adam": UNDEFINED if sampled.actual_lr is None else
                       f"{sampled.actual_mean:+.4f} ± {sampled.actual_se:.4f}",
                       "adam_lr": UNDEFINED if sampled.actual_lr is None else f"{sampled.actual_lr:.3g}"})
    return pd.DataFrame(rows, columns=["estimator", "label", "slope", "mean_curvature", "noise_curvature", "best_lr",
                                       "second_order", "monte_carlo", "trusted", "adam", "adam_lr"])
