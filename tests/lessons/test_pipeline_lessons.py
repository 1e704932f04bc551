"""The pipeline lessons: their numbers against the dense oracle (which builds μ_s, μ_log and π itself) or a closed
form, the numbers their text states, and each check failing where the statement would not hold."""

from dataclasses import replace

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.analysis.diagnostics import sequence_log_ratio
from toylab.lessons.lesson import settings, toy_of
from toylab.lessons.pipeline import SMOLLM_VOCABULARY, TYPICAL_SEED
from toylab.lessons.population import SEEDS
from toylab.lessons.tour import LESSONS

BY_ID = {lesson.id: lesson for lesson in LESSONS}


def _numbers(lesson_id, **changes):
    chosen = replace(settings(BY_ID[lesson_id]), **changes)
    return chosen, BY_ID[lesson_id].check(chosen)


def _relative_biases(dense, chosen):
    scale = np.linalg.norm(dense.true_grad)
    return {id: dense.moments(id, params, chosen.baseline)[1] / scale
            for id, params in chosen.selection(exact_only=True).items()}


def test_the_lessons_are_in_the_tour_with_their_pipelines():
    ids = [lesson.id for lesson in LESSONS]
    first = ids.index("raw_logprobs_ratio")
    assert ids[first:first + 3] == ["raw_logprobs_ratio", "processed_top_p", "keep_mask"]
    assert [settings(BY_ID[id]).pipeline for id in ("raw_logprobs_ratio", "processed_top_p", "keep_mask")] == [
        "trl_colocate_before_4163", "verl", "slime"]


@pytest.mark.slow                                    # 4 s: dense sums over every sequence of several toys
def test_raw_log_probabilities_against_dense_a_closed_form_and_the_text():
    chosen, evidence = _numbers("raw_logprobs_ratio")
    numbers, text = evidence.numbers, BY_ID["raw_logprobs_ratio"].text
    assert evidence.holds and (chosen.logged, chosen.scored, chosen.mismatch) == ("raw", "temperature", 0.0)
    dense = DenseToy(make_toy(*chosen.toy_key))
    mu_s, ratio = np.exp(dense.log_mu[0]), np.exp(dense.log_pi[0] - dense.log_logged[0])
    first = int(np.argmax(mu_s))
    assert numbers["ratio π_τ/μ_raw of the likeliest first token"] == pytest.approx(ratio[first], rel=1e-10)
    assert numbers["mean first-token ratio E_μs[ρ_1]"] == pytest.approx(mu_s @ ratio, rel=1e-10)
    assert numbers["identity check E_μs[W], six tokens"] == pytest.approx(dense.population()["identity"], rel=1e-10)
    # the LLM-like first position in closed form: p_τ(top) = ½^(1/τ) / (½^(1/τ) + (V − 1)·q^(1/τ)), q = ½/(V − 1)
    q, a = 0.5 / (SMOLLM_VOCABULARY - 1), 1 / chosen.temperature
    top = 0.5**a / (0.5**a + (SMOLLM_VOCABULARY - 1) * q**a)
    assert numbers["LLM-like first position: its probability under the sampler"] == pytest.approx(top, rel=1e-12)
    assert numbers["LLM-like first position: ratio of the likeliest token"] == pytest.approx(top / 0.5, rel=1e-12)
    biases = _relative_biases(dense, chosen)
    for id, bias in biases.items():
        assert numbers[f"rel bias {id}"] == pytest.approx(bias, rel=1e-9, abs=1e-12), id
    assert chosen.seed == TYPICAL_SEED and f"at seed {TYPICAL_SEED} (of seeds 0–29, the one whose mean log W" in text
    for shown in (f"π_τ/μ_raw = {ratio[first]:.2f} (", f"E_μs[W] = {numbers['identity check E_μs[W], six tokens']:.2f}",
                  f"{100 * top:.2f} %", f"ratio {top / 0.5:.4f}", f"sequence IS is {biases['seq_is']:.2f}",
                  f"token IS {biases['tok_is']:.2f}"):
        assert shown in text, shown
    mean_log_W = float(dense.p_sampler @ np.log(dense.W))                # the claim's mark 1, and 2: processed's W
    assert f"log W averages {mean_log_W:.2f} at seed {TYPICAL_SEED} (1), not 0 (2)" in BY_ID["raw_logprobs_ratio"].claim
    assert [mark.x for mark in evidence.marks] == [pytest.approx(mean_log_W, rel=1e-10), 0.0]


def test_the_raw_log_probabilities_seed_is_the_typical_one_its_text_says():
    """Its seed is the one of seeds 0–29 whose mean log W is nearest their average, as the text says."""
    chosen = settings(BY_ID["raw_logprobs_ratio"])
    means = []
    for seed in SEEDS:
        log_W, probability = sequence_log_ratio(toy_of(replace(chosen, seed=seed)))
        means.append(float(probability @ log_W))
    assert int(np.argmin(np.abs(np.array(means) - np.mean(means)))) == TYPICAL_SEED


def test_raw_log_probabilities_fails_with_processed_ones():
    assert not _numbers("raw_logprobs_ratio", pipeline="custom", logged="processed")[1].holds


