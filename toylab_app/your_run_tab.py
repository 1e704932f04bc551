"""The Your run tab: a user's own rollout log, its sample statistics and charts, and the toy that matches it; or a
whole run (several step files, or a zip of a run), every metric against step (``your_run_steps``).

The files in view (uploads or an example) are kept for the session (``your_run_uploads``: its callbacks and the
example buttons are the only ways to change them, and a file that cannot be read is let go at once), so they survive
a visit to another tab and are released when the session disconnects. Two uploaders: the log's takes one file and a
new one replaces it (a log, or a zip of a run); the run's takes several, and the run in view is the files in it,
dropped together or one after another (in a browser a second drop on a multi-file uploader adds to the first, so one
uploader for both would turn a second log into a two-step run). Everything from the file — its name, column names,
values, the messages that quote them — is shown through ``user_text`` (code text, never Markdown). Reading shows a progress bar, which is also where Streamlit stops the reading when the user leaves
the tab or uploads another file.
"""

from dataclasses import replace
from pathlib import Path

import streamlit as st

from toylab.presentation import run_charts as log_charts
from toylab.presentation import run_verdict
from toylab.presentation.estimates import se_text, value_text
from toylab.presentation.pipeline_text import signature_text
from toylab.presentation.run_frames import (
    applied_frame,
    beyond_view_note,
    frameworks_shown,
    quantile_frame,
    spread_frame,
    suggested_threshold_frame,
    tail_share_frame,
    thresholds_in_view,
    thresholds_outside_note,
    worst_sequences_frame,
    worst_tokens_frame,
)
from toylab.state.query import ESTIMATORS_TAB, clean_float
from toylab.text import clipped, distinct, percent
from toylab.your_run.applied import FEW_WEIGHTS, UNRELIABLE
from toylab.your_run.bottom_line import bottom_line
from toylab.your_run.bounds import LOG_RATIO_LIMIT, MB, PAGE_BOUNDS, REWARD_LIMIT
from toylab.your_run.columns import NAMES, TITLES, choose
from toylab.your_run.dumps import PICKLE_EXTENSIONS, TORCH_EXTENSIONS
from toylab.your_run.files import EXTENSIONS, LogError
from toylab.your_run.matching import matched_length, matching_estimate
from toylab.your_run.signature import logging_signature
from toylab.your_run.statistics import SINGLE_SEQUENCE, STANDARD_ERRORS
from toylab_app import chart_element, screen_share, sidebar, your_run_compare, your_run_export, your_run_steps
from toylab_app import your_run_uploads as uploads
from toylab_app.caches import your_run_cache as cache
from toylab_app.user_text import code, value

LENGTH_KEY = "your_run_match_length"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE = EXAMPLES / "rollouts_per_sequence.parquet"
EXAMPLE_RUN = EXAMPLES / "example_run.zip"
NOT_SET = "—"
PRESENT_HEIGHT = 200          # the first chart's plot when presenting: in view under the numbers at 1280×720
UPLOAD_LIMIT_MB = PAGE_BOUNDS.file_bytes // MB   # Streamlit's uploader counts 1 MB as 10**6 bytes (but on Windows)
FORMATS = (
    f"**Accepted:** Parquet, JSON Lines or CSV (the text ones may be gzip-compressed), at most "
    f"{UPLOAD_LIMIT_MB} MB, log-probabilities in nats. Either a row per sequence with list columns "
    f"(sampler and trainer log-probs, optionally a 0/1 mask, and a reward) or a row per token with a sequence "
    f"id (and optionally a position). Recognised names: sampler {', '.join(NAMES['sampler'][::2])}; trainer "
    f"{', '.join(NAMES['trainer'][::2])}; mask {', '.join(NAMES['mask'])}; reward {', '.join(NAMES['reward'][::2])}; "
    f"sequence id {', '.join(NAMES['sequence_id'])}; position {', '.join(NAMES['position'])}; advantage (used when "
    f"there is no reward) {', '.join(NAMES['advantage'])}. In a CSV a list cell is a quoted JSON list, "
    "\"[-0.1, -2.3]\". NeMo-RL's train_data_step*.jsonl and prime-rl's token exports are read as written; a torch "
    "(.pt) or pickle dump is read only by the command line. **A run**: several step files (step_N, global_step_N, "
    "train_data_stepN, … in their names) or a zip of a run's directory. **Bounds** (checked while reading; a file over one gets an "
    "error saying which): " + "; ".join(PAGE_BOUNDS.lines()) + f"; |log π − log μ| of a response token "
    f"{LOG_RATIO_LIMIT:g}; |reward| {REWARD_LIMIT:g}.")


