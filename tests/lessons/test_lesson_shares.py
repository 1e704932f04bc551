"""Every lesson's claim over its population of toys: the shipped tallies (toylab/lessons/shares.json, which the page
shows) are those of the lessons as they are, every claim holds at the share it claims, and a stated share is in the
lesson's text. The fast tier recomputes a few toys a lesson (a counterexample where there is one); the slow tier
recomputes every toy (tests/lessons/test_lesson_shares_recomputed.py)."""

import re
from pathlib import Path

import pytest

from toylab.cli.lessons import with_table
from toylab.lessons.lesson import settings, settings_of
from toylab.lessons.population import AT_SETTING, CLAIMED, SEEDS, Group, Tally, around
from toylab.lessons.shares import claim_tally, holds_at, read, record, shipped, toy_controls, toy_link
from toylab.lessons.tour import LESSONS
from toylab.presentation.lesson_shares import docs_table
from toylab.state.query import parse_link

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = shipped()


def test_every_lesson_of_the_tour_is_shipped_and_nothing_else():
    assert list(SHIPPED) == [lesson.id for lesson in LESSONS]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_population_is_thirty_seeds_at_the_setting_and_its_neighbours(lesson):
    population = lesson.population
    assert tuple(population.seeds) == SEEDS and len(SEEDS) >= 30
    assert population.groups[0] == Group(AT_SETTING.label, (), population.groups[0].stated)
    assert len(population.groups) >= 3                      # the setting and at least two neighbours
    assert len({group.label for group in population.groups}) == len(population.groups)
    for group in population.groups[1:]:
        assert group.changes and all(lesson.controls[name] != value for name, value in group.changes), group


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_claim_is_said_as_the_check_tests_it(lesson):
    """Under the grid and in docs/lessons.md: what the check tests on each toy, in words."""
    assert 20 < len(lesson.predicate) < 250 and lesson.predicate not in lesson.text


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_shipped_tallies_are_of_the_lessons_population(lesson):
    tallies = SHIPPED[lesson.id]
    assert [t.group for t in tallies] == list(lesson.population.groups)
    assert all(t.seeds == lesson.population.seeds for t in tallies)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_every_claim_holds_at_the_share_it_claims(lesson):
    """At CLAIMED (90 %) or more of each group's toys, or at exactly the count the lesson's text states for the
    group, written there as 'k of n'."""
    for tally in SHIPPED[lesson.id]:
        assert tally.met, str(tally)
        if tally.group.stated is not None:
            assert re.search(rf"(?<![\d.]){tally.count} of {tally.applicable}\b", lesson.text), str(tally)
        else:
            assert tally.share >= CLAIMED, str(tally)
        assert tally.applicable >= len(tally.seeds) / 3, str(tally)   # a group holds toys it applies to


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_a_few_toys_recomputed_agree_with_the_shipped_ones(lesson):
    """At the lesson's own setting, the first counterexample (if any) and the first toy of the last neighbour: the
    check gives what is shipped. The whole population is recomputed in the slow tier."""
    tallies = SHIPPED[lesson.id]
    toys = [(tallies[0], lesson.controls["seed"] if lesson.controls["seed"] in SEEDS else SEEDS[0]),
            (tallies[-1], tallies[-1].seeds[0])]
    broken = next(((t, t.broken[0]) for t in tallies if t.broken), None)
    for tally, seed in toys + ([broken] if broken else []):
        assert holds_at(lesson, tally.group, seed) is tally.holds[tally.seeds.index(seed)], (str(tally), seed)


def test_the_lesson_s_own_setting_is_in_its_population_and_holds_there():
    for lesson in LESSONS:
        tally = SHIPPED[lesson.id][0]
        assert settings_of(toy_controls(lesson, tally.group, lesson.controls["seed"])) == settings(lesson)
        assert tally.holds[tally.seeds.index(lesson.controls["seed"])] is True, lesson.id


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_every_toy_s_link_opens_that_toy_in_the_lesson_s_view(lesson):
    for group in lesson.population.groups:
        seed = SEEDS[-1]
        opened, view, notices = parse_link(toy_link(lesson, group, seed))
        assert notices == [] and opened == settings_of(toy_controls(lesson, group, seed))
        assert view["tab"] == lesson.tab


def test_a_tally_counts_holds_breaks_and_toys_it_does_not_apply_to():
    tally = Tally(Group("at twice the mismatch", (("mismatch", 2.0),), stated=2), (0, 1, 2, 3), (True, False, None,
                                                                                                True))
    assert (tally.count, tally.applicable, tally.broken, tally.share) == (2, 3, (1,), 2 / 3)
    assert tally.met and str(tally) == "at twice the mismatch, 2 of 3 (1 not applicable)"
    assert not Tally(Group("x"), (0, 1), (True, False)).met                       # 50 % < CLAIMED, nothing stated
    assert read(record((tally,))) == (tally,)


def test_docs_lessons_md_shows_the_shipped_table():
    """docs/lessons.md's table is written by ``python -m toylab lessons --write``: the shipped tallies, as they are."""
    document = (ROOT / "docs" / "lessons.md").read_text(encoding="utf-8")
    assert with_table(document, docs_table(LESSONS, SHIPPED)) == document


def test_any_claim_is_tallied_over_a_population_around_its_controls():
    """claim_tally, the form other claims use: a predicate of the Settings, evaluated on every toy; None (does not
    apply) where the predicate says so or the page refuses the toy."""
    population = around(1.0, ("T", 17))                           # T = 17 at V = 4: too large for the page
    controls = LESSONS[0].controls
    tallies = claim_tally(lambda s: None if s.seed == 2 else s.seed % 2 == 0 and s.mismatch >= 1, controls,
                          population, seeds=range(4))
    assert [t.holds for t in tallies] == [(True, False, None, False), (False, False, None, False),
                                          (True, False, None, False), (None,) * 4]
    assert [t.group.label for t in tallies] == ["at its setting", "at half the mismatch", "at twice the mismatch",
                                                "at T = 17"]
