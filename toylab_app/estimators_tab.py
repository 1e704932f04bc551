"""The estimators tab: the exact table, bias versus spread, and each estimator's formula."""

import re
from dataclasses import replace
from functools import partial

import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import charts, frames
from toylab.presentation.pipeline_text import identity_caption, objective_caption
from toylab.state.query import ERRORS_TAB, NO_COMPARISON
from toylab.text import UNDEFINED
from toylab_app import chart_element, screen_share, tour
from toylab_app.caches import cache

COLUMNS = {
    "swatch": st.column_config.ImageColumn("", help="The estimator's colour on every chart", width=40),
    "estimator": st.column_config.TextColumn("estimator", help="Registry id (also the URL name)"),
    "label": st.column_config.TextColumn("name"),
    "params": st.column_config.TextColumn("thresholds", help="The thresholds used (the sidebar's values)"),
    "rel_bias": st.column_config.NumberColumn(
        "rel bias", format="%.4f", help="‖E[ĝ] − ∇J‖ / ‖∇J‖, exact: does not shrink with N"),
    "rel_std": st.column_config.NumberColumn(
        "rel std at N", format="%.4f", help="sqrt(var/N) / ‖∇J‖, exact, for a batch of N sequences"),
    "rel_rmse": st.column_config.NumberColumn(
        "rel RMSE at N", format="%.4f", help="sqrt(bias² + var/N) / ‖∇J‖: the typical relative error"),
    "cosine": st.column_config.TextColumn(
        "cosine to ∇J", help="cos(E[ĝ], ∇J): 1 means the mean points the right way. — where E[ĝ] = 0: a zero "
                             "mean has no direction (every sequence masked, or every kept one with A = r − b = 0; "
                             "the reason is under the table)"),
    "tokens_affected": st.column_config.NumberColumn(
        "tokens masked/clipped", format="percent", help="Mean over positions of P(the token's weight is "
                                                        "masked or clipped)"),
    "sequences_affected": st.column_config.NumberColumn(
        "sequences masked/clipped", format="percent", help="P(any weight of the sequence is masked or clipped)"),
    "unbiased": st.column_config.CheckboxColumn("unbiased", help="rel bias below 1e-9: E[ĝ] = ∇J exactly"),
}
SPLIT_COLUMNS = {          # shown when the sampler truncates (top-k, top-p): the bias split
    "rel_floor": st.column_config.NumberColumn(
        "bias floor", format="%.4f", help="‖∇J − ∇J_S‖/‖∇J‖: ∇J's part from the sequences the sampler never draws. "
                                          "The same for every estimator on μ; no weight on what it draws removes it"),
    "rel_rest": st.column_config.NumberColumn(
        "bias rest", format="%.4f", help="‖E[ĝ] − ∇J_S‖/‖∇J‖: what the correction itself gets wrong on the sequences "
                                         "the sampler draws (0 for seq_is). Bias = floor + rest as vectors, so "
                                         "|floor − rest| ≤ rel bias ≤ floor + rest"),
}
PLAIN_COLUMNS = {          # shown when the trainer scores another π than softmax(θ): its objective moved
    "rel_plain_bias": st.column_config.NumberColumn(
        "vs softmax(θ)", format="%.4f", help="‖E[ĝ] − ∇J_plain‖/‖∇J_plain‖: the error against softmax(θ)'s gradient, "
                                            "while rel bias is against the scored π's. ≤ rel bias·‖∇J‖/‖∇J_plain‖ + "
                                            "the objective's shift (the header)"),
}
PRESENT_COLUMNS = ["swatch", "estimator", "rel_bias", "rel_std", "rel_rmse", "cosine"]   # what a room reads
PRESENT_SPLIT_COLUMNS = ["swatch", "estimator", "rel_bias", "rel_floor", "rel_rest", "rel_rmse"]  # … when it truncates
PRESENT_HEIGHT = 300                     # the scatter beside the table, both in view at 1280×720
COMPARE_KEY = "compare_baseline"         # the URL parameter: a second baseline drawn hollow on the scatter (its
FORMULAS_KEY = "formulas"                # the formulas' expander: open or not (its content is built only when open)
BASELINE_VALUES = {"none": "0", "logged": "E_μ[r]", "true": "J"}     # control in the sidebar, beside the baseline)


