"""Lessons about the pipeline's three distributions: what the engine logs as μ and what the trainer scores.

The frameworks' pipelines are ``catalogue.pipelines.PIPELINES``; each lesson opens its setting with one of them.
"""

import numpy as np

from toylab.analysis.diagnostics import sequence_log_ratio
from toylab.engine.moments import exact_moments_many
from toylab.engine.sampler import Sampler
from toylab.engine.toy import Toy, make_toy
from toylab.lessons.lesson import UNBIASED, Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.population import AT_SETTING, Group, Population, around
from toylab.state.query import ESTIMATORS_TAB, RATIOS_TAB

CORRECTIONS = ("naive", "tok_is", "tok_tis", "tok_mis", "seq_is", "seq_tis", "seq_mis", "geo_rs")
SMOLLM_VOCABULARY = 49_152            # HuggingFaceTB/SmolLM-135M-Instruct, the model of trl#4159
CUT = 1e-12                           # π-mass out of reach below this: top-p cut nothing
TRL_CAP = 2.0                         # vllm_importance_sampling_cap's default at trl e5d437e (grpo_config.py line 612)


def llm_first_position(temperature, top=0.5, vocabulary=SMOLLM_VOCABULARY):
    """A one-token toy like an LLM's first position: the likeliest token at raw probability ``top``, the rest of the
    mass spread evenly over the other tokens; mismatch 0, logged raw, scored softmax(θ/τ) (TRL before #4163)."""
    theta = np.full((1, vocabulary), np.log((1 - top) / (vocabulary - 1)))
    theta[0, 0] = np.log(top)
    return Toy(theta, np.zeros_like(theta), 0.0, 0, Sampler(temperature=temperature, logged="raw",
                                                            scored="temperature"))


TYPICAL_SEED = 12       # of seeds 0–29, the one whose E_μs[log W] is nearest their average (a test checks it)
BIASED = 0.05            # "the correction is the error": sequence and token IS biased by over 5 % of ‖∇J‖


def raw_logprobs_ratio(settings):
    """TRL before #4163 (raw log-probabilities, the trainer dividing by τ < 1) at mismatch 0, the claim: the likeliest
    first token's ratio is above 1, and E_μs[W] too (Σ π_τ²/μ_raw ≥ 1 by Cauchy–Schwarz, here by over 1 %); naive
    (which needs no μ) is unbiased while sequence and token IS are biased by over BIASED; with processed
    log-probabilities every ratio is 1 (within 1e-12). The numbers add an LLM-like first position
    (``llm_first_position``): the likeliest token's ratio there, near TRL's cap 2 at τ = 0.6, and how often it is
    drawn."""
    toy = toy_of(settings)
    first = int(np.argmax(toy.mu[0]))
    llm = llm_first_position(settings.temperature)
    processed = make_toy(*settings.toy_key[:4], sampler=Sampler(temperature=settings.temperature, scored="temperature"))
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    log_W, probability = sequence_log_ratio(toy)
    numbers = {"ratio π_τ/μ_raw of the likeliest first token": float(toy.rho[0, first]),
               "mean first-token ratio E_μs[ρ_1]": float(toy.identity_tokens[0]),
               "identity check E_μs[W], six tokens": toy.identity,
               "LLM-like first position: ratio of the likeliest token": float(llm.rho[0, 0]),
               "LLM-like first position: its probability under the sampler": float(llm.mu[0, 0]),
               "LLM-like first position: TRL's printed min(ratio, cap 2)": float(min(llm.rho[0, 0], TRL_CAP)),
               "largest |ratio − 1| with processed log-probabilities": float(np.max(np.abs(processed.rho - 1)))} \
        | {f"rel bias {id}": m.rel_bias for id, m in moments.items()}
    holds = numbers["ratio π_τ/μ_raw of the likeliest first token"] > 1 and toy.identity > 1.01 \
        and moments["naive"].rel_bias < UNBIASED and min(moments["seq_is"].rel_bias, moments["tok_is"].rel_bias) > BIASED \
        and numbers["largest |ratio − 1| with processed log-probabilities"] < 1e-12
    mean_log_W = float(probability @ log_W)
    return Evidence(numbers, holds, (Mark("sequence_W", f"mean log W = {mean_log_W:.2f}: the weights of one model "
                                                        "(mismatch 0) logged before its temperature", mean_log_W),
                                     Mark("sequence_W", "log W = 0: where processed log-probabilities put every "
                                                        "sequence (every ratio exactly 1)", 0.0)))


KEEPS = 0.5              # "every correction inherits it": each keeps over half of seq_is's bias


