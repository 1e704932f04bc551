"""The Training tab: does a run that uses each correction still learn, and does it learn the right thing?"""

import streamlit as st

from toylab.catalogue import kl_settings
from toylab.catalogue.estimators import ESTIMATORS
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.catalogue.replay import REPLAY_IDS, REPLAY_PRESETS, REPLAYS
from toylab.catalogue.update_presets import UPDATE_PRESETS
from toylab.catalogue.updates import ANCHORS, DEFAULT_UPDATE, LAG_DRAWS, LOSSES, WEIGHTS_AT
from toylab.catalogue.version_handling import VERSION_IDS, VERSION_PRESETS
from toylab.engine.versions import PROXIES, STAMPS, SWITCHES
from toylab.presentation import (
    coincidence,
    frames,
    seeds_charts,
    seeds_frames,
    training_charts,
    training_frames,
    update_text,
)
from toylab.presentation.pipeline_text import scored_objective_note
from toylab.state.query import (
    BETAS,
    CUSTOM,
    CUSTOM_UPDATE,
    DUAL_CLIPS,
    ESTIMATORS_TAB,
    EXPERTS_TAB,
    KL_CHOICES,
    LEARNING_RATES,
    NO_EXPERTS,
    NO_KL,
    PAGE_UPDATES_AT_MOST,
    TRAINING_CONTROLS,
    TRAINING_DISTANCES,
    VIEW_PARAMETERS,
    training_config,
)
from toylab.training.loop import MODES, NOISES, REACHED, stop_notice
from toylab.training.optimizers import OPTIMIZERS
from toylab.training.staleness import SATURATED
from toylab_app import address, chart_element, screen_share, staleness_view, tour
from toylab_app.caches import seeds_cache, training_cache
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.kept import kept

KEY = TRAINING_CONTROLS         # each control's URL name (its range and default: query.VIEW_PARAMETERS)
SUMMARY_COLUMNS = {        # the ids alone, their names under the table: it fits 1280 px without scrolling sideways
    "estimator": st.column_config.TextColumn("estimator"),
    "final_J": st.column_config.NumberColumn("final J", format="%.4f", help="J = E_π[r] after the last step"),
    "steps_to_reach": st.column_config.TextColumn(
        f"steps to {REACHED:.0%}", help=f"First step at which J ≥ {REACHED:g} × on_policy's final J ('never': not "
                                        "within the run)"),
    "largest_drop": st.column_config.NumberColumn(
        "largest drop of J", format="%.4f", help="max over k < l of J_k − J_l: a collapse if large"),
    "final_logged_reward": st.column_config.NumberColumn(
        "final E_μ[r]", format="%.4f", help="The reward a training log shows after the last step"),
    "final_kl_mu_pi": st.column_config.NumberColumn("final KL(μ‖π)", format="%.4f"),
    "final_kl_ref": st.column_config.NumberColumn("final KL(π‖π_ref)", format="%.4f",
                                                  help="KL from the reference after the last step (the reference's "
                                                       "controls), exact"),
    "final_cosine": st.column_config.TextColumn(
        "final cosine to ∇J", help="Of the estimator's exact mean (expected) or of the step taken (sampled); '—': "
                                   "undefined (a zero mean or step, or ∇J within rounding of 0)"),
}
SGA_COLUMNS = {            # the ids alone, as the summary's
    "estimator": st.column_config.TextColumn("estimator"),
    "slope": st.column_config.TextColumn("⟨∇J, E ĝ⟩", help="The first-order term's slope: the bias tilts it"),
    "mean_curvature": st.column_config.TextColumn("E ĝᵀ H E ĝ", help="Curvature of J along the mean step"),
    "noise_curvature": st.column_config.TextColumn("tr(H Σ)/N", help="Curvature along the noise: the variance term"),
    "best_lr": st.column_config.TextColumn(
        "best lr", help="Where the second-order quadratic peaks; '—': it never turns down (J curves up along the "
                        "step)"),
    "second_order": st.column_config.TextColumn("2nd order at lr", help="The second-order gain at the training lr"),
    "monte_carlo": st.column_config.TextColumn("Monte Carlo ± s.e."),
    "trusted": st.column_config.TextColumn(
        "± trusted?", help="Whether mean ± 2 s.e. can be trusted: 'no: heavy tail' when the batches show less than half "
                           "of the exact variance of ⟨∇J, ĝ_N⟩ — the rare batches that carry it are missing, so the "
                           "interval under-covers; 'unchecked' for batch-coupled estimators (no exact variance)"),
    "adam": st.column_config.TextColumn("Adam's actual step ± s.e.",
                                        help="E[J(θ + Δ)] − J(θ) for the step Adam takes from its state at θ_k"),
    "adam_lr": st.column_config.TextColumn("its length ÷ ‖ĝ_N‖",
                                           help="Median over batches: the lr of a plain step as long as Adam's"),
}