UPLOAD_TYPES = [extension.lstrip(".") for extension in (*EXTENSIONS, ".gz", ".zip", *TORCH_EXTENSIONS,
                                                          *PICKLE_EXTENSIONS)]
RUN_UPLOAD_TYPES = [extension.lstrip(".") for extension in (*EXTENSIONS, ".gz", *TORCH_EXTENSIONS,
                                                              *PICKLE_EXTENSIONS)]


def _open_match(settings, match):
    """on_click: the sidebar (and so the URL) to the matched toy, and the Estimators tab open."""
    sidebar.set_controls(replace(settings, T=match.T, V=match.V, seed=match.seed, mismatch=clean_float(match.mismatch)))
    st.session_state[sidebar.TAB_KEY] = ESTIMATORS_TAB


def render(settings):
    sources = uploads.shown()
    files = st.expander("Files and columns (change them here)", icon=":material/upload_file:") if sources \
        else st.container()
    with files:
        _files()
    refused, error, lost = uploads.notices()
    if refused:
        st.error(refused, icon=":material/error:")
    if error:
        st.error(code(error), icon=":material/error:")
    if lost:
        st.warning(f"{lost} of the files in the run's uploader were let go (another log was shown, or they could not "
                   "be read): remove them there and drop them again to have them in the run.",
                   icon=":material/warning:")
    if not sources:
        st.info("Upload a rollout log or a run, or use an example.", icon=":material/upload_file:")
        st.markdown(FORMATS)
        return
    if uploads.run_in_view() or len(sources) > 1 or sources[0].name.lower().endswith(".zip"):
        your_run_steps.render(settings, sources)
        return
    _log(settings, sources[0], files)


def _files():
    """What this tab reads, how its numbers differ from the toy's, the two uploaders and the examples: on top until a
    file is in view, then folded away (the first chart in view at 1280×720)."""
    st.caption("Your own rollout log: the sampler's and the trainer's log-probabilities of the same sampled "
               "tokens. Every number from the file is a **sample estimate ± its standard error** "
               f"({STANDARD_ERRORS}), unlike the toy's exact numbers on the other tabs.")
    upload, run_upload = st.columns(2)
    upload.file_uploader(f"Rollout log, or a zip of a run (at most {UPLOAD_LIMIT_MB} MB)", key=uploads.UPLOAD_KEY,
                         on_change=uploads.uploaded, type=UPLOAD_TYPES, max_upload_size=UPLOAD_LIMIT_MB, help=FORMATS)
    run_upload.file_uploader(f"A run: its step files (at most {UPLOAD_LIMIT_MB} MB each, "
                             f"{uploads.RUN_UPLOAD_BYTES // MB} MB in all)", key=uploads.RUN_UPLOAD_KEY,
                             on_change=uploads.run_uploaded,
                             type=RUN_UPLOAD_TYPES, accept_multiple_files=True, max_upload_size=UPLOAD_LIMIT_MB,
                             help="Every file dropped here joins the run in view; removing one here takes it out. "
                                  + FORMATS)
    with st.container(horizontal=True):
        st.button("Use the example log", on_click=uploads.use_example, args=(EXAMPLE,), icon=":material/science:",
                  help="240 sequences generated from the toy T = 6, V = 4, mismatch 0.5, seed 0 (not from a real "
                       "model): the matched toy should come back near mismatch 0.5.")
        st.button("Use the example run", on_click=uploads.use_example, args=(EXAMPLE_RUN,), icon=":material/timeline:",
                  help="Twelve steps generated from the toy at a realistic mismatch (per-token KL near 1e-4) that "
                       "drifts from step 9 on: not from a real model.")


