"""Altair charts of the sweep views (a threshold, the sampler, the length T): pure functions of
``sweep_frames`` frames, no computation.

Estimator colours come from the registry (``charts.colour_scale``); clicking a legend entry highlights an
estimator in every panel (the legend selection lives in the first panel, the others read it); panels stack
vertically over a shared x.
"""

import altair as alt

from toylab.presentation.charts import (
    DISTRIBUTION_COLOUR,
    colour_scale,
    highlighted_opacity,
    legend_highlight,
    readable,
    tips,
)
from toylab.presentation.sweep_frames import METRICS, STD_RATIO

PANEL_HEIGHT, PANEL_WIDTH = 230, 540
QUANTITY_COLOURS = alt.Scale(scheme="dark2")


def estimator_colour(ids, legend=True):
    """Registry colours; the legend (only ``ids``) sits on the right of the stacked panels."""
    return alt.Color("estimator:N", scale=colour_scale(),
                     legend=alt.Legend(title="estimator", values=list(ids), orient="right") if legend else None)


def _resolve(**scales):
    """A compound chart's scale resolution, given when it is built: ``resolve_scale``, like every method that
    changes a layered or concatenated chart, copies all of it (Altair deep-copies the subcharts)."""
    return alt.Resolve(scale=alt.ScaleResolveMap(**scales))


def _y(title, log):
    return alt.Y("value:Q", title=title, scale=alt.Scale(type="log" if log else "linear"))


def _estimator_lines(data, x, y, ids, highlight, first):
    """One line per estimator in its registry colour, faded unless highlighted in the legend."""
    opacity = highlighted_opacity()
    lines = data.mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=30)).encode(
        x=x, y=y, color=estimator_colour(ids, legend=first), opacity=opacity,
        tooltip=tips("estimator:N", alt.Tooltip(x.shorthand, format=".4g"), alt.Tooltip("value:Q", format=".4g")))
    return lines.add_params(highlight) if first else lines


def _vertical_rule(value, field, tooltip_title, log_x):
    return alt.Chart(alt.Data(values=[{field: value}])).mark_rule(
        color=DISTRIBUTION_COLOUR, strokeDash=[6, 4], strokeWidth=2).encode(
        x=alt.X(f"{field}:Q", scale=alt.Scale(type="log" if log_x else "linear")),
        tooltip=[alt.Tooltip(f"{field}:Q", format=".4g", title=tooltip_title)])


def threshold_chart(frame, rule_of_thumb):
    """Relative bias, std and RMSE at N against the threshold (log x), per thresholded estimator. Diamonds:
    each estimator's lowest-RMSE threshold; hollow circles: the chosen one; dashed grey rule: the rule of
    thumb C* = sqrt(2(1 + χ²_seq)) for seq_tis."""
    ids = list(dict.fromkeys(frame["estimator"]))
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    x = alt.X("threshold:Q", title="threshold (C; hi for bands; δ for k3_rs; ε for trm)",
              scale=alt.Scale(type="log"))
    panels = []
    for index, (metric, log_y) in enumerate((("relative bias", False), ("relative std at N", True),
                                             ("relative RMSE at N", True))):
        data = alt.Chart(frame).transform_filter(alt.datum.metric == metric)
        y = _y(metric, log_y)
        lines = _estimator_lines(data, x, y, ids, highlight, first=index == 0)
        marks = [data.transform_filter(getattr(alt.datum, field)).mark_point(**style).encode(
            x=x, y=y, color=estimator_colour(ids, legend=False), opacity=opacity,
            tooltip=tips("estimator:N", alt.Tooltip("threshold:Q", format=".4g", title=title)))
            for field, title, style in (("best", "lowest RMSE at N", {"shape": "diamond", "size": 170, "filled": True}),
                                        ("chosen", "chosen", {"size": 150, "strokeWidth": 2.5}))]
        rule = _vertical_rule(rule_of_thumb, "C*", "C* = sqrt(2(1 + χ²_seq))", log_x=True)
        panels.append(alt.layer(lines, *marks, rule, height=PANEL_HEIGHT, width=PANEL_WIDTH))
    return readable(alt.vconcat(
        *panels, resolve=_resolve(x="shared"),
        title=f"exact, against the threshold · dashed: C* = sqrt(2(1 + χ²_seq)) = {rule_of_thumb:.3g}"))


SWEPT_AXES = {"mismatch": ("mismatch (scale of the logit error b)", False), "top_p": ("top-p", False),
              "temperature": ("sampler temperature τ", True)}      # title, log x


