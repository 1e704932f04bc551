"""Altair charts of the sweep views (a threshold, the sampler, the length T): pure functions of
``sweep_frames`` frames, no computation.

Estimator colours come from the registry (``charts.colour_scale``); clicking a legend entry highlights an
estimator in every panel (the legend selection lives in the first panel, the others read it). Panels stack
vertically over a shared x, legends above them, so the stack is no wider than a panel and its axis; or, given
``panel`` (presentation mode), the chart is that one panel alone, as wide as its column.
"""

import altair as alt
import pandas as pd

from toylab.analysis.sweeps import PRECISION_ORDER
from toylab.presentation.charts import (
    DISTRIBUTION_COLOUR,
    LOG_FIT,
    TEXT,
    colour_scale,
    highlighted_opacity,
    holding_highlight,
    legend_columns,
    legend_highlight,
    legend_names,
    line_dash,
    mark_layers,
    readable,
    tips,
)
from toylab.presentation.sweep_frames import METRICS, STD_RATIO

PANEL_HEIGHT, PANEL_WIDTH = 230, 520
ALONE_HEIGHT = 240                  # one panel on its own (presentation mode), as wide as its column
MOST_LEGEND_COLUMNS = 4                  # above the stacked panels, as many as fit their width; beside a panel alone, 1
LEGEND_ORIENT = {False: "top", True: "right"}
AXIS_WIDTH = 80                          # a panel's value axis, its labels and title, left of the plot
QUANTITY_COLOURS = alt.Scale(scheme="dark2")


def estimator_colour(ids, alone=False, labels=None):
    """Registry colours; the legend (only ``ids``, with ``labels`` for those that lie on another) sits above the panels
    in as many columns as their width holds, or beside a panel shown ``alone`` (full width: its height is the plot's);
    every layer of every panel gives the same legend, so there is one."""
    texts = [(labels or {}).get(id, id) for id in ids]
    columns = 1 if alone else legend_columns(texts, PANEL_WIDTH + AXIS_WIDTH, MOST_LEGEND_COLUMNS)
    return alt.Color("estimator:N", scale=colour_scale(),
                     legend=alt.Legend(title="estimator", values=list(ids), orient=LEGEND_ORIENT[alone],
                                       columns=columns, labelExpr=legend_names(labels)))


def _quantity_colour(alone=False):
    return alt.Color("quantity:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title="toy", orient=LEGEND_ORIENT[alone]))


def _resolve(**scales):
    """A compound chart's scale resolution, given when it is built: ``resolve_scale``, like every method that
    changes a layered or concatenated chart, copies all of it (Altair deep-copies the subcharts)."""
    return alt.Resolve(scale=alt.ScaleResolveMap(**scales))


def _y(title, log):
    """The value axis; a log one fits its data (no rounding out to whole decades) with a few pixels to spare."""
    return alt.Y("value:Q", title=title, scale=LOG_FIT if log else alt.Undefined)


def _estimator_lines(data, x, y, ids, highlight, alone=False, labels=None):
    """One line per estimator in its registry colour, dashed by its ``line`` style (``sweep_frames.styled``: one that
    lies on another in phased short dashes over it, a second batch size's long-dashed), faded unless highlighted in
    the legend (one legend for every panel: each gives it the same spec); the panel that holds the legend's selection
    gets ``highlight``."""
    opacity = highlighted_opacity()
    lines = data.mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=30)).encode(
        x=x, y=y, color=estimator_colour(ids, alone, labels), strokeDash=line_dash(), opacity=opacity,
        tooltip=tips("estimator:N", _x_tip(x), alt.Tooltip("value:Q", format=".4g")))
    return holding_highlight(lines, highlight) if highlight is not None else lines


def _x_tip(x):
    """The x value in a tooltip: a number to 4 significant digits, a name as it is."""
    return alt.Tooltip(x.shorthand, format=".4g") if x.shorthand.endswith(":Q") else alt.Tooltip(x.shorthand)


