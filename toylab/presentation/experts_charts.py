"""Altair charts of the Experts & versions tab: pure functions of ``experts_frames`` frames, no computation.

Registry colours (``charts.estimator_colour``) for estimators; the replay modes and logging modes are columns."""

import altair as alt

from toylab.presentation.charts import TEXT, estimator_colour, readable, tips

HEIGHT = 220
FACET_WIDTH = 200               # a replay mode's panel (three across); a logging mode's 9/10 of it (four across)
MEASURE_COLOURS = alt.Scale(range=["#4c78a8", "#f58518", "#54a24b"])


def flip_chart(frame, axis, height=HEIGHT, legend="bottom"):
    """The probability that a decision, a token or a sequence routes differently in the engine, as ``axis`` grows;
    ``legend``: under the plot (bottom) or beside it (right)."""
    x = alt.X(f"{axis}:Q", title=f"{axis} of the mixture", axis=alt.Axis(format="d", tickMinStep=1))
    y = alt.Y("rate:Q", title="P(routing differs from the trainer's)", scale=alt.Scale(domain=[0, 1]))
    colour = alt.Color("measure:N", scale=MEASURE_COLOURS, title="for", sort=frame["measure"].unique().tolist(),
                       legend=alt.Legend(orient=legend, direction="vertical"))
    chart = alt.Chart(frame).mark_line(point=True, strokeWidth=2.5).encode(
        x, y, colour, tips(f"{axis}:Q", "measure:N", alt.Tooltip("rate:Q", format=".1%")))
    return readable(chart.properties(height=height))


def replay_chart(frame, N, height=HEIGHT):
    """Each estimator's relative bias and std at N under each replay mode: bias solid, std as the whisker beyond."""
    ids = frame["estimator"].unique().tolist()
    base = alt.Chart(frame).encode(alt.Y("estimator:N", sort=ids, title=None), estimator_colour(ids, legend=False))
    bars = base.mark_bar().encode(alt.X("rel_bias:Q", title=f"rel bias, + rel std at N = {N:,}"),
                                  tips("estimator:N", "replay:N", alt.Tooltip("rel_bias:Q", format=".3f"),
                                       alt.Tooltip("rel_std:Q", format=".3f"), alt.Tooltip("kl:Q", format=".4f"),
                                       alt.Tooltip("cosine:Q", format="+.3f", title="cosine to ∇J"),
                                       alt.Tooltip("served_cosine:Q", format="+.3f", title="cosine to ∇J_μ")))
    spread = base.transform_calculate(upper="datum.rel_bias + datum.rel_std").mark_rule(strokeWidth=2).encode(
        alt.X("rel_bias:Q"), alt.X2("upper:Q"))
    chart = alt.layer(bars, spread).properties(height=height, width=FACET_WIDTH).facet(
        column=alt.Column("replay:N", title="routing replay", sort=["off", "R2", "R3"]))
    return readable(chart)


def versions_chart(frame, N, height=HEIGHT):
    """Each estimator's relative bias under each way of logging the versions, its distance from the per-token truth
    as a tick."""
    ids = frame["estimator"].unique().tolist()
    base = alt.Chart(frame).encode(alt.Y("estimator:N", sort=ids, title=None), estimator_colour(ids, legend=False))
    bars = base.mark_bar().encode(alt.X("rel_bias:Q", title="rel bias (tick: from the truth)"),
                                  tips("estimator:N", "mode:N", alt.Tooltip("rel_bias:Q", format=".3f"),
                                       alt.Tooltip("rel_std:Q", format=".3f", title=f"rel std at N = {N:,}"),
                                       alt.Tooltip("from_truth:Q", format=".3f")))
    ticks = base.mark_tick(thickness=3, size=16, color=TEXT).encode(alt.X("from_truth:Q"))
    chart = alt.layer(bars, ticks).properties(height=height, width=FACET_WIDTH * 9 // 10).facet(
        column=alt.Column("mode:N", title="what the framework logs of the versions",
                          sort=list(frame["mode"].unique())))
    return readable(chart)
