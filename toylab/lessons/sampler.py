"""Lessons about the mismatch as real engines make it: top-p truncation, bf16 against fp16, an error redrawn each step.
"""

from dataclasses import replace

import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.engine.moments import exact_moments_many
from toylab.engine.toy import make_toy
from toylab.lessons.lesson import OUT_OF_REACH, UNBIASED, Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.training import training_view
from toylab.state.query import ESTIMATORS_TAB, MISMATCH_SWEEP_TAB, TRAINING_TAB
from toylab.training.loop import REACHED, TrainingConfig, steps_to_reach, train

TRUNCATED = ("naive", "tok_is", "tok_tis", "tok_mis", "prefix_is", "seq_is", "seq_tis", "seq_mis", "geo_rs")


def top_p_floor(settings):
    """At mismatch 0 and top-p 0.9: the π-mass out of reach is below 0.15 while ∇J's part out of reach,
    ‖∇J − ∇J_S‖/‖∇J‖, is above 0.3; seq_is's bias is that part (its error within reach below UNBIASED); every other
    correction's bias is within 0.05 of it."""
    toy = toy_of(settings)
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    out_of_reach = moments["seq_is"].rel_out_of_reach
    biases = {id: m.rel_bias for id, m in moments.items()}
    numbers = {"π-mass out of reach": toy.unreachable_mass, OUT_OF_REACH: out_of_reach,
               "seq_is's error within reach": moments["seq_is"].rel_within_reach} | {f"rel bias {id}": b for id, b in biases.items()}
    holds = toy.unreachable_mass < 0.15 and out_of_reach > 0.3 and moments["seq_is"].rel_within_reach < UNBIASED \
        and all(abs(bias - out_of_reach) < 0.05 for bias in biases.values())
    lowest = min((id for id in biases if id not in ("seq_is", "naive")), key=biases.get)
    marks = (Mark("bias_std", f"seq_is: relative bias {out_of_reach:.3f}, all of it ∇J's part out of reach",
                  out_of_reach, moments["seq_is"].rel_std(settings.N)),
             Mark("bias_std", f"{lowest}: the lowest bias of the corrections, {biases[lowest]:.3f}", biases[lowest],
                  moments[lowest].rel_std(settings.N)))
    return Evidence(numbers, holds, marks)


SEEDS = range(20)


def bf16_against_fp16(settings):
    """At mismatch 0 on the lesson's toy: bf16's KL(μ‖π) over 10 × fp16's, naive's relative bias over 3 × fp16's;
    over seeds 0–19 the geometric mean of the KL ratio lies between 32 and 128 (fp16 rounds 8× finer, KL goes
    with the square: 64)."""
    toys = {precision: make_toy(settings.T, settings.V, settings.mismatch, settings.seed, precision=precision)
            for precision in ("bf16", "fp16")}
    kl = {precision: diagnostics(toy).kl_mu_pi for precision, toy in toys.items()}
    bias = {precision: exact_moments_many(toy, {"naive": {}}, settings.baseline)["naive"].rel_bias
            for precision, toy in toys.items()}
    ratios = [diagnostics(make_toy(settings.T, settings.V, settings.mismatch, seed, precision="bf16")).kl_mu_pi
              / diagnostics(make_toy(settings.T, settings.V, settings.mismatch, seed, precision="fp16")).kl_mu_pi
              for seed in SEEDS]
    numbers = {"KL(μ‖π), bf16": kl["bf16"], "KL(μ‖π), fp16": kl["fp16"], "KL ratio bf16/fp16": kl["bf16"] / kl["fp16"],
               "rel bias naive, bf16": bias["bf16"], "rel bias naive, fp16": bias["fp16"],
               "bias ratio bf16/fp16": bias["bf16"] / bias["fp16"],
               "KL ratio, geometric mean over seeds 0–19": float(np.exp(np.mean(np.log(ratios))))}
    holds = numbers["KL ratio bf16/fp16"] > 10 and numbers["bias ratio bf16/fp16"] > 3 \
        and 32 < numbers["KL ratio, geometric mean over seeds 0–19"] < 128
    marks = tuple(Mark("sampler_divergence", f"logits rounded to {precision}: KL(μ‖π) = {kl[precision]:.2g}, naive's "
                                             f"relative bias {bias[precision]:.2g}", precision, kl[precision])
                  for precision in ("bf16", "fp16"))
    return Evidence(numbers, holds, marks)


NOISE_RUN = TrainingConfig(steps=300, lr=1.0, optimizer="sgd", mode="expected", noise="redrawn")


WANDERING = 200          # from this step on, naive's J with b redrawn is summarised by its range


