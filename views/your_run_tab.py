"""The Your run tab: a user's own rollout log, its sample statistics and charts, and the toy that matches it.

The file in view (an upload or the example) is kept in session state, so it survives a visit to another
tab; the uploader's callback and the example button are the only ways to change it. Everything from the file —
its name, column names, values, the messages that quote them — is shown through ``user_text`` (code text, never
Markdown). Reading shows a progress bar, which is also where Streamlit stops the reading when the user leaves
the tab or uploads another file.
"""

from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import run_charts as log_charts
from toylab.presentation.run_frames import spread_frame, tail_share_frame
from toylab.text import UNDEFINED, clipped
from toylab.your_run.applied import FEW_WEIGHTS, UNRELIABLE
from toylab.your_run.bounds import LOG_RATIO_LIMIT, MB, PAGE_BOUNDS, REWARD_LIMIT
from toylab.your_run.columns import NAMES, TITLES, choose
from toylab.your_run.files import EXTENSIONS, LogError
from toylab.your_run.matching import comparison, comparison_frame, matched_length
from toylab.your_run.statistics import SINGLE_SEQUENCE, STANDARD_ERRORS
from views import chart_element, sidebar
from views.caches import your_run_cache as cache
from views.caches.your_run_cache import Source
from views.estimators_tab import swatch
from views.user_text import code, value

LABEL = "Your run"
UPLOAD_KEY = "your_run_upload"
SOURCE_KEY = "_your_run_source"
LENGTH_KEY = "your_run_match_length"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rollouts_per_sequence.parquet"
NOT_SET = "—"
UPLOAD_LIMIT_MB = PAGE_BOUNDS.file_bytes // MB   # Streamlit's uploader counts 1 MB as 10**6 bytes (but on Windows)
FORMATS = (
    f"**Accepted:** Parquet, JSON Lines or CSV (the text ones may be gzip-compressed), at most "
    f"{UPLOAD_LIMIT_MB} MB, log-probabilities in nats. Either a row per sequence with list columns "
    f"(sampler and trainer log-probs, optionally a 0/1 mask, and a reward) or a row per token with a sequence "
    f"id (and optionally a position). Recognised names: sampler {', '.join(NAMES['sampler'][::2])}; trainer "
    f"{', '.join(NAMES['trainer'][::2])}; mask {', '.join(NAMES['mask'])}; reward {', '.join(NAMES['reward'][::2])}; "
    f"sequence id {', '.join(NAMES['sequence_id'])}; position {', '.join(NAMES['position'])}. In a CSV a list "
    "cell is a quoted JSON list, \"[-0.1, -2.3]\". **Bounds** (checked while reading; a file over one gets an "
    "error saying which): " + "; ".join(PAGE_BOUNDS.lines()) + f"; |log π − log μ| of a response token "
    f"{LOG_RATIO_LIMIT:g}; |reward| {REWARD_LIMIT:g}.")


def _uploaded():
    file = st.session_state[UPLOAD_KEY]
    st.session_state[SOURCE_KEY] = None if file is None else Source.of(file.name, file.getvalue())


def _use_example():
    st.session_state[SOURCE_KEY] = Source.of(f"examples/{EXAMPLE.name}", EXAMPLE.read_bytes())


def _open_match(settings, match):
    """on_click: the sidebar (and so the URL) to the matched toy, and the Estimators tab open."""
    sidebar.set_controls(replace(settings, T=match.T, V=match.V, seed=match.seed,
                                 mismatch=round(match.mismatch, 2)))
    st.session_state[sidebar.TAB_KEY] = "Estimators"


