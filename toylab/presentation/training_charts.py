"""Altair charts of the Training tab: pure functions of ``training_frames`` frames, no computation.

Registry colours (``charts.estimator_colour``) on every chart; on_policy, the reference, is dashed, and a line
that lies on an earlier one (``coincidence``) is drawn in short dashes over it; clicking a
legend entry highlights an estimator; sampled runs are a median line over a 10–90 % band, both in one legend.
"""

import altair as alt
import pandas as pd

from toylab.presentation import coincidence
from toylab.presentation.charts import (
    DISTRIBUTION_COLOUR,
    FADED,
    HIGHLIGHT,
    LOG_FIT,
    TEXT,
    estimator_colour,
    highlighted_opacity,
    holding_highlight,
    legend_highlight,
    line_dash,
    mark_layers,
    readable,
    tips,
)
from toylab.presentation.training_frames import QUANTITIES, TRUST, coincident, quantity_curves
from toylab.training.loop import REFERENCE

PANEL_HEIGHT = 200
BAND_OPACITY = 0.18
SYMLOG_CONSTANT = 1e-3     # the SGA axis is linear within ±0.001 of zero, logarithmic beyond

STEP_AXIS = alt.Axis(format="d", tickMinStep=1)        # steps are whole numbers: no tick at 0.5

def _curves(frame, x, y, ids, highlight, sampled, legend=True, coincident=()):
    """Median lines (and, for sampled runs, 10–90 % bands) per estimator; lines and bands share one legend; a line
    that lies on another (``coincident``) in phased short dashes over it, named in the legend."""
    colour = estimator_colour(ids, legend=legend, labels=coincidence.legend_words(coincident))
    data = alt.Chart(coincidence.with_line_styles(frame, coincidence.line_styles(coincident, ids, REFERENCE)))
    lines = data.mark_line(strokeWidth=2.5).encode(
        x, y, colour, line_dash(), highlighted_opacity(),
        tips("estimator:N", "step:Q", alt.Tooltip("median:Q", format=".4g", title="median" if sampled else "value"),
             *([alt.Tooltip("q10:Q", format=".4g"), alt.Tooltip("q90:Q", format=".4g")] if sampled else [])))
    lines = holding_highlight(lines, highlight) if highlight is not None else lines
    if not sampled:
        return [lines]
    band_opacity = alt.OpacityValue(BAND_OPACITY * FADED, condition={"param": HIGHLIGHT, "value": BAND_OPACITY,
                                                                     "empty": True})
    area = data.mark_area().encode(x, alt.Y("q10:Q"), alt.Y2("q90:Q"), colour, band_opacity)
    return [area, lines]


def curve_chart(curves, quantity, sampled, height=PANEL_HEIGHT, log=False, title=None, legend=False, marks=None):
    """One quantity of the record (a ``training_frames.QUANTITIES`` key) against step for every estimator; the
    legend only where asked (the tab's charts share the J chart's colours); a lesson's ``marks`` on it. Lines that lie
    on others are found here (``training_frames.coincident``), on this chart's own values."""
    data = quantity_curves(curves, quantity, sampled, log)
    ids = data["estimator"].unique().tolist()
    x = alt.X("step:Q", title="step k", axis=STEP_AXIS)
    y = alt.Y("median:Q", title=QUANTITIES[quantity], scale=LOG_FIT if log else alt.Undefined)
    layers = _curves(data, x, y, ids, legend_highlight(), sampled, legend=legend,
                     coincident=coincident(curves, quantity, sampled, log))
    if quantity == "cosine":
        layers.append(alt.Chart(alt.Data(values=[{"zero": 0}])).mark_rule(color=DISTRIBUTION_COLOUR).encode(
            y=alt.Y("zero:Q")))
    if marks is not None:
        layers += mark_layers(marks, x_end=data["step"].max())
    return readable(alt.layer(*layers, height=height, title=title or alt.Undefined))


def objective_chart(curves, sampled, marks=None, height=360):
    """J = E_π[r] against step for every estimator; on_policy dashed; sampled runs as median and 10–90 % band."""
    subtitle = ["dashed: on_policy, the reference"] + (["lines: per-step medians of the runs",
                                                        "bands: their 10th–90th percentiles"] if sampled else [])
    return curve_chart(curves, "J", sampled, height=height, legend=True, marks=marks,       # short lines: a lesson's
                       title=alt.TitleParams("does it train? J against step", subtitle=subtitle))   # narrow column


def cosine_chart(curves, sampled, marks=None, height=None, short=False):
    """The cosine to ∇J against step: of the exact mean E ĝ (expected), of the step taken (sampled); 0 marked.
    ``short``: a title that fits a narrow column."""
    what = "the step taken" if sampled else "the mean gradient E ĝ (exact)"
    title = f"cosine to ∇J of {'the step' if sampled else 'E ĝ'}: below 0, J falls" if short else \
        f"cosine to ∇J of {what}: below 0, the {'step' if sampled else 'flow'} lowers J"
    return curve_chart(curves, "cosine", sampled, height=height or (260 if sampled else 240), marks=marks,
                       title=title)


