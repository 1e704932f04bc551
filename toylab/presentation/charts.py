"""Altair charts: each a pure function of the frames in ``toylab.frames``; no computation here.

One colour per estimator, fixed by the registry (``colour_scale``), on every chart; clicking a legend
entry highlights that estimator; fonts are sized for a screen-shared room. No colours are set for
text or axes, so both the light and the dark Streamlit theme apply.
"""

import altair as alt

from toylab.catalogue.estimators import ESTIMATORS

AXIS_FONT, TITLE_FONT = 14, 15
FADED = 0.15
HIGHLIGHT = "highlight"
DISTRIBUTION_COLOUR = "#8C8C8C"      # the exact distribution itself: neutral, readable on light and dark


def colour_scale():
    """The registry's colours, every estimator always the same one."""
    return alt.Scale(domain=list(ESTIMATORS), range=[e.colour for e in ESTIMATORS.values()])


def estimator_colour(ids, legend=True):
    """Colour by the ``estimator`` field; the legend lists only ``ids`` (the ones on the chart)."""
    return alt.Color("estimator:N", scale=colour_scale(),
                     legend=alt.Legend(title="estimator", values=list(dict.fromkeys(ids))) if legend else None)


def tips(*fields):
    """Tooltip channels (channel objects, not shorthand strings: Altair converts those slowly)."""
    return [field if isinstance(field, alt.Tooltip) else alt.Tooltip(field) for field in fields]


def legend_highlight():
    """A selection bound to the legend: click an estimator to fade the others (shift-click for more)."""
    return alt.selection_point(name=HIGHLIGHT, fields=["estimator"], bind="legend")


def highlighted_opacity():
    """Full opacity for the legend's selection (everything when nothing is selected), faded otherwise."""
    return alt.OpacityValue(FADED, condition={"param": HIGHLIGHT, "value": 1.0, "empty": True})


READABLE = alt.Config(axis=alt.AxisConfig(labelFontSize=AXIS_FONT, titleFontSize=TITLE_FONT),
                      legend=alt.LegendConfig(labelFontSize=AXIS_FONT, titleFontSize=TITLE_FONT, symbolSize=150),
                      header=alt.HeaderConfig(labelFontSize=AXIS_FONT, titleFontSize=TITLE_FONT),
                      title=alt.TitleConfig(fontSize=TITLE_FONT + 1))


def readable(chart):
    """The top-level chart with font sizes for screen-sharing (set in place: configure_* copies the chart)."""
    chart.config = READABLE
    return chart


# -- estimators ---------------------------------------------------------------------------------------

def bias_std_chart(table, iso, N):
    """Each estimator at (rel bias, rel std at N); grey quarter circles are constant relative RMSE. Only the
    columns drawn go into the chart (not the cosine, which may be undefined)."""
    table = table[["estimator", "label", "rel_bias", "rel_std", "rel_rmse"]]
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    circles = alt.Chart(iso).mark_line(color=DISTRIBUTION_COLOUR, strokeDash=[4, 4], opacity=0.7).encode(
        alt.X("rel_bias:Q"), alt.Y("rel_std:Q"), alt.Detail("level:Q"), alt.Order("order:Q"))
    circle_labels = alt.Chart(iso).transform_filter(alt.datum.order == 0).mark_text(
        align="right", dx=-4, dy=-6, fontSize=13, color=DISTRIBUTION_COLOUR).encode(
        alt.X("rel_bias:Q"), alt.Y("rel_std:Q"), alt.Text("level:Q", format=".3~g"))
    tooltip = tips("estimator:N", "label:N", alt.Tooltip("rel_bias:Q", format=".3f"),
               alt.Tooltip("rel_std:Q", format=".3f"), alt.Tooltip("rel_rmse:Q", format=".3f"))
    points = alt.Chart(table).mark_point(size=220, filled=True).encode(
        alt.X("rel_bias:Q", title="relative bias  ‖E ĝ − ∇J‖ / ‖∇J‖"),
        alt.Y("rel_std:Q", title=f"relative std at N = {N:,}"),
        estimator_colour(table["estimator"]), opacity, tooltip).add_params(highlight)
    names = alt.Chart(table).mark_text(align="left", dx=9, fontSize=13).encode(
        alt.X("rel_bias:Q"), alt.Y("rel_std:Q"), alt.Text("estimator:N"), estimator_colour([], legend=False),
        opacity=opacity)
    return readable(alt.layer(circles, circle_labels, points, names, height=420,
                              title="bias versus spread (dashed: equal relative RMSE)"))


# -- ratios -------------------------------------------------------------------------------------------

def threshold_layers(thresholds, y_top, measure="P"):
    """Rules at each threshold (log scale) in the estimator's colour, labelled with the probability beyond it
    (``measure`` "P") or, for a sample, the share beyond it ("share")."""
    rules = alt.Chart(thresholds).mark_rule(strokeWidth=2.5, strokeDash=[6, 3]).encode(
        alt.X("log_value:Q"), estimator_colour(thresholds["estimator"]),
        tips("threshold:N", alt.Tooltip("value:Q", format=".4g"), "side:N",
             alt.Tooltip("beyond:Q", format=".4f", title=f"{measure}(beyond)")))
    labels = alt.Chart(thresholds).transform_calculate(
        text=alt.datum.threshold + f" · {measure}(" + alt.datum.side + ") = " + alt.expr.format(alt.datum.beyond, ".3f")
    ).mark_text(angle=270, align="right", baseline="bottom", dx=-4, dy=-3, fontSize=12).encode(
        alt.X("log_value:Q"), alt.YDatum(y_top), alt.Text("text:N"), estimator_colour([], legend=False))
    return [rules, labels]


