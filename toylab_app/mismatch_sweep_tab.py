"""The mismatch sweep tab: every selected estimator's exact error as the sampler moves away from the trainer —
by the scale of its logit error, its top-p, its temperature, or the precision it rounds its logits to (the ``sweep``
control, in the URL) —, and on request (``sweep_pipelines``) the same sweep under each framework pipeline."""

import streamlit as st

from toylab.presentation import coincidence, sweep_charts, sweep_frames
from toylab.state.query import SWEPT
from toylab_app import chart_element, screen_share, sweep_panel, tour
from toylab_app.caches import sweep_cache
from toylab_app.caches.kept import kept

SWEEP_KEY = "sweep"
def render(settings):
    if not settings.selection(exact_only=True):
        st.info("Select at least one exact estimator in the sidebar.")
        return
    present = screen_share.on()                     # then one row: what is swept beside the panel, no label above
    sweep_column, panel_column = st.columns(2) if present else (st, st)
    parameter = sweep_column.radio(
        "sweep over", SWEPT, key=SWEEP_KEY, persist_state="session", horizontal=True,
        label_visibility="collapsed" if present else "visible", format_func=(lambda name: f"sweep {name}") if present
        else str,
        help="Which part of the sampler model moves — mismatch: the scale of the logit error b; top_p; temperature: the "
             "sampler's τ; precision: the rounding of its logits (none, fp16, bf16) — the others stay at the sidebar's values. (The options are written as the link writes them.)")
    panel = sweep_panel.picker("mismatch_panel", panel_column)
    chart, captions = _picture(settings, parameter, panel,
                               tour.lesson_id(settings) if "sampler_divergence" in tour.marked(settings) else None)
    chart_element.draw(st, chart, width="stretch" if panel else "content")
    for caption in captions:
        st.caption(caption)
    if not present and st.toggle("compare the framework pipelines", key="sweep_pipelines", persist_state="session",
                                 help="The same sweep once per pipeline the frameworks use (what they log as μ, what "
                                      "their trainer scores), at the sidebar's top-p: one toy per point and pipeline."):
        _pipelines(settings, parameter)


@kept(spinner="Computing…")
def _picture(settings, parameter, panel, lesson):
    """(the sweep of ``parameter``'s chart, prepared; its captions), one ``panel`` or all (None), marked by lesson
    ``lesson`` (or None)."""
    estimator_rows, divergence_rows, left_out = sweep_cache.sampler_sweep(settings, parameter)
    estimators = sweep_frames.sampler_frame(estimator_rows, parameter)
    lying = sweep_frames.coincident(estimators, parameter,
                                    sweep_charts.drawn_panels(sweep_charts.SAMPLER_PANELS, panel))
    chart = sweep_charts.sampler_chart(sweep_frames.styled(estimators, lying),
                                       sweep_frames.divergence_frame(divergence_rows, parameter),
                                       sweep_frames.out_of_reach_frame(divergence_rows, parameter),
                                       getattr(settings, parameter), parameter, panel,
                                       marks=tour.marks_of(lesson, "sampler_divergence"),
                                       labels=sweep_frames.legend_words(lying))
    note = sweep_frames.coincident_note(lying, parameter)
    return chart_element.prepare(chart), ([coincidence.dashed_caption(note)] if note else []) + [
        sweep_frames.sampler_sweep_caption(settings, parameter, left_out)]


def _pipelines(settings, parameter):
    chart, caption = _pipelines_picture(settings, parameter)
    chart_element.draw(st, chart, width="content")     # its panels' own widths: stretched, the last one overflowed
    st.caption(caption)


@kept(spinner="Computing…")
def _pipelines_picture(settings, parameter):
    """(the sweep of ``parameter`` under each framework pipeline, prepared; its caption)."""
    estimator_rows, pipeline_rows, left_out = sweep_cache.pipeline_sweep(settings, parameter)
    chart = sweep_charts.pipeline_chart(sweep_frames.pipeline_frame(estimator_rows, pipeline_rows, parameter),
                                        sweep_frames.pipeline_identity_frame(pipeline_rows, parameter),
                                        getattr(settings, parameter), parameter)
    return chart_element.prepare(chart), sweep_frames.pipeline_sweep_caption(parameter, left_out)
