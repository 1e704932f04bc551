"""A run on the Your run tab: several step files or a zip of a run, every metric against step.

Each step's numbers are sample estimates of its batch, drawn with ± 2 standard errors; a dashed vermilion rule marks
the step at which a metric first left its early range; a metric the same at every step is said, not drawn. The selected estimators' shares of tokens masked or clipped have a
chart of their own, one line per estimator in its registry colour. Steps that could not be read are listed with their error, and the
others are shown. The frameworks' own metrics of any step are in an expander.
"""

import streamlit as st

from toylab.presentation import coincidence, run_charts, run_frames, run_steps_text
from toylab.your_run.files import LogError
from toylab.your_run.steps import series_keys
from toylab_app import chart_element, screen_share
from toylab_app import your_run_uploads as uploads
from toylab_app.caches import run_cache
from toylab_app.user_text import code

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
    _heading(summaries, cut)
    _metrics(summaries, departures)
    _affected(summaries, departures)
    _export(summaries)
    _frameworks([summary for summary in summaries if "error" not in summary])


def _heading(summaries, cut):
    """The run's size, then what was not read: the cut, the failed steps, the steps' notices."""
    st.markdown(run_steps_text.run_headline(summaries))
    if cut:
        st.warning(f"{cut} Read the whole run with python -m toylab inspect.", icon=":material/content_cut:")
    failed = run_frames.failed_steps_frame(summaries)
    if len(failed):
        st.warning(run_steps_text.failed_steps_note(failed), icon=":material/warning:")
        st.dataframe(failed, hide_index=True, width="stretch")
    noticed = run_steps_text.step_notices(summaries)
    if noticed:
        st.warning(code(noticed), icon=":material/info:")


def _metrics(summaries, departures):
    """Every metric against step, but those the same at every step (said in the caption)."""
    labels = run_frames.step_labels(series_keys(summaries))
    drawn, constant = run_frames.constant_metrics(run_frames.steps_frame(summaries, departures, labels))
    chart_element.draw(st, run_charts.steps_chart(drawn, **PANELS[screen_share.on()]))
    st.caption(run_steps_text.steps_caption(labels, departures, constant))


def _affected(summaries, departures):
    """The selected estimators' shares of tokens masked or clipped against step, if any."""
    affected = run_frames.affected_steps_frame(summaries, departures)
    if len(affected):
        lying = coincidence.coincidences(affected, "step", "value")
        chart_element.draw(st, run_charts.affected_steps_chart(affected, lying))
        st.caption(run_steps_text.affected_caption(departures, lying))


def _export(summaries):
    export = run_frames.steps_table(summaries)
    st.download_button("The run's steps (CSV)", export.to_csv(index=False), file_name="run_steps.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:",
                       help="A row per step: every metric charted above with its standard error, each estimator's "
                            "share of tokens affected, and the error of a step that could not be read.")


def _frameworks(read):
    """The frameworks' own metrics of one read step, chosen on a slider."""
    steps = [summary["step"] for summary in read]
    with st.expander("The frameworks' own metrics, step by step"):
        step = st.select_slider("step", steps, value=steps[-1], key="your_run_frameworks_step") if len(steps) > 1 \
            else steps[0]
        summary = next(summary for summary in read if summary["step"] == step)
        st.dataframe(run_frames.frameworks_shown(summary["frameworks"]), hide_index=True, width="stretch")
        st.caption("Each framework's formula on this step's tokens, under its own name (toylab/your_run/parity.py "
                   "cites the code); a mean carries its standard error, an extreme none.")
