"""The Experts & versions tab: a mixture of experts' routing mismatch with and without routing replay, and sequences
whose tokens come from several policy versions, by what a framework logs of them — every number an exact sum over
the hidden values and the sequences."""

import streamlit as st

from toylab.analysis.routing import routing_problem
from toylab.analysis.versions import versions_problem
from toylab.engine.experts import DRAWS
from toylab.engine.surrogate import correction_has_additive_term
from toylab.engine.versions import Versions
from toylab.presentation import experts_charts, experts_frames
from toylab.state.query import (
    FLIP_AXES,
    LEARNING_RATES,
    TRAINING_TAB,
    VERSION_ANCHORS,
    VIEW_PARAMETERS,
    experts_model,
)
from toylab_app import address, chart_element, screen_share
from toylab_app.caches import experts_cache
from toylab_app.caches.kept import kept
from toylab_app.estimators_tab import plain


def render(settings):
    selection = _selection(settings)
    _routing(settings, selection)
    _versions(settings, selection)


def _selection(settings):
    """((id, ((name, value), …)), …): the sidebar's exact estimators that are a weight (no additive term)."""
    return tuple((id, tuple(params.items())) for id, params in settings.selection(exact_only=True).items()
                 if id == "on_policy" or not correction_has_additive_term(id, params))


def _slider(where, label, name, help, low=None, high=None, step=None, disabled=False):
    parameter = VIEW_PARAMETERS[name]
    low = parameter.low if low is None else low
    high = parameter.high if high is None else high
    kind = type(parameter.default)
    return where.slider(label, kind(low), kind(high), step=kind(step or parameter.step), key=name,
                        persist_state="session", help=help, disabled=disabled)


PRESENT_FLIP_HEIGHT = 130          # the flip chart's plot in presentation mode, its legend on the right


def _experts_controls():
    """The mixture's controls (each in the link, shared with the Training tab's routing runs)."""
    layers, experts, top_k, error = st.columns(4)
    _slider(layers, "layers L", "moe_layers", "Layers of routed experts; a token's logits sum over them.")
    chosen = _slider(experts, "experts E", "moe_experts", "Experts per layer.")
    key = "moe_top_k"
    st.session_state[key] = min(st.session_state.get(key, VIEW_PARAMETERS[key].default), chosen - 1)
    _slider(top_k, "top-k", key, "Experts each layer picks per token; gates: softmax of the router's scores over "
                                 "them.", high=chosen - 1)
    _slider(error, "router error σ", "moe_error", "The engine's router scores are the trainer's plus σ times one of "
                                                  "D standard-normal tables.")
    draws, draw, spread, axis = st.columns(4)
    _slider(draws, "draws D", "moe_draws", "How many values the engine's router error takes, equally likely (its "
                                           "batch-variant kernel's states).")
    draw.radio("drawn per", DRAWS, key="moe_draw", persist_state="session", horizontal=True,
               help="One draw for a whole sequence, or one per token (a hidden value of each token: exact sums over "
                    "(V·D)^T when the estimator does not factorise).")
    _slider(spread, "expert spread κ", "moe_spread", "How far the experts' tables differ: a flipped routing moves "
                                                     "the logits by κ times a difference of experts.")
    flip_axis = axis.radio("flip rates as it grows", FLIP_AXES, key="flip_axis", persist_state="session",
                           horizontal=True, help="The mixture's layers or its experts, the rest of it held.")
    return experts_model(address.view() | {name: st.session_state.get(name, VIEW_PARAMETERS[name].default)
                                           for name in VIEW_PARAMETERS if name.startswith("moe_")}), flip_axis