def _vertical_rule(value, field, tooltip_title, log_x):
    """A dashed grey rule at x = value (a number, or a name on a nominal axis: ``log_x`` None): a row of data, so the
    chart's spec does not change with it."""
    nominal = log_x is None
    x = alt.X(f"{field}:N") if nominal else alt.X(f"{field}:Q", scale=alt.Scale(type="log" if log_x else "linear"))
    return alt.Chart(pd.DataFrame({field: [value if nominal else float(value)]})).mark_rule(
        color=DISTRIBUTION_COLOUR, strokeDash=[6, 4], strokeWidth=2).encode(
        x=x, tooltip=[alt.Tooltip(f"{field}:N", title=tooltip_title) if nominal else
                      alt.Tooltip(f"{field}:Q", format=".4g", title=tooltip_title)])


THRESHOLD_PANELS = {"bias": (METRICS["rel_bias"], False), "std": (METRICS["rel_std"], True),
                    "rmse": (METRICS["rel_rmse"], True)}          # name: (metric, log y)
SAMPLER_PANELS = {"bias": (METRICS["rel_bias"], False), "rmse": (METRICS["rel_rmse"], True)}   # and "divergence"
LENGTH_ESTIMATOR_PANELS = {"bias": (METRICS["rel_bias"], True), "std_ratio": (STD_RATIO, True)}


def drawn_panels(panels, panel=None):
    """{metric: whether its y axis is log} of the estimators' panels a chart draws: every one in ``panels`` (its table
    above), or only ``panel`` (presentation mode; none when that panel draws no estimator)."""
    return {metric: log for name, (metric, log) in panels.items() if panel in (None, name)}