def controls(settings, where=st):
    """The tab's controls (each in the URL), in ``where``, as a TrainingConfig; N is the sidebar's batch size. The
    three policies' controls are read here and built further down (``_policy_group``): a rerun reads them first."""
    mode_column, optimizer_column, noise_column, lr_column, steps_column, runs_column = where.columns(
        [2, 1.3, 1.6, 2, 2, 1.5])
    mode = mode_column.radio("mode", MODES, key=KEY["mode"], persist_state="session", horizontal=True,
                             help="expected: step along each estimator's exact mean gradient (what its bias does). "
                                  "sampled: step along the mean of N sampled sequences (the sidebar's N), several "
                                  "runs (what its variance does).")
    optimizer = optimizer_column.radio("optimizer", OPTIMIZERS, key=KEY["optimizer"], persist_state="session",
                                       horizontal=True,
                                       help="sgd: θ += lr·g. adam: β₁ = 0.9, β₂ = 0.999, ε = 1e-8, bias-corrected; it "
                                            "rescales each coordinate, so a small or biased gradient still moves θ.")
    noise = noise_column.radio("engine error b", NOISES, key=KEY["noise"], persist_state="session", horizontal=True,
                               help="fixed: the engine keeps its logit error b as θ moves. redrawn: b is drawn afresh "
                                    "from Student-t(3) at every step (a batch-variant or nondeterministic kernel), "
                                    "seeded: the same draws for every estimator and run.")
    lr = lr_column.select_slider("learning rate", LEARNING_RATES, key=KEY["lr"], persist_state="session",
                                 format_func=VIEW_PARAMETERS[KEY["lr"]].to_url,
                                 help="Step size (Adam: about the change per step of each θ).")
    steps_range = VIEW_PARAMETERS[KEY["steps"]]
    steps = steps_column.slider("steps", int(steps_range.low), int(steps_range.high), step=10, key=KEY["steps"],
                                persist_state="session", help="Number of steps K; every curve has K + 1 points.")
    runs_range = VIEW_PARAMETERS[KEY["runs"]]
    runs_column.slider("runs", int(runs_range.low), int(runs_range.high), key=KEY["runs"], persist_state="session",
                       disabled=mode == "expected", help="Independent sampled runs (fixed seeds).")
    return training_config(address.view() | {KEY["mode"]: mode, KEY["optimizer"]: optimizer, KEY["noise"]: noise,
                                    KEY["lr"]: lr, KEY["steps"]: steps}, settings.N)


POLICY_GROUP = "group_policies"          # the three-policy controls' expander: built only while open
POLICY_KEYS = ("lag", "lag_draw", "anchor", "loss", "minibatches", "epochs", "eps_low", "eps_high", "dual_clip",
               "weights_at", "replay", "replay_preset", "switch", "switch_at", "stamp", "mask_stale", "prox",
               "version_preset")


def _policies_set(view):
    """Whether a view (URL name → value) sets a framework's update or one of the three policies' controls away from
    its default."""
    return view[KEY["update"]] != CUSTOM_UPDATE or any(view[KEY[name]] != VIEW_PARAMETERS[KEY[name]].default
                                                       for name in POLICY_KEYS)


def _policy_group(where, config, T):
    """The three policies: the run's update in symbols (which policies enter r and w) over an expander that reruns
    the page when opened or closed, its widgets built only while open, opened by a link (or lesson) that sets one of
    them. In it: a framework's update in one pick (as the sidebar picks its corrections), the update's
    equation with what the current values mean, and either that framework's update in words or the tab's own
    controls (each in the URL); then the routing replay and the version switches (``_hidden_controls``)."""
    if POLICY_GROUP not in st.session_state and _policies_set(address.view()):
        st.session_state[POLICY_GROUP] = True
    where.caption(update_text.label(config.update, config.lag, config.lag_draw))   # not in the expander's label,
    group = where.expander("Three policies: a framework's update, or the engine's lag, the anchor π_old, the loss, "
                           "updates per batch; routing replay, version switches", key=POLICY_GROUP, on_change="rerun")    # which names it: a new one
                                                                                        # would close it
    if not group.open:
        return
    group.selectbox("a framework's update", VIEW_PARAMETERS[KEY["update"]].choices, key=KEY["update"],
                    persist_state="session", on_change=_chose_update, format_func=_update_name,
                    help="Sets the run's anchor, loss, updates per batch, where the correction reads its ratio and "
                         "the engine's lag as that framework's code does (docs/training.md's table), and adds its "
                         "correction to the sidebar's estimators. custom: the controls below.")
    group.markdown(update_text.equation(config.update, config.lag, config.lag_draw))
    preset = UPDATE_PRESETS.get(st.session_state[KEY["update"]])
    if preset is not None:
        group.caption(update_text.preset_text(preset, st.session_state["est"]))
    else:
        _own_controls(group)
    _hidden_controls(group, T)


def _update_name(id):
    return "custom: the controls below" if id == CUSTOM_UPDATE else id      # its option in words under it


def _chose_update():
    """on_change of the update picker: a framework's correction joins the sidebar's estimators, and its values go into
    the tab's own controls (as near as their ranges allow), where "custom" starts from them."""
    preset = UPDATE_PRESETS.get(st.session_state[KEY["update"]])
    if preset is None:
        return
    if preset.correction and preset.correction not in st.session_state["est"]:
        st.session_state["est"] = [*st.session_state["est"], preset.correction]
    update, params = preset.update, preset.update.loss_params
    values = {"lag": preset.lag, "lag_draw": preset.lag_draw, "anchor": update.anchor, "loss": update.loss,
              "weights_at": update.weights_at, "minibatches": min(update.minibatches, PAGE_UPDATES_AT_MOST),
              "epochs": min(update.epochs, PAGE_UPDATES_AT_MOST)}
    values |= {name: round(min(params[name], 1.0), 2) for name in ("eps_low", "eps_high") if name in params}
    if "dual_clip" in params:
        values["dual_clip"] = min(DUAL_CLIPS, key=lambda c: abs(c - (params["dual_clip"] or 0.0)))
    st.session_state.update({KEY[name]: value for name, value in values.items()})


