"""The sampler lessons: their numbers against the dense oracle (which builds μ itself), the numbers their text states,
and each check failing where the statement would not hold."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.lessons.lesson import settings
from toylab.lessons.sampler import BELOW, NO_FLOOR, SOME_BELOW, a_correction_below_out_of_reach
from toylab.lessons.shares import claim_tally
from toylab.lessons.tour import LESSONS

DOCS = Path(__file__).resolve().parents[2] / "docs"

BY_ID = {lesson.id: lesson for lesson in LESSONS}


def _numbers(lesson_id, **changes):
    chosen = replace(settings(BY_ID[lesson_id]), **changes)
    return chosen, BY_ID[lesson_id].check(chosen)


def _short(x):
    """7.9e-7, as the text writes it (Python's .1e writes 7.9e-07)."""
    return f"{x:.1e}".replace("e-0", "e-")


def _dense_kl(toy):
    rows = DenseToy(toy).on_support
    return float(-(rows.p_sampler @ np.log(rows.W)))


def test_the_top_p_out_of_reach_lesson_against_dense_and_its_text():
    chosen, evidence = _numbers("top_p_out_of_reach")
    numbers, text = evidence.numbers, BY_ID["top_p_out_of_reach"].text
    dense = DenseToy(make_toy(*chosen.toy_key))
    scale = np.linalg.norm(dense.true_grad)
    out_of_reach = np.linalg.norm(dense.true_grad - dense.reachable_gradient(chosen.baseline)) / scale
    assert numbers["π-mass out of reach"] == pytest.approx(dense.unreachable_mass(), rel=1e-10)
    assert numbers["bias from what is out of reach"] == pytest.approx(out_of_reach, rel=1e-9)
    biases = {}
    for id, params in chosen.selection(exact_only=True).items():
        biases[id] = dense.moments(id, params, chosen.baseline)[1] / scale
        assert numbers[f"rel bias {id}"] == pytest.approx(biases[id], rel=1e-9), id
    assert biases["seq_is"] == pytest.approx(out_of_reach, rel=1e-9)
    others = [bias for id, bias in biases.items() if id != "seq_is"]
    assert f"{100 * numbers['π-mass out of reach']:.1f} %" in text and f"{out_of_reach:.2f} as long" in text
    assert f"between {min(others):.2f} and {max(others):.2f}" in text
    assert a_correction_below_out_of_reach(chosen) is bool(min(others) < (1 - BELOW) * out_of_reach) is True
    docs = " ".join((DOCS / "sampler.md").read_text(encoding="utf-8").split())      # its example, at seed 0
    assert f"it is {out_of_reach:.4f} (seq_is's bias) while tok_is's bias is {biases['tok_is']:.4f} and naive's " \
           f"{biases['naive']:.4f}" in docs


@pytest.mark.slow
def test_out_of_reach_is_no_floor_at_the_share_the_page_states():
    """The Estimators tab's note and docs/sampler.md: some correction has less bias than seq_is (the part out of
    reach) at SOME_BELOW of the toys of the top-p lesson's population, recomputed; the claim does not apply where
    top-p cuts nothing."""
    lesson = BY_ID["top_p_out_of_reach"]
    tallies = claim_tally(a_correction_below_out_of_reach, lesson.controls, lesson.population)
    assert (sum(t.count for t in tallies), sum(t.applicable for t in tallies)) == SOME_BELOW
    assert [t.applicable for t in tallies] == [t.applicable for t in claim_tally(
        lambda s: lesson.check(s).holds, lesson.controls, lesson.population)]       # the lesson's own toys
    said = f"{SOME_BELOW[0]} of the {SOME_BELOW[1]} toys around the top-p lesson's setting"
    assert said in NO_FLOOR and said in " ".join((DOCS / "sampler.md").read_text(encoding="utf-8").split())


def test_the_top_p_lesson_does_not_apply_without_truncation():
    """At top-p 1 nothing is cut: the claim is about what top-p cuts, so it does not apply (None), not 'holds'."""
    assert _numbers("top_p_out_of_reach", top_p=1.0)[1].holds is None


def test_bf16_against_fp16_against_dense_and_its_text():
    chosen, evidence = _numbers("bf16_fp16")
    numbers, text = evidence.numbers, BY_ID["bf16_fp16"].text
    toys = {precision: make_toy(chosen.T, chosen.V, chosen.mismatch, chosen.seed, precision=precision)
            for precision in ("bf16", "fp16")}
    kl = {precision: _dense_kl(toy) for precision, toy in toys.items()}
    assert numbers["KL(μ‖π), bf16"] == pytest.approx(kl["bf16"], rel=1e-6)
    assert numbers["KL(μ‖π), fp16"] == pytest.approx(kl["fp16"], rel=1e-6)
    for precision, toy in toys.items():
        dense = DenseToy(toy)
        bias = dense.moments("naive", {}, chosen.baseline)[1] / np.linalg.norm(dense.true_grad)
        assert numbers[f"rel bias naive, {precision}"] == pytest.approx(bias, rel=1e-8)
    assert f"KL(μ‖π) is {_short(kl['bf16'])} against {_short(kl['fp16'])}" in text
    assert f"{kl['bf16'] / kl['fp16']:.0f}× less" in text
    assert f"{_short(numbers['rel bias naive, bf16'])} against {_short(numbers['rel bias naive, fp16'])}" in text


def test_bf16_against_fp16_fails_where_the_logit_error_dominates():
    """At mismatch 1 the rounding is noise on a large error: the two precisions give nearly the same KL."""
    assert not _numbers("bf16_fp16", mismatch=1.0)[1].holds


def test_the_collapse_needs_a_fixed_error_and_its_text():
    """The example the text quotes (seed 0), and the same toy with b fixed collapsing (lesson 8's check)."""
    chosen, evidence = _numbers("collapse_needs_fixed_error")
    numbers, text = evidence.numbers, BY_ID["collapse_needs_fixed_error"].text
    redrawn = numbers["tok_mis's final J, b redrawn"]
    reached = numbers["step at which it reaches 90% of on_policy's final J, b redrawn"]
    assert f"J = {redrawn:.4f}" in text and f"by step {reached:.0f}" in text
    assert BY_ID["collapse_needs_fixed_error"].view["train_noise"] == "redrawn"
    assert BY_ID["token_mask_collapse"].check(chosen).holds


def test_the_collapse_lesson_fails_where_naive_settles():
    """Without mismatch the redrawn error is zero: naive is on-policy and settles, so the check fails."""
    assert not _numbers("collapse_needs_fixed_error", mismatch=0.0)[1].holds
