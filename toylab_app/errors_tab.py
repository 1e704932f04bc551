"""The error-versus-batch-size tab: exact curves, bias floors and seq_is crossovers; Monte Carlo dots on request (a
toggle in the link: they cost more than the exact picture they confirm)."""


import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import charts, coincidence, frames
from toylab_app import chart_element, screen_share
from toylab_app.caches import cache

DOTS_KEY = "mc_dots"          # its URL name (toylab.state.query.VIEW_PARAMETERS)


def render(settings):
    moments = cache.selected_moments(settings)
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
    if not selection:
        st.info("Select at least one estimator in the sidebar.")
        return
    dots = st.toggle(f"Monte Carlo check: {cache.MONTE_CARLO_REPLICATES} batches at N = "
                     f"{', '.join(f'{n:,}' for n in cache.MONTE_CARLO_SIZES)}", key=DOTS_KEY, persist_state="session",
                     help="Dots: sampled batches' error, which should sit on the exact lines; the batch-coupled "
                          "estimators (their error is not bias² + var/N) are only sampled. Off, the tab shows the "
                          "exact lines alone and a slider step does not wait for the sampling.")
    if not moments and not dots:
        st.info("The selected estimators are batch-coupled: they have no exact error, only the Monte Carlo check.")
        return
    monte_carlo, undefined = frames.monte_carlo_frame([]), {}
    if dots:
        with st.spinner("Monte Carlo…"):
            monte_carlo, undefined = cache.monte_carlo_frame(settings.toy_key, selection, settings.baseline,
                                                             settings.aggregation)
    crossovers = frames.crossover_frame(moments, cache.reference_moments(settings))
    curves = frames.error_curve_frame(moments)
    lying = coincidence.coincidences(curves, "N", "rel_rmse", log=True)
    chart_element.draw(st, charts.error_chart(curves, monte_carlo, crossovers, lying,
                                              height=420 if screen_share.on() else 480))
    sampled_only = [id for id, _ in selection if not ESTIMATORS[id].exact]
    st.caption(frames.error_chart_caption(dots, cache.MONTE_CARLO_REPLICATES, sampled_only, lying))
    if dots:
        st.caption(AGGREGATION_CAPTIONS[settings.aggregation])
    for note in frames.undefined_monte_carlo_notes(undefined):
        st.caption(note)
    if len(crossovers):
        st.subheader("From which N does sequence IS win?")
        st.dataframe(frames.crossover_table(crossovers), hide_index=True)


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