def _own_controls(group):
    """The three policies' own controls: the engine's lag, the anchor, the loss with its ε and c, U = minibatches ×
    epochs, where the correction reads its ratio."""
    lag_column, draw_column, anchor_column, weights_column = group.columns([2, 1.4, 2.2, 1.6])
    lag_range = VIEW_PARAMETERS[KEY["lag"]]
    lag_column.slider("engine's lag s", int(lag_range.low), int(lag_range.high), key=KEY["lag"],
                      persist_state="session", help="The engine samples from the policy s steps old (θ_0 before the "
                                                    "run): asynchronous rollouts.")
    draw_column.radio("lag", LAG_DRAWS, key=KEY["lag_draw"], persist_state="session",
                      help="fixed: s every batch; uniform: s drawn from 0 … s per batch (η = s, AReaL's "
                           "max_head_offpolicyness), seeded.")
    anchor_column.radio("anchor π_old", ANCHORS, key=KEY["anchor"], persist_state="session", horizontal=True,
                        help="recompute: π_θk, the trainer's recomputation. rollout: π_θ(k−s), the policy that "
                             "generated the batch. bypass: the engine's logged μ (r = π_θ/μ, w ≡ 1).")
    weights_column.radio("correction reads", WEIGHTS_AT, key=KEY["weights_at"], persist_state="session",
                         format_func={"anchor": "w = π_old/μ", "current": "π_θ/μ"}.get,
                         help="The estimator's weight g: of w = π_old/μ, frozen for the batch, or of the current "
                              "π_θ/μ at each update (verl's bypass mode).")
    loss_column, minibatch_column, epoch_column, low_column, high_column, dual_column = group.columns(
        [2, 1.4, 1.4, 1.4, 1.4, 1.4])
    loss = loss_column.selectbox("loss L(r, A)", tuple(LOSSES), key=KEY["loss"], persist_state="session",
                                 format_func=lambda id: LOSSES[id].label,
                                 help="ppo: min(rA, clip(r)A), dual clip for A < 0. reinforce: A·log π. cispo: "
                                      "sg(clip(r))·A·log π. dppo_kl, ipo_kl: prime-rl's masks and (log r)² term.")
    minibatch_column.slider("minibatches", 1, PAGE_UPDATES_AT_MOST, key=KEY["minibatches"], persist_state="session",
                            help="Sampled mode splits the batch into these; expected mode takes each at the exact "
                                 "expectation.")
    epoch_column.slider("epochs", 1, PAGE_UPDATES_AT_MOST, key=KEY["epochs"], persist_state="session",
                        help="Passes over the batch: U = minibatches × epochs updates with π_old frozen.")
    clipped = {"eps_low", "eps_high"} <= set(LOSSES[loss].params)
    for column, name, label in ((low_column, "eps_low", "ε_low"), (high_column, "eps_high", "ε_high")):
        column.slider(label, 0.0, 1.0, step=0.01, key=KEY[name], persist_state="session", disabled=not clipped,
                      help="The clip range is [1 − ε_low, 1 + ε_high] (ppo and cispo).")
    dual_column.select_slider("dual clip c", DUAL_CLIPS, key=KEY["dual_clip"], persist_state="session",
                              format_func=lambda c: "off" if c == 0 else f"{c:g}", disabled="dual_clip" not in
                              LOSSES[loss].params, help="For A < 0, ratios above c are clipped (verl's default 3).")


def _hidden_controls(group, T):
    """The routing replay of the toy's mixture of experts and the version switches (each in the link; the mixture's
    shape in the Experts & versions tab)."""
    replay_column, replay_preset_column, switch_column, at_column = group.columns([2.2, 2, 1.8, 1.2])
    replay_preset = replay_preset_column.selectbox(
        "replay preset", REPLAY_IDS, key=KEY["replay_preset"], persist_state="session",
        help="A framework's routing-replay option (read from its code): it sets the replay mode.")
    replay_column.radio("mixture of experts: replay", (NO_EXPERTS, *REPLAYS), key=KEY["replay"],
                        persist_state="session", horizontal=True, disabled=replay_preset != CUSTOM,
                        help=f"none: the dense toy. off: the trainer routes with its own router; R2: with the routing "
                             f"recorded at the anchor's recomputation; R3: with the engine's. The mixture (layers, "
                             f"experts, router error) is set in the {EXPERTS_TAB} tab.")
    switch = switch_column.radio("version switch", SWITCHES, key=KEY["switch"], persist_state="session",
                                 horizontal=True, help="fixed: every sequence switches to one version newer at the "
                                                       "position; drawn: its head 1 … η back (η = the lag) and its "
                                                       "switch position drawn per sequence.")
    if T > 2:                                            # a slider needs two positions: 1 … T − 1
        at_column.slider("at", 1, T - 1, key=KEY["switch_at"], persist_state="session",
                         disabled=switch != "fixed", help="The fixed switch's position.")
    else:
        at_column.caption("at 1: the only position" if T == 2 else "no position: a switch needs T ≥ 2")
    stamp_column, mask_column, prox_column, version_preset_column = group.columns([2.2, 1.4, 2, 2.2])
    version_preset = version_preset_column.selectbox(
        "version preset", VERSION_IDS, key=KEY["version_preset"], persist_state="session",
        help="A framework's version handling (read from its code): it sets the stamp, the mask and π_prox.")
    preset_set = version_preset != CUSTOM
    one_version = switch == "off"                      # every token from one version: no stamp or prefix to read
    stamp_column.radio("stamp", STAMPS, key=KEY["stamp"], persist_state="session", horizontal=True,
                       disabled=preset_set or one_version,
                       help="What is logged as each token's version: its own, the sequence's head's or its tail's (read "
                            "by the rollout anchor and loglinear).")
    mask_column.toggle("mask prefix", key=KEY["mask_stale"], persist_state="session", disabled=preset_set or one_version,
                       help="Mask the stale prefix (slime's --mask-offpolicy-in-partial-rollout): the tokens before "
                            "the switch leave the loss.")
    prox_column.radio("π_prox", PROXIES, key=KEY["prox"], persist_state="session", horizontal=True,
                      disabled=preset_set, help="AReaL's prox_logp_method: recompute, or loglinear from the stamps "
                                                "(with the anchor recompute).")
    ignored = _ignored(replay_preset, version_preset, one_version)
    if ignored:
        group.caption(ignored)