def _log(settings, source, files):
    """One log: its numbers with the bottom line first, its charts, what the estimators do, and the matched toy; the
    column pickers in ``files`` (with the uploaders) unless detection is unsure."""
    progress = st.empty()
    report = _reporter(progress, source)
    try:
        detected = cache.detection(source.digest, source.name, source, report)
    except LogError as error:                    # the file itself cannot be read: let it go at once
        uploads.refuse(str(error))
        progress.empty()
        st.error(code(error), icon=":material/error:")
        return
    try:
        columns = _columns(source, files, *detected)
        results = cache.summary(source, columns, report)
        selection = tuple((id, tuple(params.items())) for id, params in settings.selection().items())
        rows, rewards, suggested, thresholds = cache.estimators(source, columns, selection, report)
    except LogError as error:                    # with these columns: another pick may read it, so it is kept
        progress.empty()
        st.error(code(error), icon=":material/error:")
        return
    progress.empty()
    statistics, sizes = results["statistics"], results["magnitudes"]
    _headline(source, statistics, sizes, results["notices"])
    st.markdown(run_verdict.bottom_line_text(bottom_line(statistics, rewards, rows), rewards), help=run_verdict.RULE)
    _token_charts(results, thresholds["tokens"], statistics, sizes)
    _sequence_charts(results, statistics, thresholds)
    _estimator_table(rows, rewards, statistics, suggested)
    _frameworks(results["frameworks"])
    _matched_toy(settings, statistics, sizes)
    with st.expander("Export the results, or compare with another log"):
        your_run_export.render(cache.rollout_log(source, columns, report), source.name, "your_run_export")
        _compare(source, columns, statistics, sizes)


def _reporter(placeholder, source):
    """progress(share) for reading the log: a progress bar (share None: waiting for another user's log)."""
    def progress(share):
        if share is None:
            placeholder.progress(0.0, text="Waiting for another log to be read (one at a time) …")
        else:
            placeholder.progress(share, text=f"Reading {value(source.name)}: {share:.0%}")
    return progress


def _columns(source, files, preview, detection):
    """The Columns: detected, or picked (the pickers sit with the files, or in an expander of their own, open, when
    detection is unsure)."""
    for doubt in detection.doubts:
        st.warning(f"{code(f'{source.name}: {doubt}')} Check the columns below.", icon=":material/help:")
    explicit = {}
    with st.expander("Columns", expanded=True) if detection.unsure else files:
        st.caption("The columns: which holds what (detected; pick another to change it)")
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


def _headline(source, statistics, sizes, notices):
    sequences = f"{statistics.sequences:,} sequence{'s' if statistics.sequences != 1 else ''}"
    st.markdown(f"{value(source.name)} · {sequences}, {statistics.tokens:,} response tokens"
                + (f" ({statistics.dropped:,} sequences without response tokens left out)" if statistics.dropped
                   else ""))
    for notice in notices:
        st.warning(code(notice[0].upper() + notice[1:] + "."), icon=":material/info:")
    signature = logging_signature(sizes.identity)
    if signature.verdict in ("raw", "truncated"):
        st.warning(signature_text(signature), icon=":material/warning:")


def _metrics(statistics, sizes):
    """The log's headline numbers, each a sample estimate with its standard error below it."""
    metrics = [
        ("mean length", statistics.mean_length, "Response tokens per sequence: mean ± se."),
        ("k1 = mean(log μ − log π)", statistics.k1,
         "Estimates the per-token KL(μ‖π): the mean over response tokens of log μ − log π, ± its standard error."),
        ("k3 = mean(ρ − 1 − log ρ)", statistics.k3,
         "Another unbiased estimate of the per-token KL(μ‖π) (each term ≥ 0): its standard error is far smaller "
         "than k1's when the mismatch is small."),
        ("χ² = mean((ρ − 1)²)", sizes.chi2_low_variance,
         "Estimates the per-token χ² = E_μ[ρ²] − 1 (unbiased, as mean(ρ²) − 1 is, since E_μ[ρ] = 1) with a far "
         "smaller standard error: a sum of squares, not a difference of two numbers near 1."),
        ("mean ρ − 1", sizes.identity,
         "0 in expectation when the logged log μ is the distribution the tokens were drawn from; below 0 flags "
         "top-p/top-k truncation or a temperature missing from the logged log-probs."),
    ]
    if statistics.mean_reward is not None:
        metrics.append(("mean reward E_μ[r]", statistics.mean_reward,
                        "The logged mean reward: rewards of sampler rollouts, E_μ[r], not the trainer's J = E_π[r]."))
    columns = st.columns(len(metrics) + 1)
    for column, (label, estimate, help) in zip(columns, metrics, strict=False):
        column.metric(label, value_text(estimate.value), delta=f"± {se_text(estimate.se)}" if se_text(estimate.se) else None,
                      delta_color="off", delta_arrow="off", delta_description="standard error", help=help)
    columns[-1].metric("ESS fraction (this sample)", percent(statistics.ess_fraction),
                       help="(Σ W)² / (B·Σ W²) of these sequences' weights W = ∏ρ_t: the share of the batch "
                            "sequence-level IS effectively keeps. A property of this sample (no standard error).")
    if statistics.k1.se is None:
        st.caption(f"No standard errors: {SINGLE_SEQUENCE}.")


