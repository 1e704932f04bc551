"""The lessons: each a plain statement, the setting and tab that show it, and the numbers that prove it.

A lesson's ``controls`` are sidebar values under their session-state keys (T, V, mismatch, seed, est,
baseline, N and "id.param" thresholds); ``settings(lesson)`` is the Settings they make. ``view`` holds the
values of its tab's own controls, under their URL names (the Training tab's). ``check(settings)`` computes
the evidence from the library on that setting: named numbers and whether the statement holds.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from toylab.diagnostics import diagnostics, sequence_chi2
from toylab.length import length_toy
from toylab.moments import baseline_value, exact_moments
from toylab.query import TRAINING_CONTROLS, make_settings
from toylab.recursion import exact_by_recursion, objective_by_recursion
from toylab.sweeps import best_thresholds, threshold_sweep
from toylab.toy import make_toy
from toylab.training import TrainingConfig, train

UNBIASED = 1e-9


@dataclass(frozen=True)
class Evidence:
    numbers: dict        # name → value, as shown under the lesson
    holds: bool


@dataclass(frozen=True)
class Lesson:
    id: str
    text: str
    controls: dict
    tab: str
    check: Callable
    view: dict = field(default_factory=dict)


def settings(lesson):
    """The Settings a lesson's controls make (canonical, as the sidebar would)."""
    controls = dict(lesson.controls)
    thresholds = {tuple(key.split(".")): value for key, value in controls.items() if "." in key}
    return make_settings(controls["T"], controls["V"], controls["mismatch"], controls["seed"], controls["est"],
                         thresholds, controls["baseline"], controls["N"])


def _toy(settings):
    return make_toy(*settings.toy_key)


def weight_mostly_below_one(settings):
    """E_μ[W] = 1 and E_μ[log W] = −KL(μ‖π) < 0, so P_μ(W < 1) > ½."""
    toy = _toy(settings)
    log_W = toy.log_W
    W = np.exp(log_W)
    numbers = {"E_μ[W]": float(toy.p_sampler @ W), "E_μ[log W]": float(toy.p_sampler @ log_W),
               "−KL(μ‖π)": -diagnostics(toy).kl_mu_pi, "P_μ(W < 1)": float(toy.p_sampler @ (W < 1)),
               "largest W": float(W.max())}
    holds = abs(numbers["E_μ[W]"] - 1) < 1e-9 and abs(numbers["E_μ[log W]"] - numbers["−KL(μ‖π)"]) < 1e-9 \
        and numbers["P_μ(W < 1)"] > 0.5
    return Evidence(numbers, holds)


def token_corrections_stay_biased(settings):
    """tok_is and tok_tis are biased at T ≥ 2 although positions are independent; seq_is is not."""
    toy = _toy(settings)
    bias = {id: exact_moments(toy, id, settings.params(id), settings.baseline).rel_bias
            for id in ("tok_is", "tok_tis", "seq_is")}
    numbers = {f"rel bias {id}": value for id, value in bias.items()}
    return Evidence(numbers, bias["tok_is"] > 0.05 and bias["tok_tis"] > 0.05 and bias["seq_is"] < UNBIASED)


LENGTH_EVIDENCE = (16, 32, 64)


def sequence_is_variance_explodes(settings):
    """At T = 16, 32, 64 on the Sequence length tab's toys (``length_toy``, exact by recursion): seq_is
    unbiased, and var(seq_is)/var(on_policy) grows like (1 + χ²_seq)^κ with κ = log ratio / log(1 + χ²_seq)
    between ½ and 3/2."""
    numbers, holds = {}, True
    for T in LENGTH_EVIDENCE:
        toy = length_toy(T, settings.V, settings.mismatch, settings.seed)
        objective = objective_by_recursion(toy)
        seq_is, on_policy = (exact_by_recursion(toy, id, {}, settings.baseline, objective)
                             for id in ("seq_is", "on_policy"))
        ratio, growth = seq_is.var / on_policy.var, 1 + sequence_chi2(toy)
        numbers |= {f"T={T}: rel bias seq_is": seq_is.rel_bias, f"T={T}: var ratio seq_is/on_policy": ratio,
                    f"T={T}: 1 + χ²_seq": growth}
        holds &= seq_is.rel_bias < UNBIASED and 0.5 < np.log(ratio) / np.log(growth) < 1.5
    first, last = (numbers[f"T={T}: var ratio seq_is/on_policy"] for T in (LENGTH_EVIDENCE[0], LENGTH_EVIDENCE[-1]))
    return Evidence(numbers, holds and last > 100 * first)


SMALL_N, LARGE_N = 4, 4096