def _ignored(replay_preset, version_preset, one_version):
    """Which of the routing and version controls the current choice leaves without effect (greyed), and why ('' if
    none)."""
    notes = []
    if replay_preset != CUSTOM:
        notes.append(f"{replay_preset} sets the replay ({REPLAY_PRESETS[replay_preset].replay}): the replay buttons "
                     "are ignored while it is chosen.")
    if version_preset != CUSTOM:
        chosen = VERSION_PRESETS[version_preset]
        notes.append(f"{version_preset} sets the stamp ({chosen.stamp}), the prefix mask "
                     f"({'on' if chosen.mask_stale else 'off'}) and π_prox ({chosen.prox}): those controls are "
                     "ignored while it is chosen.")
    if one_version:
        notes.append("No version switch: every token of a sequence comes from one version, so the stamp and the "
                     "prefix mask have nothing to act on (π_prox still reads the engine's lag).")
    return " ".join(notes)


REFERENCE_GROUP = "group_reference"     # the reference's controls: built only while open
REFERENCE_KEYS = ("kl_setting", "beta", "ref_distance")


def _reference_set(view):
    """Whether a view sets the reference's controls away from their defaults."""
    return any(view[KEY[name]] != VIEW_PARAMETERS[KEY[name]].default for name in REFERENCE_KEYS)


def _kl_label(choice):
    if choice == NO_KL:
        return "off"
    return f"{choice} · {KL_PRESETS[choice].option}" if choice in KL_PRESETS else kl_settings.label(choice)


def _reference_group(where):
    """The reference's controls (each in the URL): the KL setting (a framework's preset or an estimator and its
    placement), β and π_ref's distance from θ₀; an expander like the three policies'."""
    if REFERENCE_GROUP not in st.session_state and _reference_set(address.view()):
        st.session_state[REFERENCE_GROUP] = True
    group = where.expander("The reference: a KL penalty to π_ref, β", key=REFERENCE_GROUP, on_change="rerun")
    if not group.open:
        return
    kl_column, beta_column, distance_column = group.columns([4, 2, 2])
    chosen = kl_column.selectbox(
        "KL penalty", KL_CHOICES, key=KEY["kl_setting"], persist_state="session", format_func=_kl_label,
        help="An estimator and where it goes (in the loss, with a ratio; in the reward, summed over the sequence, "
             "to go or per token), or a framework's preset: its estimator, placement, ratio and clamps, read from "
             "its code. The correction of a reward penalty is each trained estimator's.")
    beta_column.select_slider("β", BETAS, key=KEY["beta"], persist_state="session",
                              format_func=VIEW_PARAMETERS[KEY["beta"]].to_url, disabled=chosen == NO_KL,
                              help="The penalty's coefficient (the toy sums KL over its T positions, as the "
                                   "frameworks' token-mean losses weigh it against the policy loss); greyed while "
                                   "the penalty is off: nothing to weigh")
    distance_column.select_slider("π_ref's distance from θ₀", TRAINING_DISTANCES, key=KEY["ref_distance"],
                                  persist_state="session", format_func=VIEW_PARAMETERS[KEY["ref_distance"]].to_url,
                                  help="π_ref = softmax(θ₀ + distance·d), d a seeded standard normal table; 0: the "
                                       "run starts at its reference")
    if chosen in KL_PRESETS:
        preset = KL_PRESETS[chosen]
        group.caption(f"{chosen} ({preset.commit[:7]}, {preset.code}): the framework's default β is "
                      f"{preset.default_beta:g}" + (", on by default" if preset.default_on else ", off by default")
                      + (f". {preset.note[0].upper()}{preset.note[1:]}." if preset.note else "."))
    group.caption(("KL penalty off: β is ignored (greyed); π_ref's distance still sets the KL(π‖π_ref) the run "
                   "charts. " if chosen == NO_KL else "")
                  + f"How each setting estimates ∇KL(π‖π_ref) on the engine's tokens: *{ESTIMATORS_TAB}*, the KL view.")


def _run_in_words():
    """The run the controls set, in a few words (a lesson's collapsed controls): 'expected · sgd · lr 1 · 300 steps'."""
    view = address.view()
    value = {name: view[url] for name, url in KEY.items()}
    policies = f" · {value['anchor']} · {value['minibatches']} × {value['epochs']} updates · lag {value['lag']}" \
        if _policies_set(view) else ""
    if value["update"] != CUSTOM_UPDATE:
        policies = f" · {value['update']}"
    return (f"{value['mode']} · {value['optimizer']} · lr {VIEW_PARAMETERS[KEY['lr']].to_url(value['lr'])} · "
            f"{value['steps']} steps · b {value['noise']}{policies}")