def threshold_chart(frame, rule_of_thumb, panel=None, marks=None, labels=None):
    """Relative bias, std and RMSE at N against the threshold (log x), per thresholded estimator. Diamonds:
    each estimator's lowest-RMSE threshold; hollow circles: the chosen one; dashed grey rule: the rule of
    thumb C* = sqrt(2(1 + χ²_seq)) for seq_tis, its value written at its top. With two batch sizes in ``frame``
    (``sweep_frames.compared_threshold_frame``) the second's std and RMSE are long-dashed (its ``line`` style). ``panel``: one of
    THRESHOLD_PANELS alone; ``marks``: a lesson's annotations (``frames.mark_frame``) on the RMSE panel."""
    frame = frame if "line" in frame else frame.assign(line="own")
    ids = frame["estimator"].unique().tolist()
    batches = frame["batch"].unique().tolist() if "batch" in frame else []
    opacity = highlighted_opacity()
    x = alt.X("threshold:Q", title="threshold (C; hi for bands; δ for k3_rs; ε for trm)",
              scale=alt.Scale(type="log"))

    def build(name, leading):
        metric, log_y = THRESHOLD_PANELS[name]
        data = alt.Chart(frame).transform_filter(alt.datum.metric == metric)
        y = _y(metric, log_y)
        lines = _estimator_lines(data, x, y, ids, legend_highlight() if leading else None, alone=panel is not None,
                                 labels=labels)
        points = [data.transform_filter(getattr(alt.datum, field)).mark_point(**style).encode(
            x=x, y=y, color=estimator_colour(ids, panel is not None, labels), opacity=opacity,
            tooltip=tips("estimator:N", *(["batch:N"] if len(batches) > 1 else []),
                         alt.Tooltip("threshold:Q", format=".4g", title=title)))
            for field, title, style in (("best", "lowest RMSE at N", {"shape": "diamond", "size": 170, "filled": True}),
                                        ("chosen", "chosen", {"size": 150, "strokeWidth": 2.5}))]
        rule = _vertical_rule(rule_of_thumb, "C*", "C* = sqrt(2(1 + χ²_seq))", log_x=True)
        label = alt.Chart(pd.DataFrame({"C*": [float(rule_of_thumb)]})).transform_calculate(
            text="'C* = ' + format(datum['C*'], '.3g')").mark_text(align="left", dx=4, baseline="top", y=4).encode(
            x=alt.X("C*:Q"), text=alt.Text("text:N"))
        annotations = mark_layers(marks) if marks is not None and name == "rmse" else []
        return alt.layer(lines, *points, rule, label, *annotations, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    names = list(THRESHOLD_PANELS)
    title = "exact, against the threshold · diamonds: the lowest RMSE · dashed grey: C* = sqrt(2(1 + χ²_seq))" + (
        f" · long dashes: at {batches[1]}" if len(batches) > 1 else "")
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([build(name, leading=index == 0) for index, name in enumerate(names)], title)


SWEPT_AXES = {"mismatch": ("mismatch (scale of the logit error b)", False), "top_p": ("top-p", False),
              "temperature": ("sampler temperature τ", True),
              "precision": ("logits rounded to (none, then ever coarser)", None)}   # title, log x (None: nominal)


def _swept_x(parameter):
    """The swept parameter's x channel: linear or log, or (precision) the names in PRECISION_ORDER."""
    title, log_x = SWEPT_AXES[parameter]
    if log_x is None:
        return alt.X(f"{parameter}:N", title=title, sort=list(PRECISION_ORDER), scale=alt.Scale(domain=list(PRECISION_ORDER)),
                     axis=alt.Axis(labelAngle=0))
    return alt.X(f"{parameter}:Q", title=title, scale=alt.Scale(type="log" if log_x else "linear"))


def sampler_chart(estimators, divergences, out_of_reach, chosen, parameter="mismatch", panel=None, marks=None, labels=None):
    """Relative bias (linear) and relative RMSE at N (log) of each estimator as one sampler parameter moves, over
    the toy's KL(μ‖π), χ²_seq and π-mass out of reach (log); in the bias panel ∇J's part out of reach (dashed, in the text colour: seq_is's bias)
    where the sampler truncates; the dashed grey rule is the chosen value. ``panel``: "rmse", "bias" or
    "divergence" alone; ``marks``: a lesson's annotations on the divergence panel."""
    estimators = estimators if "line" in estimators else estimators.assign(line="own")
    ids = estimators["estimator"].unique().tolist()
    _, log_x = SWEPT_AXES[parameter]
    x = _swept_x(parameter)
    rule = _vertical_rule(chosen, f"chosen {parameter}", f"chosen {parameter}", log_x=log_x)

    def build(name, leading):
        if name == "divergence":
            divergence = alt.Chart(divergences).mark_line(strokeWidth=2.5, point=True).encode(
                x=x, y=_y("divergence of μ from π", log=True), color=_quantity_colour(panel is not None),
                tooltip=tips("quantity:N", _x_tip(x), alt.Tooltip("value:Q", format=".4g")))
            annotations = mark_layers(marks, x_type="N" if log_x is None else "Q") if marks is not None else []
            return alt.layer(divergence, rule, *annotations, height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
        metric, log_y = SAMPLER_PANELS[name]
        data = alt.Chart(estimators).transform_filter(alt.datum.metric == metric)
        layers = [_estimator_lines(data, x, _y(metric, log_y), ids, legend_highlight() if leading else None,
                                   alone=panel is not None, labels=labels), rule]
        if name == "bias" and len(out_of_reach):
            layers.append(alt.Chart(out_of_reach).mark_line(color=TEXT, strokeDash=[8, 4], strokeWidth=2).encode(
                x=x, y=alt.Y("value:Q"), tooltip=[_x_tip(x), alt.Tooltip("value:Q", format=".4g",
                                                                          title="∇J out of reach (seq_is's bias)")]))
        return alt.layer(*layers, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    title = "exact, θ and b fixed (same seed), only the sampler moves"
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([_one_legend([build(name, leading=name == "bias") for name in SAMPLER_PANELS]),
                   build("divergence", leading=False)], title, color="independent")


METHOD_SHAPES = {"exact (enumeration)": "circle", "exact (recursion)": "square", "Monte Carlo": "triangle-up"}


def _method_points(frame, x, y, colour, opacity, tooltip, methods, alone=False):
    """Filled points whose shape says how each value was computed, the legend naming ``methods`` alone (the ways the
    chart draws: no Monte Carlo triangle while its toggle is off; one domain for panels that share the scale), and
    ±2 s.e. bars for the Monte Carlo ones (a layer only when there are any: an empty one makes Vega-Lite warn of an
    infinite extent)."""
    drawn = [(method, shape) for method, shape in METHOD_SHAPES.items() if method in methods]
    shape = alt.Shape("method:N", legend=alt.Legend(title="computed by", orient="top"),     # a row: beside a panel
                                                                                            # alone, under the estimators'
                                                                                            # it would be cut off
                      scale=alt.Scale(domain=[method for method, _ in drawn], range=[shape for _, shape in drawn]))
    points = alt.Chart(frame).mark_point(size=60, filled=True).encode(x=x, y=y, color=colour, shape=shape,
                                                                      opacity=opacity, tooltip=tooltip)
    sampled = frame[frame["monte_carlo"]]
    bars = alt.Chart(sampled).mark_rule(strokeWidth=2).encode(x=x, y=alt.Y("lower:Q"), y2=alt.Y2("upper:Q"),
                                                              color=colour, opacity=opacity)
    return [points, bars] if len(sampled) else [points]


LENGTH_PANELS = ("divergence", "probability", "bias", "std_ratio")
LENGTH_TITLES = {"bias": "relative bias ‖E[ĝ] − ∇J‖ / ‖∇J‖", "std_ratio": "std ÷ on-policy std (same T)"}


def length_chart(divergences, probabilities, estimators, panel=None, marks=None, labels=None):
    """Against T (log x): χ²_seq and the ESS fraction (log y); P(W > C) and P(ρ_geo outside band) (linear);
    each estimator's relative bias and its std ÷ on-policy std at the same T (log y). Point shape says how
    each value was computed; Monte Carlo points carry ±2 s.e. bars. ``panel``: one of LENGTH_PANELS alone;
    ``marks``: a lesson's annotations on the std-ratio panel."""
    x = alt.X("T:Q", title="T (tokens per sequence)", scale=alt.Scale(type="log", base=2))
    tooltip = tips("quantity:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N")
    ids = estimators["estimator"].unique().tolist()
    opacity = highlighted_opacity()
    alone = panel is not None
    shown = [probabilities, estimators] if panel is None else [probabilities if panel == "probability" else estimators]
    methods = set().union(*(frame["method"] for frame in shown))           # the ways drawn, for the shape legend

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
                *_method_points(probabilities, x, alt.Y("value:Q"), colour, alt.OpacityValue(1.0), tooltip, methods,
                                alone),
                height=PANEL_HEIGHT * 0.8, width=PANEL_WIDTH)
        metric, log_y = LENGTH_ESTIMATOR_PANELS[name]
        frame = estimators[estimators["metric"] == metric]
        frame = frame if "line" in frame else frame.assign(line="own")
        y = _y(LENGTH_TITLES[name], log=log_y)
        lines = alt.Chart(frame).mark_line(strokeWidth=2).encode(x=x, y=y, color=estimator_colour(ids, alone, labels),
                                                                 strokeDash=line_dash(), opacity=opacity)
        lines = holding_highlight(lines, legend_highlight()) if leading else lines
        points = _method_points(frame, x, y, estimator_colour(ids, alone, labels), opacity,
                                tips("estimator:N", "T:Q", alt.Tooltip("value:Q", format=".4g"), "method:N"), methods,
                                alone)
        annotations = mark_layers(marks) if marks is not None and name == "std_ratio" else []
        return alt.layer(lines, *points, *annotations, height=PANEL_HEIGHT, width=PANEL_WIDTH)

    title = "against the sequence length T (V fixed)"
    if panel is not None:
        return _alone(build(panel, leading=True), title)
    return _stack([build("divergence", False), build("probability", False),
                   _one_legend([build(name, leading=name == "bias") for name in LENGTH_ESTIMATOR_PANELS])],
                  title, color="independent", shape="shared")


def capped_chart(frame, cap, marks=None):
    """Against T (log x), one position repeated T times: E_μ[min(W, C)] of the sequence ratio and E_μ[min(ρ_geo, C)]
    of its geometric mean (linear y from 0), a dotted rule at 1 (E_μ[W] without the cap, for a
    sampler that keeps every token); ``marks``: a lesson's."""
    x = alt.X("T:Q", title="T (copies of the first position)", scale=alt.Scale(type="log", base=2))
    y = alt.Y("value:Q", title=f"mean, capped at C = {cap:g}", scale=alt.Scale(domainMin=0))
    colour = alt.Color("quantity:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title=None, orient="top"))
    lines = alt.Chart(frame).mark_line(strokeWidth=2.5, point=True).encode(
        x=x, y=y, color=colour, tooltip=tips("quantity:N", "T:Q", alt.Tooltip("value:Q", format=".4g")))
    one = alt.Chart(pd.DataFrame({"value": [1.0]})).mark_rule(strokeDash=[2, 2], color=TEXT).encode(y="value:Q")
    annotations = mark_layers(marks, x_end=frame["T"].max()) if marks is not None else []
    return readable(alt.layer(lines, one, *annotations, height=PANEL_HEIGHT, width="container",
                              title="one position repeated: the sequence ratio W against its geometric mean"))


def _stack(panels, title, **scales):
    """Panels one above the other over a shared x, their legends above them."""
    return readable(alt.vconcat(*panels, resolve=_resolve(x="shared", **scales), title=title))


def _one_legend(panels):
    """The estimators' panels of a stack whose other panels colour something else (colours resolved independently):
    one block with one colour scale, so one estimator legend, above the first of them — its words speak of the panels
    under it (``sweep_frames.legend_words`` of those panels), where a legend over each would repeat one panel's words
    over another."""
    return alt.vconcat(*panels, resolve=_resolve(x="shared", color="shared"))


def _alone(panel, title):
    """One panel as the whole chart: full width (the page draws it as wide as its column), taller."""
    panel.height, panel.width, panel.title = ALONE_HEIGHT, "container", title
    return readable(panel)


PIPELINE_COLUMNS, PIPELINE_WIDTH = 2, 310     # two panels a row: each as wide as its pipeline's name (≈ 290 px),
                                                # both with the y axis within 1280 px beside the sidebar


def pipeline_chart(estimators, identity, chosen, parameter="temperature"):
    """Each estimator's relative bias as one sampler parameter moves (its x as the sampler sweep's: ``_swept_x``, the
    precisions by name), one small panel per pipeline (its frameworks in the tooltip), over the identity check E_μs[W]
    of every pipeline (log y, the dashed grey rule at the chosen value and a dotted one at 1)."""
    ids = estimators["estimator"].unique().tolist()
    _, log_x = SWEPT_AXES[parameter]
    x = _swept_x(parameter)
    panels = alt.Chart(estimators).mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=20)).encode(
        x=x, y=_y("relative bias", log=False), color=estimator_colour(ids),
        tooltip=tips("estimator:N", "pipeline:N", "frameworks:N", _x_tip(x), alt.Tooltip("value:Q", format=".4g"))
    ).properties(height=PANEL_HEIGHT * 0.7, width=PIPELINE_WIDTH).facet(
        facet=alt.Facet("pipeline:N", title=None, sort=estimators["pipeline"].unique().tolist()),
        columns=PIPELINE_COLUMNS)
    one = alt.Chart(pd.DataFrame({"value": [1.0]})).mark_rule(color=TEXT, strokeDash=[2, 3]).encode(y="value:Q")
    check = alt.layer(
        alt.Chart(identity).mark_line(strokeWidth=2.5).encode(
            x=x, y=_y("identity check E_μs[W]", log=True),
            color=alt.Color("pipeline:N", scale=QUANTITY_COLOURS, legend=alt.Legend(title="pipeline", orient="top",
                                                                                    columns=2)),
            tooltip=tips("pipeline:N", "frameworks:N", _x_tip(x), alt.Tooltip("value:Q", format=".4g"))),
        one, _vertical_rule(chosen, f"chosen {parameter}", f"chosen {parameter}", log_x=log_x),
        height=PANEL_HEIGHT, width=PANEL_WIDTH)
    return readable(alt.vconcat(panels, check, resolve=_resolve(color="independent"),
                                title="the same sweep under each framework pipeline"))