def sampler_chart(estimators, divergences, floor, chosen, parameter="mismatch"):
    """Relative bias (linear) and relative RMSE at N (log) of each estimator as one sampler parameter moves, over
    the toy's KL(μ‖π), χ²_seq and π-mass out of reach (log); in the bias panel the bias floor (black, dashed)
    where the sampler truncates; the dashed grey rule is the chosen value."""
    ids = list(dict.fromkeys(estimators["estimator"]))
    highlight = legend_highlight()
    title, log_x = SWEPT_AXES[parameter]
    x = alt.X(f"{parameter}:Q", title=title, scale=alt.Scale(type="log" if log_x else "linear"))
    rule = _vertical_rule(chosen, f"chosen {parameter}", f"chosen {parameter}", log_x=log_x)
    panels = []
    for index, (metric, log_y) in enumerate((("relative bias", False), ("relative RMSE at N", True))):
        data = alt.Chart(estimators).transform_filter(alt.datum.metric == metric)
        layers = [_estimator_lines(data, x, _y(metric, log_y), ids, highlight, first=index == 0), rule]
        if index == 0 and len(floor):
            layers.append(alt.Chart(floor).mark_line(color="black", strokeDash=[8, 4], strokeWidth=2).encode(
                x=x, y=alt.Y("value:Q"), tooltip=[alt.Tooltip(f"{parameter}:Q", format=".4g"),
                                                  alt.Tooltip("value:Q", format=".4g", title="bias floor")]))
        panels.append(alt.layer(*layers, height=PANEL_HEIGHT, width=PANEL_WIDTH))
    divergence = alt.Chart(divergences).mark_line(strokeWidth=2.5, strokeDash=[2, 2]).encode(
        x=x, y=_y("divergence of μ from π", log=True),
        color=alt.Color("quantity:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title="toy")),
        tooltip=tips("quantity:N", alt.Tooltip(f"{parameter}:Q", format=".3g"), alt.Tooltip("value:Q", format=".4g")))
    panels.append(alt.layer(divergence, rule, height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH))
    return readable(alt.vconcat(*panels, resolve=_resolve(x="shared", color="independent"),
                                title="exact, θ and b fixed (same seed), only the sampler moves"))


def _method_points(data, x, y, colour, opacity, tooltip):
    """Filled points for exact values, hollow for Monte Carlo, and ±2 s.e. bars for Monte Carlo."""
    shape = alt.Shape("method:N", legend=alt.Legend(title="computed by"),
                      scale=alt.Scale(domain=["exact (enumeration)", "exact (recursion)", "Monte Carlo"],
                                      range=["circle", "square", "triangle-up"]))
    points = data.mark_point(size=60, filled=True).encode(x=x, y=y, color=colour, shape=shape, opacity=opacity,
                                                          tooltip=tooltip)
    bars = data.transform_filter(alt.datum.monte_carlo).mark_rule(strokeWidth=2).encode(
        x=x, y=alt.Y("lower:Q"), y2=alt.Y2("upper:Q"), color=colour, opacity=opacity)
    return [points, bars]


def length_chart(divergences, probabilities, estimators):
    """Against T (log x): χ²_seq and the ESS fraction (log y); P(W > C) and P(ρ_geo outside band) (linear);
    each estimator's relative bias and its std ÷ on-policy std at the same T (log y). Point shape says how
    each value was computed; Monte Carlo points carry ±2 s.e. bars."""
    x = alt.X("T:Q", title="T (tokens per sequence)", scale=alt.Scale(type="log", base=2))
    quantity = alt.Color("quantity:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title="toy"))
    tooltip = tips("quantity:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N")
    divergence = alt.Chart(divergences).mark_line(strokeWidth=2.5, point=True).encode(
        x=x, y=_y("χ²_seq and ESS fraction", log=True), color=quantity, tooltip=tooltip)
    probability_data = alt.Chart(probabilities)
    probability = alt.layer(
        probability_data.mark_line(strokeWidth=2).encode(x=x, y=_y("probability under μ", log=False), color=quantity),
        *_method_points(probability_data, x, alt.Y("value:Q"), quantity, alt.OpacityValue(1.0), tooltip),
        height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
    ids = list(dict.fromkeys(estimators["estimator"]))
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    panels = [divergence.properties(height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH),
              probability]
    for index, (metric, title) in enumerate(((METRICS["rel_bias"], "relative bias ‖E[ĝ] − ∇J‖ / ‖∇J‖"),
                                             (STD_RATIO, "std ÷ on-policy std (same T)"))):
        data = alt.Chart(estimators).transform_filter(alt.datum.metric == metric)
        y = _y(title, log=True)
        lines = data.mark_line(strokeWidth=2).encode(x=x, y=y, color=estimator_colour(ids, legend=index == 0),
                                                     detail=alt.Detail("estimator:N"), opacity=opacity)
        lines = lines.add_params(highlight) if index == 0 else lines
        tooltip = tips("estimator:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N")
        panels.append(alt.layer(lines, *_method_points(data, x, y, estimator_colour(ids, legend=False), opacity,
                                                        tooltip), height=PANEL_HEIGHT, width=PANEL_WIDTH))
    return readable(alt.vconcat(*panels, resolve=_resolve(x="shared", color="independent", shape="shared"),
                                title="against the sequence length T (V fixed)"))
