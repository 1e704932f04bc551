"""The estimators tab: the exact table, bias versus spread, and each estimator's formula."""

import re
from dataclasses import dataclass, replace
from functools import partial

import pandas as pd
import pyarrow as pa
import streamlit as st

from toylab.catalogue import kl_settings
from toylab.catalogue.estimators import ESTIMATORS
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.lessons.sampler import NO_FLOOR
from toylab.presentation import charts, frames, kl_charts, kl_frames, seeds_charts, seeds_frames
from toylab.presentation.pipeline_text import identity_caption, objective_caption
from toylab.state.query import ERRORS_TAB, NO_COMPARISON, TRAINING_TAB, VIEW_DISTANCES
from toylab.text import UNDEFINED
from toylab_app import chart_element, screen_share, tour
from toylab_app.caches import cache, seeds_cache
from toylab_app.caches.kept import kept

COLUMNS = {
    "swatch": st.column_config.ImageColumn("", help="The estimator's colour on every chart", width=40),
    "estimator": st.column_config.TextColumn("estimator", help="Registry id (also the URL name)"),
    "label": st.column_config.TextColumn("name"),
    "params": st.column_config.TextColumn("thresholds", help="The thresholds used (the sidebar's values)"),
    "rel_bias": st.column_config.NumberColumn(
        "rel bias", format="%.4f", help="‖E[ĝ] − ∇J‖ / ‖∇J‖, exact: does not shrink with N"),
    "rel_std": st.column_config.NumberColumn(
        "rel std", format="%.4f", help="sqrt(var/N) / ‖∇J‖ at the sidebar's N, exact, for a batch of N sequences"),
    "rel_rmse": st.column_config.NumberColumn(
        "rel RMSE", format="%.4f", help="sqrt(bias² + var/N) / ‖∇J‖ at the sidebar's N: the typical relative "
                                        "error"),
    "cosine": st.column_config.TextColumn(
        "cosine", help="cos(E[ĝ], ∇J), to ∇J: 1 means the mean points the right way. — where E[ĝ] = 0: a zero "
                             "mean has no direction (every sequence masked, or every kept one with A = r − b = 0; "
                             "the reason is under the table)"),
    "tokens_affected": st.column_config.NumberColumn(
        "tokens hit", format="percent", help="Tokens masked or clipped: the mean over positions of P(the "
                                             "token's weight is masked or clipped)"),
    "sequences_affected": st.column_config.NumberColumn(
        "seqs hit", format="percent", help="Sequences masked or clipped: P(any weight of the sequence is "
                                           "masked or clipped)"),
    "unbiased": st.column_config.CheckboxColumn("unbiased", help="rel bias below 1e-9: E[ĝ] = ∇J exactly"),
}
SPLIT_COLUMNS = {          # shown when the sampler truncates (top-k, top-p): the bias split
    "rel_out_of_reach": st.column_config.NumberColumn(
        "out of reach", format="%.4f", help="‖∇J − ∇J_S‖/‖∇J‖: ∇J's part from the sequences the sampler never "
                                            "draws — seq_is's whole bias. The same for every estimator on μ; no weight "
                                            "on what it draws removes it. Not a floor: an estimator's error within "
                                            "reach can point against it, and its bias be smaller"),
    "rel_within_reach": st.column_config.NumberColumn(
        "within reach", format="%.4f", help="‖E[ĝ] − ∇J_S‖/‖∇J‖: what the correction itself gets wrong on the "
                                            "sequences the sampler draws (0 for seq_is). Bias = out of reach + within "
                                            "reach as vectors, so |out of reach − within reach| ≤ rel bias ≤ out of "
                                            "reach + within reach"),
}
PLAIN_COLUMNS = {          # shown when the trainer scores another π than softmax(θ): its objective moved
    "rel_plain_bias": st.column_config.NumberColumn(
        "vs plain", format="%.4f", help="Against softmax(θ): ‖E[ĝ] − ∇J_plain‖/‖∇J_plain‖: the error against softmax(θ)'s gradient, "
                                            "while rel bias is against the scored π's. ≤ rel bias·‖∇J‖/‖∇J_plain‖ + "
                                            "the objective's shift (the header)"),
}
PRESENT_COLUMNS = ["swatch", "estimator", "rel_bias", "rel_std", "rel_rmse", "cosine"]   # what a room reads
PRESENT_SPLIT_COLUMNS = ["swatch", "estimator", "rel_bias", "rel_out_of_reach", "rel_within_reach", "rel_rmse"]  # … when it truncates
PRESENT_HEIGHT = 300                     # the scatter beside the table, both in view at 1280×720
COMPARE_KEY = "compare_baseline"         # the URL parameter: a second baseline drawn hollow on the scatter (its
FORMULAS_KEY = "formulas"                # the formulas' expander: open or not (its content is built only when open)
BASELINE_VALUES = {"none": "0", "logged": "E_μ[r]", "true": "J"}     # control in the sidebar, beside the baseline)
KL_LESSON_HEIGHT = 220                   # the KL chart's plot under a lesson that marks it: its marks in view
KL_VIEW_KEY, KL_DISTANCE_KEY, KL_FRAMEWORKS_KEY = "kl_view", "kl_distance", "kl_frameworks"    # the KL view's URL names
KL_COLUMNS = {
    "setting": st.column_config.TextColumn(
        "KL setting", help="ESTIMATOR.PLACEMENT[.MODIFIER] or a framework's preset (also --kl on the command line)"),
    "weight": st.column_config.TextColumn(
        "weight", help="In the loss: the ratio on the term (none; current = π/sg(π), 1 with its gradient; anchor = "
                       "π/π_old; engine = π/μ). In the reward: the advantage's correction (naive, tok_is, seq_is)"),
    "cosine": st.column_config.TextColumn("cosine to ∇KL(π‖π_ref)", help="cos(E[ĝ], ∇KL(π‖π_ref)), exact"),
    "rel_bias": st.column_config.NumberColumn(
        "rel bias", format="%.4f", help="‖E[ĝ] − ∇KL(π‖π_ref)‖/‖∇KL(π‖π_ref)‖, exact, on the engine's tokens"),
    "rel_std": st.column_config.NumberColumn("rel std at N", format="%.4f",
                                             help="sqrt(var/N)/‖∇KL‖ for a batch of N sequences (the sidebar's N)"),
    "rel_rmse": st.column_config.NumberColumn("rel RMSE at N", format="%.4f", help="sqrt(bias² + var/N)/‖∇KL‖"),
    "reverse_cosine": st.column_config.TextColumn(
        "cosine to ∇KL(π_ref‖π)", help="Against the other direction's gradient, π − π_ref: what k3 in the loss "
                                       "follows on policy"),
    "on_policy_rel_bias": st.column_config.NumberColumn(
        "rel bias on policy", format="%.4f", help="The same with the sampler equal to the trainer (μ := π): 0 for "
                                                  "an identity; the difference from rel bias is the engine's part"),
}