def step_cosine_chart(curves):
    """Expected mode with Adam: the cosine to ∇J of the step Adam actually takes from the exact means."""
    return curve_chart(curves, "step_cosine", False, height=200,
                       title="cosine to ∇J of the step Adam takes from E ĝ (it rescales each coordinate)")


def logged_chart(frame, estimator, colour, marks=None, height=300):
    """One estimator's J (solid) and the logged reward E_μ[r] (dotted), with the gap between them shaded; a lesson's
    ``marks`` on it."""
    names = {"J": "J = E_π[r] (true)", "logged_reward": "E_μ[r] (what the log shows)"}
    long = frame.melt(id_vars=["step"], value_vars=list(names), var_name="series", value_name="value")
    long["series"] = long["series"].map(names)
    gap = alt.Chart(frame).mark_area(opacity=0.18, color=colour).encode(
        alt.X("step:Q"), alt.Y("J:Q"), alt.Y2("logged_reward:Q"))
    x, y = alt.X("step:Q", title="step k", axis=STEP_AXIS), alt.Y("value:Q", title="reward")
    lines = alt.Chart(long).mark_line(strokeWidth=2.5, color=colour).encode(
        x, y, alt.StrokeDash("series:N", legend=alt.Legend(title=None, orient="top", direction="vertical"),
                             scale=alt.Scale(domain=list(names.values()), range=[[1, 0], [2, 3]])),
        tips("series:N", "step:Q", alt.Tooltip("value:Q", format=".4f")))
    annotations = mark_layers(marks, x_end=frame["step"].max()) if marks is not None else []
    return readable(alt.layer(gap, lines, *annotations, height=height, title=f"{estimator}: the training log against J"))


def sga_chart(curves, monte_carlo, chosen_lr, adam=None):
    """Expected one-step improvement against lr (log x): second-order lines, Monte Carlo points with ±2 s.e. bars
    (hollow and dashed where the tail check fails: that interval is not to be trusted); the dashed rule is the
    training lr as a plain step; with Adam, diamonds: its actual step, at the lr of a plain step as long."""
    ids = list(dict.fromkeys(list(curves["estimator"]) + list(monte_carlo["estimator"])))
    highlight = legend_highlight()
    x = alt.X("lr:Q", title="step size lr", scale=alt.Scale(type="log"))
    colour = estimator_colour(ids)
    scale = alt.Scale(type="symlog", constant=SYMLOG_CONSTANT)
    y = alt.Y("improvement:Q", title="E[J(θ + lr·ĝ_N)] − J(θ)  (symlog)", scale=scale)
    lines = holding_highlight(alt.Chart(curves).mark_line(strokeWidth=2.5).encode(
        x, y, colour, highlighted_opacity(),
        tips("estimator:N", alt.Tooltip("lr:Q", format=".3g"),
             alt.Tooltip("improvement:Q", format=".4f", title="second order"))), highlight)
    point_tips = tips("estimator:N", alt.Tooltip("lr:Q", format=".3g"),
                      alt.Tooltip("mean:Q", format=".4f", title="Monte Carlo"), alt.Tooltip("se:Q", format=".4f", title="s.e."),
                      alt.Tooltip("agrees:N", title="second order within 2 s.e."),
                      alt.Tooltip("trusted:N", title="interval trusted"))
    untrusted = monte_carlo["trusted"] == TRUST[False]
    layers = [lines]
    for keep, filled, dash in ((~untrusted, True, [1, 0]), (untrusted, False, [3, 3])):
        if not keep.any():
            continue                    # no empty layers: Vega-Lite warns of an infinite extent
        data = alt.Chart(monte_carlo[keep])
        layers.append(data.mark_rule(strokeWidth=2, strokeDash=dash).encode(
            x, alt.Y("low:Q", scale=scale), alt.Y2("high:Q"), colour, highlighted_opacity()))
        layers.append(data.mark_point(size=70, filled=filled, strokeWidth=2).encode(
            x, alt.Y("mean:Q", scale=scale), colour, highlighted_opacity(), point_tips))
    if adam is not None and len(adam):
        layers.append(alt.Chart(adam).mark_point(shape="diamond", size=160, filled=True, stroke=TEXT,
                                                 strokeWidth=1).encode(
            x, alt.Y("mean:Q", scale=scale), colour, highlighted_opacity(),
            tips("estimator:N", alt.Tooltip("lr:Q", format=".3g", title="Adam's step as a plain lr"),
                 alt.Tooltip("mean:Q", format=".4f", title="Monte Carlo, Adam's step"),
                 alt.Tooltip("se:Q", format=".4f", title="s.e."))))
    layers.append(alt.Chart(pd.DataFrame({"lr": [float(chosen_lr)]})).mark_rule(
        color=DISTRIBUTION_COLOUR, strokeDash=[6, 4], strokeWidth=2).encode(
        x=alt.X("lr:Q"), tooltip=[alt.Tooltip("lr:Q", title="training lr, as a plain step θ + lr·ĝ_N")]))
    return readable(alt.layer(
        *layers, height=380,
        title="one step: expected improvement of J (lines: exact to second order; dots: Monte Carlo"
              + ("; diamonds: Adam's actual step)" if adam is not None and len(adam) else ")")))
