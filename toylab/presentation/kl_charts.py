"""The KL view's chart: each KL setting at (rel bias, rel std at N) against ∇KL(π‖π_ref), coloured by where the
penalty goes; a pure function of ``kl_frames.kl_scatter_frame``. The names are in the tooltips and the table beside it
(several settings share a point: k2 in the loss, k3 × π/sg(π), k3+ and k1 in the token's reward), so no label
overprints another."""

import altair as alt

from toylab.presentation.charts import DISTRIBUTION_COLOUR, mark_layers, readable, tips
from toylab.presentation.kl_frames import PLACEMENTS

PLACEMENT_COLOURS = alt.Scale(domain=list(PLACEMENTS), range=["#0072B2", "#E69F00"])     # colour-blind safe


def kl_bias_std_chart(points, N, marks=None, height=300):
    """The settings' points; ``marks``: a lesson's (``frames.mark_frame``) on the same axes."""
    x = alt.X("rel_bias:Q", title="relative bias  ‖E ĝ − ∇KL(π‖π_ref)‖ / ‖∇KL‖")
    y = alt.Y("rel_std:Q", title=f"relative std at N = {N:,}")
    dots = alt.Chart(points).mark_point(filled=True, size=160, opacity=0.85).encode(
        x, y, alt.Color("placement:N", scale=PLACEMENT_COLOURS, legend=alt.Legend(title="the KL")),
        tips("setting:N", "label:N", "weight:N", alt.Tooltip("rel_bias:Q", format=".3f"),
             alt.Tooltip("rel_std:Q", format=".3f"), alt.Tooltip("rel_rmse:Q", format=".3f")))
    zero = alt.Chart(alt.Data(values=[{"zero": 0}])).mark_rule(color=DISTRIBUTION_COLOUR, strokeDash=[4, 4]).encode(
        alt.X("zero:Q"))
    layers = [zero, dots] + (mark_layers(marks) if marks is not None else [])
    return readable(alt.layer(*layers, height=height, title=alt.Title(
        "each setting's estimate of ∇KL(π‖π_ref) on the engine's tokens",
        subtitle="on the dashed line: unbiased; hover a point for its setting")))
