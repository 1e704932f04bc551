"""The chart of a seeds view: pure functions of ``seeds_frames`` frames, no computation.

Each estimator's column holds one tick per toy of the population, in its registry colour, and the current toy as a
ring round a dot: where the current toy sits among the others.
"""

import altair as alt

from toylab.presentation.charts import LOG_FIT, TEXT, colour_scale, readable, tips

HEIGHT = 260


def strip_chart(frame, title, y_title, log=False, height=HEIGHT):
    """``seeds_frames.strip_frame`` as ticks (every toy) and a ringed dot (the current toy) per estimator, on a log
    axis (``log``, an error) or a linear one from 0 to 1 (a J)."""
    order = list(dict.fromkeys(frame["estimator"]))
    x = alt.X("estimator:N", sort=order, title=None, axis=alt.Axis(labelAngle=-30))
    y = alt.Y("value:Q", title=y_title, scale=LOG_FIT if log else alt.Scale(domain=[0, 1]))
    colour = alt.Color("estimator:N", scale=colour_scale(), legend=None)
    tooltip = tips("estimator:N", "seed:Q", alt.Tooltip("value:Q", format=".4g"), "rank:Q")
    drawn = frame[frame["value"] > 0] if log else frame
    others = alt.Chart(drawn[~drawn["current"]]).mark_tick(thickness=2, size=18, opacity=0.55).encode(
        x, y, colour, tooltip=tooltip)
    here = drawn[drawn["current"]]
    dots = alt.Chart(here).mark_point(filled=True, size=70).encode(x, y, colour, tooltip=tooltip)
    rings = alt.Chart(here).mark_point(size=260, strokeWidth=2.5, color=TEXT).encode(x, y, tooltip=tooltip)
    return readable(alt.layer(others, dots, rings, height=height, title=title))