def collapse_needs_a_fixed_error(settings):
    """tok_mis at mismatch 1, 300 SGD steps: with b fixed J ends below its start (under 0.05); with b redrawn every
    step J ends above 0.99 and reaches REACHED × on_policy's final J; at mismatch 0.7 with b fixed it ends above 0.99.
    Uncorrected naive, b redrawn, never settles: from step WANDERING on its J spans over 0.05, all below on_policy's."""
    selection = {"on_policy": {}, "tok_mis": settings.params("tok_mis")}
    fixed_run = replace(NOISE_RUN, noise="fixed")
    runs = {"fixed": train(toy_of(settings), selection, settings.baseline, fixed_run),
            "redrawn": train(toy_of(settings), selection | {"naive": {}}, settings.baseline, NOISE_RUN)}
    wandering = runs["redrawn"]["naive"].J[WANDERING:]
    milder = train(make_toy(settings.T, settings.V, 0.7, settings.seed), selection, settings.baseline, fixed_run)
    target = REACHED * runs["redrawn"]["on_policy"].J[-1]
    reached = steps_to_reach(runs["redrawn"]["tok_mis"].J, target)
    numbers = {"J at step 0": runs["fixed"]["tok_mis"].J[0],
               "tok_mis's final J, b fixed": runs["fixed"]["tok_mis"].J[-1],
               "tok_mis's final J, b redrawn": runs["redrawn"]["tok_mis"].J[-1],
               f"step at which it reaches {REACHED:.0%} of on_policy's final J, b redrawn": np.nan if reached is None
               else reached,
               "tok_mis's final J at mismatch 0.7, b fixed": milder["tok_mis"].J[-1],
               f"naive's lowest J from step {WANDERING}, b redrawn": wandering.min(),
               f"naive's highest J from step {WANDERING}, b redrawn": wandering.max()}
    holds = runs["fixed"]["tok_mis"].J[-1] < min(0.05, runs["fixed"]["tok_mis"].J[0]) \
        and runs["redrawn"]["tok_mis"].J[-1] > 0.99 and reached is not None and milder["tok_mis"].J[-1] > 0.99 \
        and np.ptp(wandering) > 0.05 and wandering.max() < runs["redrawn"]["on_policy"].J[-1]
    redrawn, end = runs["redrawn"]["tok_mis"].J, NOISE_RUN.steps
    marks = (Mark("training_J", f"b redrawn: tok_mis reaches {REACHED:.0%} of on_policy's final J at step {reached}",
                  reached, float(redrawn[reached])) if reached is not None else None,
             Mark("training_J", f"and ends at J = {redrawn[-1]:.4f}; with b fixed it sank to "
                                f"{runs['fixed']['tok_mis'].J[-1]:.3f}", end, float(redrawn[-1])),
             Mark("training_J", f"uncorrected naive never settles: each fresh b pushes it elsewhere, J between "
                                f"{wandering.min():.2f} and {wandering.max():.2f} from step {WANDERING} on", end,
                  float(runs["redrawn"]["naive"].J[-1])))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds,
                    tuple(mark for mark in marks if mark is not None))


LESSONS = (
    Lesson("top_p_floor",
           "Top-p truncation is a bias no correction removes: with no logit error at all (mismatch 0), a sampler with "
           "top-p 0.9 never draws 9.5 % of π's mass, yet ∇J's part from that mass is 0.44 as long as ∇J (out of "
           "reach), because what it cuts is the rare token 0 the reward needs. Sequence IS, unbiased without "
           "truncation, now has exactly that bias and the other corrections land between 0.40 and 0.44: reweighting "
           "what the sampler draws cannot give back what it never draws.",
           controls(TRUNCATED, mismatch=0.0, top_p=0.9), ESTIMATORS_TAB, top_p_floor,
           claim="Top-p 0.9 leaves a bias no correction removes: all of seq_is's bias is ∇J's part out of reach (1), and "
                 "the best correction still has 0.40 (2)."),
    Lesson("bf16_fp16",
           "Rounding alone is a mismatch, and bf16 makes more of it than fp16: with no logit error (mismatch 0), "
           "logits rounded to bf16 give KL(μ‖π) = 7.9e-7 on the default toy, to fp16 2.7e-8, 29× less (fp16 keeps 10 "
           "mantissa bits to bf16's 7 and rounds 8× finer, and KL, quadratic in the error, falls about 64×: 71× on "
           "average over seeds 0–19). naive's relative bias is 8.5e-4 against 1.7e-4.",
           controls(("naive", "tok_tis", "seq_is"), mismatch=0.0, precision="bf16"), MISMATCH_SWEEP_TAB, bf16_against_fp16,
           view={"sweep": "precision", "mismatch_panel": "divergence"},
           claim="Rounding alone is a mismatch: at mismatch 0, logits rounded to bf16 (1) give 29× the KL(μ‖π) of fp16 "
                 "(2)."),
    Lesson("collapse_needs_fixed_error",
           "The token-mask collapse needs an engine whose error stays put: redraw the logit error b at every step from "
           "the same distribution (a batch-variant or nondeterministic kernel) and at the same mismatch 1 tok_mis "
           "climbs to J = 0.9998, reaching 90 % of on_policy's final J by step 50, instead of sinking to 0.031. With b "
           "fixed the mask drops the same tokens step after step and its bias pushes one way; at mismatch 0.7 even a "
           "fixed b does not collapse it (J = 0.9993).",
           controls(("on_policy", "naive", "tok_tis", "tok_mis")), TRAINING_TAB, collapse_needs_a_fixed_error,
           training_view(NOISE_RUN, "tok_mis"),
           claim="The collapse needs a fixed engine error: with b redrawn every step tok_mis reaches 90 % of on-policy's "
                 "J (1) and ends near 1 (2); naive wanders (3)."),
)
