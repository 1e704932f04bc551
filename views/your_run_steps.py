"""A run on the Your run tab: several step files or a zip of a run, every metric against step.

Each step's numbers are sample estimates of its batch, drawn with ± 2 standard errors; a dashed vermilion rule marks
the step at which a metric first left its early range; a metric the same at every step is said, not drawn. The selected estimators' shares of tokens masked or clipped have a
chart of their own, one line per estimator in its registry colour. Steps that could not be read are listed with their error, and the
others are shown. The frameworks' own metrics of any step are in an expander.
"""

import streamlit as st

from toylab.presentation import coincidence, run_charts, run_frames
from toylab.presentation.estimates import se_text, value_text
from toylab.your_run.files import LogError
from toylab.your_run.steps import AFFECTED_SERIES, EARLY_MIN, EARLY_SHARE, series_keys
from views import chart_element, screen_share
from views import your_run_uploads as uploads
from views.caches import run_cache
from views.user_text import code

NOTICES_SHOWN = 5
PANELS = {True: {"columns": 6, "width": 125, "height": 110},      # presenting: the width of the page, in view
          False: {"columns": 3, "width": 200, "height": 120}}     # beside the sidebar at 1280 px


def render(settings, sources):
    """The run view of ``sources`` (the tab's Sources: several step files, or one zip); an error in the tab if no
    step of it can be read."""
    selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
    placeholder = st.empty()
    try:
        summaries, departures, cut = run_cache.run_summaries(
            sources, selection, lambda share, text: placeholder.progress(share or 0.0, text=text))
    except LogError as error:                    # no step of it can be read: let its files go at once
        uploads.refuse(str(error))
        placeholder.empty()
        st.error(code(error), icon=":material/error:")
        return
    placeholder.empty()
    read = [summary for summary in summaries if "error" not in summary]
    plural = "s" if len(summaries) != 1 else ""
    st.markdown(f"**A run of {len(summaries):,} step{plural}** ({sum(s['tokens'] for s in read):,} response tokens in "
                f"{sum(s['sequences'] for s in read):,} sequences, {len(read):,} steps read)")
    if cut:
        st.warning(f"{cut} Read the whole run with python -m toylab inspect.", icon=":material/content_cut:")
    failed = run_frames.failed_steps_frame(summaries)
    if len(failed):
        st.warning(f"{len(failed)} step(s) could not be read; the others are shown, and the chart skips those "
                   "steps.", icon=":material/warning:")
        st.dataframe(failed, hide_index=True, width="stretch")
    noticed = [f"step {summary['step']}: {notice}" for summary in read for notice in summary.get("notices", ())]
    if noticed:
        more = [f"… and {len(noticed) - NOTICES_SHOWN} more"] if len(noticed) > NOTICES_SHOWN else []
        st.warning(code("; ".join(noticed[:NOTICES_SHOWN] + more)), icon=":material/info:")
    labels = run_frames.step_labels(series_keys(summaries))
    left = {key: step for key, step in departures.items() if step is not None and key in labels}
    drawn, constant = run_frames.constant_metrics(run_frames.steps_frame(summaries, departures, labels))
    chart_element.draw(st, run_charts.steps_chart(drawn, **PANELS[screen_share.on()]))
    st.caption(f"Each panel against the step (its x axis). Each step's value (orange dots) ± 2 standard errors (the band; clustered by sequence). Dashed "
               f"vermilion rule: the first step whose value ± 2 se lies wholly outside the metric's early range (its "
               f"first {EARLY_SHARE:.0%} of steps, at least {EARLY_MIN})"
               + (": " + ", ".join(f"{labels[key]} at step {step}" for key, step in left.items()) + "." if left
                  else "; none left it.")
               + (" Not drawn, the same at every step: " + "; ".join(f"{metric} = {value_text(number)}"
                                                                    for metric, number in constant.items()) + "."
                  if constant else ""))
    affected = run_frames.affected_steps_frame(summaries, departures)
    if len(affected):
        lying = coincidence.coincidences(affected, "step", "value")
        chart_element.draw(st, run_charts.affected_steps_chart(affected, lying))
        moved = [f"{key[len(AFFECTED_SERIES):]} at step {step}" for key, step in departures.items()
                 if step is not None and key.startswith(AFFECTED_SERIES)]
        st.caption("Shares of this sample's response tokens, at the sidebar's thresholds (no standard error). Dashed "
                   "rule in the estimator's colour: the first step where its share left its early range (its early "
                   "values' range widened by its own width)" + (": " + ", ".join(moved) + "." if moved else
                                                                "; none left it.")
                   + (f" Drawn in short dashes over the line each lies on: "
                      f"{coincidence.describe(lying, affected['step'], 'step')}." if lying else ""))
    export = run_frames.steps_table(summaries)
    st.download_button("The run's steps (CSV)", export.to_csv(index=False), file_name="run_steps.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:",
                       help="A row per step: every metric charted above with its standard error, each estimator's "
                            "share of tokens affected, and the error of a step that could not be read.")
    steps = [summary["step"] for summary in read]
    with st.expander("The frameworks' own metrics, step by step"):
        step = st.select_slider("step", steps, value=steps[-1], key="your_run_frameworks_step") if len(steps) > 1 \
            else steps[0]
        summary = next(summary for summary in read if summary["step"] == step)
        frame = run_frames.frameworks_frame(summary["frameworks"])
        frame["value"] = frame["value"].map(value_text)
        frame["se"] = frame["se"].map(se_text)
        st.dataframe(frame, hide_index=True, width="stretch")
        st.caption("Each framework's formula on this step's tokens, under its own name (toylab/your_run/parity.py "
                   "cites the code); a mean carries its standard error, an extreme none.")
