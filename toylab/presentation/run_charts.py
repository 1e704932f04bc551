"""Altair charts of a rollout log: each a pure function of a ``toylab.log_frames`` frame.

The data are samples, so they are drawn in the colour the Ratios tab gives a sampled batch, never in the
grey of an exact distribution; thresholds (when given) are drawn as on the Ratios tab, in each
estimator's registry colour.
"""

import altair as alt
import pandas as pd

from toylab.presentation import coincidence
from toylab.presentation.charts import (
    SPAN_SCALE,
    TEXT,
    estimator_colour,
    line_dash,
    readable,
    threshold_layers,
    tips,
    x_span,
)
from toylab.presentation.frames import ratio_domain

DATA_COLOUR = "#E69F00"          # the Ratios tab's sampled-batch colour
LOG_RHO = "log ρ_t = log π(y_t) − log μ(y_t)"
HEIGHT = 300


def _domain(frame, thresholds):
    """The x domain of a histogram with thresholds (``frames.ratio_domain``); its bars and labels stay inside."""
    return ratio_domain(pd.concat([frame["bin_start"], frame["bin_end"]]), thresholds)


def _count_bars(frame, count, x_title, domain=None):
    """Bars from bin_start to bin_end on a log count axis (bars start below 1, so a single count shows), over
    ``domain`` if given (with ``charts.x_span`` beside them); an end bin that also counts the tail beyond the view
    (``tail``) is outlined."""
    scale = SPAN_SCALE if domain else alt.Undefined
    return alt.Chart(frame).mark_bar(color=DATA_COLOUR, opacity=0.85, stroke=TEXT).encode(
        alt.X("bin_start:Q", title=x_title, scale=scale), alt.X2("bin_end:Q"),
        alt.Y(f"{count}:Q", scale=alt.Scale(type="log"), title=f"{count} (log scale)"), alt.Y2Datum(0.5),
        alt.StrokeWidthValue(0, condition={"test": "datum.tail", "value": 2}),     # a condition, not a scale on a
                                                                  # discrete field (Vega-Lite warned of one, thrice)
        tips(alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
             alt.Tooltip(f"{count}:Q", format=","), alt.Tooltip("tail:N", title="includes the tail beyond")))


def token_histogram_chart(frame, thresholds=None, height=None):
    """How many response tokens have each log ρ_t (log count axis: the tails are few), with the selected
    per-token thresholds if given (``log_frames.token_threshold_frame``); ``height``: the plot's (HEIGHT)."""
    zero = alt.Chart(frame).mark_rule(strokeDash=[4, 4]).encode(alt.XDatum(0.0))
    ruled = thresholds is not None and len(thresholds)
    domain = _domain(frame, thresholds) if ruled else None
    layers = [_count_bars(frame, "tokens", LOG_RHO, domain), zero]
    if ruled:
        layers += [x_span(domain), *threshold_layers(thresholds, domain, measure="share", legend="right")]
    return readable(alt.layer(*layers, height=height or HEIGHT, title="log ρ_t of every response token"))


def _binned_chart(frame, x, title):
    """Mean log ρ_t per bin (line and points sized by tokens) and its 10–90 % band; ``x`` is an alt.X."""
    band = alt.Chart(frame).mark_area(color=DATA_COLOUR, opacity=0.25).encode(
        x, alt.Y("low:Q", title="log ρ_t (mean, 10–90 % band)"), alt.Y2("high:Q"))
    line = alt.Chart(frame).mark_line(color=DATA_COLOUR, strokeWidth=2.5).encode(x, alt.Y("mean_log_rho:Q"))
    points = alt.Chart(frame).mark_circle(color=DATA_COLOUR, opacity=0.9).encode(
        x, alt.Y("mean_log_rho:Q"), alt.Size("tokens:Q", legend=None, scale=alt.Scale(range=[15, 150])),
        tips(alt.Tooltip(x.shorthand, format=".3g"), alt.Tooltip("tokens:Q", format=","),
             alt.Tooltip("mean_log_rho:Q", format=".3f", title="mean log ρ"), alt.Tooltip("low:Q", format=".3f"),
             alt.Tooltip("high:Q", format=".3f")))
    zero = alt.Chart(frame).mark_rule(strokeDash=[4, 4]).encode(alt.YDatum(0.0))
    return readable(alt.layer(band, line, points, zero, height=HEIGHT, title=title))


def position_chart(frame):
    """Does the mismatch grow along the response? log ρ_t against the token's position."""
    return _binned_chart(frame, alt.X("position:Q", title="position in the response (0 = first token)"),
                         "log ρ_t along the response")


def probability_chart(frame):
    """Where the mismatch lives: log ρ_t against the sampler's own probability of the token."""
    return _binned_chart(frame, alt.X("log10_mu:Q", title="log10 μ(y_t), the sampler's probability of the token"),
                         "log ρ_t against the sampler's probability")


