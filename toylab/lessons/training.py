"""Lessons about training with a correction: a token mask that collapses, full masks that stall; and about the three
policies of an update: a recomputed anchor that the clip never reaches, bypass's clip spent on the engine's mismatch,
objectives that part as the rollouts grow stale, and a sequence ratio that falls with the length."""

from dataclasses import fields, replace

import numpy as np

from toylab.analysis.repeated import repeated_position
from toylab.catalogue.updates import Update
from toylab.engine.moments import exact_moments
from toylab.lessons.lesson import Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.population import AT_SETTING, Group, Population, around
from toylab.state.query import (
    CLIP_CONTROLS,
    LENGTH_TAB,
    NO_EXPERTS,
    TRAINING_CONTROLS,
    TRAINING_TAB,
    UPDATE_CONTROLS,
)
from toylab.training.loop import TrainingConfig, train
from toylab.training.staleness import LAGS, staleness


def training_view(config, pick, **view):
    """The Training tab's controls (URL name → value) that show ``config`` (its update's anchor, loss with ε and c,
    minibatches, epochs and weights included), with ``pick``'s training log and any other ``view`` values. The config
    has no experts: the tab's replay is NO_EXPERTS, the dense toy (its "off" is a mixture of experts without replay)."""
    names = {f.name for f in fields(TrainingConfig)} - {"update", "replay"}   # update: its URL name picks a preset
    update = config.update
    params = update.loss_params
    return {url: getattr(config, name) for name, url in TRAINING_CONTROLS.items() if name in names} \
        | {TRAINING_CONTROLS["replay"]: NO_EXPERTS} \
        | {TRAINING_CONTROLS[name]: getattr(update, name) for name in UPDATE_CONTROLS} \
        | {TRAINING_CONTROLS[name]: params[name] or 0.0 for name in CLIP_CONTROLS if name in params} \
        | {TRAINING_CONTROLS["pick"]: pick} | view


COLLAPSE = TrainingConfig(steps=300, lr=1.0, optimizer="sgd", mode="expected")


def token_mask_collapses(settings):
    """The claim: tok_mis's expected flow at COLLAPSE trains the wrong way — J ends below its start — where on_policy
    reaches J > 0.99. The numbers (the lesson's example): its peak, the first step its mean turns against ∇J (cosine
    < 0), the steps where J falls while E_μ[r] rises, and E_μ[r] at the end."""
    runs = train(toy_of(settings), {"tok_mis": settings.params("tok_mis"), "on_policy": {}}, settings.baseline, COLLAPSE)
    mask = runs["tok_mis"]
    peak = int(np.argmax(mask.J))
    falls_while_log_rises = int(np.sum((np.diff(mask.J) < 0) & (np.diff(mask.logged_reward) > 0)))
    numbers = {"J at step 0": mask.J[0], "peak J": mask.J[peak], "step of the peak": peak,
               "first step with cosine < 0": int(np.argmax(mask.cosine < 0)), "lowest cosine": float(np.nanmin(mask.cosine)),
               f"J at step {COLLAPSE.steps}": mask.J[-1], f"E_μ[r] at step {COLLAPSE.steps}": mask.logged_reward[-1],
               "steps where J falls while E_μ[r] rises": falls_while_log_rises,
               f"on_policy's J at step {COLLAPSE.steps}": runs["on_policy"].J[-1]}
    holds = mask.J[-1] < mask.J[0] and runs["on_policy"].J[-1] > 0.99
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
KEPT = 0.02              # "keeps almost no rollout": under 2 % of the sequences, by their μ-probability
STILL = 0.01             # "J does not move": it moves by less than this over STALL's steps
CLIMBS = 0.9             # on-policy training "climbs": its J ends above this