def _routing(settings, selection):
    st.subheader("Routing: the engine and the trainer pick different experts")
    problem = routing_problem(settings.sampler)
    try:
        experts, axis = _experts_controls()      # the flip chart's axis in the controls' last column: the chart
                                                  # starts in view at 1280×720
    except ValueError as error:
        st.warning(_sentence(error), icon=":material/warning:")
        return
    if problem:
        st.info(f"{problem[0].upper()}{problem[1:]}.", icon=":material/block:")
        return
    flips = _flip_picture(settings.T, settings.V, settings.seed, experts, axis, screen_share.on())
    picture = _routing_picture(settings, experts, selection)
    if isinstance(picture, str):
        st.warning(picture, icon=":material/warning:")
        return
    replay_caption, replay_chart, replay_table = picture
    left, right = st.columns([2, 3])
    chart_element.draw(left, flips[0])
    left.caption(flips[1])
    right.caption(replay_caption)
    if replay_chart is not None:
        chart_element.draw(st, replay_chart)
        st.dataframe(replay_table, hide_index=True, width="stretch", column_config={
            "rel_bias": st.column_config.NumberColumn("rel bias (∇J)", format="%.4f"),
            "rel_std": st.column_config.NumberColumn(f"rel std at N = {settings.N:,}", format="%.4f"),
            "cosine": st.column_config.NumberColumn("cosine to ∇J", format="%+.4f"),
            "served_cosine": st.column_config.NumberColumn("cosine to ∇J_μ", format="%+.4f"),
            "served_rel_bias": st.column_config.NumberColumn("rel bias (∇J_μ)", format="%.4f"),
            "kl": st.column_config.NumberColumn("KL(μ‖π_old)", format="%.4f")})
    with st.expander("The frameworks' routing replay, read from their code"):
        st.markdown(_presets_in_words("replay"))
        st.caption(f"Train under any of them in the {TRAINING_TAB} tab (Three policies: the replay, or a preset).")


@kept(spinner="Routing every draw…")
def _flip_picture(T, V, seed, experts, axis, present):
    """(the flip rates as ``axis`` grows, prepared; its caption): they read the router and the seed only, so a
    mismatch step keeps them. In presentation mode (``present``) shorter, its legend beside it: the whole chart in
    view at 1280×720."""
    chart = chart_element.prepare(experts_charts.flip_chart(
        experts_frames.flip_frame(experts_cache.flips(T, V, seed, experts, axis), axis), axis,
        **({"height": PRESENT_FLIP_HEIGHT, "legend": "right"} if present else {})))
    return chart, (
        f"Over the engine's D = {experts.draws} error draws: a decision flips when its top-{experts.top_k} set differs "
        "from the trainer's; a token when some layer's does; a sequence when some token's does"
        + (" (one draw for the whole sequence)." if experts.draw == "sequence" else " (a draw per token).")
        + " Megatron-LM #4168 reports about 10 % of router decisions and 94 % of tokens differing per forward pass "
          "(48 layers).")


@kept(spinner="Routing every draw…")
def _routing_picture(settings, experts, selection):
    """(the caption of the routing view, its replay chart prepared and table as Arrow — both None when it has no
    rows), or why the view cannot be made (a sentence)."""
    try:
        view = experts_cache.routing(settings.toy_key, experts, selection, settings.baseline, settings.N)
    except ValueError as error:
        return _sentence(error)
    frame = experts_frames.replay_frame(view)
    caption = (
        f"Here: {view.flips.mean():.0%} of decisions, {view.token_flips.mean():.0%} of tokens, "
        f"{view.sequence_flips:.0%} of sequences flip. The k1 KL(μ‖π_old) the correction sees: "
        + ", ".join(f"{mode} {kl:.3f}" for mode, kl in view.kl.items())
        + f". J = {view.J:.4f} (the trainer's own routing), served J_μ = {view.served_J:.4f} (the engine's draws). "
        "Without replay (off, and R2 at one update: it records the trainer's own routing) the ratio π/μ carries the "
        "flips, and sequence IS stays unbiased for ∇J, at a higher variance. R3 (the engine's routing replayed) "
        "leaves only the logit error in the ratio, but its gradient is the trainer's under the engine's routing: "
        "biased for ∇J — compare the cosines to ∇J and to ∇J_μ in the table.")
    if not len(frame):
        return caption, None, None
    return caption, chart_element.prepare(experts_charts.replay_chart(frame, settings.N)), chart_element.arrow(frame)


@kept
def _presets_in_words(kind):
    """The frameworks' routing replay (``replay``) or version handling (``versions``) as a list, a preset a line: its
    option as code, its other columns in words, the code it was read from and the note (prose that wraps, where a
    table's columns pushed it off a 1280 px screen)."""
    frame = experts_frames.replay_presets_frame() if kind == "replay" else experts_frames.version_presets_frame()
    described = [name for name in frame.columns if name not in ("preset", "option", "code", "note")]
    return "\n".join(f"- **{plain(row['preset'])}** `{row['option']}`: "
                     + ", ".join(f"{plain(name)} {plain(str(row[name]))}" for name in described)
                     + f". {plain(row['code'])}." + (f" {plain(row['note'])}" if row["note"] else "")
                     for row in frame.to_dict("records"))


def _sentence(error):
    return f"{str(error)[0].upper()}{str(error)[1:]}."