def overlaid_histogram_chart(frame):
    """Several logs' log ρ_t on the same bins (``log_frames.overlaid_histogram_frame``): each log's share of its
    tokens per bin, as steps, one colour per log."""
    return readable(alt.Chart(frame, height=HEIGHT, title="log ρ_t of each log (share of its tokens)").mark_line(
        interpolate="step-after", strokeWidth=2.5).encode(
        alt.X("bin_start:Q", title=LOG_RHO), alt.Y("share:Q", scale=alt.Scale(type="log"), title="share of tokens (log)"),
        alt.Color("log:N", scale=alt.Scale(range=[DATA_COLOUR, "#0072B2", "#009E73", "#CC79A7"]), title="log"),
        tips("log:N", alt.Tooltip("bin_start:Q", format=".3g"), alt.Tooltip("bin_end:Q", format=".3g"),
             alt.Tooltip("tokens:Q", format=","), alt.Tooltip("share:Q", format=".3g"))))


RULE_COLOUR = "#D55E00"           # the rule where a run's metric first left its early range: dashed vermilion


def steps_chart(frame, columns=2, width=300, height=150):
    """A run's metrics against step (``log_frames.steps_frame``), one small panel each with its own y scale, in the
    frame's order, ``columns`` abreast: the value, its ± 2 se band, and a dashed vermilion rule at the step where it
    first left its early range. Each panel draws its own step axis, untitled (the caption says the x axis is the
    step): a shared one sits under the last panel of each column, so a last row with fewer panels left one axis in
    an empty cell and the panel above it without one."""
    base = alt.Chart(frame)
    x = alt.X("step:Q", title=None)
    band = base.mark_area(color=DATA_COLOUR, opacity=0.25).encode(x, alt.Y("low:Q", title=None), alt.Y2("high:Q"))
    line = base.mark_line(color=DATA_COLOUR, point=alt.OverlayMarkDef(color=DATA_COLOUR, size=40)).encode(
        x, alt.Y("value:Q"), tips("metric:N", "step:Q", alt.Tooltip("value:Q", format=".4g"),
                                  alt.Tooltip("low:Q", format=".4g", title="− 2 se"),
                                  alt.Tooltip("high:Q", format=".4g", title="+ 2 se")))
    left = base.transform_filter(alt.datum.left).mark_rule(color=RULE_COLOUR, strokeWidth=2.5, strokeDash=[5, 3]).encode(
        x, tips("metric:N", alt.Tooltip("step:Q", title="left its early range at step")))
    return readable(alt.layer(band, line, left, height=height, width=width).facet(
        facet=alt.Facet("metric:N", title=None, sort=frame["metric"].unique().tolist()), columns=columns
    ).resolve_scale(y="independent").resolve_axis(x="independent"))


def affected_steps_chart(frame, coincident=()):
    """Each selected estimator's share of response tokens masked or clipped against step
    (``run_frames.affected_steps_frame``), in its registry colour (one that lies on another, ``coincident``, in
    phased short dashes over it, named in the legend), with a rule in that colour at the step where the share first
    left its early range."""
    ids = frame["estimator"].unique().tolist()
    base = alt.Chart(coincidence.with_line_styles(frame, coincidence.line_styles(coincident, ids)))
    x = alt.X("step:Q", title="step", axis=alt.Axis(format="d", tickMinStep=1))
    colour = estimator_colour(ids, labels=coincidence.legend_words(coincident))
    line = base.mark_line(point=True).encode(
        x, alt.Y("value:Q", title="share of response tokens masked or clipped", axis=alt.Axis(format="%")), colour,
        line_dash(), tips("estimator:N", "step:Q", alt.Tooltip("value:Q", format=".3%")))
    left = base.transform_filter(alt.datum.left).mark_rule(strokeWidth=2.5, strokeDash=[5, 3]).encode(
        x, colour, tips("estimator:N", alt.Tooltip("step:Q", title="left its early range at step")))
    return readable(alt.layer(line, left, height=HEIGHT, title="What each selected estimator masks or clips, step "
                                                               "by step"))


def sequence_histogram_chart(frame, thresholds=None, kind="W"):
    """Sequences per bin of log W (kind "W") or log ρ_geo (kind "geo"), with thresholds if given
    (``log_frames.sequence_threshold_frame``: estimator, threshold, value, log_value, side, beyond)."""
    name = "log W = Σ_t log ρ_t  (verl/TRL 'sequence' ratio)" if kind == "W" else \
        "log ρ_geo = log W / L  (GSPO's sequence ratio)"
    ruled = thresholds is not None and len(thresholds)
    domain = _domain(frame, thresholds) if ruled else None
    layers = [_count_bars(frame, "sequences", name, domain)]
    if ruled:
        layers += [x_span(domain), *threshold_layers(thresholds, domain, measure="share")]
    return readable(alt.layer(*layers, height=HEIGHT))
