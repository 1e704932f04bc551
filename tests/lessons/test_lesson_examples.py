"""The numbers a lesson quotes are one example of its claim, at the setting its button opens (seed 0), and labelled
so: each one here is its check's number at that setting, as the text or the claim writes it. (Their values against
independent computations: test_lessons.py, test_policy_lessons.py, test_sampler_lessons.py, test_pipeline_lessons.py.)
"""

import pytest

from toylab.lessons.lesson import settings
from toylab.lessons.tour import LESSONS

BY_ID = {lesson.id: lesson for lesson in LESSONS}


def example(lesson_id):
    lesson = BY_ID[lesson_id]
    assert settings(lesson).seed == 0 and "seed 0" in lesson.text + lesson.claim, lesson_id
    return lesson, lesson.check(settings(lesson)).numbers


def test_the_best_thresholds():
    lesson, numbers = example("threshold_depends_on_N")
    assert f"C = {numbers['best C at N=4']:.3g} for N = 4 (1), at C = {numbers['best C at N=4096']:.3g} for" \
        in lesson.claim


def test_the_token_mask_collapse_at_seed_0():
    lesson, numbers = example("token_mask_collapse")
    assert numbers["step of the peak"] == 35 and "for about 35 steps" in lesson.text
    assert numbers["first step with cosine < 0"] == 35 and numbers["lowest cosine"] < 0
    assert numbers["J at step 300"] < numbers["J at step 0"]
    assert 5 <= numbers["E_μ[r] at step 300"] / numbers["J at step 300"] < 6 and "five times above J" in lesson.text


def test_the_recomputed_anchor_at_seed_0():
    lesson, numbers = example("recomputed_anchor_never_clips")
    assert f"at seed 0 its spread reaches {numbers['recompute: largest spread of w']:.2f}" in lesson.text
    assert f"at seed 0 up to {numbers['rollout: largest clipped share']:.0%}".replace("%", " %") in lesson.text


def test_bypass_at_seed_0():
    lesson, numbers = example("bypass_spends_the_clip")
    assert f"({numbers['bypass: clipped share at step 0, lr 0.01']:.0%}".replace("%", " %") + " at seed 0)" \
        in lesson.text


def test_the_stale_objectives_at_seed_0():
    lesson, numbers = example("stale_objectives_part")
    J = {(objective, lag): numbers[f"{objective}: J at lag {lag}"] for objective in ("bypass", "decoupled", "recompute")
         for lag in (0, 16)}
    assert f"J = {J['bypass', 0]:.2f} at lag 0 to {J['bypass', 16]:.2f} at lag 16" in lesson.text
    assert f"decoupled objective from {J['decoupled', 0]:.2f} to {J['decoupled', 16]:.2f}" in lesson.text
    assert f"recompute-without-w from {J['recompute', 0]:.2f} to {J['recompute', 16]:.2f}" in lesson.text
    assert J["decoupled", 16] == max(J[objective, 16] for objective in ("bypass", "decoupled", "recompute"))


@pytest.mark.parametrize("where", ["text", "claim"])
def test_the_capped_sequence_ratio_at_seed_0(where):
    lesson, numbers = example("sequence_ratio_falls_with_length")
    W = {T: numbers[f"E[min(W, 3)] at T = {T}"] for T in (1, 64, 128)}
    said = getattr(lesson, where)
    assert f"from {W[1]:.2f} at T = 1" in said and f"to {W[64]:.2f} at T = 64" in said
    assert f"stays at {numbers['E[min(ρ_geo, 3)] at T = 64']:.2f}" in said
    assert where == "claim" or f"{W[128]:.2f} at T = 128" in said