def _notes(settings, table, same, truncates):
    """Under the table: why a number is undefined, what a truncating sampler puts out of reach, and which estimators
    are one estimator on this toy."""
    notes = [f"{UNDEFINED} {note}." for note in frames.table_notes(table)]
    if truncates:
        notes.append(f"The sampler ({settings.sampler.describe()}) never draws some sequences: every estimator on μ "
                     "misses ∇J's part from them (out of reach), which no correction removes — seq_is, unbiased "
                     f"without truncation, has exactly that bias. {NO_FLOOR}")
    diagnostics = cache.toy_diagnostics(settings.toy_key)
    notes += [caption for caption in (objective_caption(settings, diagnostics), identity_caption(settings, diagnostics))
              if caption]
    if same:
        notes.append(f"Identical on this toy (same exact mean and variance): {frames.same_note(same)} here. The "
                     "chart draws each as a ring round the point it shares; the lines of other tabs, dashed over "
                     "each other.")
    return notes


SEEDS_KEY = "est_seeds"                   # the URL parameter: the seeds view, on or off
RANK_COLUMNS = {
    "estimator": st.column_config.TextColumn("estimator"),
    "value": st.column_config.NumberColumn("rel RMSE at N here", format="%.4f"),
    "rank": st.column_config.NumberColumn("rank here", help="1: the lowest relative RMSE at N on this toy; equal "
                                                            "numbers share a rank"),
    "same_rank": st.column_config.NumberColumn("same rank at", help="How many of the toys rank it as this toy does"),
    "first": st.column_config.NumberColumn("first at", help="How many of the toys rank it first (lowest RMSE)"),
    "median_rank": st.column_config.NumberColumn("median rank", format="%.1f"),
    "toys": st.column_config.NumberColumn("of toys"),
}