def render(settings):
    """The controls, then J, the cosine, the three policies, one estimator's training log and the mismatch against
    step, the summary, the seeds, staleness and SGA views. A lesson on show gets the charts it marks first, sized to
    be in view at 1280×720, its run's controls folded away. Every chart, note and table of a run is kept for every
    session (``_chart`` and friends): a second session's identical press builds none of them again."""
    marked = tour.marked(settings)
    lesson = [chart for chart in marked if chart in LESSON_CHARTS]
    where = st.expander(f"The run: {_run_in_words()}", icon=":material/tune:") if lesson else st
    try:
        config = controls(settings, where)
    except ValueError as error:
        st.warning(f"{str(error)[0].upper()}{str(error)[1:]}.", icon=":material/warning:")
        return
    selection = training_cache.trained(settings, config.mode, config.weights_only)
    left_out = training_cache.left_out(settings, config.mode, config.weights_only)
    ids = _trained(settings, config, selection)
    if ids is None:
        return
    if st.session_state.get(KEY["pick"]) not in ids:
        st.session_state[KEY["pick"]] = ids[min(1, len(ids) - 1)]
    if lesson:
        _pick(where, ids)
    draw = _drawers(settings, config, selection, marked, lesson)
    _top_charts(settings, config, selection, draw, lesson)
    _policy_group(st, config, settings.T)
    if _three_policies(config):
        _policy_charts(draw, lesson, _curves(settings, config, selection))
    _reference_group(st)
    if _referenced(config):
        _reference_chart(draw, lesson, config)
    lying = _coincident_note(settings, config, selection)
    st.caption(_about_the_run(settings, config, left_out)
               + (" " + coincidence.dashed_caption(lying, chart="the J chart") if lying else ""))
    busy = training_cache.busy_note(settings, config, selection)   # the machine's state now (not kept), its own
    if busy:                                                         # caption under the charts: a lesson's stay in view
        st.caption(f"{busy[0].upper()}{busy[1:]}.")
    _log_and_mismatch(settings, config, selection, draw, lesson, ids)
    table, names = _summary(settings, config, selection)
    st.dataframe(table, column_config=SUMMARY_COLUMNS, hide_index=True, width="stretch")
    st.caption(names)                                        # the names the table leaves out, said once
    _seeds_view(settings, config, selection)
    staleness_view.render(settings, config, draw["training_staleness"], lesson)
    _sga_view(settings, config)


def _drawers(settings, config, selection, marked, lesson):
    """{chart: draw(where, height)} for each chart a lesson may mark; the training log is the picked estimator's
    at the time it is drawn."""
    shown = tour.lesson_id(settings)

    def chart(name):
        return lambda at, size: chart_element.draw(at, _chart(settings, config, selection, name, shown if name in
                                                              marked else None, size, name == "training_cosine"
                                                              and bool(lesson)))

    def logged(at, size):
        chart_element.draw(at, _logged_chart(settings, config, selection, st.session_state[KEY["pick"]],
                                             shown if "training_logged" in marked else None, size))
    draw = {"training_J": chart("training_J"), "training_cosine": chart("training_cosine"),
            "step_cosine": chart("step_cosine"), "kl_mu_pi": chart("kl_mu_pi"), "chi2_seq": chart("chi2_seq"),
            "training_logged": logged,
            "training_staleness": lambda at, size: staleness_view.curves(at, settings, config, size)}
    return draw | {name: chart(name) for name in POLICY_CHARTS if _three_policies(config)} \
        | ({"training_kl_ref": chart("training_kl_ref")} if _referenced(config) else {})


def _top_charts(settings, config, selection, draw, lesson):
    """A lesson's marked charts, then J (with what the anchor makes moot) and the cosine, unless the lesson drew them,
    and any run that stopped early, said."""
    stops = _stop_notes(settings, config, selection)
    if stops:
        st.warning(" ".join(f"{note[0].upper()}{note[1:]}." for note in stops), icon=":material/warning:")
    if lesson:
        _lesson_charts(lesson, draw)
    if "training_J" not in lesson:
        draw["training_J"](st, 300 if screen_share.on() else 360)
    if update_text.correction_moot(config.update):                  # the sidebar's choice, ignored: say so
        st.info(update_text.IGNORED, icon=":material/info:")
    if "training_cosine" not in lesson:
        draw["training_cosine"](st, None)
    if config.mode == "expected" and config.optimizer == "adam":
        draw["step_cosine"](st, None)


def _log_and_mismatch(settings, config, selection, draw, lesson, ids):
    """Side by side: the picked estimator's training log against J, and KL(μ‖π) and χ²_seq against step."""
    left, right = st.columns(2)
    with left:
        if not lesson:
            _pick(st, ids)
        if "training_logged" not in lesson:                # a lesson draws it on top, its legend saying as much
            draw["training_logged"](st, 300)
            st.caption("A rollout log averages the reward of sampler rollouts, E_μ[r]; the trainer climbs J = E_π[r]. "
                       "Shaded: the gap" + (" (per-step medians over the runs)." if config.mode == "sampled" else "."))
    with right:
        st.markdown("**Does training make the mismatch worse?**")
        draw["kl_mu_pi"](st, None)
        draw["chi2_seq"](st, None)


def _expected(settings, config, *rest):
    """Whether a run's pictures are made ahead (``caches.ahead``): in expected mode only (sampled runs cost more)."""
    return config.mode == "expected"


CHARTS = {     # a chart of the run's curves: how it is drawn from (curves, sampled, marks, height, short)
    "training_J": lambda curves, sampled, marks, height, short: training_charts.objective_chart(
        curves, sampled, marks, height=height),
    "training_cosine": lambda curves, sampled, marks, height, short: training_charts.cosine_chart(
        curves, sampled, marks, height=height, short=short),
    "step_cosine": lambda curves, sampled, marks, height, short: training_charts.step_cosine_chart(curves),
    "kl_mu_pi": lambda curves, sampled, marks, height, short: training_charts.curve_chart(
        curves, "kl_mu_pi", sampled, height=180),
    "chi2_seq": lambda curves, sampled, marks, height, short: training_charts.curve_chart(
        curves, "chi2_seq", sampled, height=180, log=True),
    "training_kl_ref": lambda curves, sampled, marks, height, short: training_charts.curve_chart(
        curves, "kl_ref", sampled, height=height or 200, marks=marks),
}


