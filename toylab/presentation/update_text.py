"""The update's three policies in words, as the Training tab's controls set them: which of π_θ, π_old and μ enter the
PPO ratio r and the correction's ratio w, what each is at the current values, and what a setting makes moot.

Each token ascends g(w)·L(r, A) (``catalogue.updates``): r = π_θ/π_old, w = π_old/μ (or sg(π_θ)/μ recomputed at
every update), π_old the anchor, μ the engine at θ_(k−s) for a lag s. Text only: the identities it states are the
training loop's, tested there.
"""

from toylab.catalogue.updates import LOSSES

ANCHOR = {"recompute": ("π_θk", "the trainer's recomputation at the batch's θ_k"),
          "rollout": ("π_θ(k−s)", "the trainer's policy that generated the batch"),
          "bypass": ("μ", "the engine's logged probabilities")}


def correction_moot(update):
    """Whether every correction's weight is the same constant: the anchor is μ and the correction reads w = π_old/μ,
    so w ≡ 1 and g(w) = g(1) on every token."""
    return update.anchor == "bypass" and update.weights_at == "anchor"


def _engine(lag, lag_draw):
    if lag == 0:
        return "μ = the engine at θ_k"
    return f"μ = the engine at θ_(k−s), s ~ uniform 0 … {lag}" if lag_draw == "uniform" else \
        f"μ = the engine at θ_(k−s), s = {lag}"


def _w(update, lag):
    if update.weights_at == "current":
        return "w = sg(π_θ)/μ, recomputed at every update"
    if correction_moot(update):
        return "w = π_old/μ ≡ 1"
    old = "π_θk" if update.anchor == "recompute" or lag == 0 else ANCHOR[update.anchor][0]
    return f"w = π_old/μ = {old}/μ"


def _r(update):
    return f"r = π_θ/π_old, π_old = {ANCHOR[update.anchor][0]}"


def label(update, lag, lag_draw):
    """The policies in symbols, one line over their controls, e.g. 'Three policies: r = π_θ/π_old, π_old = π_θk ·
    w = π_old/μ = π_θk/μ · μ = the engine at θ_k · U = 1'."""
    return f"Three policies: {_r(update)} · {_w(update, lag)} · {_engine(lag, lag_draw)} · U = {update.U}"


def equation(update, lag, lag_draw):
    """The update as one paragraph of Markdown: each token's g(w)·L(r, A) with the current anchor, ratio, engine and
    loss, and what the setting means (r ≡ 1 and a clip that never binds; w ≡ 1 and corrections that all weigh alike;
    a staleness w carries or r does)."""
    loss = LOSSES[update.loss]
    text = (f"Each token: **g(w) · L(r, A)**, L = {loss.label}, U = {update.U} update{'s' * (update.U > 1)} a batch "
            f"({update.minibatches} minibatch{'es' * (update.minibatches > 1)} × {update.epochs} epoch"
            f"{'s' * (update.epochs > 1)}). **{_r(update)}** ({ANCHOR[update.anchor][1]}); **{_w(update, lag)}**; "
            f"**{_engine(lag, lag_draw)}**. ")
    return text + " ".join(_meanings(update, lag))


def _meanings(update, lag):
    """What the current values mean, a sentence each."""
    said = []
    starts_at_anchor = update.anchor == "recompute" or (update.anchor == "rollout" and lag == 0)
    if starts_at_anchor and update.U == 1:
        said.append("π_θ = π_old at the batch's only update, so r ≡ 1: no clip or mask of r ever binds.")
    elif starts_at_anchor:
        said.append("r = 1 at the first update and moves over the next U − 1.")
    elif update.anchor == "rollout":
        said.append("r = π_θk/π_θ(k−s) from the first update: the staleness is in r, clipped by the loss; w is the "
                    "engine's mismatch alone.")
    else:
        said.append("r = π_θ/μ: the mismatch and any staleness are in r, clipped by the loss.")
    if correction_moot(update):
        said.append(IGNORED)
    elif update.weights_at == "current":
        said.append("The correction weighs sg(π_θ)/μ as π_θ moves, not the batch's frozen w (verl's bypass mode).")
    elif update.anchor == "recompute" and lag > 0:
        said.append("w = π_θk/μ carries the staleness with the engine's mismatch.")
    return said


IGNORED = ("w ≡ 1, so no correction has anything to correct: each weighs every token by its value at w = 1, the same "
           "constant, and one whose weight there is 1 (every ratio weight, cap and band of the catalogue at its "
           "defaults) trains as naive does — the J chart's legend names them. To apply the corrections, let them "
           "read π_θ/μ (correction reads).")


def preset_text(preset, selected=()):
    """A framework's update preset in a few lines of Markdown: its option, its update exactly, its staleness, its
    correction (whether it is among the ``selected`` estimators) and pipeline, where its code computes the loss, and
    where its code and documentation disagree."""
    update = preset.update
    params = ", ".join(f"{name} {'off' if value is None else f'{value:g}'}" for name, value in update.params)
    lag = (f"lag s ~ uniform 0 … {preset.lag}" if preset.lag_draw == "uniform" else f"lag {preset.lag}")
    lines = [f"**{preset.id}** ({preset.option}): anchor {update.anchor}, loss {update.loss}"
             + (f" ({params})" if params else "") + f", U = {update.U} ({update.minibatches} × {update.epochs}), "
             f"the correction reads {'π_θ/μ' if update.weights_at == 'current' else 'w = π_old/μ'}, {lag}.",
             f"Its correction: {preset.correction or 'none (g = 1)'}"
             + ("" if not preset.correction else " (among the sidebar's estimators)" if preset.correction in selected
                else " (not among the sidebar's estimators: picking this update adds it, or add it there)")
             + f"; its pipeline: {preset.pipeline or 'the sampler of the sidebar'}"
             + (" (the sidebar's Sampler group sets it)." if preset.pipeline else "."),
             f"Code: {preset.code} ({preset.framework} {preset.commit[:7]})."]
    return "\n\n".join(lines + ([f"Note: {preset.note}."] if preset.note else []))
