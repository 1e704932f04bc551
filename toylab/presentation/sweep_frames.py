"""DataFrames for the sweep views' charts (a threshold, the sampler, the length T): long format (one row
per point and metric), nothing computed but the reshaping and the ±2 s.e. error bars.

Values a log axis cannot show (zero, an unbiased estimator's bias below UNBIASED, or overflow) are dropped
from log-scale panels; ``length_overflow_notes`` names the overflowed ones, so the view can say what is
not drawn.
"""

import numpy as np
import pandas as pd

from toylab.analysis.length import MONTE_CARLO, OUT_OF_REACH
from toylab.presentation import coincidence
from toylab.presentation.pipeline_text import PIPELINE_SWEEP_ABOUT, combination_label, presets_text

UNBIASED = 1e-9
ROUNDING = 1e-12
METRICS = {"rel_bias": "relative bias", "rel_std": "relative std at N", "rel_rmse": "relative RMSE at N"}
STD_RATIO = "std ÷ on-policy std"


def _positive(frame, floor=0.0):
    """The rows a log axis can show: finite values above ``floor``."""
    return frame[np.isfinite(frame["value"]) & (frame["value"] > floor)].reset_index(drop=True)


def _long(rows, keys, metrics):
    frame = pd.DataFrame(rows)
    return frame.melt(id_vars=keys, value_vars=list(metrics), var_name="metric", value_name="value") \
        .assign(metric=lambda f: f["metric"].map(METRICS))


def threshold_frame(rows, best, batch=""):
    """(estimator, parameter, threshold, chosen, best, batch, metric, value); ``best`` = sweeps.best_thresholds(rows),
    ``batch`` names the batch size ("N = 64"). Relative bias keeps its zeros (a linear axis); std and RMSE drop what a
    log axis cannot show."""
    frame = pd.DataFrame(rows)
    frame["best"] = [row["threshold"] == best[row["estimator"]]["threshold"] for row in rows]
    frame["batch"] = batch
    long = _long(frame, ["estimator", "parameter", "threshold", "chosen", "best", "batch"], METRICS)
    bias = long["metric"] == METRICS["rel_bias"]
    return pd.concat([long[bias], _positive(long[~bias])], ignore_index=True)


def compared_threshold_frame(sweeps):
    """The threshold frames of one sweep at several batch sizes, [(N, rows, best)], the first the sidebar's: its rows
    keep every metric; the others' only std and RMSE (the bias does not depend on N), none of them "chosen"."""
    (N, rows, best), *others = sweeps
    parts = [threshold_frame(rows, best, f"N = {N:,}")]
    for N, rows, best in others:
        other = threshold_frame(rows, best, f"N = {N:,}")
        parts.append(other[other["metric"] != METRICS["rel_bias"]].assign(chosen=False))
    return pd.concat(parts, ignore_index=True)


def sampler_frame(estimator_rows, parameter="mismatch"):
    """(parameter, estimator, metric, value) for relative bias (zeros kept: linear axis) and RMSE."""
    return _long(estimator_rows, [parameter, "estimator"], ["rel_bias", "rel_rmse"])


DIVERGENCES = {"kl_mu_pi": "KL(μ‖π)", "chi2_seq": "χ²_seq", "unreachable_mass": "π-mass out of reach"}


def divergence_frame(divergence_rows, parameter="mismatch"):
    """(parameter, quantity, value) for KL(μ‖π), χ²_seq and the π-mass out of reach; zeros (no truncation, or
    rounding error at mismatch 0, ~1e-17) dropped for the log axis."""
    frame = pd.DataFrame(divergence_rows)[[parameter, *DIVERGENCES]].rename(columns=DIVERGENCES)
    long = frame.melt(id_vars=[parameter], var_name="quantity", value_name="value")
    return _positive(long, floor=ROUNDING)


def out_of_reach_frame(divergence_rows, parameter="mismatch"):
    """(parameter, value): ∇J's part out of reach, ‖∇J − ∇J_S‖/‖∇J‖, at each point, empty where no point truncates."""
    frame = pd.DataFrame(divergence_rows)
    if not frame["unreachable_mass"].gt(0).any():
        return pd.DataFrame(columns=[parameter, "value"])
    return frame[[parameter, "rel_out_of_reach"]].rename(columns={"rel_out_of_reach": "value"})