CURVES = ByteBoundedCache(8, lambda curves: 1, grows=False)   # the last runs' curves: each chart of a run reads them


def _curves(settings, config, selection):
    """The run's curves (``training_frames.curve_frame``), the three policies' and the reference's among them when the
    run has them: a step toward its charts, kept only while they are made (not with them: 0.4 MB a run, more than its
    charts)."""
    def build():
        trajectories = training_cache.trajectories(settings.toy_key, selection, settings.baseline, config)
        return training_frames.curve_frame(trajectories, training_frames.CURVES
                                           + (training_frames.POLICY_CURVES if _three_policies(config) else ())
                                           + (training_frames.REFERENCE_CURVES if _referenced(config) else ()))
    return CURVES.get((settings, config, selection), build)


@kept(ahead=_expected)
def _chart(settings, config, selection, name, lesson, height, short):
    """The run's chart ``name`` (CHARTS, or one of POLICY_CHARTS), prepared; marked by lesson ``lesson`` (or None)."""
    curves, sampled, marks = _curves(settings, config, selection), config.mode == "sampled", tour.marks_of(lesson, name)
    if name in POLICY_CHARTS:
        return chart_element.prepare(training_charts.curve_chart(curves, POLICY_CHARTS[name], sampled,
                                                                 height=height or 180, marks=marks))
    return chart_element.prepare(CHARTS[name](curves, sampled, marks, height, short))


@kept(ahead=_expected)
def _logged_chart(settings, config, selection, pick, lesson, height):
    """The training log of estimator ``pick``: its logged reward E_μ[r] against J, prepared."""
    trajectory = training_cache.trajectories(settings.toy_key, selection, settings.baseline, config)[pick]
    return chart_element.prepare(training_charts.logged_chart(
        training_frames.logged_frame(trajectory), pick, ESTIMATORS[pick].colour,
        tour.marks_of(lesson, "training_logged"), height=height))


@kept(ahead=_expected)
def _coincident_note(settings, config, selection):
    """What lies on what on the J chart, in words ('' if nothing)."""
    return training_frames.coincident_note(_curves(settings, config, selection), config.mode == "sampled")


@kept(ahead=_expected)
def _stop_notes(settings, config, selection):
    """Why an estimator's curves end early, one sentence each (``loop.stop_notice``; none: every run went on)."""
    trajectories = training_cache.trajectories(settings.toy_key, selection, settings.baseline, config)
    return [note for trajectory in trajectories.values() if (note := stop_notice(trajectory))]


@kept(ahead=_expected)
def _summary(settings, config, selection):
    """(the summary table's shown columns as an Arrow table, the estimators' names in words)."""
    summary = training_frames.summary_frame(
        training_cache.trajectories(settings.toy_key, selection, settings.baseline, config))
    return (chart_element.arrow(summary[list(SUMMARY_COLUMNS)]),
            frames.names_note(summary["estimator"]))


SEEDS_COLUMNS = {
    "estimator": st.column_config.TextColumn("estimator"),
    "value": st.column_config.NumberColumn("final J here", format="%.4f"),
    "rank": st.column_config.NumberColumn("rank here", help="1: the highest J after the run's steps on this toy; "
                                                            "equal numbers share a rank"),
    "same_rank": st.column_config.NumberColumn("same rank at", help="How many of the toys rank it as this toy does"),
    "first": st.column_config.NumberColumn("first at", help="How many of the toys rank it first (highest J)"),
    "median_rank": st.column_config.NumberColumn("median rank", format="%.1f"),
    "toys": st.column_config.NumberColumn("of toys"),
}


def _seeds_view(settings, config, selection):
    """The table's takeaway, each estimator's J after the run, over this toy and 29 others that differ in their seed
    alone, trained together in expected mode: opt-in."""
    if not st.toggle("Across seeds: final J on 30 toys", key=KEY["seeds"], persist_state="session",
                     help="This run on 30 toys that differ from this one in their seed alone (seeds 0–29, or this "
                          "seed and 0–28), trained together, expected mode: each estimator's J after the last step "
                          "and its rank. Off, a change of the toy does not wait for it."):
        return
    if config.mode != "expected":
        st.info("Across seeds trains in expected mode: switch the mode to expected to see it.",
                icon=":material/info:")
        return
    keys = tuple(seeds_cache.toy_keys(settings))
    problem = seeds_cache.too_large(settings) or seeds_cache.refusal(keys, "training", selection, settings.baseline,
                                                                     config)
    if problem:
        st.info(f"Across seeds: {problem}.", icon=":material/hourglass:")
        return
    with st.spinner("Training 30 toys…"):
        values = seeds_cache.final_J(keys, selection, settings.baseline, config)
    frame = seeds_frames.strip_frame(values, settings.seed, lowest_first=False)
    chart_element.draw(st, seeds_charts.strip_chart(
        frame, f"J after {config.steps} steps on 30 toys (ticks; ringed: this toy, seed {settings.seed})",
        f"J after {config.steps} steps"))
    same, toys = seeds_frames.same_order(frame)
    st.dataframe(seeds_frames.rank_table(frame), column_config=SEEDS_COLUMNS, hide_index=True, width="stretch")
    saturated = int((frame["value"] >= 1 - SATURATED).sum())
    st.caption(f"Ranked by J after {config.steps} steps, highest first, on this toy: {seeds_frames.order_text(frame)}. "
               f"{same} of {toys} toys rank every estimator the same way. The toys: seeds "
               f"{seeds_frames.seeds_text(frame)}, each exact (expected mode, this run's controls); a rank is shared "
               "by numbers equal to rounding."
               + (f" Saturated: {saturated} of the {len(frame)} runs end within {SATURATED:g} of J = 1, where ranks "
                  "are decided by thousandths; the table's steps to 90 % tell speed apart." if saturated else ""))


