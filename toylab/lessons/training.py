"""Lessons about training with a correction: a token mask that collapses, full masks that stall."""

from dataclasses import fields

import numpy as np

from toylab.engine.moments import exact_moments
from toylab.lessons.lesson import Evidence, Lesson, Mark, controls, toy_of
from toylab.state.query import TRAINING_CONTROLS, TRAINING_TAB
from toylab.training.loop import TrainingConfig, train


def training_view(config, pick):
    """The Training tab's controls (URL name → value) that show ``config``, with ``pick``'s training log."""
    names = {f.name for f in fields(TrainingConfig)}
    return {url: getattr(config, name) for name, url in TRAINING_CONTROLS.items() if name in names} \
        | {TRAINING_CONTROLS["pick"]: pick}


COLLAPSE = TrainingConfig(steps=300, lr=1.0, optimizer="sgd", mode="expected")


def token_mask_collapses(settings):
    """tok_mis's expected flow at COLLAPSE: J peaks 0.1 above its start at step 25–45, its mean turns against ∇J
    (cosine < 0), J ends below its start; on ≥ 5 steps J falls while E_μ[r] rises, and E_μ[r] ends over 5 × J;
    on_policy reaches J > 0.99."""
    runs = train(toy_of(settings), settings.selection(exact_only=True) | {"on_policy": {}}, settings.baseline, COLLAPSE)
    mask = runs["tok_mis"]
    peak = int(np.argmax(mask.J))
    falls_while_log_rises = int(np.sum((np.diff(mask.J) < 0) & (np.diff(mask.logged_reward) > 0)))
    numbers = {"J at step 0": mask.J[0], "peak J": mask.J[peak], "step of the peak": peak,
               "first step with cosine < 0": int(np.argmax(mask.cosine < 0)), "lowest cosine": float(np.nanmin(mask.cosine)),
               f"J at step {COLLAPSE.steps}": mask.J[-1], f"E_μ[r] at step {COLLAPSE.steps}": mask.logged_reward[-1],
               "steps where J falls while E_μ[r] rises": falls_while_log_rises,
               f"on_policy's J at step {COLLAPSE.steps}": runs["on_policy"].J[-1]}
    holds = mask.J[peak] > mask.J[0] + 0.1 and 25 <= peak <= 45 and mask.J[-1] < mask.J[0] \
        and numbers["lowest cosine"] < 0 and falls_while_log_rises >= 5 and mask.logged_reward[-1] > 5 * mask.J[-1] \
        and runs["on_policy"].J[-1] > 0.99
    turn = numbers["first step with cosine < 0"]
    end = COLLAPSE.steps
    marks = (Mark("training_J", f"tok_mis peaks: J = {mask.J[peak]:.3f} at step {peak}", peak, float(mask.J[peak])),
             Mark("training_J", f"tok_mis ends at J = {mask.J[-1]:.3f}, below its start ({mask.J[0]:.3f})", end,
                  float(mask.J[-1])),
             Mark("training_cosine", f"from step {turn} tok_mis's mean gradient points against ∇J (cosine "
                                     f"{mask.cosine[turn]:.2f})", turn, float(mask.cosine[turn])),
             Mark("training_logged", f"the log still shows E_μ[r] = {mask.logged_reward[-1]:.3f} at step {end}", end,
                  float(mask.logged_reward[-1])))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds, marks)


STALL = TrainingConfig(steps=100, lr=1.0, optimizer="sgd", mode="expected")


def full_masks_stall(settings):
    """trm and k3_rs at STALL: every sequence masked (exactly), so J does not move at all; on_policy reaches J > 0.99."""
    toy = toy_of(settings)
    runs = train(toy, settings.selection(exact_only=True) | {"on_policy": {}}, settings.baseline, STALL)
    numbers = {}
    for id in ("trm", "k3_rs"):
        numbers |= {f"{id}: share of sequences masked": exact_moments(toy, id, settings.params(id)).sequences_affected,
                    f"{id}: largest change of J": float(np.ptp(runs[id].J))}
    numbers[f"on_policy's J at step {STALL.steps}"] = float(runs["on_policy"].J[-1])
    holds = all(numbers[f"{id}: share of sequences masked"] == 1 and numbers[f"{id}: largest change of J"] == 0
                for id in ("trm", "k3_rs")) and numbers[f"on_policy's J at step {STALL.steps}"] > 0.99
    marks = (Mark("training_J", f"trm and k3_rs mask every sequence: J stays at {runs['trm'].J[-1]:.3f}", STALL.steps,
                  float(runs["trm"].J[-1])),
             Mark("training_J", f"on_policy reaches J = {runs['on_policy'].J[-1]:.3f}", STALL.steps,
                  float(runs["on_policy"].J[-1])))
    return Evidence(numbers, holds, marks)


LESSONS = (
    Lesson("token_mask_collapse",
           "Under heavy mismatch a token mask can train the wrong way: at mismatch 1, IcePop-style tok_mis (keep "
           "ρ_t in [0.5, 5]) climbs for about 35 steps, then its mean gradient turns against ∇J (cosine below 0) and "
           "J sinks below where it started. Meanwhile the logged reward E_μ[r] keeps rising for a while and ends "
           "five times above J, so the training log hides the collapse.",
           controls(("on_policy", "naive", "tok_tis", "tok_mis")), TRAINING_TAB, token_mask_collapses,
           training_view(COLLAPSE, "tok_mis"),
           claim="Under heavy mismatch tok_mis peaks (1), its gradient turns against ∇J (3), J sinks below its "
                 "start (2); the log still shows a high reward (4)."),
    Lesson("full_mask_stalls",
           "A mask that keeps no rollout stops training dead: at mismatch 1 the trust-region mask (ε = 0.5) and k3 "
           "rejection (δ = 0.01) reject every sequence, so their mean gradient is exactly zero and J never moves, "
           "while on-policy training climbs to J ≈ 1.",
           controls(("on_policy", "naive", "k3_rs", "trm")), TRAINING_TAB, full_masks_stall,
           training_view(STALL, "trm"),
           claim="A mask that keeps no rollout stops training dead: trm and k3_rs stay where they start (1) while "
                 "on-policy training climbs to J ≈ 1 (2)."),
)
