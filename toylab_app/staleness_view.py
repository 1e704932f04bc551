"""The Training tab's staleness view: how much staleness is safe? Learning curves at each engine lag for PPO centred
on μ, the decoupled objective and recompute without w (and, given a cap, AReaL's capped behaviour weight), the steps
each takes to the target against the lag, and how often what this toy shows holds across seeds.

Its controls are in the link: on or off (``staleness``), the lag fixed or drawn up to η (``staleness_draw``), the cap
C on w (``staleness_cap``, 0: none) and the seeds view (``staleness_seeds``). Where this toy shows a lag putting a run
ahead ("staleness helps"), the view says how often that holds: from the frozen population at the page's defaults and
the lesson's setting (``training.staleness_evidence``), from the seeds view when it is on, or it says where to look.
"""

import streamlit as st

from toylab.analysis.seeds import seeds_around
from toylab.catalogue.updates import LAG_DRAWS
from toylab.presentation import coincidence, staleness_charts, staleness_frames
from toylab.state.query import STALENESS_CAPS, TRAINING_CONTROLS, VIEW_PARAMETERS
from toylab.training.staleness import LABELS, LAGS, objectives, reading, tally
from toylab.training.staleness_evidence import entry_of, frozen
from toylab_app import chart_element, tour
from toylab_app.caches import seeds_cache, training_cache

KEY = TRAINING_CONTROLS
DRAW_WORDS = {"fixed": "fixed s", "uniform": "uniform up to η"}


def chosen():
    """(draw, cap or None): the view's lag draw and cap on w, as the session (or the link) holds them."""
    draw = st.session_state.get(KEY["staleness_draw"], VIEW_PARAMETERS[KEY["staleness_draw"]].default)
    cap = st.session_state.get(KEY["staleness_cap"], VIEW_PARAMETERS[KEY["staleness_cap"]].default)
    return draw, (cap or None)


def render(settings, config, draw_chart, lesson):
    """The view under its toggle: its controls, the learning curves (unless a lesson drew them on top), the steps to
    the target, and what they say."""
    st.subheader("How much staleness is safe?")
    if not st.toggle("Show the staleness view", key=KEY["staleness"], persist_state="session",
                     help="Learning curves J against step at each engine lag s = 0 … 16, for PPO centred on μ "
                          "(bypass), the decoupled objective and recompute without w: expected mode, exact. Off, a "
                          "change of the toy does not wait for it."):
        return
    draw_column, cap_column, seeds_column = st.columns([1.3, 1.3, 2])
    draw_column.radio("engine's lag", LAG_DRAWS, key=KEY["staleness_draw"], persist_state="session", horizontal=True,
                      format_func=DRAW_WORDS.get,
                      help="fixed: the engine's policy is s steps old at every batch. uniform: s drawn from 0 … η "
                           "for each batch (η: AReaL's max_head_offpolicyness), seeded by the toy's seed.")
    cap_column.selectbox("cap C on w (AReaL)", STALENESS_CAPS, key=KEY["staleness_cap"], persist_state="session",
                         format_func=lambda cap: f"C = {cap:g}" if cap else "none",
                         help="Adds the decoupled objective with AReaL's behav_imp_weight_cap: a token whose w = "
                              "π_old/μ exceeds C is dropped from the loss (a mask, though it is named a cap; AReaL's "
                              "old default 5).")
    seeds = seeds_column.toggle("Across seeds: this toy among 30", key=KEY["staleness_seeds"], persist_state="session",
                                help="The same runs on 30 toys that differ from this one in their seed alone, trained "
                                     "together: how often what this toy shows holds.")
    draw, cap = chosen()
    with st.spinner(f"Training at {len(LAGS)} lags…"):
        refused = training_cache.staleness_refusal(settings, config, cap)
        if refused:
            st.info(f"The staleness view ({len(LAGS) * len({run[0] for run in objectives(cap).values()})} runs, one "
                    f"per lag and anchor): {refused} (the page's limits).", icon=":material/hourglass:")
            return
        result = training_cache.staleness(settings, config, draw, cap)
    if "training_staleness" not in lesson:
        draw_chart(st, None)
    if result.stopped:
        st.warning(f"{result.stopped_text()}.", icon=":material/warning:")
    frame = staleness_frames.steps_frame(result)
    chart_element.draw(st, staleness_charts.steps_chart(
        frame, result.steps, draw, labels=coincidence.legend_words(staleness_frames.steps_coincident(frame))))
    across = _across(settings, config, draw, cap) if seeds else None
    st.caption(_about(config, draw, cap, result) + " " + staleness_frames.saturation_note(result))
    ahead = _ahead_note(settings, config, draw, cap, reading(result), across)
    if ahead:
        st.caption(ahead)
    if across:
        _seeds(settings, config, draw, across)