def full_masks_stall(settings):
    """trm and k3_rs at STALL: each keeps under KEPT of the sequences (μ-probability) and its J moves by less than
    STILL, while on_policy's J ends above CLIMBS."""
    toy = toy_of(settings)
    runs = train(toy, {"trm": settings.params("trm"), "k3_rs": settings.params("k3_rs"), "on_policy": {}},
                 settings.baseline, STALL)
    numbers = {}
    for id in ("trm", "k3_rs"):
        numbers |= {f"{id}: share of sequences kept": 1 - exact_moments(toy, id, settings.params(id)).sequences_affected,
                    f"{id}: largest change of J": float(np.ptp(runs[id].J))}
    numbers[f"on_policy's J at step {STALL.steps}"] = float(runs["on_policy"].J[-1])
    holds = all(numbers[f"{id}: share of sequences kept"] < KEPT and numbers[f"{id}: largest change of J"] < STILL
                for id in ("trm", "k3_rs")) and numbers[f"on_policy's J at step {STALL.steps}"] > CLIMBS
    kept = max(numbers[f"{id}: share of sequences kept"] for id in ("trm", "k3_rs"))
    marks = (Mark("training_J", f"trm and k3_rs keep {kept:.2g} of the sequences or less: J stays at "
                                f"{runs['trm'].J[-1]:.3f}", STALL.steps, float(runs["trm"].J[-1])),
             Mark("training_J", f"on_policy reaches J = {runs['on_policy'].J[-1]:.3f}", STALL.steps,
                  float(runs["on_policy"].J[-1])))
    return Evidence(numbers, holds, marks)


LAGGED = TrainingConfig(steps=100, lr=1.0, optimizer="sgd", mode="expected", lag=8)


def recomputed_anchor_never_clips(settings):
    """At mismatch 0 with the engine 8 steps behind, one update per batch: recomputing π_old gives r ≡ 1 at every
    step — clipped share and PPO KL exactly 0 — and w = π_θk/μ carries the lag (spread above 0.05); the rollout
    anchor π_θ(k−8) moves the lag into r (clipped share above 0.05) and leaves w ≡ 1 (spread below 1e-12)."""
    toy = toy_of(settings)
    selection = {"tok_is": {}}
    recompute = train(toy, selection, settings.baseline, LAGGED)["tok_is"]
    rollout = train(toy, selection, settings.baseline, replace(LAGGED, update=Update("rollout")))["tok_is"]
    peak = int(np.argmax(recompute.w_std))
    numbers = {"recompute: largest clipped share": recompute.clip_share.max(),
               "recompute: largest |PPO KL|": np.abs(recompute.ppo_kl).max(),
               "recompute: largest spread of w": recompute.w_std[peak], "step of that spread": peak,
               "rollout: largest clipped share": rollout.clip_share.max(),
               "rollout: largest |PPO KL|": np.abs(rollout.ppo_kl).max(),
               "rollout: largest spread of w": rollout.w_std.max()}
    holds = numbers["recompute: largest clipped share"] == 0 and numbers["recompute: largest |PPO KL|"] == 0 \
        and numbers["recompute: largest spread of w"] > 0.05 and numbers["rollout: largest clipped share"] > 0.05 \
        and numbers["rollout: largest spread of w"] < 1e-12
    marks = (Mark("training_clip", "recompute: not one token clipped, at any step (r ≡ 1)", LAGGED.steps, 0.0),
             Mark("training_w", f"the lag sits in w: its spread reaches {recompute.w_std[peak]:.3f}", peak,
                  float(recompute.w_std[peak])))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds, marks)


BYPASS = TrainingConfig(steps=100, lr=0.01, optimizer="sgd", mode="expected", update=Update("bypass"))
SPENT = 0.05             # "a share of the tokens": over 5 %