def processed_with_top_p(settings):
    """verl's pipeline (processed log-probabilities, the trainer dividing by τ) at mismatch 0, the claim where the
    sampler cuts a token (elsewhere it does not apply): every kept token's ratio is its position's kept mass (below
    1, identical within a position), E_μs[W] = 1 − the π-mass out of reach; no correction clips or masks a token;
    seq_is's bias is the out-of-reach part of ∇J (its rest below UNBIASED) and every correction keeps over KEEPS of
    it."""
    toy = toy_of(settings)
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    kept_ratios = [toy.rho[t, toy.kept[t]] for t in range(toy.T)]
    cut = ~toy.kept
    out_of_reach = moments["seq_is"].rel_floor
    biases = {id: m.rel_bias for id, m in moments.items()}
    numbers = {"tokens cut (μ = 0 while π_τ > 0)": int(cut.sum()),
               "π_τ-mass of the cut tokens, largest position": float(np.max(np.sum(toy.pi, axis=1, where=cut))),
               "smallest ratio on a kept token": float(min(r.min() for r in kept_ratios)),
               "largest ratio on a kept token": float(max(r.max() for r in kept_ratios)),
               "identity check E_μs[W]": toy.identity, "π-mass out of reach": toy.unreachable_mass,
               "bias from what is out of reach": out_of_reach, "rest of seq_is's bias": moments["seq_is"].rel_rest,
               "largest share of tokens clipped or masked": max(m.tokens_affected for m in moments.values())} \
        | {f"rel bias {id}": b for id, b in biases.items()}
    holds = None if not cut.any() else bool(np.all(toy.pi[cut] > 0)) \
        and all(np.ptp(r) < 1e-12 and r.max() <= 1 + 1e-12 for r in kept_ratios) \
        and abs(toy.identity - (1 - toy.unreachable_mass)) < 1e-12 \
        and numbers["largest share of tokens clipped or masked"] < 1e-12 \
        and moments["seq_is"].rel_rest < UNBIASED and all(bias > KEEPS * out_of_reach for bias in biases.values())
    lowest = min(biases, key=biases.get)
    marks = (Mark("bias_std", f"seq_is: relative bias {out_of_reach:.3f}, all of it from what top-p cuts", out_of_reach,
                  moments["seq_is"].rel_std(settings.N)),
             Mark("bias_std", f"{lowest}: {biases[lowest]:.3f}, its own error partly against that",
                  biases[lowest], moments[lowest].rel_std(settings.N)))
    return Evidence(numbers, holds, marks)


MOVED = 0.1              # "a different objective": its gradient over 10 % of ‖∇J_plain‖ away from softmax(θ)'s


def keep_mask(settings):
    """slime's pipeline (processed log-probabilities over the nucleus, the trainer keeping the sampler's mask), the
    claim where top-p cuts π-mass (elsewhere the keep mask changes nothing and it does not apply): nothing out of
    reach and E_μs[W] = 1 (within 1e-12); seq_is unbiased for the keep-mask objective; that objective's gradient
    more than MOVED × ‖∇J_plain‖ away from softmax(θ)'s. The numbers add verl's trainer (τ alone) on the same toy."""
    toy = toy_of(settings)
    verl = make_toy(*settings.toy_key[:4], sampler=Sampler(top_p=settings.top_p, temperature=settings.temperature,
                                                           scored="temperature"))
    moments = exact_moments_many(toy, settings.selection(exact_only=True), settings.baseline)
    temperature_only = exact_moments_many(verl, {"seq_is": {}}, settings.baseline)["seq_is"]
    numbers = {"identity check E_μs[W]": toy.identity, "bias from what is out of reach": moments["seq_is"].rel_floor,
               "rel bias seq_is, keep mask": moments["seq_is"].rel_bias,
               "rel bias seq_is, trainer dividing by τ only (verl)": temperature_only.rel_bias,
               "its bias from what is out of reach": temperature_only.rel_floor,
               "J of the keep-mask π": toy.J, "J of softmax(θ/τ)": verl.J, "J of softmax(θ)": toy.plain_J,
               "objective shift ‖∇J − ∇J_plain‖/‖∇J_plain‖": toy.objective_shift} \
        | {f"rel bias {id}": m.rel_bias for id, m in moments.items()} \
        | {f"vs softmax(θ) {id}": m.rel_plain_bias for id, m in moments.items()}
    holds = None if verl.unreachable_mass < CUT else abs(toy.identity - 1) < 1e-12 \
        and moments["seq_is"].rel_floor < 1e-12 and moments["seq_is"].rel_bias < UNBIASED \
        and toy.objective_shift > MOVED
    marks = (Mark("bias_std", "seq_is: unbiased for the keep-mask objective, nothing out of reach", moments["seq_is"].rel_bias,
                  moments["seq_is"].rel_std(settings.N)),)
    return Evidence(numbers, holds, marks)


