"""The reference's lessons: the counts their texts state, the numbers they quote (seed 0's), and checks that fail
where they should. Each claim over its population (30 seeds at its setting and its neighbours) is tallied by
tests/lessons/test_lesson_shares.py against the shipped shares.json."""

from dataclasses import replace

import pytest

from toylab.lessons import reference
from toylab.lessons.lesson import settings, settings_of
from toylab.lessons.population import SEEDS
from toylab.lessons.shares import shipped
from toylab.presentation.lesson_shares import totals

BY_ID = {lesson.id: lesson for lesson in reference.LESSONS}


def at(lesson, seed, changes):
    return settings_of(dict(lesson.controls) | changes | {"seed": seed})


def test_the_clamp_binds_far_from_the_reference_on_the_stated_share_of_toys():
    """low_var_kl's text states 17 of 30 toys at distance 4, 11 of 30 at T = 4 (the far tokens depend on π and π_ref,
    not on μ): the toys its claim applies to; elsewhere its check says it does not apply."""
    lesson = BY_ID["low_var_kl_clamp"]
    found = [[lesson.check(at(lesson, seed, changes)) for seed in SEEDS] for changes in ({}, {"T": 4})]
    binds = [[evidence.numbers["far: tokens clamped"] > 0 for evidence in group] for group in found]
    assert [sum(group) for group in binds] == [17, 11]
    assert all((evidence.holds is None) is not bound for group, bound_group in zip(found, binds, strict=True)
               for evidence, bound in zip(group, bound_group, strict=True))
    assert "17 of 30" in lesson.text and "17 of 30" in lesson.claim and "at T = 4 on 11 of 30" in lesson.text


def test_the_counts_the_texts_state_are_the_shipped_ones():
    """'on each of the 120 toys of its population' (β), 'at 119 of the 120 toys' (k3's relative error above 0.1,
    part of its claim)."""
    tallies = shipped()
    trade, k3 = BY_ID["beta_trades_j_for_kl"], BY_ID["k3_follows_the_reverse_kl"]
    assert totals(tallies[trade.id]) == (120, 120) and "each of the 120 toys" in trade.text and "120" in trade.claim
    assert totals(tallies[k3.id]) == (119, 120) and "at 119 of the 120 toys" in k3.text


def test_the_quoted_numbers_are_seed_0s():
    numbers = {id: lesson.check(settings(lesson)).numbers for id, lesson in BY_ID.items()}
    k3 = numbers["k3_follows_the_reverse_kl"]["k3: rel bias against ∇KL(π‖π_ref)"]
    assert f"{k3:.2f}" == "0.45" and "0.45" in BY_ID["k3_follows_the_reverse_kl"].text
    ratio = numbers["kl_ratio_needs_the_engine"]
    quoted = [ratio["TRL's π/π_old: rel bias"], ratio["TRL's π/π_old: rel bias at twice the mismatch"]]
    assert [f"{value:.2f}" for value in quoted] == ["0.42", "0.80"]
    clamp = numbers["low_var_kl_clamp"]
    assert f"{100 * clamp['far: change of the mean gradient, relative']:.0f} %" == "3 %"
    trade = numbers["beta_trades_j_for_kl"]
    assert [f"{trade[f'on_policy, β = {beta}: final {name}']:{style}}"
            for beta, name, style in (("0.3", "J", ".2f"), ("0.3", "KL(π‖π_ref)", ".2f"), ("0", "J", ".2f"),
                                      ("0", "KL(π‖π_ref)", ".1f"))] == ["0.34", "0.61", "0.97", "5.1"]


@pytest.mark.parametrize("lesson_id", ["k3_follows_the_reverse_kl", "kl_ratio_needs_the_engine"])
def test_the_claims_fail_where_they_should(lesson_id):
    """At the reference itself (distance 0) there is no gradient to follow; at mismatch 0 the ratio π/π_old is exact."""
    lesson = BY_ID[lesson_id]
    if lesson_id == "kl_ratio_needs_the_engine":
        assert not lesson.check(replace(settings(lesson), mismatch=0.0)).holds
    else:
        chosen = settings(lesson)
        original, reference.NEAR = reference.NEAR, 1e-9
        try:
            assert not lesson.check(chosen).holds
        finally:
            reference.NEAR = original
