"""Lessons about the mismatch as real engines make it: top-p truncation, bf16 against fp16, an error redrawn each step.
"""


import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.engine.moments import exact_moments_many
from toylab.engine.toy import make_toy
from toylab.lessons.lesson import UNBIASED, Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.population import AT_SETTING, Group, Population, around
from toylab.lessons.training import training_view
from toylab.state.query import ESTIMATORS_TAB, MISMATCH_SWEEP_TAB, TRAINING_TAB
from toylab.training.loop import REACHED, TrainingConfig, steps_to_reach, train

TRUNCATED = ("naive", "tok_is", "tok_tis", "tok_mis", "prefix_is", "seq_is", "seq_tis", "seq_mis", "geo_rs")


KEEPS = 0.5              # "no correction removes it": every correction keeps over half of seq_is's bias
CUT = 1e-12              # π-mass out of reach below this: top-p cut nothing, and the claim does not apply


def top_p_out_of_reach(settings):
    """The claim, where the sampler leaves π-mass out of reach (above CUT; elsewhere it does not apply): seq_is's bias
    is exactly the out-of-reach part of ∇J, ‖∇J − ∇J_S‖/‖∇J‖ (its error within reach below UNBIASED), and every correction keeps
    over KEEPS of it. The numbers: that mass and every correction's relative bias."""
    toy = toy_of(settings)
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    out_of_reach = moments["seq_is"].rel_out_of_reach
    biases = {id: m.rel_bias for id, m in moments.items()}
    numbers = {"π-mass out of reach": toy.unreachable_mass, "bias from what is out of reach": out_of_reach,
               "seq_is's error within reach": moments["seq_is"].rel_within_reach} | {f"rel bias {id}": b for id, b in biases.items()}
    holds = None if toy.unreachable_mass < CUT else \
        moments["seq_is"].rel_within_reach < UNBIASED and all(bias > KEEPS * out_of_reach for bias in biases.values())
    lowest = min((id for id in biases if id not in ("seq_is", "naive")), key=biases.get)
    marks = (Mark("bias_std", f"seq_is: relative bias {out_of_reach:.3f}, all of it from what top-p cuts",
                  out_of_reach, moments["seq_is"].rel_std(settings.N)),
             Mark("bias_std", f"{lowest}: the lowest bias of the corrections, {biases[lowest]:.3f}", biases[lowest],
                  moments[lowest].rel_std(settings.N)))
    return Evidence(numbers, holds, marks)


def a_correction_below_out_of_reach(settings):
    """Whether some correction on μ (any selected estimator but seq_is) has a relative bias below ∇J's part out of
    reach, seq_is's whole bias, by more than BELOW of it: what makes that part no floor. None where the sampler cuts
    no π-mass (below CUT)."""
    toy = toy_of(settings)
    if toy.unreachable_mass < CUT:
        return None
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    out_of_reach = moments["seq_is"].rel_out_of_reach
    return any(m.rel_bias < (1 - BELOW) * out_of_reach for id, m in moments.items() if id != "seq_is")


BELOW = 1e-6             # "below": by more than this share of the part out of reach (seq_tis equals seq_is there)
SOME_BELOW = (95, 99)    # a_correction_below_out_of_reach over top_p_out_of_reach's population: holds, applies
NO_FLOOR = ("It is not a floor under the others' bias: an estimator's own error within reach may point against it and "
            "cancel part of it, so a biased correction can show less bias than seq_is. Some correction does at "
            f"{SOME_BELOW[0]} of the {SOME_BELOW[1]} toys around the top-p lesson's setting (seeds 0–29 at top-p 0.8, "
            "0.9 and 0.95, and at T = 4, wherever top-p cuts π-mass): cancellation, not a repair — every correction "
            "there keeps over half of it.")


def bf16_against_fp16(settings):
    """At mismatch 0 on the lesson's toy: bf16's KL(μ‖π) over 10 × fp16's, naive's relative bias over 3 × fp16's
    (fp16 rounds 8× finer, KL goes with the square: about 64×)."""
    toys = {precision: make_toy(settings.T, settings.V, settings.mismatch, settings.seed, precision=precision)
            for precision in ("bf16", "fp16")}
    kl = {precision: diagnostics(toy).kl_mu_pi for precision, toy in toys.items()}
    bias = {precision: exact_moments_many(toy, {"naive": {}}, settings.baseline)["naive"].rel_bias
            for precision, toy in toys.items()}
    numbers = {"KL(μ‖π), bf16": kl["bf16"], "KL(μ‖π), fp16": kl["fp16"], "KL ratio bf16/fp16": kl["bf16"] / kl["fp16"],
               "rel bias naive, bf16": bias["bf16"], "rel bias naive, fp16": bias["fp16"],
               "bias ratio bf16/fp16": bias["bf16"] / bias["fp16"]}
    holds = numbers["KL ratio bf16/fp16"] > 10 and numbers["bias ratio bf16/fp16"] > 3
    marks = tuple(Mark("sampler_divergence", f"logits rounded to {precision}: KL(μ‖π) = {kl[precision]:.2g}, naive's "
                                             f"relative bias {bias[precision]:.2g}", precision, kl[precision])
                  for precision in ("bf16", "fp16"))
    return Evidence(numbers, holds, marks)


NOISE_RUN = TrainingConfig(steps=300, lr=1.0, optimizer="sgd", mode="expected", noise="redrawn")


WANDERING = 200          # from this step on, naive's J with b redrawn is summarised by its range