def test_processed_with_top_p_against_dense_and_the_text():
    chosen, evidence = _numbers("processed_top_p")
    numbers, text = evidence.numbers, BY_ID["processed_top_p"].text
    assert evidence.holds and (chosen.logged, chosen.scored) == ("processed", "temperature")
    dense = DenseToy(make_toy(*chosen.toy_key))
    cut = np.isinf(dense.log_mu)
    kept_mass = np.sum(dense.pi, axis=1, where=~cut)
    ratios = np.where(~cut, np.exp(dense.log_pi - np.where(cut, 0.0, dense.log_logged)), np.nan)
    np.testing.assert_allclose(np.nanmax(ratios, axis=1), kept_mass, rtol=1e-12)
    np.testing.assert_allclose(np.nanmin(ratios, axis=1), kept_mass, rtol=1e-12)
    assert numbers["tokens cut (μ = 0 while π_τ > 0)"] == cut.sum() and np.all(dense.pi[cut] > 0)
    assert numbers["smallest ratio on a kept token"] == pytest.approx(kept_mass.min(), rel=1e-12)
    population = dense.population()
    assert numbers["identity check E_μs[W]"] == pytest.approx(population["identity"], rel=1e-10)
    assert numbers["identity check E_μs[W]"] == pytest.approx(1 - population["unreachable_mass"], rel=1e-10)
    scale = np.linalg.norm(dense.true_grad)
    out_of_reach = np.linalg.norm(dense.true_grad - dense.reachable_gradient(chosen.baseline)) / scale
    assert numbers["bias from what is out of reach"] == pytest.approx(out_of_reach, rel=1e-9)
    biases = _relative_biases(dense, chosen)
    for id, bias in biases.items():
        assert numbers[f"rel bias {id}"] == pytest.approx(bias, rel=1e-9), id
    assert biases["seq_is"] == pytest.approx(out_of_reach, rel=1e-9)
    others = [bias for id, bias in biases.items() if id not in ("seq_is", "seq_tis", "seq_mis")]
    for shown in (f"{cut.sum()} tokens are cut", f"from {kept_mass.min():.3f} to 1",
                  f"E_μs[W] = {population['identity']:.3f}", f"sequence IS's bias is {out_of_reach:.3f}",
                  f"between {min(others):.3f} and {out_of_reach:.3f}"):
        assert shown in text, shown
    lowest = min(biases.values())
    assert f"{out_of_reach:.3f} at seed 0 (1)" in BY_ID["processed_top_p"].claim and f"below {lowest:.3f} (2)" in \
        BY_ID["processed_top_p"].claim
    assert [mark.x for mark in evidence.marks] == [pytest.approx(out_of_reach, rel=1e-9), pytest.approx(lowest, rel=1e-9)]


def test_processed_with_top_p_does_not_apply_without_truncation():
    assert _numbers("processed_top_p", top_p=1.0)[1].holds is None


def test_keep_mask_against_dense_and_the_text():
    chosen, evidence = _numbers("keep_mask")
    numbers, text = evidence.numbers, BY_ID["keep_mask"].text
    assert evidence.holds and (chosen.logged, chosen.scored) == ("processed", "keep_mask")
    dense = DenseToy(make_toy(*chosen.toy_key))
    population = dense.population()
    assert numbers["identity check E_μs[W]"] == pytest.approx(population["identity"], rel=1e-12)
    assert dense.unreachable_mass() == 0
    biases = _relative_biases(dense, chosen)
    assert biases["seq_is"] < 1e-12 and numbers["rel bias seq_is, keep mask"] < 1e-12
    verl = DenseToy(make_toy(*chosen.toy_key[:4], top_p=chosen.top_p, temperature=chosen.temperature,
                             scored="temperature"))
    seq_is = verl.moments("seq_is", {}, chosen.baseline)[1] / np.linalg.norm(verl.true_grad)
    assert numbers["rel bias seq_is, trainer dividing by τ only (verl)"] == pytest.approx(seq_is, rel=1e-9)
    assert numbers["J of the keep-mask π"] == pytest.approx(population["J"], rel=1e-12)
    assert numbers["J of softmax(θ)"] == pytest.approx(population["plain_J"], rel=1e-12)
    assert numbers["objective shift ‖∇J − ∇J_plain‖/‖∇J_plain‖"] == pytest.approx(population["objective_shift"],
                                                                                    rel=1e-9)
    for shown in (f"a bias of {seq_is:.3f}", f"masked π's J is {population['J']:.4f} against {population['plain_J']:.4f}",
                  f"{100 * population['objective_shift']:.0f} % of ‖∇J‖ away"):
        assert shown in text, shown
    assert f"({100 * population['objective_shift']:.0f} % at seed 0)" in BY_ID["keep_mask"].claim
    (mark,) = evidence.marks
    assert mark.x == pytest.approx(biases["seq_is"], abs=1e-12)


def test_keep_mask_fails_with_a_trainer_that_divides_by_tau_alone():
    assert not _numbers("keep_mask", pipeline="custom", scored="temperature")[1].holds