LESSONS = (
    Lesson("raw_logprobs_ratio",
           "Raw log-probabilities are taken before the temperature: with no logit error (mismatch 0) and τ = "
           "0.6, TRL before #4163 divided the trainer's logits by τ but took vLLM's raw log-probabilities as "
           "μ, so the ratios are not 1 (the likeliest first token's is above 1, and E_μs[W] too), and the "
           "wrong μ makes the correction the error: naive, which needs no μ, is unbiased, while sequence and "
           "token IS are biased by over 5 %, and with processed log-probabilities every ratio is exactly 1. "
           "On this V = 8 toy at seed 12 (of seeds 0–29, the one whose mean log W is nearest their average) "
           "the likeliest first token gets π_τ/μ_raw = 1.41 (E_μs[W] = 1.91 over six tokens; sequence IS is "
           "0.26 off, token IS 0.40), and on a first position like SmolLM's in trl#4159, the likeliest token "
           "at raw probability ½ and the other half spread over its 49,151 other tokens, that token, drawn "
           "99.93 % of the time, gets the ratio 1.9985, the 2 TRL printed (its cap).",
           controls(("naive", "tok_is", "tok_tis", "seq_is"), mismatch=0.0, V=8, seed=TYPICAL_SEED, temperature=0.6,
                    pipeline="trl_colocate_before_4163"),
           RATIOS_TAB, raw_logprobs_ratio,
           claim="One model, no logit error, yet W ≠ 1: with raw log-probabilities as μ at τ = 0.6 (TRL before "
                 "#4163) log W averages 0.36 at seed 12 (1), not 0 (2).",
           predicate="the likeliest first token's ratio above 1, E_μs[W] > 1.01, naive unbiased, seq_is and tok_is "
                     "biased by over 5 %; processed log-probabilities give every ratio 1",
           population=Population((AT_SETTING, Group("at τ = 0.8", (("temperature", 0.8),)), Group("at V = 4", (("V", 4),))))),
    Lesson("processed_top_p",
           "Processed log-probabilities carry the truncation, a trainer that only divides by τ does not: "
           "with verl's pipeline at mismatch 0, top-p 0.9 and τ = 0.8 the sampler cuts tokens the trainer "
           "still scores (there μ = 0, μ/π = 0, and no batch holds them), on every token it keeps the ratio "
           "π_τ/μ is that position's kept mass (as trl#6789 derives), so the weights shrink uniformly, no "
           "correction clips or masks a single token and E_μs[W] is just 1 − the π-mass out of reach, and "
           "sequence IS's bias is exactly ∇J's part out of reach while every other correction keeps over "
           "half of it. At seed 0, for example, 3 tokens are cut, the kept ratios run from 0.909 to 1, "
           "E_μs[W] = 0.772, sequence IS's bias is 0.631 and the others' between 0.553 and 0.631, by an "
           "error of their own that points partly against it.",
           controls(CORRECTIONS, mismatch=0.0, top_p=0.9, temperature=0.8, pipeline="verl"), ESTIMATORS_TAB,
           processed_with_top_p,
           claim="verl at top-p 0.9, no logit error: all of seq_is's bias comes from what top-p cuts, 0.631 at "
                 "seed 0 (1); no correction gets below 0.553 (2).",
           predicate="where top-p cuts a token: kept ratios are the kept mass, E_μs[W] = 1 − the mass out of reach, "
                     "nothing clipped or masked, seq_is's bias is exactly the part out of reach and every correction "
                     "keeps over half of it",
           population=Population((AT_SETTING, Group("at top-p 0.8", (("top_p", 0.8),)), Group("at top-p 0.95", (("top_p", 0.95),)), Group("at T = 4", (("T", 4),))))),
    Lesson("keep_mask",
           "The Keep Sampling Mask (DeepSeek-V3.2; slime's top-p replay) removes the bias of what top-p cuts "
           "by changing the objective: the trainer scores softmax(θ/τ) only on the tokens the sampler kept, "
           "so E_μs[W] = 1, nothing is out of reach and sequence IS is unbiased, for J under the masked π, "
           "whose gradient is over 10 % of ‖∇J‖ away from softmax(θ)'s (a cut token's logit gets no "
           "gradient). At mismatch 0.3, top-p 0.9, τ = 0.8 and seed 0, for example, verl's trainer (τ alone) "
           "leaves sequence IS a bias of 0.907, and the masked π's J is 0.0067 against 0.0554 for "
           "softmax(θ), the mask cutting the rare token 0 the reward needs, with a gradient 83 % of ‖∇J‖ "
           "away.",
           controls(CORRECTIONS, mismatch=0.3, top_p=0.9, temperature=0.8, pipeline="slime"), ESTIMATORS_TAB, keep_mask,
           claim="The keep mask (slime) leaves nothing out of reach: seq_is is unbiased (1), for the masked π's J, "
                 "whose gradient is off softmax(θ)'s (83 % at seed 0).",
           predicate="where top-p cuts π-mass: E_μs[W] = 1, seq_is unbiased for the masked objective, whose gradient "
                     "is over 10 % of ‖∇J‖ away from softmax(θ)'s",
           population=around(0.3, ("T", 4))),
)