def bypass_spends_the_clip(settings):
    """PPO centred on the engine's μ (bypass): at step 0, before θ has moved, over SPENT of the tokens are already
    outside [1 − ε, 1 + ε] — the same share at learning rate 0.01 and 1 —, where the recomputed anchor clips none.
    (Step 0 alone: one step of each run.)"""
    toy = toy_of(settings)
    first = replace(BYPASS, steps=1)
    small, large, recompute = (train(toy, {"naive": {}}, settings.baseline, config)["naive"]
                               for config in (first, replace(first, lr=1.0), replace(first, update=Update())))
    numbers = {"bypass: clipped share at step 0, lr 0.01": small.clip_share[0],
               "bypass: clipped share at step 0, lr 1": large.clip_share[0],
               "bypass: PPO KL at step 0": small.ppo_kl[0],
               "recompute: clipped share at step 0": recompute.clip_share[0]}
    holds = small.clip_share[0] == large.clip_share[0] > SPENT and recompute.clip_share[0] == 0
    marks = (Mark("training_clip", f"step 0, nothing learnt yet: {small.clip_share[0]:.0%} of tokens clipped", 0,
                  float(small.clip_share[0])),)
    return Evidence({name: float(value) for name, value in numbers.items()}, holds, marks)


STALE = TrainingConfig(steps=30, lr=1.0, optimizer="sgd", mode="expected")


def stale_objectives_part(settings):
    """J after 30 steps at the engine's lags 0 and 16 (``training.staleness``): at lag 16, PPO centred
    on μ is below both the decoupled objective and recompute-without-w."""
    result = staleness(toy_of(settings), settings.baseline, STALE, lags=(LAGS[0], LAGS[-1]))  # the two it quotes
    J = result.J
    numbers = {f"{objective}: J at lag {lag}": J[objective][index] for objective in J
               for index, lag in enumerate(result.lags) if lag in (0, 16)} | {"on_policy: J": result.on_policy}
    holds = J["bypass"][-1] < min(J["decoupled"][-1], J["recompute"][-1])
    last, steps = result.lags[-1], STALE.steps
    marks = (Mark("training_staleness", f"PPO centred on μ at lag {last}: J = {J['bypass'][-1]:.3f} after {steps} "
                                        "steps", steps, J["bypass"][-1], panel="bypass"),
             Mark("training_staleness", f"the decoupled objective at lag {last}: J = {J['decoupled'][-1]:.3f} after "
                                        f"{steps} steps", steps, J["decoupled"][-1], panel="decoupled"))
    return Evidence(numbers, holds, marks)


LENGTHS = (1, 4, 16, 64, 128)
DRAWN_LONGEST = 64     # the longest T the Sequence length tab draws at V = 4 (repeated.COUNT_LIMIT): mark 2 sits there
TRL_CAP = 3.0          # TRL's vllm_importance_sampling_clip_max default at f2cd577 (trl/trainer/grpo_config.py line 937)


def sequence_ratio_falls_with_length(settings):
    """The first position of the toy repeated T times (``repeated.repeated_position``), capped at seq_tis's C (the
    lesson's is TRL's 3): E_μ[min(W, C)] of the product of token ratios never rises with T (over LENGTHS), and falls
    from T = 1 to the longest by more than E_μ[min(ρ_geo, C)] of its geometric mean moves over T = 4 … the longest.
    The marks are at T = 1 and DRAWN_LONGEST, on the tab's chart."""
    toy = toy_of(settings)
    cap = settings.params("seq_tis")["C"]
    found = repeated_position(toy.log_rho[0], toy.mu[0], LENGTHS, cap)
    numbers = {f"E[min(W, {cap:g})] at T = {T}": found[T][0] for T in LENGTHS} \
        | {f"E[min(ρ_geo, {cap:g})] at T = {T}": found[T][1] for T in LENGTHS} \
        | {f"E[log W] at T = {LENGTHS[-1]}": found[LENGTHS[-1]][2]}
    first, last = LENGTHS[0], DRAWN_LONGEST
    capped_W, capped_geo = (np.array([found[T][which] for T in LENGTHS]) for which in (0, 1))
    holds = bool(np.all(np.diff(capped_W) <= 1e-12) and capped_W[0] - capped_W[-1] > np.ptp(capped_geo[1:]))
    marks = (Mark("length_capped", f"E_μ[min(W, {cap:g})] at T = {first}: {found[first][0]:.2f}", first,
                  found[first][0]),
             Mark("length_capped", f"E_μ[min(W, {cap:g})] at T = {last}: {found[last][0]:.2f}", last, found[last][0]),
             Mark("length_capped", f"E_μ[min(ρ_geo, {cap:g})] at T = {last}: {found[last][1]:.2f}", last,
                  found[last][1]))
    return Evidence(numbers, holds, marks)


