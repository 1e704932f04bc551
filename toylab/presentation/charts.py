"""Altair charts: each a pure function of the frames in ``toylab.presentation.frames``; no computation here.

One colour per estimator, fixed by the registry (``colour_scale``), on every chart; clicking a legend entry
highlights that estimator. A chart's spec holds its structure, never a number a slider moves (a domain is the
extent of its data, a marked value a row of data): Streamlit then swaps the data of the chart already drawn
instead of building a new one, the most of a browser's work after a slider step. Every text is at least FONT pixels and drawn in TEXT, the SVG's ``currentColor``:
the page's own text colour, so it keeps the theme's full contrast on the light and on the dark background, and
follows a theme switch without a rerun. No label overprints another: the scatter's names are placed by
``labels``, each threshold gets its own row above the plot. Estimators whose numbers are identical on the toy
(``same``: {id: the earlier id it equals}) are drawn so that both show — a ring round the point — and a line that
lies on another (``coincidence``) in short dashes over it; the legend says "= naive here" or "≈ naive".
"""

import json

import altair as alt
import pandas as pd

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import coincidence, frames

FONT, TITLE_FONT = 16, 17
TEXT = "currentColor"
FADED = 0.15
HIGHLIGHT = "highlight"
DISTRIBUTION_COLOUR = "#8C8C8C"      # the exact distribution itself (bars, sticks, rules): neutral on light and dark
SAMPLE_COLOUR = "#E69F00"            # a sampled batch
ROW = 22                             # pixels per row of threshold labels above a plot
LEGEND_LABEL_LIMIT = 360
LABEL_CHARACTER, LEGEND_SYMBOL = 7.5, 48     # pixels: a character of a FONT-size label (its widest, on average), the
                                             # symbol with its gaps
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")
DOMAIN_SCALE = alt.Scale(nice=False, zero=False, padding=0)  # the domain is the extent of an invisible layer of its
                                                             # corners: numbers stay data, not spec
LOG_DOMAIN_SCALE = alt.Scale(type="log", nice=False, padding=0)
LOG_FIT = alt.Scale(type="log", nice=False, padding=8)      # a log axis on its data's extent, not out to whole decades
MARK_NAMES = {"ring": "lesson_mark_ring", "rule": "lesson_mark_rule", "number": "lesson_mark_number",
              "number_before": "lesson_mark_number_before", "rule_number": "lesson_mark_rule_number"}   # a lesson's marks, named: a browser test finds them in the SVG
SPAN_SCALE = alt.Scale(nice=False, zero=False, padding=0)
LINE_DASHES = alt.Scale(domain=list(coincidence.DASHES), range=list(coincidence.DASHES.values()))


def colour_scale():
    """The registry's colours, every estimator always the same one."""
    return alt.Scale(domain=list(ESTIMATORS), range=[e.colour for e in ESTIMATORS.values()])


def legend_names(labels):
    """A Vega expression for a legend's labels: each estimator's id, or its label in ``labels`` ({id: text}, e.g.
    "geo_rs = naive here": ``coincidence.legend_words``; a tuple of lines is drawn one under another)."""
    expression = "datum.label"
    for id, text in (labels or {}).items():
        label = json.dumps(text if isinstance(text, str) else list(text))
        expression = f"datum.label === {json.dumps(id)} ? {label} : {expression}"
    return expression