def _seeds_view(settings):
    """The table's takeaway, the estimators ranked by relative RMSE at N, over this toy and 29 others that differ in
    their seed alone: opt-in, each toy's moments cached as the table's are."""
    if not st.toggle("Across seeds: this toy among 30", key=SEEDS_KEY, persist_state="session",
                     help="The ranking by relative RMSE at N on 30 toys that differ from this one in their seed alone "
                          "(seeds 0–29, or this seed and 0–28): the same T, V, mismatch, sampler, estimators, "
                          "thresholds, baseline and N, each toy exact. Off, a change of the toy does not wait for it."):
        return
    problem = seeds_cache.too_large(settings)
    if problem:
        st.info(f"{problem[0].upper()}{problem[1:]}.", icon=":material/hourglass:")
        return
    with st.spinner("Exact moments of 30 toys…"):
        frame = seeds_frames.strip_frame(seeds_cache.estimator_values(settings, settings.N), settings.seed)
    chart_element.draw(st, seeds_charts.strip_chart(
        frame, f"relative RMSE at N = {settings.N:,} on 30 toys (ticks; ringed: this toy, seed {settings.seed})",
        "relative RMSE at N", log=True, height=220 if screen_share.on() else seeds_charts.HEIGHT))
    same, toys = seeds_frames.same_order(frame)
    st.dataframe(seeds_frames.rank_table(frame), column_config=RANK_COLUMNS, hide_index=True, width="stretch")
    st.caption(f"Ranked by relative RMSE at N = {settings.N:,}, lowest first, on this toy: "
               f"{seeds_frames.order_text(frame)}. {same} of {toys} toys rank every estimator the same way. The toys: "
               f"seeds {seeds_frames.seeds_text(frame)}, each exact; a rank is shared by numbers equal to rounding.")


