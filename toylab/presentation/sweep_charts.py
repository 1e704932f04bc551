"""Altair charts of the sweep views (a threshold, the sampler, the length T): pure functions of
``sweep_frames`` frames, no computation.

Estimator colours come from the registry (``charts.colour_scale``); clicking a legend entry highlights an
estimator in every panel (the legend selection lives in the first panel, the others read it). Panels stack
vertically over a shared x, legends above them, so the stack is no wider than a panel and its axis; or, given
``panel`` (presentation mode), the chart is that one panel alone, as wide as its column.
"""

import altair as alt
import pandas as pd

from toylab.presentation.charts import (
    DISTRIBUTION_COLOUR,
    TEXT,
    colour_scale,
    highlighted_opacity,
    holding_highlight,
    legend_highlight,
    mark_layers,
    readable,
    tips,
)
from toylab.presentation.sweep_frames import METRICS, STD_RATIO

PANEL_HEIGHT, PANEL_WIDTH = 230, 520
ALONE_HEIGHT = 240                  # one panel on its own (presentation mode), as wide as its column
LEGEND_COLUMNS = {False: 4, True: 6}     # above the stacked panels; above a panel alone
QUANTITY_COLOURS = alt.Scale(scheme="dark2")


def estimator_colour(ids, alone=False):
    """Registry colours; the legend (only ``ids``) sits above the panels in columns, more of them above a panel shown
    ``alone`` (full width); every layer of every panel gives the same legend, so there is one."""
    return alt.Color("estimator:N", scale=colour_scale(),
                     legend=alt.Legend(title="estimator", values=list(ids), orient="top", columns=LEGEND_COLUMNS[alone]))


def _quantity_colour(alone=False):
    return alt.Color("quantity:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title="toy", orient="top"))


def _resolve(**scales):
    """A compound chart's scale resolution, given when it is built: ``resolve_scale``, like every method that
    changes a layered or concatenated chart, copies all of it (Altair deep-copies the subcharts)."""
    return alt.Resolve(scale=alt.ScaleResolveMap(**scales))


def _y(title, log):
    return alt.Y("value:Q", title=title, scale=alt.Scale(type="log" if log else "linear"))


def _estimator_lines(data, x, y, ids, highlight, alone=False):
    """One line per estimator in its registry colour, faded unless highlighted in the legend (one legend for every
    panel: each gives it the same spec); the panel that holds the legend's selection gets ``highlight``."""
    opacity = highlighted_opacity()
    lines = data.mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=30)).encode(
        x=x, y=y, color=estimator_colour(ids, alone), opacity=opacity,
        tooltip=tips("estimator:N", alt.Tooltip(x.shorthand, format=".4g"), alt.Tooltip("value:Q", format=".4g")))
    return holding_highlight(lines, highlight) if highlight is not None else lines


def _vertical_rule(value, field, tooltip_title, log_x):
    """A dashed grey rule at x = value: a row of data, so the chart's spec does not change with it."""
    return alt.Chart(pd.DataFrame({field: [float(value)]})).mark_rule(
        color=DISTRIBUTION_COLOUR, strokeDash=[6, 4], strokeWidth=2).encode(
        x=alt.X(f"{field}:Q", scale=alt.Scale(type="log" if log_x else "linear")),
        tooltip=[alt.Tooltip(f"{field}:Q", format=".4g", title=tooltip_title)])


THRESHOLD_PANELS = {"bias": ("relative bias", False), "std": ("relative std at N", True),
                    "rmse": ("relative RMSE at N", True)}