def _three_policies(config):
    """Whether the run is more than today's one recomputed update per batch with the engine at θ_k."""
    return config.update != DEFAULT_UPDATE or config.lag > 0 or config.hidden


def _referenced(config):
    """Whether the run has a reference to chart: a KL penalty, or π_ref moved away from θ₀."""
    return config.kl.active or config.reference.distance > 0


POLICY_CHARTS = {"training_clip": "clip_share", "training_ppo_kl": "ppo_kl", "training_w": "w_std"}


def _policy_charts(draw, lesson, curves):
    """What the frameworks log of the three policies, against step: the clipped share, the PPO KL, w's spread (those
    a lesson marks are on top already); one that is the same constant at every step of every run is a sentence."""
    st.markdown("**What the frameworks log: the clip, the PPO KL, the correction's ratio**")
    for column, (chart, quantity) in zip(st.columns(3), POLICY_CHARTS.items(), strict=True):
        constant = training_frames.constant_value(curves, quantity)
        if constant is not None:
            column.markdown(f"**{training_frames.QUANTITIES[quantity]}**: {constant:g} at every step of every run"
                            + (" (w ≡ 1)." if quantity == "w_std" and constant == 0 else "."))
        elif chart not in lesson:
            draw[chart](column, None)
    st.caption("Clipped share: the share of tokens whose gradient the loss's clip or mask holds (verl's pg_clipfrac "
               "and pg_clipfrac_lower; prime-rl's is_masked), averaged over the batch's U updates. PPO KL: the token "
               "mean of −log r = log π_old − log π_θ (verl's ppo_kl), averaged likewise. Spread of w: the standard "
               "deviation over the tokens of w = π_old/μ. Expected mode: each exact, under μ.")


def _reference_chart(draw, lesson, config):
    """KL(π_k‖π_ref) against step, below J's chart: how β trades J for staying near the reference (on top when a
    lesson marks it)."""
    st.markdown("**How far from the reference: KL(π_k‖π_ref)**")
    if "training_kl_ref" not in lesson:
        draw["training_kl_ref"](st, None)
    st.caption(("KL penalty: " + config.kl.describe() if config.kl.active else "No KL penalty")
               + f"; π_ref = softmax(θ₀ + {config.reference.distance:g}·d). KL(π_k‖π_ref), exact at every step: the "
                 "divergence every framework's KL names, whatever its estimator estimates.")


def _trained(settings, config, selection):
    """The ids of ``selection`` trained under ``config`` (the run kept for every session), or None with a notice: a
    run over the page's limits is refused before it starts, and a run the trainer refuses says why. (A run that fits
    on a busy server says what the load does to it under the charts, ``render``.)"""
    try:
        refused, ids = _run(settings, config, selection)
    except ValueError as error:
        st.warning(f"{str(error)[0].upper()}{str(error)[1:]}.", icon=":material/warning:")
        return None
    if refused:
        st.info(f"{refused[0].upper()}{refused[1:]} (the page's limits).", icon=":material/hourglass:")
        return None
    return ids


@kept(spinner=lambda settings, config, selection: f"Training {len(selection)} estimators for {config.steps} steps…",
      ahead=_expected)
def _run(settings, config, selection):
    """(why the run would not finish within the page's seconds or memory, or None; the ids it trained): refused before
    it starts (``training_cache.refusal``), else trained (``training_cache.trajectories``)."""
    refused = training_cache.refusal(settings, config, selection)
    if refused:
        return refused, None
    return None, list(training_cache.trajectories(settings.toy_key, selection, settings.baseline, config))


def _pick(where, ids):
    """The estimator whose training log is shown (its selectbox, in ``where``)."""
    return where.selectbox("estimator whose training log to show", ids, key=KEY["pick"], persist_state="session",
                           help="Its logged reward E_μ[r] against the true J, step by step.")


LESSON_CHARTS = ("training_J", "training_cosine", "training_logged", "training_clip", "training_w", "training_kl_ref",
                 "training_staleness")
LESSON_HEIGHTS = {1: 240, "main": 270, "beside": 70}     # plot heights that keep a lesson's charts in view at 720 px


def _lesson_charts(marked, draw):
    """A lesson's marked charts at the top: one across the width, or the first on the left and the others stacked
    on its right."""
    if len(marked) == 1:
        draw[marked[0]](st, LESSON_HEIGHTS[1])
        return
    main, beside = st.columns([3, 2], gap="medium")
    draw[marked[0]](main, LESSON_HEIGHTS["main"])
    for chart in marked[1:]:
        draw[chart](beside, LESSON_HEIGHTS["beside"])