def collapse_needs_a_fixed_error(settings):
    """The claim, 300 SGD steps with b redrawn every step: tok_mis ends above its start and reaches REACHED ×
    on_policy's final J; uncorrected naive never settles: from step WANDERING on its J spans over 0.05, all below
    on_policy's. (With b fixed, the run of lesson token_mask_collapse.)"""
    runs = train(toy_of(settings), {"on_policy": {}, "tok_mis": settings.params("tok_mis"), "naive": {}},
                 settings.baseline, NOISE_RUN)
    wandering = runs["naive"].J[WANDERING:]
    redrawn = runs["tok_mis"].J
    reached = steps_to_reach(redrawn, REACHED * runs["on_policy"].J[-1])
    numbers = {"J at step 0": redrawn[0], "tok_mis's final J, b redrawn": redrawn[-1],
               f"step at which it reaches {REACHED:.0%} of on_policy's final J, b redrawn": np.nan if reached is None
               else reached,
               f"naive's lowest J from step {WANDERING}, b redrawn": wandering.min(),
               f"naive's highest J from step {WANDERING}, b redrawn": wandering.max()}
    holds = redrawn[-1] > redrawn[0] and reached is not None and np.ptp(wandering) > 0.05 \
        and wandering.max() < runs["on_policy"].J[-1]
    end = NOISE_RUN.steps
    marks = (Mark("training_J", f"b redrawn: tok_mis reaches {REACHED:.0%} of on_policy's final J at step {reached}",
                  reached, float(redrawn[reached])) if reached is not None else None,
             Mark("training_J", f"and ends at J = {redrawn[-1]:.4f}", end, float(redrawn[-1])),
             Mark("training_J", f"uncorrected naive never settles: each fresh b pushes it elsewhere, J between "
                                f"{wandering.min():.2f} and {wandering.max():.2f} from step {WANDERING} on", end,
                  float(runs["naive"].J[-1])))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds,
                    tuple(mark for mark in marks if mark is not None))


LESSONS = (
    Lesson("top_p_out_of_reach",
           "Top-p truncation leaves a bias no correction removes: with no logit error at all (mismatch 0), a "
           "sampler with top-p 0.9 never draws some of π's mass, all of sequence IS's bias is ∇J's part from "
           "that mass, and every other correction keeps over half of it, since reweighting what the sampler "
           "draws cannot give back what it never draws. At seed 0, for example, top-p cuts 9.5 % of π's "
           "mass, yet ∇J's part from it is 0.44 as long as ∇J, because what it cuts is the rare token 0 the "
           "reward needs, and the corrections land between 0.40 and 0.44.",
           controls(TRUNCATED, mismatch=0.0, top_p=0.9), ESTIMATORS_TAB, top_p_out_of_reach,
           claim="Top-p 0.9 leaves a bias no correction removes: all of seq_is's bias comes from what it cuts (1); "
                 "at seed 0 the best correction still has 0.40 (2).",
           predicate="where top-p cuts π-mass: seq_is's bias is exactly the part of ∇J out of reach, every correction "
                     "keeps over half of it",
           population=Population((AT_SETTING, Group("at top-p 0.8", (("top_p", 0.8),)), Group("at top-p 0.95", (("top_p", 0.95),)), Group("at T = 4", (("T", 4),))))),
    Lesson("bf16_fp16",
           "Rounding alone is a mismatch, and bf16 makes more of it than fp16: with no logit error (mismatch "
           "0), logits rounded to bf16 give over 10 times fp16's KL(μ‖π) and over 3 times naive's relative "
           "bias (fp16 keeps 10 mantissa bits to bf16's 7 and rounds 8× finer, and KL, quadratic in the "
           "error, falls about 64×). At seed 0, for example, KL(μ‖π) is 7.9e-7 against 2.7e-8, 29× less, and "
           "naive's relative bias 8.5e-4 against 1.7e-4.",
           controls(("naive", "tok_tis", "seq_is"), mismatch=0.0, precision="bf16"), MISMATCH_SWEEP_TAB, bf16_against_fp16,
           view={"sweep": "precision", "mismatch_panel": "divergence"},
           claim="Rounding alone is a mismatch: at mismatch 0, logits rounded to bf16 (1) give over 10× the "
                 "KL(μ‖π) of fp16 (2), 29× at seed 0.",
           predicate="bf16's KL(μ‖π) over 10 × fp16's, naive's relative bias over 3 × fp16's",
           population=Population((AT_SETTING, Group("at T = 4", (("T", 4),)), Group("at V = 8", (("V", 8),))))),
    Lesson("collapse_needs_fixed_error",
           "The token-mask collapse needs an engine whose error stays put: redraw the logit error b at every "
           "step from the same distribution (a batch-variant or nondeterministic kernel) and tok_mis trains, "
           "ending above where it started and reaching 90 % of on-policy's final J, while uncorrected naive "
           "never settles (at seed 0, mismatch 1, tok_mis reaches 90 % by step 50 and ends at J = 0.9998, "
           "where with b fixed it collapses, lesson 8). With b fixed the mask drops the same tokens step "
           "after step and its bias pushes one way.",
           controls(("on_policy", "naive", "tok_tis", "tok_mis")), TRAINING_TAB, collapse_needs_a_fixed_error,
           training_view(NOISE_RUN, "tok_mis"),
           claim="The collapse needs a fixed engine error: with b redrawn every step tok_mis reaches 90 % of on-policy's "
                 "J (1) and ends near 1 (2); naive wanders (3).",
           predicate="b redrawn each step: tok_mis ends above its start and reaches 90 % of on-policy's final J; "
                     "naive's J spans over 0.05 from step 200, below on-policy's",
           population=around(1.0, ("T", 4))),
)