def threshold_chart(frame, rule_of_thumb, panel=None, marks=None):
    """Relative bias, std and RMSE at N against the threshold (log x), per thresholded estimator. Diamonds:
    each estimator's lowest-RMSE threshold; hollow circles: the chosen one; dashed grey rule: the rule of
    thumb C* = sqrt(2(1 + χ²_seq)) for seq_tis. ``panel``: one of THRESHOLD_PANELS alone; ``marks``: a lesson's
    annotations (``frames.mark_frame``) on the RMSE panel."""
    ids = list(dict.fromkeys(frame["estimator"]))
    opacity = highlighted_opacity()
    x = alt.X("threshold:Q", title="threshold (C; hi for bands; δ for k3_rs; ε for trm)",
              scale=alt.Scale(type="log"))

    def build(name, leading):
        metric, log_y = THRESHOLD_PANELS[name]
        data = alt.Chart(frame).transform_filter(alt.datum.metric == metric)
        y = _y(metric, log_y)
        lines = _estimator_lines(data, x, y, ids, legend_highlight() if leading else None, alone=panel is not None)
        points = [data.transform_filter(getattr(alt.datum, field)).mark_point(**style).encode(
            x=x, y=y, color=estimator_colour(ids, panel is not None), opacity=opacity,
            tooltip=tips("estimator:N", alt.Tooltip("threshold:Q", format=".4g", title=title)))
            for field, title, style in (("best", "lowest RMSE at N", {"shape": "diamond", "size": 170, "filled": True}),
                                        ("chosen", "chosen", {"size": 150, "strokeWidth": 2.5}))]
        rule = _vertical_rule(rule_of_thumb, "C*", "C* = sqrt(2(1 + χ²_seq))", log_x=True)
        annotations = mark_layers(marks) if marks is not None and name == "rmse" else []
        return alt.layer(lines, *points, rule, *annotations, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    names = list(THRESHOLD_PANELS)
    title = "exact, against the threshold · dashed: C* = sqrt(2(1 + χ²_seq)) (hover for its value)"
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([build(name, leading=index == 0) for index, name in enumerate(names)], title)


SWEPT_AXES = {"mismatch": ("mismatch (scale of the logit error b)", False), "top_p": ("top-p", False),
              "temperature": ("sampler temperature τ", True)}      # title, log x


def sampler_chart(estimators, divergences, floor, chosen, parameter="mismatch", panel=None):
    """Relative bias (linear) and relative RMSE at N (log) of each estimator as one sampler parameter moves, over
    the toy's KL(μ‖π), χ²_seq and π-mass out of reach (log); in the bias panel the bias floor (dashed, in the text colour)
    where the sampler truncates; the dashed grey rule is the chosen value. ``panel``: "rmse", "bias" or
    "divergence" alone."""
    ids = list(dict.fromkeys(estimators["estimator"]))
    axis_title, log_x = SWEPT_AXES[parameter]
    x = alt.X(f"{parameter}:Q", title=axis_title, scale=alt.Scale(type="log" if log_x else "linear"))
    rule = _vertical_rule(chosen, f"chosen {parameter}", f"chosen {parameter}", log_x=log_x)

    def build(name, leading):
        if name == "divergence":
            divergence = alt.Chart(divergences).mark_line(strokeWidth=2.5, strokeDash=[2, 2]).encode(
                x=x, y=_y("divergence of μ from π", log=True), color=_quantity_colour(panel is not None),
                tooltip=tips("quantity:N", alt.Tooltip(f"{parameter}:Q", format=".3g"),
                             alt.Tooltip("value:Q", format=".4g")))
            return alt.layer(divergence, rule, height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
        metric, log_y = {"bias": ("relative bias", False), "rmse": ("relative RMSE at N", True)}[name]
        data = alt.Chart(estimators).transform_filter(alt.datum.metric == metric)
        layers = [_estimator_lines(data, x, _y(metric, log_y), ids, legend_highlight() if leading else None,
                                   alone=panel is not None), rule]
        if name == "bias" and len(floor):
            layers.append(alt.Chart(floor).mark_line(color=TEXT, strokeDash=[8, 4], strokeWidth=2).encode(
                x=x, y=alt.Y("value:Q"), tooltip=[alt.Tooltip(f"{parameter}:Q", format=".4g"),
                                                  alt.Tooltip("value:Q", format=".4g", title="bias floor")]))
        return alt.layer(*layers, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    title = "exact, θ and b fixed (same seed), only the sampler moves"
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([build(name, leading=index == 0) for index, name in enumerate(("bias", "rmse", "divergence"))],
                  title, color="independent")


def _method_points(frame, x, y, colour, opacity, tooltip):
    """Filled points whose shape says how each value was computed, and ±2 s.e. bars for the Monte Carlo ones (a
    layer only when there are any: an empty one makes Vega-Lite warn of an infinite extent)."""
    shape = alt.Shape("method:N", legend=alt.Legend(title="computed by", orient="top"),
                      scale=alt.Scale(domain=["exact (enumeration)", "exact (recursion)", "Monte Carlo"],
                                      range=["circle", "square", "triangle-up"]))
    points = alt.Chart(frame).mark_point(size=60, filled=True).encode(x=x, y=y, color=colour, shape=shape,
                                                                      opacity=opacity, tooltip=tooltip)
    sampled = frame[frame["monte_carlo"]]
    bars = alt.Chart(sampled).mark_rule(strokeWidth=2).encode(x=x, y=alt.Y("lower:Q"), y2=alt.Y2("upper:Q"),
                                                              color=colour, opacity=opacity)
    return [points, bars] if len(sampled) else [points]


LENGTH_PANELS = ("divergence", "probability", "bias", "std_ratio")


def length_chart(divergences, probabilities, estimators, panel=None, marks=None):
    """Against T (log x): χ²_seq and the ESS fraction (log y); P(W > C) and P(ρ_geo outside band) (linear);
    each estimator's relative bias and its std ÷ on-policy std at the same T (log y). Point shape says how
    each value was computed; Monte Carlo points carry ±2 s.e. bars. ``panel``: one of LENGTH_PANELS alone;
    ``marks``: a lesson's annotations on the std-ratio panel."""
    x = alt.X("T:Q", title="T (tokens per sequence)", scale=alt.Scale(type="log", base=2))
    tooltip = tips("quantity:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N")
    ids = list(dict.fromkeys(estimators["estimator"]))
    opacity = highlighted_opacity()

    alone = panel is not None

    def build(name, leading):
        if name == "divergence":
            return alt.Chart(divergences).mark_line(strokeWidth=2.5, point=True).encode(
                x=x, y=_y("χ²_seq and ESS fraction", log=True), color=_quantity_colour(alone), tooltip=tooltip
            ).properties(height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
        if name == "probability":
            colour = _quantity_colour(alone)
            return alt.layer(
                alt.Chart(probabilities).mark_line(strokeWidth=2).encode(
                    x=x, y=_y("probability under μ", log=False), color=colour),
                *_method_points(probabilities, x, alt.Y("value:Q"), colour, alt.OpacityValue(1.0), tooltip),
                height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
        metric, title = {"bias": (METRICS["rel_bias"], "relative bias ‖E[ĝ] − ∇J‖ / ‖∇J‖"),
                         "std_ratio": (STD_RATIO, "std ÷ on-policy std (same T)")}[name]
        frame = estimators[estimators["metric"] == metric]
        y = _y(title, log=True)
        lines = alt.Chart(frame).mark_line(strokeWidth=2).encode(x=x, y=y, color=estimator_colour(ids, alone),
                                                                 detail=alt.Detail("estimator:N"), opacity=opacity)
        lines = holding_highlight(lines, legend_highlight()) if leading else lines
        points = _method_points(frame, x, y, estimator_colour(ids, alone), opacity,
                                tips("estimator:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N"))
        annotations = mark_layers(marks) if marks is not None and name == "std_ratio" else []
        return alt.layer(lines, *points, *annotations, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    title = "against the sequence length T (V fixed)"
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([build(name, leading=name == "bias") for name in LENGTH_PANELS], title, color="independent",
                  shape="shared")


def _stack(panels, title, **scales):
    """Panels one above the other over a shared x, their legends above them."""
    return readable(alt.vconcat(*panels, resolve=_resolve(x="shared", **scales), title=title))


def _alone(panel, title):
    """One panel as the whole chart: full width (the page draws it as wide as its column), taller."""
    panel.height, panel.width, panel.title = ALONE_HEIGHT, "container", title
    return readable(panel)