def length_divergence_frame(rows):
    """(T, quantity, value) for χ²_seq, the ESS fraction and (a truncating sampler) the π-mass out of reach, exact at
    every T; zeros dropped for the log axis."""
    frame = pd.DataFrame(rows)
    return _positive(frame[frame["quantity"].isin(["χ²_seq", "ESS fraction", OUT_OF_REACH])][["T", "quantity", "value"]])


def length_probability_frame(rows):
    """(T, quantity, value, lower, upper, method, monte_carlo) for P(W > C) and P(ρ_geo outside band), with
    ±2 s.e. bands clipped to [0, 1] (zero width when exact)."""
    frame = pd.DataFrame(rows)
    frame = frame[frame["quantity"].str.startswith("P(")].reset_index(drop=True)
    band = 2 * frame["se"]
    return frame.assign(lower=(frame["value"] - band).clip(lower=0.0), upper=(frame["value"] + band).clip(upper=1.0),
                        monte_carlo=frame["method"] == MONTE_CARLO).drop(columns="se")


def length_estimator_frame(rows):
    """(T, estimator, metric, value, lower, upper, method, monte_carlo): relative bias and the std relative to
    on-policy sqrt(var_e/var_on_policy), with ±2 s.e. bands for Monte Carlo points; points a log axis cannot
    show are dropped."""
    frame = pd.DataFrame(rows)
    parts = []
    for metric, value, se in ((METRICS["rel_bias"], frame["rel_bias"], frame["rel_bias_se"]),
                              (STD_RATIO, frame["std_ratio"], frame["std_ratio_se"])):
        parts.append(pd.DataFrame({
            "T": frame["T"], "estimator": frame["estimator"], "metric": metric, "value": value,
            "lower": np.maximum(value - 2 * se, UNBIASED), "upper": value + 2 * se, "method": frame["method"],
            "monte_carlo": frame["method"] == MONTE_CARLO}))
    long = pd.concat(parts, ignore_index=True)
    return _positive(long, floor=np.where(long["metric"] == METRICS["rel_bias"], UNBIASED, 0.0))


def length_capped_frame(rows):
    """(T, quantity, value) of ``repeated.capped_means``: E_μ[min(W, C)] and E_μ[min(ρ_geo, C)] against T."""
    return pd.DataFrame(rows, columns=["T", "quantity", "value"])


def length_overflow_notes(population_rows, estimator_rows):
    """'χ²_seq at T = 192, 256' for every quantity (and estimator metric) beyond float64's range at some T:
    those points are not drawn."""
    overflowed = {}
    for row in population_rows:
        if not np.isfinite(row["value"]):
            overflowed.setdefault(row["quantity"], []).append(row["T"])
    for row in estimator_rows:
        for metric, title in (("rel_bias", METRICS["rel_bias"]), ("std_ratio", STD_RATIO)):
            if not np.isfinite(row[metric]):
                overflowed.setdefault(f"{row['estimator']}'s {title}", []).append(row["T"])
    return [f"{name} at T = {', '.join(map(str, lengths))}" for name, lengths in overflowed.items()]



def length_overflow_caption(population_rows, estimator_rows):
    """The sentence under the length chart naming what ``length_overflow_notes`` finds not drawn (and why the ESS
    fraction goes with an overflowed χ²_seq), or "" when everything is drawn."""
    overflowed = length_overflow_notes(population_rows, estimator_rows)
    if not overflowed:
        return ""
    return ("Not drawn, beyond float64's largest number (about 1.8e308): " + "; ".join(overflowed)
            + (" (where χ²_seq overflows, the ESS fraction 1/(1 + χ²_seq) is below 1e-308 and is not drawn either)"
               if any(note.startswith("χ²_seq") for note in overflowed) else "") + ".")


def threshold_sweep_caption(N, points):
    """Under the threshold chart: exact at batch size N, what a band sweeps, and the grid (``points`` log-spaced
    values, ``analysis.sweeps.grid_points``)."""
    return (f"Exact at every point, batch size N = {N:,}. Bands (tok_mis, geo_rs) sweep their upper bound hi with lo "
            "held at the sidebar's value; the other thresholds sweep their one parameter over its allowed range "
            f"({points} log-spaced values plus the chosen one; fewer on large toys, where each point is a full pass "
            "over the M sequences).")