LESSONS = (
    Lesson("token_mask_collapse",
           "Under heavy mismatch a token mask can train the wrong way, and the training log hides it: "
           "IcePop-style tok_mis (keep ρ_t in [0.5, 5]) ends below where it started at 2 of 30 seeds at "
           "mismatch 1 and at 5 of 30 at mismatch 2 (at mismatch 0.5 at 0 of 30, at T = 4 at 1 of 30), where "
           "on-policy training reaches J above 0.99 at every one. Seed 0 is one of the two at mismatch 1: "
           "tok_mis climbs for about 35 steps, then its mean gradient turns against ∇J (cosine below 0) and "
           "J sinks below its start, while the logged reward E_μ[r] keeps rising for a while and ends five "
           "times above J.",
           controls(("on_policy", "naive", "tok_tis", "tok_mis")), TRAINING_TAB, token_mask_collapses,
           training_view(COLLAPSE, "tok_mis"),
           claim="At 2 of 30 seeds (seed 0 here) tok_mis peaks (1), its gradient turns against ∇J (3) and J sinks "
                 "below its start (2); the log shows a high reward (4).",
           predicate="tok_mis's J after 300 steps below its start, on-policy's above 0.99",
           population=around(1.0, ("T", 4), stated={"setting": 2, "half": 0, "twice": 5, "other": 1})),
    Lesson("full_mask_stalls",
           "A mask that keeps almost no rollout stops training: at mismatch 1 the trust-region mask (ε = "
           "0.5) and k3 rejection (δ = 0.01) each keep under 2 % of the sequences and J moves by less than "
           "0.01 in 100 steps, while on-policy training climbs above 0.9. At half the mismatch trm keeps "
           "more and trains, and this holds at 12 of 30 seeds; at T = 4 at 20 of 30.",
           controls(("on_policy", "naive", "k3_rs", "trm")), TRAINING_TAB, full_masks_stall,
           training_view(STALL, "trm"),
           claim="A mask that keeps almost no rollout stops training: trm and k3_rs stay where they start (1) "
                 "while on-policy training climbs to J ≈ 1 (2).",
           predicate="trm and k3_rs each keep under 2 % of the sequences and move J by under 0.01 in 100 steps; "
                     "on-policy's J ends above 0.9",
           population=around(1.0, ("T", 4), stated={"half": 12, "other": 20})),
    Lesson("recomputed_anchor_never_clips",
           "With π_old recomputed and one update per batch, the PPO ratio r = π_θ/π_old is exactly 1 when "
           "the loss is taken, so the clip never binds, however stale the rollouts: at mismatch 0 with the "
           "engine 8 steps behind, not one token is clipped in 100 steps and the PPO KL is 0, while w = "
           "π_old/μ carries all of the lag (at seed 0 its spread reaches 0.40). Anchor π_old at the policy "
           "that generated the batch instead and the lag moves into r, where the clip sees it (at seed 0 up "
           "to 29 % of tokens clipped), and w is 1 (the complaint of verl #791: with one PPO epoch the clip "
           "ratio does nothing).",
           controls(("on_policy", "naive", "tok_is"), mismatch=0.0, baseline="logged"), TRAINING_TAB, recomputed_anchor_never_clips,
           training_view(LAGGED, "tok_is"),
           claim="Recompute π_old, one update: r ≡ 1, nothing clipped (1) however stale; the lag sits in w (2).",
           predicate="lag 8: recomputed π_old clips nothing and its PPO KL is 0 at every step, the spread of w exceeds "
                     "0.05; the rollout anchor clips over 5 % and its w ≡ 1",
           population=Population((AT_SETTING, Group("at T = 4", (("T", 4),)), Group("at V = 3", (("V", 3),))))),
    Lesson("bypass_spends_the_clip",
           "PPO centred on the engine's μ (bypass mode: π_old = μ) spends its trust region on the engine's "
           "error before the policy moves at all: at mismatch 0.3 over 5 % of the tokens are outside [0.8, "
           "1.2] at step 0 (42 % at seed 0), the same share at learning rate 0.01 as at 1, so their gradient "
           "is clipped away, where a recomputed π_old clips none. At half the mismatch over 5 % are clipped "
           "at 25 of 30 seeds.",
           controls(("on_policy", "naive", "tok_is"), mismatch=0.3, baseline="logged"), TRAINING_TAB, bypass_spends_the_clip,
           training_view(BYPASS, "naive"),
           claim="Bypass: at step 0, before θ moves, a share of the tokens is already clipped (1): the engine's "
                 "error, not learning.",
           predicate="bypass clips over 5 % of tokens at step 0, the same at learning rate 0.01 and 1; the recomputed "
                     "anchor clips none",
           population=around(0.3, ("T", 4), stated={"half": 25})),
    Lesson("stale_objectives_part",
           "As the rollouts grow stale, PPO centred on μ (bypass, AReaL's \"naive PPO\") suffers most: after "
           "30 steps with the engine 16 steps behind it is below both the decoupled objective (π_old "
           "recomputed, w = π_old/μ as a weight) and recomputing without w. At mismatch 0.3 and seed 0, for "
           "example, it falls from J = 0.68 at lag 0 to 0.18 at lag 16, the decoupled objective from 0.86 to "
           "0.52 and recompute-without-w from 0.80 to 0.35: the shape of AReaL's table of naive against "
           "decoupled PPO, here exact.",
           controls(("on_policy", "naive", "tok_is"), mismatch=0.3, baseline="logged"), TRAINING_TAB, stale_objectives_part,
           training_view(STALE, "tok_is", staleness=True),
           claim="Stale rollouts hurt PPO centred on μ most: at lag 16 it is the lowest of the three (1); at seed "
                 "0 the decoupled objective keeps the most (2).",
           predicate="at lag 16, after 30 steps, bypass's J below the decoupled objective's and recompute-without-w's",
           population=around(0.3, ("T", 4))),
    Lesson("sequence_ratio_falls_with_length",
           "A sequence ratio is a product of token ratios, W = ∏_t ρ_t: its mean is 1 at every length, but "
           "its typical value falls as e^{T·E[log ρ]}, so with the toy's first position repeated T times the "
           "mean of W capped at 3 (TRL's sequence_truncate default cap) never rises with T, and falls by "
           "more than the same for the geometric mean ρ_geo = W^{1/T} moves. At seed 0 it falls from 1.00 at "
           "T = 1 to 0.35 at T = 64 and 0.13 at T = 128 while ρ_geo's stays at 0.95 (TRL #5814, where a "
           "capped W deflated the weights and TRL kept the product as the unbiased weight).",
           controls(("on_policy", "naive", "seq_tis", "gspo_geo"), mismatch=0.3, seq_tis__C=TRL_CAP), LENGTH_TAB,
           sequence_ratio_falls_with_length,
           claim="Capped at 3, the mean of W = ∏ρ_t falls with T, at seed 0 from 1.00 at T = 1 (1) to 0.35 at T = "
                 "64 (2); its geometric mean's stays at 0.95 (3).",
           predicate="E_μ[min(W, 3)] never rises over T = 1, 4, 16, 64, 128 and falls by more than E_μ[min(ρ_geo, 3)] "
                     "moves over T = 4 … 128",
           population=around(0.3, ("V", 3))),
)