def render(settings):
    st.caption("Your own rollout log: the sampler's and the trainer's log-probabilities of the same sampled "
               "tokens. Every number from the file is a **sample estimate ± its standard error** "
               f"({STANDARD_ERRORS}), unlike the toy's exact numbers on the other tabs.")
    upload, example = st.columns([3, 1], vertical_alignment="center")
    upload.file_uploader(f"Rollout log (at most {UPLOAD_LIMIT_MB} MB)", key=UPLOAD_KEY, on_change=_uploaded,
                         type=[extension.lstrip(".") for extension in EXTENSIONS] + ["gz"],
                         max_upload_size=UPLOAD_LIMIT_MB, help=FORMATS)
    example.button("Use the example log", on_click=_use_example, icon=":material/science:", width="stretch",
                   help="240 sequences generated from the toy T = 6, V = 4, mismatch 0.5, seed 0 (not from a real "
                        "model): the matched toy should come back near mismatch 0.5.")
    source = st.session_state.get(SOURCE_KEY)
    if source is None:
        st.info("Upload a rollout log, or use the example log.", icon=":material/upload_file:")
        st.markdown(FORMATS)
        return
    progress = st.empty()
    try:
        columns = _columns(source)
        results = cache.summary(source, columns, _reporter(progress, source))
        selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
        rows, rewards, thresholds = cache.estimators(source, columns, selection, _reporter(progress, source))
    except LogError as error:
        progress.empty()
        st.error(code(error), icon=":material/error:")
        return
    progress.empty()
    statistics = results["statistics"]
    _headline(source, statistics)
    _token_charts(results, thresholds["tokens"])
    _sequence_charts(results, statistics, thresholds)
    _estimator_table(rows, rewards, statistics)
    _matched_toy(settings, statistics)


def _reporter(placeholder, source):
    """progress(share) for reading the log: a progress bar (share None: waiting for another user's log)."""
    def progress(share):
        if share is None:
            placeholder.progress(0.0, text="Waiting for another log to be read (one at a time) …")
        else:
            placeholder.progress(share, text=f"Reading {value(source.name)}: {share:.0%}")
    return progress


def _columns(source):
    """The Columns: detected, or picked (the pickers sit in an expander, open when detection is unsure)."""
    preview, detection = cache.detection(source.digest, source.name, source)
    for doubt in detection.doubts:
        st.warning(f"{code(f'{source.name}: {doubt}')} Check the columns below.", icon=":material/help:")
    explicit = {}
    with st.expander("Columns", expanded=detection.unsure):
        pickers = st.columns(len(NAMES))
        for picker, role in zip(pickers, NAMES, strict=True):
            required = role in ("sampler", "trainer")
            options = list(detection.numeric if required else (NOT_SET, *preview.columns))
            guess = detection.guess[role] if detection.guess[role] in options else (None if required else NOT_SET)
            chosen = picker.selectbox(role.replace("_", " "), options, index=options.index(guess) if guess else None,
                                      key=f"your_run_column.{role}.{source.digest[:12]}", help=TITLES[role],
                                      placeholder="choose a column", format_func=clipped)
            explicit[role] = None if chosen == NOT_SET else chosen
    return choose(preview, source.name, **explicit)


def _headline(source, statistics):
    st.markdown(f"{value(source.name)} · {statistics.sequences:,} sequences, {statistics.tokens:,} response tokens"
                + (f" ({statistics.dropped:,} sequences without response tokens left out)" if statistics.dropped
                   else ""))
    metrics = [
        ("mean length", statistics.mean_length, "{:.1f}", "Response tokens per sequence: mean ± se."),
        ("k1 = mean(log μ − log π)", statistics.k1, "{:.4f}",
         "Estimates the per-token KL(μ‖π): the mean over response tokens of log μ − log π, ± its standard error."),
        ("k3 = mean(ρ − 1 − log ρ)", statistics.k3, "{:.4f}",
         "Another unbiased estimate of the per-token KL(μ‖π) (each term ≥ 0), ± its standard error."),
        ("token χ² = mean(ρ²) − 1", statistics.chi2_token, "{:.4g}",
         "Estimates E_μ[ρ_t²] − 1, the per-token χ²: how much a per-token weight varies. Heavy-tailed: its "
         "standard error can understate the uncertainty."),
    ]
    if statistics.mean_reward is not None:
        metrics.append(("mean reward E_μ[r]", statistics.mean_reward, "{:.4f}",
                        "The logged mean reward: rewards of sampler rollouts, E_μ[r], not the trainer's J = E_π[r]."))
    columns = st.columns(len(metrics) + 1)
    for column, (label, estimate, style, help) in zip(columns, metrics, strict=False):
        column.metric(label, style.format(estimate.value), delta=f"± {_number(estimate.se, style)}", delta_color="off",
                      delta_arrow="off", delta_description="standard error", help=help)
    columns[-1].metric("ESS fraction (this sample)", f"{statistics.ess_fraction:.1%}",
                       help="(Σ W)² / (B·Σ W²) of these sequences' weights W = ∏ρ_t: the share of the batch "
                            "sequence-level IS effectively keeps. A property of this sample (no standard error).")
    st.caption("Sample estimates, each with its standard error below it."
               + (f" {UNDEFINED}: {SINGLE_SEQUENCE}." if statistics.k1.se is None else ""))