def legend_columns(texts, width, most):
    """How many columns of a legend whose labels are ``texts`` (a tuple is lines) fit ``width`` pixels, 1 to ``most``:
    each column as wide as the longest label at LABEL_CHARACTER pixels a character, its symbol and gap beside it."""
    widest = max((len(line) for text in texts for line in ((text,) if isinstance(text, str) else text)), default=0)
    return max(1, min(most, int(width // (widest * LABEL_CHARACTER + LEGEND_SYMBOL))))


def estimator_legend(ids, labels=None, orient=alt.Undefined):
    """The estimator legend: only ``ids`` (the ones on the chart), with ``labels`` where an estimator lies on another."""
    return alt.Legend(title="estimator", values=list(dict.fromkeys(ids)), labelExpr=legend_names(labels), orient=orient)


def estimator_colour(ids, legend=True, labels=None, orient=alt.Undefined):
    """Colour by the ``estimator`` field, with ``estimator_legend`` (or none)."""
    return alt.Color("estimator:N", scale=colour_scale(), legend=estimator_legend(ids, labels, orient) if legend else None)


def line_dash():
    """The ``line`` field (``coincidence.with_line_styles``) as dashes: solid, long dashes for the reference, and the
    phased short dashes of lines drawn over another (``coincidence.DASHES``)."""
    return alt.StrokeDash("line:N", scale=LINE_DASHES, legend=None)


def tips(*fields):
    """Tooltip channels (channel objects, not shorthand strings: Altair converts those slowly)."""
    return [field if isinstance(field, alt.Tooltip) else alt.Tooltip(field) for field in fields]


def legend_highlight():
    """A selection bound to the legend: click an estimator to fade the others (shift-click for more)."""
    return alt.selection_point(name=HIGHLIGHT, fields=["estimator"], bind="legend")


def holding_highlight(chart, highlight):
    """``chart`` holding the legend's selection ``highlight``, under a fixed view name: unnamed, Altair would name the
    view by a hash of its data, and the spec would change with every slider step."""
    chart = chart.add_params(highlight)
    chart.name = HIGHLIGHT
    return chart


def highlighted_opacity():
    """Full opacity for the legend's selection (everything when nothing is selected), faded otherwise."""
    return alt.OpacityValue(FADED, condition={"param": HIGHLIGHT, "value": 1.0, "empty": True})


READABLE = alt.Config(
    axis=alt.AxisConfig(labelFontSize=FONT, titleFontSize=FONT, labelColor=TEXT, titleColor=TEXT),
    legend=alt.LegendConfig(labelFontSize=FONT, titleFontSize=FONT, labelColor=TEXT, titleColor=TEXT, symbolSize=150,
                            labelLimit=LEGEND_LABEL_LIMIT),
    header=alt.HeaderConfig(labelFontSize=FONT, titleFontSize=FONT, labelColor=TEXT, titleColor=TEXT),
    title=alt.TitleConfig(fontSize=TITLE_FONT, color=TEXT, subtitleFontSize=FONT, subtitleColor=TEXT),
    text=alt.MarkConfig(fontSize=FONT, color=TEXT))


def x_span(domain):
    """An invisible layer across ``domain`` (lowest, highest x): with SPAN_SCALE, the x domain is data, not spec."""
    return alt.Chart(pd.DataFrame({"span": list(domain)})).mark_point(opacity=0).encode(alt.X("span:Q", scale=SPAN_SCALE))


def readable(chart):
    """The top-level chart with the page's text sizes and colours (set in place: configure_* copies the chart). A
    single or layered chart fits its width to its column and keeps its plot's height, growing by what is drawn
    above the plot (threshold labels) instead of squeezing it; a compound or faceted chart keeps its panels' sizes
    (fit-x on a facet gives it no width at all)."""
    chart.config = READABLE
    if not isinstance(chart, alt.ConcatChart | alt.HConcatChart | alt.VConcatChart | alt.FacetChart):
        chart.autosize = FIT_WIDTH
    return chart


# -- estimators ---------------------------------------------------------------------------------------

def bias_std_chart(scatter, N, height=frames.SCATTER_HEIGHT, marks=None, compared=None):
    """Each estimator at (rel bias, rel std at N) on ``frames.bias_std_frames``' fixed domains (the std axis
    logarithmic when the stds spread widely); grey quarter circles are constant relative RMSE (their levels in the
    subtitle); a duplicate is a ring round the point it equals, named with it ("naive = geo_rs"); names sit where
    ``labels`` put them, joined to their point by a rule when far from it. With ``scatter.before``, each estimator's
    point at the ``compared`` setting (e.g. "b = 0") is hollow, a grey line to where it is now. ``marks``: a lesson's
    annotations (``frames.mark_frame``) on the same axes."""
    points, labels, iso = scatter.points, scatter.labels, scatter.iso
    x = alt.X("rel_bias:Q", title="relative bias  ‖E ĝ − ∇J‖ / ‖∇J‖", scale=DOMAIN_SCALE)
    y = alt.Y("rel_std:Q", title=f"relative std at N = {N:,}" + ("  (log)" if scatter.log_y else ""),
              scale=LOG_DOMAIN_SCALE if scatter.log_y else DOMAIN_SCALE)
    corners = alt.Chart(scatter.extent).mark_point(opacity=0).encode(x, y)
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    circles = alt.Chart(iso).mark_line(color=DISTRIBUTION_COLOUR, strokeDash=[4, 4], opacity=0.7).encode(
        x, y, alt.Detail("level:Q"), alt.Order("order:Q"), alt.Tooltip("level:Q", title="relative RMSE"))
    tooltip = tips("estimator:N", "label:N", alt.Tooltip("rel_bias:Q", format=".3f"),
                   alt.Tooltip("rel_std:Q", format=".3f"), alt.Tooltip("rel_rmse:Q", format=".3f"))
    legend = estimator_legend(points["estimator"], {id: f"{id} = {first} here" for id, first in scatter.same.items()})
    dots = holding_highlight(alt.Chart(points).mark_point(filled=True, strokeWidth=3).encode(   # a ring: no fill
        x, y, alt.Color("estimator:N", scale=colour_scale(), legend=legend),
        alt.Stroke("estimator:N", scale=colour_scale(), legend=legend), opacity, tooltip,
        alt.Size("ring:Q", scale=alt.Scale(domain=[0, 1, 4], range=[220, 600, 1800]), legend=None),
        alt.FillOpacityValue(0, condition={"test": "datum.ring === 0", "value": 1})), highlight)
    moves = []
    if scatter.before is not None and len(scatter.before):
        moves = [alt.Chart(scatter.before).mark_rule(color=DISTRIBUTION_COLOUR, strokeWidth=2).encode(
                     x, y, alt.X2("to_bias:Q"), alt.Y2("to_std:Q")),
                 alt.Chart(scatter.before).mark_point(filled=False, size=220, strokeWidth=2.5).encode(
                     x, y, alt.Stroke("estimator:N", scale=colour_scale(), legend=legend),
                     tips("estimator:N", alt.Tooltip("rel_bias:Q", format=".3f", title=f"rel bias, {compared}"),
                          alt.Tooltip("rel_std:Q", format=".3f", title=f"rel std, {compared}")))]
    leaders = alt.Chart(labels[labels["leader"]]).mark_rule(color=DISTRIBUTION_COLOUR).encode(
        alt.X("anchor_x:Q"), alt.Y("anchor_y:Q"), alt.X2("x:Q"), alt.Y2("y:Q"))
    names = [alt.Chart(part).mark_text(align="left", baseline="middle", fontWeight=weight).encode(
        alt.X("x:Q"), alt.Y("y:Q"), alt.Text("text:N"))
        for weight, part in (("normal", labels[labels["kind"] != "mark"]), ("bold", labels[labels["kind"] == "mark"]))]
    if len(labels[labels["kind"] == "mark"]):
        names[1] = names[1].properties(name=MARK_NAMES["number"])
    layers = [layer for layer in (corners, circles, *moves, dots, leaders, *names) if len(layer.data)]  # an empty
    layers += mark_layers(marks, numbers=False) if marks is not None else []       # layer makes Vega-Lite warn
    subtitle = "dashed: equal relative RMSE at N, each named with its level" + (
        f" · hollow: {compared}, filled: now" if moves else "")
    return readable(alt.layer(*layers, height=height, title=alt.Title("bias versus spread", subtitle=subtitle)))


def mark_layers(marks, numbers=True, x_type="Q", x_end=None):
    """A lesson's annotations, on the x and y scales of the layered chart they join: a ring at each marked point, a
    dotted rule at a marked x alone, each with its number (unless ``numbers`` is False: the chart places them
    itself); the page lists the numbered sentences with the lesson. ``x_type`` "N" on a nominal x axis. A ring at
    ``x_end`` (the plot's right edge) has its number before it, inside the plot, not over the legend beside it. Each
    layer is named (MARK_NAMES), so its marks can be found on the page. Only layers with marks to draw (an empty one
    makes Vega-Lite warn of an infinite extent)."""
    x, y, number = alt.X(f"x:{x_type}"), alt.Y("y:Q"), alt.Text("number:N")
    points, lines = marks[marks["y"].notna()], marks[marks["y"].isna()]
    layers = []
    if len(points):
        layers.append(alt.Chart(points, name=MARK_NAMES["ring"]).mark_point(size=900, strokeWidth=2.5, color=TEXT)
                      .encode(x, y))
        at_end = points["x"].ge(x_end) if x_end is not None else pd.Series(False, index=points.index)
        if numbers and (~at_end).any():
            layers.append(alt.Chart(points[~at_end], name=MARK_NAMES["number"]).mark_text(
                align="left", dx=18, dy=-14, fontWeight="bold").encode(x, y, number))
        if numbers and at_end.any():
            layers.append(alt.Chart(points[at_end], name=MARK_NAMES["number_before"]).mark_text(
                align="right", dx=-18, dy=-14, fontWeight="bold").encode(x, y, number))
    if len(lines):
        layers.append(alt.Chart(lines, name=MARK_NAMES["rule"]).mark_rule(strokeWidth=2, color=TEXT, strokeDash=[2, 2])
                      .encode(x))
        layers.append(alt.Chart(lines, name=MARK_NAMES["rule_number"]).mark_text(
            align="left", dx=4, baseline="top", y=4, fontWeight="bold").encode(x, number))
    return layers


# -- ratios -------------------------------------------------------------------------------------------

def threshold_layers(thresholds, x_domain, measure="P", plot_width=frames.RATIO_WIDTH, legend="bottom"):
    """Rules at each threshold (log scale) in the estimator's colour (its legend at ``legend``), and above the plot
    one row per distinct value saying what lies beyond it: the probability (``measure`` "P") or, for a sample, the
    share ("share"), placed on the plot's ``x_domain`` (``frames.ratio_domain``) so that it stays inside a plot at
    least ``plot_width`` pixels wide."""
    thresholds = frames.threshold_rule_frame(thresholds)
    rows = frames.threshold_label_frame(thresholds, x_domain, measure, plot_width)
    rules = [alt.Chart(thresholds[thresholds["overlap"] == index]).mark_rule(
        strokeWidth=2.5, strokeDash=[6, 3] if index == 0 else [6, 6], strokeDashOffset=6 * index).encode(
        alt.X("log_value:Q"), estimator_colour(thresholds["estimator"], orient=legend),
        tips("threshold:N", alt.Tooltip("value:Q", format=".4g"), "side:N",
             alt.Tooltip("beyond:Q", format=".4f", title=f"{measure}(beyond)")))
        for index in sorted(set(thresholds["overlap"]))]
    labels = [alt.Chart(rows[rows["align"] == align]).mark_text(align=align, baseline="middle").encode(
        alt.X("log_value:Q"), alt.Y("row_y:Q", scale=None), alt.Text("text:N")) for align in ("left", "right")
        if (rows["align"] == align).any()]             # an empty layer makes Vega-Lite warn of an infinite extent
    return [*rules, *labels]


def token_ratio_chart(frame, thresholds, title="log ρ_t over all positions", height=320, width=alt.Undefined,
                      plot_width=frames.RATIO_WIDTH, legend="right"):
    """Exact μ-probability of each log ρ_t value (sticks), a sampled batch's frequencies (circles, if any),
    and the thresholds (their labels placed for a plot at least ``plot_width`` pixels wide; their legend at
    ``legend``)."""
    domain = frames.ratio_domain(frame["log_rho"], thresholds)
    x = alt.X("log_rho:Q", title="log ρ_t = log π_t(y_t) − log μ_t(y_t)", scale=SPAN_SCALE)
    sticks = alt.Chart(frame).mark_rule(strokeWidth=5, color=DISTRIBUTION_COLOUR).encode(
        x, alt.Y("probability:Q", title="probability under μ"),
        tips("position:O", "token:O", alt.Tooltip("log_rho:Q", format=".3f"),
             alt.Tooltip("probability:Q", format=".4f")))
    layers = [x_span(domain), sticks]
    if "batch" in frame:
        layers.append(alt.Chart(frame).mark_point(size=90, strokeWidth=2, color=SAMPLE_COLOUR).encode(
            alt.X("log_rho:Q"), alt.Y("batch:Q"), alt.Tooltip("batch:Q", format=".4f", title="batch fraction")))
    if len(thresholds):
        layers += threshold_layers(thresholds, domain, plot_width=width if isinstance(width, int) else plot_width,
                                   legend=legend)
    return alt.layer(*layers, title=title, height=height, width=width)


def token_ratio_panels(frame, thresholds, columns=2):
    """One small ``token_ratio_chart`` per position, two abreast (their legend below: they fit a column beside the
    sidebar at 1280 px)."""
    panels = [token_ratio_chart(frame[frame["position"] == t], thresholds[thresholds["position"] == t],
                                title=f"position {t}", height=170, width=300, legend="bottom")
              for t in sorted(frame["position"].unique())]
    return readable(alt.concat(*panels, columns=columns))


def sequence_ratio_chart(histogram, thresholds, kind="W", marks=None, height=320, plot_width=frames.RATIO_WIDTH):
    """μ-probability per bin of log W or log ρ_geo, a sampled batch as a step line, the thresholds (labels placed for
    a plot at least ``plot_width`` pixels wide), and a lesson's ``marks`` (``frames.mark_frame``, x on its axis)."""
    name = "log W = Σ_t log ρ_t  (verl/TRL 'sequence' ratio)" if kind == "W" else \
        "log ρ_geo = log W / T  (GSPO's sequence ratio)"
    domain = frames.ratio_domain(pd.concat([histogram["bin_start"], histogram["bin_end"]]), thresholds)
    x = alt.X("bin_start:Q", title=name, scale=SPAN_SCALE)
    y = alt.Y("probability:Q", title="probability under μ")
    bars = alt.Chart(histogram).mark_bar(color=DISTRIBUTION_COLOUR, opacity=0.8).encode(
        x, alt.X2("bin_end:Q"), y, alt.Y2Datum(0),    # from 0 up: a bar ranged in x alone is a 5-px dash at its y
        tips(alt.Tooltip("bin_start:Q", format=".3f"), alt.Tooltip("bin_end:Q", format=".3f"),
             alt.Tooltip("probability:Q", format=".4f")))
    layers = [x_span(domain), bars]
    if "batch" in histogram:
        layers.append(alt.Chart(histogram).mark_line(interpolate="step", color=SAMPLE_COLOUR, strokeWidth=2.5).encode(
            alt.X("bin_start:Q"), alt.Y("batch:Q"), alt.Tooltip("batch:Q", format=".4f", title="batch fraction")))
    if len(thresholds):
        layers += threshold_layers(thresholds, domain, plot_width=plot_width)
    if marks is not None:
        layers += mark_layers(marks)
    return readable(alt.layer(*layers, height=height))


# -- error versus batch size ----------------------------------------------------------------------------

def error_chart(curves, monte_carlo, crossovers, coincident=(), height=480):
    """Log-log relative error against N: exact curves (one that lies on another, ``coincident``, in phased short
    dashes over it), each biased estimator's relative bias (dashed: the level its error tends to, below it at every N), Monte Carlo rms with the 10–90 % spread, and the first batch size at which
    seq_is wins (open diamonds)."""
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    ids = list(dict.fromkeys(list(curves["estimator"]) + list(monte_carlo["estimator"])))
    x = alt.X("N:Q", scale=alt.Scale(type="log", domain=[1, 100_000]), title="batch size N",
              axis=alt.Axis(format="~s"))
    y = alt.Y("rel_rmse:Q", scale=LOG_FIT, title="relative error ‖ĝ_N − ∇J‖ / ‖∇J‖")
    colour = estimator_colour(ids, labels=coincidence.legend_words(coincident))
    styled = coincidence.with_line_styles(curves, coincidence.line_styles(coincident, ids))
    lines = holding_highlight(alt.Chart(styled).mark_line(strokeWidth=2.5).encode(
        x, y, colour, line_dash(), opacity,
        tips("estimator:N", alt.Tooltip("N:Q", format=",.0f"), alt.Tooltip("rel_rmse:Q", format=".4f"))), highlight)
    biases = alt.Chart(curves[curves["rel_bias"] > 1e-9]).mark_rule(strokeDash=[6, 4], strokeWidth=1.5).encode(
        alt.Y("mean(rel_bias):Q"), colour, opacity,
        tips("estimator:N", alt.Tooltip("mean(rel_bias):Q", format=".4f", title="relative bias: the error at any N "
                                                                                 "is above it")))
    spread = alt.Chart(monte_carlo).mark_rule(strokeWidth=2).encode(
        alt.X("N:Q"), alt.Y("q10:Q"), alt.Y2("q90:Q"), colour, opacity)
    points = alt.Chart(monte_carlo).mark_point(size=80, filled=True, shape="circle").encode(
        alt.X("N:Q"), alt.Y("rms:Q"), colour, opacity,
        tips("estimator:N", "N:Q", alt.Tooltip("rms:Q", format=".4f", title="Monte Carlo rms"),
             alt.Tooltip("q10:Q", format=".4f"), alt.Tooltip("q90:Q", format=".4f")))
    shown = crossovers[(crossovers["first_N"] > 1) & (crossovers["first_N"] <= 100_000)]
    crossings = alt.Chart(shown).mark_point(shape="diamond", size=260, strokeWidth=2.5).encode(
        alt.X("first_N:Q"), alt.Y("rel_rmse:Q"), colour, opacity,
        tips("estimator:N", alt.Tooltip("first_N:Q", format=",", title="seq_is wins from N")))
    drawn = [layer for layer in (biases, spread, points, crossings) if len(layer.data)]   # an empty layer: a warning
    return readable(alt.layer(lines, *drawn, height=height))