def best_threshold_depends_on_N(settings):
    """seq_tis's sweep: the lowest C has more bias and less spread than the highest, and the C with the lowest
    RMSE at N = 4 is smaller than at N = 4096."""
    toy = _toy(settings)
    selection = {"seq_tis": settings.params("seq_tis")}
    small, large = (threshold_sweep(toy, selection, settings.baseline, N) for N in (SMALL_N, LARGE_N))
    lowest, highest = small[0], small[-1]
    best_small, best_large = (best_thresholds(rows)["seq_tis"]["threshold"] for rows in (small, large))
    numbers = {f"best C at N={SMALL_N}": best_small, f"best C at N={LARGE_N}": best_large,
               f"rel bias at C={lowest['threshold']:g}": lowest["rel_bias"],
               f"rel bias at C={highest['threshold']:g}": highest["rel_bias"],
               f"rel std at N={SMALL_N}, C={lowest['threshold']:g}": lowest["rel_std"],
               f"rel std at N={SMALL_N}, C={highest['threshold']:g}": highest["rel_std"]}
    holds = best_small < best_large and lowest["rel_bias"] > highest["rel_bias"] \
        and lowest["rel_std"] < highest["rel_std"]
    return Evidence(numbers, holds)


def baseline_shifts_uncorrected_means(settings):
    """mean(b = 0) − mean(b) = b·E_μ[Σ_t c_t s_t]: for naive exactly b·(μ_t − π_t) per row, nonzero under
    mismatch; also for tok_tis (clipped ρ); zero for tok_is and seq_is, since E_μ[ρ_t s_t] = E_π[s_t] = 0."""
    toy = _toy(settings)
    b = baseline_value(toy, settings.baseline)
    shift = {id: exact_moments(toy, id, settings.params(id), "none").mean
             - exact_moments(toy, id, settings.params(id), settings.baseline).mean
             for id in ("naive", "tok_tis", "tok_is", "seq_is")}
    numbers = {"b": b} | {f"‖mean shift‖ {id}": float(np.linalg.norm(value)) for id, value in shift.items()}
    naive_identity = float(np.abs(shift["naive"] - b * (toy.mu - toy.pi)).max())
    numbers["max |naive shift − b(μ − π)|"] = naive_identity
    scale = float(np.linalg.norm(shift["naive"]))
    holds = naive_identity < 1e-12 and scale > 1e-3 and numbers["‖mean shift‖ tok_tis"] > 1e-3 * scale \
        and max(numbers["‖mean shift‖ tok_is"], numbers["‖mean shift‖ seq_is"]) < 1e-12
    return Evidence(numbers, holds)


def logged_reward_is_not_J(settings):
    """E_μ[r] (what a rollout log averages) differs from J = E_π[r] under mismatch."""
    toy = _toy(settings)
    numbers = {"J = E_π[r]": toy.J, "E_μ[r] (logged)": toy.logged_reward}
    return Evidence(numbers, abs(toy.J - toy.logged_reward) > 0.1 * toy.J)


def two_sequence_ratios(settings):
    """W and ρ_geo = W^(1/T) differ: E_μ[W] = 1 but E_μ[ρ_geo] < 1 (Jensen), and log W spreads T times wider."""
    toy = _toy(settings)
    p, log_W = toy.p_sampler, toy.log_W
    spread = float(np.sqrt(p @ (log_W - p @ log_W) ** 2))
    numbers = {"E_μ[W]": float(p @ np.exp(log_W)), "E_μ[ρ_geo]": float(p @ np.exp(log_W / toy.T)),
               "P_μ(W > 2)": float(p @ (log_W > np.log(2))), "P_μ(ρ_geo > 2)": float(p @ (log_W / toy.T > np.log(2))),
               "sd of log W": spread, "sd of log ρ_geo": spread / toy.T}
    holds = abs(numbers["E_μ[W]"] - 1) < 1e-9 and numbers["E_μ[ρ_geo]"] < 1 - 1e-3 \
        and numbers["P_μ(W > 2)"] > 10 * numbers["P_μ(ρ_geo > 2)"]
    return Evidence(numbers, holds)


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
    runs = train(_toy(settings), settings.selection(exact_only=True) | {"on_policy": {}}, settings.baseline, COLLAPSE)
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
    return Evidence({name: float(value) for name, value in numbers.items()}, holds)


STALL = TrainingConfig(steps=100, lr=1.0, optimizer="sgd", mode="expected")