def _token_charts(results, thresholds, statistics, sizes):
    """The first chart (log ρ_t of every token) with the tail shares beside it, then the log's headline numbers, the
    most extreme tokens and the mismatch along the response and against μ."""
    if not screen_share.on():                    # presenting: the chart's own title, and the chart in view
        st.subheader("Per-token ratio ρ_t = π(y_t)/μ(y_t)")
    histogram, shares = st.columns([3, 1])
    inside, beyond = thresholds_in_view(thresholds, results["tokens"])
    chart_element.draw(histogram, log_charts.token_histogram_chart(results["tokens"], inside,
                                                                   height=PRESENT_HEIGHT if screen_share.on() else None))
    if beyond is not None and len(beyond):
        histogram.caption(beyond_view_note(beyond))
    shares.dataframe(_defined(tail_share_frame(results["statistics"])), hide_index=True, width="stretch", column_config={
        "threshold": st.column_config.NumberColumn("|log ρ_t| >", format="%g"),
        "share": st.column_config.NumberColumn("share of tokens", format="%.3g"),
        "se": st.column_config.NumberColumn("± se", format="%.2g")})
    shares.dataframe(quantile_frame(results["magnitudes"]), hide_index=True, width="stretch", column_config={
        "value": st.column_config.NumberColumn(format="%.3g")})
    _metrics(statistics, sizes)
    with st.expander("The most extreme tokens and sequences"):
        sizes = results["magnitudes"]
        st.dataframe(worst_tokens_frame(sizes), hide_index=True, width="stretch", column_config={
            "row": st.column_config.NumberColumn("row in the file"), "position": "position in the response",
            "sampler_probability": st.column_config.NumberColumn("μ(y_t)", format="%.4g"),
            "trainer_probability": st.column_config.NumberColumn("π(y_t)", format="%.4g"),
            "log_rho": st.column_config.NumberColumn("log ρ_t", format="%.4g")})
        st.dataframe(worst_sequences_frame(sizes), hide_index=True, width="stretch", column_config={
            "row": st.column_config.NumberColumn("row in the file"), "length": "tokens",
            "log_W": st.column_config.NumberColumn("log W", format="%.4g"),
            "max_abs_log_rho": st.column_config.NumberColumn("largest |log ρ_t|", format="%.4g")})
        st.caption("The tokens with the largest |log ρ_t| (the sampler's and the trainer's probability of the sampled "
                   "token), and the sequences with the largest |log W|.")
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
    spread = _defined(spread_frame(statistics))
    st.dataframe(spread, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4g") for name in spread.columns[1:]})
    st.caption("Over the log's sequences: mean ± se, spread and quantiles. E_μ[log W] = −KL(μ‖π) of a whole "
               "sequence, so log W is mostly below 0, with rare large weights.")


ESTIMATOR_COLUMNS = {
    "swatch": st.column_config.ImageColumn("", help="The estimator's colour on every chart", width=40),
    "name": st.column_config.TextColumn("estimator", help="Registry id; framework:option ids (verl:…, "
                                                          "slime:…, …) are the frameworks' options as their code "
                                                          "computes them"),
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


def _estimator_table(rows, rewards, statistics, suggested):
    st.subheader("What each estimator would do to these sequences")
    if not rows:
        st.info("Select estimators in the sidebar to apply them to the log.")
        return
    if any(row.tokens_affected is not None for row in rows):
        st.dataframe(applied_frame(rows)[list(ESTIMATOR_COLUMNS)], column_config=ESTIMATOR_COLUMNS, hide_index=True,
                     width="stretch")
    for row in rows:
        if row.note:
            what = "weights are not summarised" if row.tokens_affected is not None else "is not applied"
            st.markdown(f"- **{row.name}** {what}: {row.note}.")
    st.caption("Computed by the same weight functions as the toy's exact table (``toylab.coefficients``), on this "
               "log's sequences: shares of its tokens and sequences, not probabilities. Estimators that read the "
               "advantage (PPO-clip, the off-policy mask) use A = r − mean(r) of the log, or its own advantages when "
               "it has them and no reward. Dashed rules on the "
               "histograms above: the selected thresholds, with the share of the log beyond each.")
    if suggested:
        st.dataframe(suggested_threshold_frame(suggested), hide_index=True, width="stretch",
                     column_config={name: st.column_config.NumberColumn(format="%.4g") for name in
                                    ("now", "touches 0.1 %", "touches 1 %", "touches 10 %")})
        st.caption(thresholds_outside_note(suggested))
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
            column.metric(label, value_text(estimate.value), delta=f"± {se_text(estimate.se)}" if se_text(estimate.se)
                          else None, delta_color="off", delta_arrow="off", delta_description="standard error", help=help)
    if statistics.ess_fraction < FEW_WEIGHTS:
        text = UNRELIABLE.format(statistics.ess_fraction)
        st.warning(text[0].upper() + text[1:] + ".", icon=":material/warning:")


def _frameworks(block):
    with st.expander("Frameworks: the metrics your dashboard shows, on this log"):
        st.dataframe(frameworks_shown(block), hide_index=True, width="stretch")
        st.caption("Each framework's formula on this log's tokens, under its own name (toylab/your_run/parity.py "
                   "cites the code); a mean carries its standard error, an extreme none.")


def _compare(source, columns, statistics, sizes):
    """A second upload, shown side by side with this log (before and after a fix, bf16 against fp8)."""
    st.file_uploader(f"Compare with another log (at most {UPLOAD_LIMIT_MB} MB)", key=uploads.COMPARE_KEY,
                     on_change=uploads.compared_uploaded, type=[extension.lstrip(".") for extension in EXTENSIONS]
                     + ["gz"], max_upload_size=UPLOAD_LIMIT_MB)
    if uploads.compared_notice():
        st.error(code(uploads.compared_notice()), icon=":material/error:")
    second = uploads.compared()
    if second is None:
        return
    progress = st.empty()
    try:
        preview, _ = cache.detection(second.digest, second.name, second, _reporter(progress, second))
        second_columns = choose(preview, second.name)
        results = cache.summary(second, second_columns, _reporter(progress, second), compared=True)
        first_log = cache.rollout_log(source, columns, _reporter(progress, source))
        second_log = cache.rollout_log(second, second_columns, _reporter(progress, second), compared=True)
    except LogError as error:                    # its columns are detected, never picked: let it go at once
        uploads.refuse_compared(str(error))
        progress.empty()
        st.error(code(error), icon=":material/error:")
        return
    progress.empty()
    first_name, second_name = distinct((source.name, second.name))       # two files may share a name
    your_run_compare.render({first_name: (first_log, statistics, sizes),
                             second_name: (second_log, results["statistics"], results["magnitudes"])})


def _matched_toy(settings, statistics, sizes):
    st.subheader("The toy that matches")
    data_T = matched_length(statistics.mean_length.value, settings.V)
    choice = st.radio("match at", ("sidebar", "data"), key=LENGTH_KEY, horizontal=True, format_func={
        "sidebar": f"the sidebar's T = {settings.T}",
        "data": f"the data's mean length (T = {data_T}, capped at the page's limit for V = {settings.V})"}.get)
    T = settings.T if choice == "sidebar" else data_T
    matched_on, kl = matching_estimate(statistics)
    match = cache.matched(kl, T, settings.V, settings.seed, settings.sampler, matched_on)
    st.markdown("\n".join(f"- {sentence}" for sentence in run_verdict.comparison(match, statistics, sizes)))
    table = _defined(run_verdict.comparison_frame(match, statistics, sizes))
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "quantity": st.column_config.TextColumn("quantity"),
        "data": st.column_config.NumberColumn("data (sample estimate)", format="%.4g"),
        "se": st.column_config.NumberColumn("± se", format="%.2g"),
        "toy": st.column_config.NumberColumn("toy (exact)", format="%.4g"),
        "toy_low": st.column_config.NumberColumn("toy, lowest within 2 se", format="%.4g"),
        "toy_high": st.column_config.NumberColumn("toy, highest within 2 se", format="%.4g"),
        "verdict": st.column_config.TextColumn("verdict")})
    st.button(run_verdict.open_match_label(match, statistics), key="your_run_open_match", on_click=_open_match,
              args=(settings, match), help="Sets the sidebar (and so the link) to the matched toy, at the mismatch "
                                          f"found (not rounded to the slider's step), and opens the {ESTIMATORS_TAB} "
                                          "tab.")


def _defined(frame):
    """The frame without its columns that hold no number (the standard errors of a one-sequence log: the caption
    says why), so no cell reads "None"."""
    return frame.dropna(axis=1, how="all")
