"""Altair charts of the staleness view: pure functions of ``staleness_frames`` frames, no computation.

J's axis runs from 0 to 1 on every panel (J is a probability: a zoomed axis would make the last thousandths of a
saturated run look like a gap). The lags are coloured from dark (no lag) to light (the largest), colour-blind safe;
on_policy, the reference, is grey and long-dashed; a lag's line that lies on another in phased short dashes over it,
named in the legend (``coincidence``). The steps chart colours the objectives.
"""

import altair as alt
import pandas as pd

from toylab.presentation.charts import (
    DISTRIBUTION_COLOUR,
    TEXT,
    legend_names,
    line_dash,
    mark_layers,
    readable,
    tips,
)
from toylab.presentation.staleness_frames import LAG_WORDS, REFERENCE, SHORT, lag_name, never_at

LAG_COLOURS = ("#440154", "#443983", "#31688e", "#21918c", "#35b779", "#90d743")     # viridis to 0.85: no pale end
REFERENCE_COLOUR = "#7F7F7F"
OBJECTIVE_COLOURS = {"bypass": "#D55E00", "decoupled": "#0072B2", "recompute": "#009E73", "capped": "#CC79A7"}
PAD = alt.AutoSizeParams(type="pad", contains="padding")    # panels side by side keep their sizes ("fit" is for one)
PANELS_WIDTH = 480              # the panels' plots together, pixels: with their axes and the legend they fit 820 px
STEP_AXIS = alt.Axis(format="d", tickMinStep=1)
LAG_AXIS_VALUES = (0, 1, 2, 4, 8, 16)


def _lag_colour(lags, draw, labels):
    names = [REFERENCE, *(lag_name(lag) for lag in lags)]
    return alt.Color("series:N", sort=names, title=LAG_WORDS[draw],
                     scale=alt.Scale(domain=names, range=[REFERENCE_COLOUR, *LAG_COLOURS[:len(lags)]]),
                     legend=alt.Legend(orient="right", labelExpr=legend_names(labels)))


def curves_chart(frame, lags, draw, target, marks=None, height=220, labels=None):
    """J against step k, one panel per objective, one line per lag and on_policy's in each; a dotted rule at the
    ``target``; a lesson's ``marks`` (``frames.mark_frame`` with a ``panel`` column) on the panel each names."""
    objectives = list(dict.fromkeys(frame["objective"]))
    width = PANELS_WIDTH // len(objectives)
    colour = _lag_colour(lags, draw, labels)
    x = alt.X("step:Q", title="step k", axis=STEP_AXIS)
    rule = alt.Chart(pd.DataFrame({"J": [float(target)]})).mark_rule(color=TEXT, strokeDash=[2, 3]).encode(
        y=alt.Y("J:Q"), tooltip=[alt.Tooltip("J:Q", format=".4f", title="target: 0.9 × on_policy's last J")])
    panels = []
    for index, objective in enumerate(objectives):
        y = alt.Y("J:Q", title="J = E_π[r]" if index == 0 else None, scale=alt.Scale(domain=[0, 1]))
        lines = alt.Chart(frame).transform_filter(alt.datum.objective == objective).mark_line(strokeWidth=2).encode(
            x, y, colour, line_dash(),
            tooltip=tips(alt.Tooltip("series:N", title="lag"), "step:Q", alt.Tooltip("J:Q", format=".4f")))
        own = marks[marks["panel"] == objective] if marks is not None else None
        annotations = mark_layers(own, x_end=frame["step"].max()) if own is not None and len(own) else []
        panels.append(alt.layer(lines, rule, *annotations, height=height, width=width, title=SHORT[objective]))
    return readable(alt.hconcat(*panels, autosize=PAD,
                                resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="shared", y="shared")),
                                title=f"J against step at each {LAG_WORDS[draw].split(' (')[0]} (grey, long dashes: "
                                      "on_policy; dotted: the target)"))


def steps_chart(frame, steps, draw, height=220, labels=None):
    """Steps to the target against the lag, one line per objective (one that lies on another in short dashes over it,
    named in the legend: ``labels``); "never" (not within the K steps) as a cross above the run's end, the dotted
    rule."""
    order = list(dict.fromkeys(frame["objective"]))
    colour = alt.Color("objective:N", title=None, sort=order,
                       scale=alt.Scale(domain=order, range=[OBJECTIVE_COLOURS[name] for name in order]),
                       legend=alt.Legend(orient="bottom", columns=2, labelExpr=legend_names(labels)))
    x = alt.X("lag:Q", title=LAG_WORDS[draw].split(" (")[0], scale=alt.Scale(type="symlog"),
              axis=alt.Axis(values=sorted(frame["lag"].unique().tolist()), format="d"))
    y = alt.Y("drawn:Q", title="steps to the target", scale=alt.Scale(domain=[0, never_at(steps)]))
    tooltip = tips(alt.Tooltip("label:N", title="objective"), alt.Tooltip("lag:Q", title="lag"),
                   alt.Tooltip("steps:Q", title="steps"), alt.Tooltip("never:N", title=f"not within {steps}"))
    reached = frame[~frame["never"]]
    layers = [alt.Chart(reached).mark_line(point=True, strokeWidth=2).encode(x, y, colour, line_dash(),
                                                                             tooltip=tooltip)]
    if frame["never"].any():
        layers.append(alt.Chart(frame[frame["never"]]).mark_point(shape="cross", size=110, filled=True).encode(
            x, y, colour, tooltip=tooltip))
    layers.append(alt.Chart(pd.DataFrame({"drawn": [float(steps)]})).mark_rule(
        color=DISTRIBUTION_COLOUR, strokeDash=[2, 3]).encode(y=alt.Y("drawn:Q")))
    return readable(alt.layer(*layers, height=height, title=f"steps to the target (crosses: not within {steps})"))


def population_chart(frame, steps, draw, height=170):
    """Steps to the target against the lag on every toy of a population, one panel per objective: each other toy a
    thin grey line, the current toy bold in the objective's colour; "never" above the run's end."""
    objectives = list(dict.fromkeys(frame["objective"]))
    x = alt.X("lag:Q", title=LAG_WORDS[draw].split(" (")[0], scale=alt.Scale(type="symlog"),
              axis=alt.Axis(values=sorted(frame["lag"].unique().tolist()), format="d"))
    y = alt.Y("drawn:Q", title="steps to the target", scale=alt.Scale(domain=[0, never_at(steps)]))
    tooltip = tips("seed:Q", alt.Tooltip("lag:Q", title="lag"), alt.Tooltip("drawn:Q", title="steps"),
                   alt.Tooltip("never:N", title=f"not within {steps}"))
    panels = []
    for objective in objectives:
        rows = frame[frame["objective"] == objective]
        others = alt.Chart(rows[~rows["current"]]).mark_line(strokeWidth=1, opacity=0.35, color=DISTRIBUTION_COLOUR
                                                             ).encode(x, y, alt.Detail("seed:N"), tooltip=tooltip)
        colour = OBJECTIVE_COLOURS[objective]
        here = alt.Chart(rows[rows["current"]]).mark_line(
            strokeWidth=3, color=colour, point=alt.OverlayMarkDef(color=colour)).encode(x, y, tooltip=tooltip)
        panels.append(alt.layer(others, here, height=height, width=PANELS_WIDTH // len(objectives),
                                title=SHORT[objective]))
    return readable(alt.hconcat(*panels, autosize=PAD, resolve=alt.Resolve(scale=alt.ScaleResolveMap(y="shared")),
                                title="steps to the target on 30 toys (grey; bold: this toy; at the top: not within "
                                      f"{steps} steps)"))
