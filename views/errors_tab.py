"""The error-versus-batch-size tab: exact curves, Monte Carlo checks, bias floors and seq_is crossovers."""

import math

import pandas as pd
import streamlit as st

from toylab import charts, frames
from toylab.estimators import ESTIMATORS
from views import cache


def render(settings):
    moments = cache.selected_moments(settings)
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
    if not selection:
        st.info("Select at least one estimator in the sidebar.")
        return
    with st.spinner(f"Monte Carlo: {cache.MONTE_CARLO_REPLICATES} batches at N = "
                    f"{', '.join(f'{n:,}' for n in cache.MONTE_CARLO_SIZES)}…"):
        monte_carlo, undefined = cache.monte_carlo_frame(settings.toy_key, selection, settings.baseline)
    crossovers = frames.crossover_frame(moments, cache.reference_moments(settings))
    st.altair_chart(charts.error_chart(frames.error_curve_frame(moments), monte_carlo, crossovers),
                    width="stretch")
    st.caption(f"Lines: exact sqrt(bias² + var/N)/‖∇J‖. Dots: Monte Carlo rms over "
               f"{cache.MONTE_CARLO_REPLICATES} batches, bars its 10–90 % range (batch-coupled estimators "
               "have dots only). Dashed: each biased estimator's bias floor. Diamonds: where seq_is, unbiased, "
               "overtakes it. Click a legend entry to highlight one estimator.")
    for id, sizes in undefined.items():
        st.caption(f"No Monte Carlo point for {id} at N = {', '.join(map(str, sizes))}: it is undefined "
                   f"{ESTIMATORS[id].undefined}.")
    if len(crossovers):
        st.subheader("From which N does sequence IS win?")
        st.dataframe(pd.DataFrame({"estimator": crossovers["estimator"],
                                   "seq_is has the lower RMSE for": [_describe(n) for n in crossovers["crossover_N"]]}),
                     hide_index=True)


def _describe(n):
    if math.isinf(n):
        return "no N"
    return "every N ≥ 1" if n <= 1 else f"N > {n:,.1f}"