SWEEP_ABOUT = {                     # what moves as each sampler parameter is swept, for the caption
    "mismatch": "only μ = sampler(θ + mismatch·b) moves. At mismatch 0 (and a plain-softmax sampler) μ = π and every "
                "ratio is 1, so an estimator whose weight is 1 at ratio 1 (each one at its default thresholds) "
                "coincides with naive there (and with on_policy).",
    "top_p": "only the sampler's top-p moves: below 1 it cuts the tokens whose more likely rivals hold p of the mass, "
             "and the sequences through them are never drawn. Dashed, in the text colour: ∇J's part from those "
             "sequences (relative to ‖∇J‖, out of reach): seq_is's whole bias, which no weight removes; another estimator's own "
             "error may point against it, so its bias may lie below the dashes.",
    "temperature": "only the sampler's temperature τ moves (μ ∝ exp(z/τ)); the trainer has none, so even at mismatch 0 "
                   "τ ≠ 1 is a mismatch. Low τ sharpens μ: the ratios of the tokens it rarely draws grow fast.",
    "precision": "only the precision the sampler rounds its logits to moves: none, fp16 (10 mantissa bits), bf16 (7). "
                 "The trainer does not round, so even at mismatch 0 rounding is a mismatch; where it is exactly 0 (no "
                 "rounding at mismatch 0) a log axis draws no point.",
}


def swept_value_text(value):
    """A swept value as a caption names it: a precision by its name, a number to 3 significant digits."""
    return value if isinstance(value, str) else f"{value:.3g}"


def sampler_sweep_caption(settings, parameter, left_out):
    """Under the sampler sweep: the toy it is exact on (``settings``), what moves as ``parameter`` is swept
    (SWEEP_ABOUT), and the values ``left_out`` (W beyond float64 there)."""
    return (f"Exact at every point (T = {settings.T}, V = {settings.V}, seed {settings.seed}, N = {settings.N:,}; "
            f"sampler {settings.sampler.describe()}, mismatch {settings.mismatch:g}). θ and b come from the seed alone, "
            f"so {SWEEP_ABOUT[parameter]} Batch-coupled estimators have no exact moments and are not shown."
            + (f" Left out, W beyond float64 there: {parameter} = {', '.join(map(swept_value_text, left_out))}."
               if left_out else ""))


def pipeline_sweep_caption(parameter, left_out):
    """Under the sweep per framework pipeline: PIPELINE_SWEEP_ABOUT, and per pipeline the values ``left_out``
    ({(logged, scored): [value, …]})."""
    return PIPELINE_SWEEP_ABOUT + "".join(
        f" Left out under {combination_label(*key)} (W beyond float64, or the scored objective flat): {parameter} = "
        f"{', '.join(map(swept_value_text, values))}." for key, values in left_out.items())


PANEL_NAMES = {METRICS["rel_bias"]: "bias", METRICS["rel_std"]: "std", METRICS["rel_rmse"]: "RMSE",
               STD_RATIO: "std ratio"}      # a panel in a legend that covers several


def coincident(frame, x, panels):
    """{(metric, batch): [Coincidence]}: on each panel the chart draws (``panels``: {metric: whether its axis is log},
    in the chart's order), the estimators' lines that lie on others; where a panel draws several batch sizes
    (``batch``: "N = 64"), each one's lines among themselves (batch None where it draws one)."""
    found = {}
    for metric, log in panels.items():
        rows = frame[frame["metric"] == metric]
        batches = rows["batch"].unique().tolist() if "batch" in rows else []
        for batch in batches if len(batches) > 1 else [None]:
            drawn = rows if batch is None else rows[rows["batch"] == batch]
            found[metric, batch] = coincidence.coincidences(drawn, x, "value", log=log)
    return found


def styled(frame, found, reference=None):
    """The frame with each row's line style: ``coincidence.line_styles`` of its panel, but "compared" (long dashes) for
    the rows of a second batch size."""
    ids = frame["estimator"].unique().tolist()
    styles = {key: coincidence.line_styles(lying, ids, reference) for key, lying in found.items()}
    batches = frame["batch"].tolist() if "batch" in frame else [None] * len(frame)
    first = batches[0] if batches else None
    line = ["compared" if batch != first else
            styles.get((metric, batch), styles.get((metric, None), {})).get(id, "own")
            for id, metric, batch in zip(frame["estimator"].tolist(), frame["metric"].tolist(), batches, strict=True)]
    return frame.assign(line=line)


def _panel_name(key, short=False):
    """A panel in words: its metric, and its batch size if it draws several — "relative RMSE at N (N = 4,096)", or
    (``short``, PANEL_NAMES) "RMSE at N = 4,096"."""
    metric, batch = key
    if short:
        return PANEL_NAMES[metric] + (f" at {batch}" if batch else "")
    return metric + (f" ({batch})" if batch else "")