def _token_charts(results, thresholds):
    st.subheader("Per-token ratio ρ_t = π(y_t)/μ(y_t)")
    histogram, shares = st.columns([3, 1])
    chart_element.draw(histogram, log_charts.token_histogram_chart(results["tokens"], thresholds))
    shares.dataframe(tail_share_frame(results["statistics"]), hide_index=True, width="stretch", column_config={
        "threshold": st.column_config.NumberColumn("|log ρ_t| >", format="%g"),
        "share": st.column_config.NumberColumn("share of tokens", format="percent"),
        "se": st.column_config.NumberColumn("± se", format="percent")})
    along, probability = st.columns(2)
    chart_element.draw(along, log_charts.position_chart(results["position"]))
    chart_element.draw(probability, log_charts.probability_chart(results["probability"]))
    st.caption("Line: mean log ρ_t per bin; band: its 10–90 % range; dot size: tokens in the bin. Below 0 the "
               "trainer gives the sampled token less probability than the sampler did.")


def _sequence_charts(results, statistics, thresholds):
    st.subheader("Sequence ratios")
    W, geo = st.columns(2)
    chart_element.draw(W, log_charts.sequence_histogram_chart(results["W"], thresholds["W"], kind="W"))
    chart_element.draw(geo, log_charts.sequence_histogram_chart(results["geo"], thresholds["geo"], kind="geo"))
    spread = spread_frame(statistics)
    st.dataframe(spread, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g") for name in spread.columns[1:]})
    st.caption("Over the log's sequences: mean ± se, spread and quantiles. E_μ[log W] = −KL(μ‖π) of a whole "
               "sequence, so log W is mostly below 0, with rare large weights.")


ESTIMATOR_COLUMNS = {
    "swatch": st.column_config.ImageColumn("", help="The estimator's colour on every chart", width=40),
    "name": st.column_config.TextColumn("estimator", help="Registry id; verl:… and trl:… are the frameworks' "
                                                          "options as their code computes them"),
    "tokens_affected": st.column_config.NumberColumn(
        "tokens masked/clipped", format="percent", help="Share of this log's response tokens whose weight the "
                                                       "estimator masks or clips (a count on the data, not a "
                                                       "probability)"),
    "sequences_affected": st.column_config.NumberColumn(
        "sequences masked/clipped", format="percent", help="Share of this log's sequences with any masked or "
                                                          "clipped token"),
    "weight_mean": st.column_config.NumberColumn("weight mean", format="%.4g", help="Mean of the per-token "
                                                                                  "coefficient c_t over the tokens"),
    "weight_sd": st.column_config.NumberColumn("weight sd", format="%.3g"),
    "weight_max": st.column_config.NumberColumn("largest weight", format="%.4g"),
    "ess_fraction": st.column_config.NumberColumn(
        "ESS of its weights", format="percent", help="(Σ c)² / (n·Σ c²) over the n response tokens: the share of "
                                                     "the tokens its weights effectively keep"),
}


def _estimator_table(rows, rewards, statistics):
    st.subheader("What each estimator would do to these sequences")
    if not rows:
        st.info("Select estimators in the sidebar to apply them to the log.")
        return
    applied = [row for row in rows if row.tokens_affected is not None]
    if applied:
        table = pd.DataFrame([row.as_dict() for row in applied]).assign(
            swatch=[swatch(ESTIMATORS[row.name].colour) for row in applied])
        st.dataframe(table[list(ESTIMATOR_COLUMNS)], column_config=ESTIMATOR_COLUMNS, hide_index=True,
                     width="stretch")
    for row in rows:
        if row.note:
            what = "weights are not summarised" if row.tokens_affected is not None else "is not applied"
            st.markdown(f"- **{row.name}** {what}: {row.note}.")
    st.caption("Computed by the same weight functions as the toy's exact table (``toylab.coefficients``), on this "
               "log's sequences: shares of its tokens and sequences, not probabilities. Estimators that read the "
               "advantage (PPO-clip, the off-policy mask) use A = r − mean(r) of the log. Dashed rules on the "
               "histograms above: the selected thresholds, with the share of the log beyond each.")
    if rewards is None:
        return
    metrics = [("logged E_μ[r]", rewards.logged, "The mean reward of the log's sampler rollouts."),
               ("J by sequence IS", rewards.seq_is, "mean of W·r: unbiased for J = E_π[r], heavy-tailed"),
               ("J by self-normalised IS", rewards.snis, "Σ W·r / Σ W: biased, steadier; delta-method se")]
    for column, (label, estimate, help) in zip(st.columns(len(metrics)), metrics, strict=True):
        if estimate is None:
            column.metric(label, NOT_SET, help=help + " — undefined: its mean or standard error is beyond float64 "
                                                      "(the sequence weights W reach e^709)")
        else:
            column.metric(label, f"{estimate.value:.4f}", delta=f"± {_number(estimate.se, '{:.4f}')}",
                          delta_color="off", delta_arrow="off", delta_description="standard error", help=help)
    if statistics.ess_fraction < FEW_WEIGHTS:
        text = UNRELIABLE.format(statistics.ess_fraction)
        st.warning(text[0].upper() + text[1:] + ".", icon=":material/warning:")


def _matched_toy(settings, statistics):
    st.subheader("The toy that matches")
    data_T = matched_length(statistics.mean_length.value, settings.V)
    choice = st.radio("match at", ("sidebar", "data"), key=LENGTH_KEY, horizontal=True, format_func={
        "sidebar": f"the sidebar's T = {settings.T}",
        "data": f"the data's mean length (T = {data_T}, capped at the page's limit for V = {settings.V})"}.get)
    T = settings.T if choice == "sidebar" else data_T
    match = cache.matched(statistics.k1, T, settings.V, settings.seed)
    st.markdown("\n".join(f"- {sentence}" for sentence in comparison(match, statistics)))
    table = comparison_frame(match, statistics)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "quantity": st.column_config.TextColumn("quantity"),
        "data": st.column_config.NumberColumn("data (sample estimate)", format="%.4g"),
        "se": st.column_config.NumberColumn("± se", format="%.2g"),
        "toy": st.column_config.NumberColumn("toy (exact)", format="%.4g"),
        "toy_low": st.column_config.NumberColumn("toy, lowest within 2 se", format="%.4g"),
        "toy_high": st.column_config.NumberColumn("toy, highest within 2 se", format="%.4g")})
    st.button(f"Open the Estimators tab at this toy (T = {T}, V = {settings.V}, mismatch "
              f"{round(match.mismatch, 2):g}) →", key="your_run_open_match", on_click=_open_match,
              args=(settings, match), help="Sets the sidebar (and so the link) to the matched toy, its mismatch "
                                          "rounded to the slider's step of 0.01, and opens the Estimators tab.")


def _number(number, style):
    return UNDEFINED if number is None else style.format(number)
