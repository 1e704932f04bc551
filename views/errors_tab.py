"""The error-versus-batch-size tab: exact curves, Monte Carlo checks, bias floors and seq_is crossovers."""

import math

import pandas as pd
import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import charts, coincidence, frames
from views import chart_element, presentation
from views.caches import cache


def render(settings):
    moments = cache.selected_moments(settings)
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
    if not selection:
        st.info("Select at least one estimator in the sidebar.")
        return
    with st.spinner(f"Monte Carlo: {cache.MONTE_CARLO_REPLICATES} batches at N = "
                    f"{', '.join(f'{n:,}' for n in cache.MONTE_CARLO_SIZES)}…"):
        monte_carlo, undefined = cache.monte_carlo_frame(settings.toy_key, selection, settings.baseline,
                                                         settings.aggregation)
    crossovers = frames.crossover_frame(moments, cache.reference_moments(settings))
    curves = frames.error_curve_frame(moments)
    lying = coincidence.coincidences(curves, "N", "rel_rmse", log=True)
    chart_element.draw(st, charts.error_chart(curves, monte_carlo, crossovers, lying,
                                              height=420 if presentation.on() else 480))
    st.caption(f"Lines: exact sqrt(bias² + var/N)/‖∇J‖. Dots: Monte Carlo rms over "
               f"{cache.MONTE_CARLO_REPLICATES} batches, bars its 10–90 % range (batch-coupled estimators "
               "have dots only). Dashed: each biased estimator's relative bias, the level its error tends to as N "
               "grows. Diamonds: where seq_is (unbiased unless the sampler truncates) overtakes it, at the first whole "
               "batch size where it does. Click a legend entry to highlight one estimator."
               + (f" Drawn in short dashes over the line each lies on: {coincidence.describe(lying, curves['N'], 'N')}."
                  if lying else ""))
    st.caption(AGGREGATION_CAPTIONS[settings.aggregation])
    for id, sizes in undefined.items():
        st.caption(f"No Monte Carlo point for {id} at N = {', '.join(map(str, sizes))}: it is undefined "
                   f"{ESTIMATORS[id].undefined}.")
    if len(crossovers):
        st.subheader("From which N does sequence IS win?")
        st.dataframe(pd.DataFrame({"estimator": crossovers["estimator"],
                                   "seq_is has the lower RMSE for": [_describe(n) for n in crossovers["first_N"]]}),
                     hide_index=True)


AGGREGATION_CAPTIONS = {
    "seq-mean-token-sum": "Loss aggregation seq-mean-token-sum: each batch divides its summed token losses by N, "
                          "the estimate the exact lines describe. Pick verl's token-mean in the sidebar to see what "
                          "dividing by the kept tokens does to estimators that reject.",
    "token-mean": "Loss aggregation token-mean (verl's default): each batch divides by the tokens left after "
                  "rejection, so an estimator that rejects has its kept tokens scaled up by 1/(kept fraction) of "
                  "that batch — a batch-coupled rescaling that the exact lines (seq-mean-token-sum) do not include. "
                  "Estimators that reject nothing are unchanged.",
    "seq-mean-token-mean": "Loss aggregation seq-mean-token-mean (verl): each sequence is divided by its own kept "
                           "tokens and the batch by the sequences with any kept token, so token-level rejection "
                           "reweights sequences and sequence rejection rescales the batch; the exact lines do not "
                           "include either. Estimators that reject nothing are unchanged.",
    "dapo": "Loss aggregation dapo (TRL's default): each batch divides by all its response tokens, masked or not; "
            "on this fixed-length toy that is seq-mean-token-sum, so the dots match the exact lines as before.",
}


def _describe(first):
    """The batch sizes from ``first`` (an integer, or NaN for none) on, in words."""
    if math.isnan(first):
        return "no N"
    return f"every N ≥ {int(first):,}"