def token_ratio_chart(frame, thresholds, title="log ρ_t over all positions", height=320, width=alt.Undefined):
    """Exact μ-probability of each log ρ_t value (sticks), a sampled batch's frequencies (circles, if any),
    and the thresholds."""
    y_top = float(frame[["probability"] + (["batch"] if "batch" in frame else [])].max().max())
    x = alt.X("log_rho:Q", title="log ρ_t = log π_t(y_t) − log μ_t(y_t)")
    sticks = alt.Chart(frame).mark_rule(strokeWidth=5, color=DISTRIBUTION_COLOUR).encode(
        x, alt.Y("probability:Q", title="probability under μ"),
        tips("position:O", "token:O", alt.Tooltip("log_rho:Q", format=".3f"),
             alt.Tooltip("probability:Q", format=".4f")))
    layers = [sticks]
    if "batch" in frame:
        layers.append(alt.Chart(frame).mark_point(size=90, strokeWidth=2, color="#E69F00").encode(
            alt.X("log_rho:Q"), alt.Y("batch:Q"), alt.Tooltip("batch:Q", format=".4f", title="batch fraction")))
    if len(thresholds):
        layers += threshold_layers(thresholds, y_top)
    return alt.layer(*layers, title=title, height=height, width=width)


def token_ratio_panels(frame, thresholds, columns=4):
    """One small ``token_ratio_chart`` per position."""
    panels = [token_ratio_chart(frame[frame["position"] == t], thresholds[thresholds["position"] == t],
                                title=f"position {t}", height=170, width=230)
              for t in sorted(frame["position"].unique())]
    return readable(alt.concat(*panels, columns=columns))


def sequence_ratio_chart(histogram, thresholds, kind="W"):
    """μ-probability per bin of log W or log ρ_geo, a sampled batch as a step line, and the thresholds."""
    name = "log W = Σ_t log ρ_t  (verl/TRL 'sequence' ratio)" if kind == "W" else \
        "log ρ_geo = log W / T  (GSPO's sequence ratio)"
    y_top = float(histogram[["probability"] + (["batch"] if "batch" in histogram else [])].max().max())
    bars = alt.Chart(histogram).mark_bar(color=DISTRIBUTION_COLOUR, opacity=0.8).encode(
        alt.X("bin_start:Q", title=name), alt.X2("bin_end:Q"), alt.Y("probability:Q", title="probability under μ"),
        tips(alt.Tooltip("bin_start:Q", format=".3f"), alt.Tooltip("bin_end:Q", format=".3f"),
             alt.Tooltip("probability:Q", format=".4f")))
    layers = [bars]
    if "batch" in histogram:
        layers.append(alt.Chart(histogram).mark_line(interpolate="step", color="#E69F00", strokeWidth=2.5).encode(
            alt.X("bin_start:Q"), alt.Y("batch:Q"), alt.Tooltip("batch:Q", format=".4f", title="batch fraction")))
    if len(thresholds):
        layers += threshold_layers(thresholds, y_top)
    return readable(alt.layer(*layers, height=320))


# -- error versus batch size ----------------------------------------------------------------------------

def error_chart(curves, monte_carlo, crossovers):
    """Log-log relative error against N: exact curves, bias floors (dashed), Monte Carlo rms with the
    10–90 % spread, and the N beyond which seq_is wins (open diamonds)."""
    highlight = legend_highlight()
    opacity = highlighted_opacity()
    ids = list(dict.fromkeys(list(curves["estimator"]) + list(monte_carlo["estimator"])))
    x = alt.X("N:Q", scale=alt.Scale(type="log", domain=[1, 100_000]), title="batch size N",
              axis=alt.Axis(format="~s"))
    y = alt.Y("rel_rmse:Q", scale=alt.Scale(type="log"), title="relative error ‖ĝ_N − ∇J‖ / ‖∇J‖")
    colour = estimator_colour(ids)
    lines = alt.Chart(curves).mark_line(strokeWidth=2.5).encode(
        x, y, colour, opacity,
        tips("estimator:N", alt.Tooltip("N:Q", format=",.0f"), alt.Tooltip("rel_rmse:Q", format=".4f"))
    ).add_params(highlight)
    floors = alt.Chart(curves[curves["rel_bias"] > 1e-9]).mark_rule(strokeDash=[6, 4], strokeWidth=1.5).encode(
        alt.Y("mean(rel_bias):Q"), colour, opacity,
        tips("estimator:N", alt.Tooltip("mean(rel_bias):Q", format=".4f", title="bias floor")))
    spread = alt.Chart(monte_carlo).mark_rule(strokeWidth=2).encode(
        alt.X("N:Q"), alt.Y("q10:Q"), alt.Y2("q90:Q"), colour, opacity)
    points = alt.Chart(monte_carlo).mark_point(size=80, filled=True, shape="circle").encode(
        alt.X("N:Q"), alt.Y("rms:Q"), colour, opacity,
        tips("estimator:N", "N:Q", alt.Tooltip("rms:Q", format=".4f", title="Monte Carlo rms"),
             alt.Tooltip("q10:Q", format=".4f"), alt.Tooltip("q90:Q", format=".4f")))
    shown = crossovers[(crossovers["crossover_N"] > 1) & (crossovers["crossover_N"] <= 100_000)]
    crossings = alt.Chart(shown).mark_point(shape="diamond", size=260, strokeWidth=2.5).encode(
        alt.X("crossover_N:Q"), alt.Y("rel_rmse:Q"), colour, opacity,
        tips("estimator:N", alt.Tooltip("crossover_N:Q", format=",.0f", title="seq_is wins beyond N")))
    return readable(alt.layer(lines, floors, spread, points, crossings, height=480))