def legend_words(found):
    """{id: legend label} for the one legend over the panels drawn (``coincidence.panel_legend_words``: a relation
    that does not hold on every panel names the ones it holds on, "bias" or "RMSE at N = 4,096")."""
    return coincidence.panel_legend_words(found, {key: _panel_name(key, short=True) for key in found})


def coincident_note(found, name):
    """'relative RMSE at N: seq_tis = seq_is at mismatch ≥ 0.55; …' for each panel drawn (and batch size, where it
    draws several: 'relative RMSE at N (N = 4,096): …') with lines that lie on others."""
    return "; ".join(f"{_panel_name(key)}: {coincidence.describe(lying, name)}"
                     for key, lying in found.items() if lying)


def pipeline_frame(estimator_rows, pipeline_rows, parameter):
    """(pipeline, frameworks, parameter, estimator, value): each estimator's relative bias under each pipeline of
    ``sweeps.pipeline_sweep`` (a linear axis: zeros kept)."""
    frameworks = {(row["logged"], row["scored"]): presets_text(row["presets"]) for row in pipeline_rows}
    frame = pd.DataFrame(estimator_rows)
    return pd.DataFrame({
        "pipeline": [combination_label(*key) for key in zip(frame["logged"], frame["scored"], strict=True)],
        "frameworks": [frameworks[key] for key in zip(frame["logged"], frame["scored"], strict=True)],
        parameter: frame[parameter], "estimator": frame["estimator"], "value": frame["rel_bias"]})


def pipeline_identity_frame(pipeline_rows, parameter):
    """(pipeline, frameworks, parameter, value): the identity check E_μs[W] at each point of each pipeline."""
    frame = pd.DataFrame(pipeline_rows)
    return pd.DataFrame({
        "pipeline": [combination_label(*key) for key in zip(frame["logged"], frame["scored"], strict=True)],
        "frameworks": [presets_text(presets) for presets in frame["presets"]], parameter: frame[parameter],
        "value": frame["identity"]})


BEST_THRESHOLD_NUMBERS = ("lowest-RMSE threshold", "its rel RMSE", "chosen threshold", "chosen rel RMSE")


def best_threshold_table(rows, best):
    """One row per swept estimator: its lowest-RMSE threshold (``best_thresholds``), whether that is at the sweep's
    edge, and its relative RMSE; beside them the chosen threshold and its relative RMSE (the row marked chosen).
    The numeric columns are ``BEST_THRESHOLD_NUMBERS``."""
    chosen = {row["estimator"]: row for row in rows if row["chosen"]}
    return pd.DataFrame([{
        "estimator": id, "parameter": row["parameter"], "lowest-RMSE threshold": row["threshold"],
        "at the sweep's edge": row["edge"] or "", "its rel RMSE": row["rel_rmse"],
        "chosen threshold": chosen[id]["threshold"], "chosen rel RMSE": chosen[id]["rel_rmse"]}
        for id, row in best.items()])


def edge_note(best):
    """The sentence naming the estimators whose lowest RMSE lies at an edge of the range swept (their optimum may
    lie beyond it), or None when none does."""
    at_edge = [f"{id} at its {row['edge']} edge ({row['parameter']} = {row['threshold']:.3g})"
               for id, row in best.items() if row["edge"]]
    if not at_edge:
        return None
    return ("The lowest RMSE lies at the edge of the range swept for " + "; ".join(at_edge)
            + ": the best threshold may lie beyond it, outside what the estimator allows.")


def rule_of_thumb_note(best, rule_of_thumb, N):
    """Li et al.'s C* = sqrt(2(1 + χ²_seq)) beside seq_tis's lowest-RMSE threshold at batch size N (Markdown), or
    None when seq_tis is not swept."""
    if "seq_tis" not in best:
        return None
    row = best["seq_tis"]
    return (f"**Rule of thumb (Li et al. 2025):** C* = sqrt(2(1 + χ²_seq)) = **{rule_of_thumb:.3g}**; on this toy "
            f"seq_tis's lowest relative RMSE at N = {N:,} is at C = **{row['threshold']:.3g}** (rel RMSE "
            f"{row['rel_rmse']:.3g})" + (f", the {row['edge']} edge of the range swept." if row["edge"] else "."))