def full_masks_stall(settings):
    """trm and k3_rs at STALL: every sequence masked (exactly), so J does not move at all; on_policy reaches J > 0.99."""
    toy = _toy(settings)
    runs = train(toy, settings.selection(exact_only=True) | {"on_policy": {}}, settings.baseline, STALL)
    numbers = {}
    for id in ("trm", "k3_rs"):
        numbers |= {f"{id}: share of sequences masked": exact_moments(toy, id, settings.params(id)).sequences_affected,
                    f"{id}: largest change of J": float(np.ptp(runs[id].J))}
    numbers[f"on_policy's J at step {STALL.steps}"] = float(runs["on_policy"].J[-1])
    holds = all(numbers[f"{id}: share of sequences masked"] == 1 and numbers[f"{id}: largest change of J"] == 0
                for id in ("trm", "k3_rs")) and numbers[f"on_policy's J at step {STALL.steps}"] > 0.99
    return Evidence(numbers, holds)


def _controls(estimators, mismatch=1.0, T=6, baseline="none", N=64, **thresholds):
    return {"T": T, "V": 4, "mismatch": mismatch, "seed": 0, "est": list(estimators), "baseline": baseline,
            "N": N} | {key.replace("__", "."): value for key, value in thresholds.items()}


LESSONS = (
    Lesson("weight_below_one",
           "The sequence weight W = π(y)/μ(y) averages exactly 1 over the sampler, yet most sequences get "
           "W < 1: E_μ[log W] = −KL(μ‖π) < 0, and a few rare sequences carry huge weights.",
           _controls(("seq_is", "seq_tis")), "Ratios", weight_mostly_below_one),
    Lesson("token_bias",
           "Token-level corrections (tok_is, tok_tis) stay biased even though the positions are independent: "
           "the reward couples the positions, so reweighting each token by its own ρ_t (rather than the "
           "sequence by W) misses the other tokens' mismatch.",
           _controls(("naive", "tok_is", "tok_tis", "seq_is")), "Estimators", token_corrections_stay_biased),
    Lesson("seq_is_variance",
           "Sequence-level IS is unbiased at every length, but its variance grows like "
           "(1 + χ²_t)^T = 1 + χ²_seq: exponentially in T.",
           _controls(("on_policy", "tok_is", "tok_tis", "seq_is"), mismatch=0.5), "Sequence length",
           sequence_is_variance_explodes),
    Lesson("threshold_depends_on_N",
           "Truncation and masking trade bias for variance: a lower threshold adds bias and removes spread. "
           "So the best threshold depends on the batch size N: small batches want aggressive truncation, large "
           "ones a much higher threshold.",
           _controls(("seq_tis", "seq_mis", "tok_tis"), N=SMALL_N), "Threshold sweep", best_threshold_depends_on_N),
    Lesson("baseline_shift",
           "Under mismatch a baseline changes the mean of naive and truncated token-level estimators, because "
           "E_μ[s_t] = μ_t − π_t ≠ 0; it leaves tok_is and seq_is alone, whose weights make E[ρ_t s_t] = 0.",
           _controls(("naive", "tok_is", "tok_tis", "seq_is"), baseline="logged"), "Estimators",
           baseline_shifts_uncorrected_means),
    Lesson("logged_reward",
           "The mean reward a rollout log shows is E_μ[r], the sampler's, not the objective J = E_π[r] "
           "the trainer climbs; under mismatch they differ.",
           _controls(("naive", "seq_is")), "Estimators", logged_reward_is_not_J),
    Lesson("sequence_ratio_names",
           "\"Sequence ratio\" means W = ∏_t ρ_t in verl's and TRL's sequence modes but ρ_geo = W^(1/T) in "
           "GSPO: the same words, very different numbers (E_μ[W] = 1, E_μ[ρ_geo] < 1).",
           _controls(("seq_tis", "geo_rs", "gspo_geo")), "Ratios", two_sequence_ratios),
    Lesson("token_mask_collapse",
           "Under heavy mismatch a token mask can train the wrong way: at mismatch 1, IcePop-style tok_mis (keep "
           "ρ_t in [0.5, 5]) climbs for about 35 steps, then its mean gradient turns against ∇J (cosine below 0) and "
           "J sinks below where it started. Meanwhile the logged reward E_μ[r] keeps rising for a while and ends "
           "five times above J, so the training log hides the collapse.",
           _controls(("on_policy", "naive", "tok_tis", "tok_mis")), "Training", token_mask_collapses,
           training_view(COLLAPSE, "tok_mis")),
    Lesson("full_mask_stalls",
           "A mask that keeps no rollout stops training dead: at mismatch 1 the trust-region mask (ε = 0.5) and k3 "
           "rejection (δ = 0.01) reject every sequence, so their mean gradient is exactly zero and J never moves, "
           "while on-policy training climbs to J ≈ 1.",
           _controls(("on_policy", "naive", "k3_rs", "trm")), "Training", full_masks_stall,
           training_view(STALL, "trm")),
)