def _about_the_run(settings, config, left_out):
    sampler = "" if settings.sampler.is_default else f", the sampler model ({settings.sampler.describe()}) applied"
    error = "b fixed" if config.noise == "fixed" else "b redrawn from Student-t(3) at every step (seeded)"
    text = (f"From the toy's θ₀ (seed {settings.seed}) with {error}: each step rebuilds π_k = softmax(θ_k) and "
            f"μ_k = softmax(θ_k + {settings.mismatch:g}·b_k){sampler}; baseline '{settings.baseline}' recomputed "
            "every step. " + scored_objective_note(settings))
    if config.mode == "expected":
        text += ("Expected mode: θ moves along each estimator's exact mean gradient, no noise — the flow its bias "
                 "follows; on_policy's flow is exact gradient ascent on J. The cosine is that of the mean E ĝ"
                 + (" (the step Adam takes from it, below, points elsewhere)" if config.optimizer == "adam" else
                    ", which SGD's step shares") + ". Gaps in the cosine: undefined there (a zero mean, e.g. every "
                 "sequence masked, or ∇J within rounding of 0 at J's maximum).")
    else:
        text += (f"Sampled mode: {config.runs} runs, each step averaging ĝ over N = {config.N:,} sequences drawn "
                 "from μ_k (run r seeded by (seed, r); every estimator sees the same uniforms); lines are per-step "
                 f"medians, {training_frames.band_description(config.runs)}. J itself is exact at every step of "
                 "every run. The cosine is the step's, and leaves out runs where it is undefined (a zero step, e.g. "
                 "every sequence of the batch masked, or ∇J within rounding of 0).")
    if left_out:
        text += f" Not trained: {'; '.join(left_out)}."
    return text


def _sga_view(settings, config):
    st.subheader("One step: bias against variance (the SGA view)")
    if not st.toggle("Show the one-step view", key=KEY["sga"], persist_state="session",
                     help="How much one step of each estimator gains, E[J(θ + lr·ĝ_N)] − J(θ), to second order "
                          "(exact) and by Monte Carlo, at a θ of on_policy's run. Off, a change of the toy does not "
                          "wait for it."):
        return
    sga_selection = training_cache.trained(settings, "sampled")
    skipped = training_cache.left_out(settings, "sampled")
    key = KEY["sga_step"]
    st.session_state[key] = min(st.session_state.get(key, VIEW_PARAMETERS[key].default), config.steps)
    step = st.slider("at θ_k of on_policy's run, step k", 0, config.steps, key=key, persist_state="session", help="The θ at which to look one step ahead: on_policy's expected-mode "
                                               "run under this tab's optimizer and learning rate.")
    with_second_order = training_cache.sga_has_second_order(settings, sga_selection)
    with st.spinner("Second order and Monte Carlo of one step…"):
        J, exact, sampled, beyond = training_cache.sga(settings.toy_key, sga_selection, settings.baseline, settings.N,
                                                       config, step, with_second_order)
    curves = training_frames.second_order_frame(exact, training_cache.SGA_CURVE_LRS, J)
    points = training_frames.monte_carlo_frame(sampled, exact)
    adam = training_frames.adam_frame(sampled)
    chart_element.draw(st, training_charts.sga_chart(curves, points, config.lr, adam))
    heavy = sorted(set(points.loc[points["trusted"] == training_frames.TRUST[False], "estimator"]))
    unchecked = sorted(set(points.loc[points["trusted"] == training_frames.TRUST[None], "estimator"]))
    st.caption(
        f"At θ_{step} (J = {J:.4f}), batch size N = {settings.N:,} (the sidebar's). Lines: E[J(θ + lr·ĝ_N)] − J(θ) to "
        "second order, lr·⟨∇J, E ĝ⟩ + (lr²/2)·(E ĝᵀ H E ĝ + tr(H Σ)/N), every piece exact: E ĝ from the exact engine, "
        "H the exact Hessian of J (from the count of token 0), tr(H Σ) = E[ĝᵀ H ĝ] − E ĝᵀ H E ĝ summed over all "
        "M sequences; drawn only where it is possible at all (−J to 1 − J). Dots: Monte Carlo of the same "
        f"expectation, J evaluated exactly after each of {training_cache.sga_batches(settings.N)} sampled steps, "
        "±2 s.e. bars; where they leave the line, the second-order model is not enough at that lr. Dashed: the "
        "training lr, as a plain step θ + lr·ĝ_N." + (f" Not shown: {'; '.join(skipped)}." if skipped else "")
        + ("" if with_second_order else " The second order is skipped on a toy this large (it sums over all M "
                                        "sequences per estimator).")
        + (f" The second order is skipped: {beyond}." if beyond else "")
        + ("" if sampled else " No Monte Carlo at this N (too few batches fit the time budget)."))
    if sampled:
        st.caption(
            "Can the ±2 s.e. bars be trusted? A heavy-tailed ĝ hides much of its mean in batches too rare to be drawn, "
            "and then the batches under-state the spread too. The check: the batches' variance of ⟨∇J, ĝ_N⟩ against "
            "its exact value; below half of it the interval is not trusted (hollow dot, dashed bar) — measured at "
            "mismatch 1, such intervals covered the truth in 23–46 % of repeats at small lr, those that passed in "
            "94–100 % (docs/training.md)."
            + (f" Not trusted here: {', '.join(heavy)}." if heavy else " Every checked interval passes here.")
            + (f" Unchecked (batch-coupled, no exact variance): {', '.join(unchecked)}." if unchecked else ""))
    if len(adam):
        st.caption(
            f"With Adam the step taken is not lr·ĝ_N: from its state after {step} steps of on_policy's run, Adam moves "
            "each coordinate by about lr whatever ĝ_N's size. Diamonds: E[J(θ + Δ)] − J(θ) of that actual step, placed at "
            "the lr of a plain step as long (median of ‖Δ‖/‖ĝ_N‖ over the batches); the table gives both.")
    table = training_frames.sga_table([id for id, _ in sga_selection], exact, sampled, config.lr) if sampled else None
    if table is not None:
        shown = [name for name in SGA_COLUMNS if len(adam) or not name.startswith("adam")]   # SGD: no Adam step
        st.dataframe(table[shown], column_config=SGA_COLUMNS, hide_index=True, width="stretch")
        st.caption(frames.names_note(table["estimator"]))