def plain(text):
    """Text shown as written inside Markdown: its emphasis, code, link and math characters escaped."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|$~])", r"\\\1", text)


@dataclass(frozen=True)
class Picture:
    """What the tab shows of a Settings, kept for every session: the table (its frame, for the download, and the
    columns shown, as Arrow), the bias-against-spread chart, the notes under the table."""
    table: pd.DataFrame
    shown: pa.Table
    columns: dict
    chart: chart_element.Prepared
    notes: list
    names: str


@kept(spinner="Computing…")
def _picture(settings, compared, present, lesson):
    """The Picture of ``settings``, or None when no exact estimator is selected; ``compared``: a second baseline drawn
    hollow (or NO_COMPARISON), ``present``: presentation mode, ``lesson``: the lesson on show whose marks it draws."""
    moments = cache.selected_moments(settings)
    if not moments:
        return None
    table = frames.table_frame(moments, settings.N)
    same = frames.duplicates(moments)
    shown = frames.shown_table(table)
    truncates = bool(table["rel_out_of_reach"].gt(0).any())
    marks = tour.marks_of(lesson, "bias_std")
    height = PRESENT_HEIGHT if present else frames.SCATTER_HEIGHT
    before = None
    if compared not in (NO_COMPARISON, settings.baseline):
        before = frames.table_frame(cache.selected_moments(replace(settings, baseline=compared)), settings.N)
    chart = charts.bias_std_chart(frames.bias_std_frames(table, same, marks, height, before=before), settings.N, height,
                                  marks, compared=f"b = {BASELINE_VALUES[compared]}" if before is not None else None)
    columns = COLUMNS | (SPLIT_COLUMNS if truncates else {}) | (PLAIN_COLUMNS if settings.scored != "plain" else {})
    names = ([name for name in columns if name != "label" and not (truncates and name == "unbiased")]   # the names
             if not present else PRESENT_SPLIT_COLUMNS if truncates else PRESENT_COLUMNS)   # under it: it fits at 1280
    # px; a truncating sampler leaves ∇J's part out of reach to every estimator on μ: "unbiased" is the split's to say
    return Picture(table, chart_element.arrow(shown[names]), columns, chart_element.prepare(chart),
                   _notes(settings, table, same, truncates), frames.names_note(table["estimator"]))


def render(settings):
    batch_coupled = [id for id in settings.estimators if not ESTIMATORS[id].exact]
    if batch_coupled:
        st.caption(f"{', '.join(batch_coupled)}: batch-coupled, no exact single-sample moments; "
                   f"see *{ERRORS_TAB}* for their Monte Carlo errors.")
    kl_first = "kl_bias_std" in tour.marked(settings)      # a lesson on the KL view: its chart on top
    if kl_first:
        _kl_view(settings, lesson=True)
    present = screen_share.on()
    picture = _picture(settings, st.session_state.get(COMPARE_KEY, NO_COMPARISON), present,
                       tour.lesson_id(settings) if "bias_std" in tour.marked(settings) else None)
    if picture is None:
        st.info("Select at least one exact estimator in the sidebar to see the table.")
        return
    if present:                              # side by side, the table's main columns: both in view at 1280×720
        left, right = st.columns([1.15, 1], gap="medium")
        chart_element.draw(left, picture.chart)
        right.dataframe(picture.shown, column_config=picture.columns, hide_index=True, width="stretch")
        right.caption(picture.names)                                   # the ids, named without hovering
        notes = right
    else:                                    # the chart first: in view on arrival at 1280×720, the table under it
        chart_element.draw(st, picture.chart)
        st.dataframe(picture.shown, column_config=picture.columns, hide_index=True, width="stretch")
        st.caption(picture.names)
        notes = st
    for note in picture.notes:
        notes.caption(note)
    table = picture.table
    st.download_button("Download CSV", partial(frames.table_csv, table), file_name="toylab_estimators.csv",
                       mime="text/csv", on_click="ignore",   # a run's start would drop the file (tests/page/test_app.py)
                       help="The table's numbers at full precision, with the settings' N; "
                            f"{UNDEFINED} marks an undefined number, its reason in the note column")
    _seeds_view(settings)
    if not kl_first:
        _kl_view(settings)
    _formulas(settings)


def _formulas(settings):
    formulas = st.expander("Formulas of the selected estimators", key=FORMULAS_KEY, on_change="rerun")
    if formulas.open:                                  # built only while open: a step redraws one closed expander
        formulas.markdown("\n\n".join(               # one element, not three per estimator: a lighter re-render
            f"**{id} · {ESTIMATORS[id].label}**\n\n$$\n{ESTIMATORS[id].latex}\n$$\n\n"
            f"Source: {plain(ESTIMATORS[id].source)}. Thresholds: {plain(frames.params_text(settings.params(id)))}."
            for id in settings.estimators))


def _kl_view(settings, lesson=False):
    """The KL view (opt-in, off the slider's path): each KL setting's estimate of ∇KL(π‖π_ref) on the engine's
    tokens against the true gradient, π_ref a distance from the toy's θ. For a lesson that marks its chart
    (``lesson``): at the top of the tab, the chart before its controls and sized to keep the marks in view."""
    if not lesson:
        st.subheader("The reference: estimating ∇KL(π‖π_ref) on the engine's tokens")
    if not st.toggle("Show the KL view", key=KL_VIEW_KEY, persist_state="session",
                     help="k1, k2, k3 and the frameworks' KL settings, in the loss or in the reward, as estimators of "
                          "the KL penalty's gradient: exact, in closed form."):
        return
    chart_place = st.container()
    distance_column, frameworks_column = st.columns([3, 2])
    distance = distance_column.select_slider(
        "π_ref's distance from θ₀", VIEW_DISTANCES, key=KL_DISTANCE_KEY, persist_state="session",
        help="π_ref = softmax(θ₀ + distance·d), d a standard normal (T, V) table drawn once per seed: the standard "
             "deviation of the reference's logit offset. At θ₀ itself every gradient would be 0.")
    frameworks = frameworks_column.toggle("every framework's preset", key=KL_FRAMEWORKS_KEY, persist_state="session",
                                          help="Add a row per framework KL preset (its estimator, placement, ratio "
                                               "and clamps; β does not change a gradient's direction or relative "
                                               "error)")
    chosen = kl_settings.VIEW_SETTINGS + (tuple(KL_PRESETS) if frameworks else ())
    summary, rows = cache.kl_view(settings.toy_key, distance, chosen, settings.N)
    reverse = UNDEFINED if summary["kl_reverse"] is None else f"{summary['kl_reverse']:.4g}"
    chart_element.draw(chart_place, kl_charts.kl_bias_std_chart(kl_frames.kl_scatter_frame(rows), settings.N,
                                                                tour.marks(settings, "kl_bias_std"),
                                                                **({"height": KL_LESSON_HEIGHT} if lesson else {})))
    table = kl_frames.kl_view_frame(rows)
    st.dataframe(table.drop(columns="label"), column_config=KL_COLUMNS, hide_index=True, width="stretch")
    with st.expander("What each KL setting is"):          # the words, wrapped: in the table they pushed its numbers
        st.table(table[["setting", "label"]].set_index("setting").rename(columns={"label": "what it is"}))  # off 1280 px
    st.caption(f"At the toy's θ (= θ₀), π_ref at distance {distance:g}: KL(π‖π_ref) = {summary['kl_forward']:.4g}, "
               f"KL(π_ref‖π) = {reverse}, ‖∇KL(π‖π_ref)‖ = {summary['grad_norm']:.4g}. One update at the recomputed "
               "anchor, tokens drawn from the engine's μ: ĝ is the penalty's gradient per unit β — in the loss "
               "Σ_t ∂ℓ/∂log π·s_t, in the reward Σ_t c_t·K_t·s_t (the update ascends −β·ĝ). On policy k1 in the "
               "loss has mean 0, k2 follows ∇KL(π‖π_ref), k3 follows ∇KL(π_ref‖π), k1 in the reward follows "
               "∇KL(π‖π_ref); a ratio whose gradient flows (π/sg(π), π/μ) turns k3 into ∇KL(π‖π_ref).")
    sentence = kl_frames.engine_sentence(rows)
    if sentence:
        st.caption(sentence + f" β, the estimator and the placement also train: *{TRAINING_TAB}*, the reference's "
                              "controls.")