def _versions(settings, selection):
    st.subheader("Versions: one sequence, two policies")
    problem = versions_problem(settings.sampler)
    if problem:
        st.info(f"{problem[0].upper()}{problem[1:]}.", icon=":material/block:")
        return
    if settings.T < 2:
        st.info("A switch needs at least two tokens (T ≥ 2).")
        return
    switch, at, lag, anchor, step, lr = st.columns([1.3, 1, 1, 1.6, 1.3, 1.3])
    chosen = switch.radio("switch", ("drawn", "fixed"), key="versions_switch", persist_state="session",
                          help="drawn: each sequence's head from 1 … η versions back and its switch position from "
                               "1 … T − 1, uniformly; fixed: at one position, the head η back.")
    if settings.T > 2:                                   # a slider needs two positions: 1 … T − 1
        position = _slider(at, "at position", "versions_at", "The fixed switch's position: tokens before it from the "
                                                             "head's version, from it on one version newer (greyed for "
                                                             "a drawn switch, whose position is drawn per sequence).",
                           high=settings.T - 1, disabled=chosen != "fixed")
    else:
        position = 1
        at.caption("at position 1: the only one at T = 2")
    eta = _slider(lag, "η (head's lag)", "versions_lag", "How many versions behind the trainer the head may be.")
    anchor_name = anchor.radio("anchor π_old", VERSION_ANCHORS, key="versions_anchor", persist_state="session",
                               horizontal=True, help="rollout: π at the stamped version; loglinear: AReaL's π_prox "
                                                     "from the stamps; recompute: π_θk; bypass: the logged μ.")
    k = _slider(step, "at step k", "versions_step", "θ_k: on_policy's after k exact SGD steps; versions are its "
                                                    "earlier steps.")
    rate = lr.select_slider("their lr", LEARNING_RATES, key="versions_lr", persist_state="session",
                            format_func=VIEW_PARAMETERS["versions_lr"].to_url)
    versions = Versions(switch=chosen, at=min(position, settings.T - 1))
    estimators = tuple(entry for entry in selection if entry[0] != "on_policy")
    if not estimators:
        st.info("Select an estimator other than on_policy in the sidebar.")
        return
    picture = _versions_picture(settings, versions, eta, anchor_name, estimators, k, rate)
    if isinstance(picture, str):
        st.warning(picture, icon=":material/warning:")
        return
    chart, caption, table = picture
    chart_element.draw(st, chart)
    st.caption(caption)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "rel_bias": st.column_config.NumberColumn("rel bias", format="%.4f"),
        "rel_std": st.column_config.NumberColumn(f"rel std at N = {settings.N:,}", format="%.4f"),
        "cosine": st.column_config.NumberColumn("cosine to ∇J", format="%+.4f"),
        "from_truth": st.column_config.NumberColumn("from the per-token truth", format="%.4f")})
    with st.expander("The frameworks' version handling, read from their code"):
        st.markdown(_presets_in_words("versions"))
        st.caption(f"Train under any of them in the {TRAINING_TAB} tab (Three policies: the switch and a preset).")


@kept(spinner="Summing every version pattern…")
def _versions_picture(settings, versions, eta, anchor_name, estimators, k, rate):
    """(the versions chart prepared, its caption, its table as Arrow) at on_policy's step ``k``, or why the view cannot
    be made (a sentence). on_policy's versions read π alone (``experts_cache``), so a mismatch step recomputes only
    the sums over the patterns."""
    try:
        view = experts_cache.versions(settings.toy_key, versions, eta, anchor_name, estimators, settings.baseline,
                                      settings.N, k, rate)
    except ValueError as error:
        return _sentence(error)
    frame = experts_frames.versions_frame(view)
    caption = (
        f"At θ_{k} (J = {view.J:.4f}), {view.patterns} version pattern(s): tokens before the switch from θ_(k−h), "
        "after it from θ_(k−h+1); each token's μ is its own version's (what every framework logs). The first update "
        f"of PPO (ε 0.2) with the anchor {anchor_name}: its relative bias against ∇J (bar) and its mean's distance from "
        "the per-token truth's, ‖E ĝ − E ĝ_truth‖/‖∇J‖ (tick). One stamp per sequence misleads only an anchor that reads versions — rollout (π at the stamped "
        "version) and loglinear (AReaL's π_prox, α = (s − 1)/s) — and the head stamp most where the switch is early; a "
        "masked stale prefix drops its tokens' gradient (bias) and their variance.")
    return chart_element.prepare(experts_charts.versions_chart(frame, settings.N)), caption, chart_element.arrow(frame)