def _notes(where, settings, table, same, truncates):
    """Under the table: why a number is undefined, what a truncating sampler's bias floor is, and which estimators
    are one estimator on this toy."""
    for note in frames.table_notes(table):
        where.caption(f"{UNDEFINED} {note}.")
    if truncates:
        where.caption(f"The sampler ({settings.sampler.describe()}) never draws some sequences: every estimator on μ "
                      "misses ∇J's part from them, the bias floor, which no correction removes — seq_is, unbiased "
                      "without truncation, has exactly that bias. An estimator's own error (the rest) may point against "
                      "the floor and partly cancel it, so a biased correction can show less bias than seq_is; that is "
                      "an accident of this toy, not a repair.")
    diagnostics = cache.toy_diagnostics(settings.toy_key)
    for caption in (objective_caption(settings, diagnostics), identity_caption(settings, diagnostics)):
        if caption:
            where.caption(caption)
    if same:
        where.caption(f"Identical on this toy (same exact mean and variance): {frames.same_note(same)} here. The "
                      "chart draws each as a ring round the point it shares; the lines of other tabs, dashed over "
                      "each other.")


def plain(text):
    """Text shown as written inside Markdown: its emphasis, code, link and math characters escaped."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|$~])", r"\\\1", text)


def render(settings):
    batch_coupled = [id for id in settings.estimators if not ESTIMATORS[id].exact]
    if batch_coupled:
        st.caption(f"{', '.join(batch_coupled)}: batch-coupled, no exact single-sample moments; "
                   f"see *{ERRORS_TAB}* for their Monte Carlo errors.")
    moments = cache.selected_moments(settings)
    if not moments:
        st.info("Select at least one exact estimator in the sidebar to see the table.")
        return
    table = frames.table_frame(moments, settings.N)
    same = frames.duplicates(moments)
    shown = frames.shown_table(table)
    truncates = bool(table["rel_floor"].gt(0).any())
    marks = tour.marks(settings, "bias_std")
    height = PRESENT_HEIGHT if screen_share.on() else frames.SCATTER_HEIGHT
    compared = st.session_state.get(COMPARE_KEY, NO_COMPARISON)
    before = None
    if compared not in (NO_COMPARISON, settings.baseline):
        before = frames.table_frame(cache.selected_moments(replace(settings, baseline=compared)), settings.N)
    chart = charts.bias_std_chart(frames.bias_std_frames(table, same, marks, height, before=before), settings.N, height,
                                  marks, compared=f"b = {BASELINE_VALUES[compared]}" if before is not None else None)
    columns = COLUMNS | (SPLIT_COLUMNS if truncates else {}) | (PLAIN_COLUMNS if settings.scored != "plain" else {})
    if screen_share.on():                    # side by side, the table's main columns: both in view at 1280×720
        left, right = st.columns([1.15, 1], gap="medium")
        chart_element.draw(left, chart)
        right.dataframe(shown[PRESENT_SPLIT_COLUMNS if truncates else PRESENT_COLUMNS], column_config=columns,
                        hide_index=True, width="stretch")
        right.caption(frames.names_note(table["estimator"]))           # the ids, named without hovering
        _notes(right, settings, table, same, truncates)
    else:
        st.dataframe(shown[list(columns)], column_config=columns, hide_index=True, width="stretch")
        _notes(st, settings, table, same, truncates)
    st.download_button("Download CSV", partial(frames.table_csv, table), file_name="toylab_estimators.csv",
                       mime="text/csv", help="The table's numbers at full precision, with the settings' N; "
                                             f"{UNDEFINED} marks an undefined number, its reason in the note column")
    if not screen_share.on():
        chart_element.draw(st, chart)
    formulas = st.expander("Formulas of the selected estimators", key=FORMULAS_KEY, on_change="rerun")
    if formulas.open:                                  # built only while open: a step redraws one closed expander
        formulas.markdown("\n\n".join(                 # one element, not three per estimator: a lighter re-render
            f"**{id} · {ESTIMATORS[id].label}**\n\n$$\n{ESTIMATORS[id].latex}\n$$\n\n"
            f"Source: {plain(ESTIMATORS[id].source)}. Thresholds: {plain(frames.params_text(settings.params(id)))}."
            for id in settings.estimators))