def curves(at, settings, config, height):
    """The learning curves, in ``at`` (``height``: a lesson's, or None), with the lesson's marks, and the words on
    lines that lie on others under them; nothing when the runs are refused (the view says why)."""
    draw, cap = chosen()
    if training_cache.staleness_refusal(settings, config, cap):
        return
    result = training_cache.staleness(settings, config, draw, cap)
    frame, found = staleness_frames.curve_frame(result)
    chart_element.draw(at, staleness_charts.curves_chart(
        frame, result.lags, draw, result.target, tour.marks(settings, "training_staleness"), height=height or 220,
        labels=staleness_frames.legend_words(found)), width="content")          # panels side by side: their own width
    note = staleness_frames.coincident_note(found)
    if note:
        at.caption(coincidence.dashed_caption(note, chart="the learning curves"))


def _about(config, draw, cap, result):
    lag = "s steps old at every batch" if draw == "fixed" else \
        "s steps old, s drawn from 0 … η for each batch (seeded by the toy's seed)"
    runs = "; ".join(f"{name}: {LABELS[name]}" for name in objectives(cap))
    capped = f" (areal:token_mask, w·1[w ≤ {cap:g}])" if cap else ""
    return (f"Each curve: {config.steps} steps in expected mode at lr {config.lr:g} ({config.optimizer}), the loss "
            f"{config.update.loss} with U = {config.update.U} updates per batch, the engine's policy {lag}. {runs}"
            f"{capped}. The target: 0.9 × on_policy's J after {result.steps} steps, {result.target:.4f} (the table's "
            "\"steps to 90 %\"); on_policy samples the trainer itself: no engine, no lag. The comparison of AReaL's "
            "table of naive against decoupled PPO, exact, on one toy.")


def _across(settings, config, draw, cap):
    """{seed: Reading} of the population, or None with a notice when it is too large or too slow for the page. Where the
    view is at a setting whose population is frozen (``staleness_evidence``: the page's defaults, the lesson's setting)
    and the seed among 0–29, the population is those seeds: read from the file, not trained again."""
    name = entry_of(settings.T, settings.V, settings.mismatch, settings.sampler, settings.baseline, config, draw, cap)
    if name is not None:
        here, *_ = frozen()[name].values()                     # the first group: the setting itself, seeds 0–29
        if seeds_around(settings.seed) == tuple(range(len(here))):
            return dict(enumerate(here))
    problem = seeds_cache.too_large(settings)
    keys = tuple(seeds_cache.toy_keys(settings))
    if not problem:
        problem = seeds_cache.refusal(keys, "staleness", (), settings.baseline, config, draw, cap)
    if problem:
        st.info(f"Across seeds: {problem}.", icon=":material/hourglass:")
        return None
    with st.spinner("Training 30 toys at every lag…"):
        return seeds_cache.staleness_readings(keys, settings.baseline, config, draw, cap)


def _ahead_note(settings, config, draw, cap, here, across):
    """Where this toy shows a lag putting a run ahead, and how often that holds across seeds ('' if nowhere)."""
    helped = {objective: words for objective in here.steps if (words := staleness_frames.ahead_words(here, objective))}
    if not helped:
        return ""
    text = "Staleness helps? On this toy " + "; ".join(helped.values()) + "."
    name = entry_of(settings.T, settings.V, settings.mismatch, settings.sampler, settings.baseline, config, draw, cap)
    if name is not None and settings.seed < 30:
        groups = {label: tally(readings) for label, readings in frozen()[name].items()}
        return text + " How often a lag puts it ahead, across seeds 0–29: " + "; ".join(
            f"{objective} on " + ", ".join(f"{counts.ahead[objective]} of {counts.toys} {label}"
                                           for label, counts in groups.items()) for objective in helped) + "."
    if across:
        counts = tally(list(across.values()))
        return text + " Across the 30 toys: " + "; ".join(
            f"{objective} on {counts.ahead[objective]} of {counts.toys}" for objective in helped) + "."
    return text + " Whether that holds beyond this toy: turn on Across seeds."


def _seeds(settings, config, draw, across):
    frame = staleness_frames.population_frame(across, settings.seed)
    chart_element.draw(st, staleness_charts.population_chart(frame, config.steps, draw), width="content")
    counts = tally(list(across.values()))
    largest = max(LAGS)
    st.caption("Across the 30 toys (seeds " + ("0–29" if settings.seed < 30 else f"{settings.seed} and 0–28")
               + "), each exact: " + "; ".join(staleness_frames.tally_words(counts, objective, largest)
                                               for objective in counts.ahead) + ". Decoupled no later to the target "
               "than recompute, and recompute no later than bypass, at lag " + ", ".join(
                   f"{lag} on {count}" for lag, count in zip(LAGS, counts.ordered, strict=True)) + f" of {counts.toys}.")
