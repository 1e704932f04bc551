"""The staleness view's frozen population is current: every entry recomputed (slow), and the entries are where the
page opens the view without asking (its defaults, the stale-rollouts lesson's setting)."""

import pytest

from toylab.lessons import training as lessons
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.tour import LESSONS
from toylab.state.query import TRAINING, VIEW_DEFAULTS
from toylab.state.settings import Settings
from toylab.training.staleness_evidence import (
    ENTRIES,
    LEAD_DIGITS,
    PATH,
    as_json,
    compute,
    entry_of,
    frozen,
    read,
)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENTRIES))
def test_the_frozen_population_is_current(name):
    """Recomputed now: the steps to the target exactly, each lead to the file's digits, on_policy's J to 1e-10."""
    now = read(as_json({name: compute(ENTRIES[name])}))[name]
    kept = read(PATH.read_text())[name]
    assert list(now) == list(kept)
    for label in now:
        assert len(now[label]) == len(kept[label]) == 30
        for fresh, old in zip(now[label], kept[label], strict=True):
            assert fresh["steps"] == old["steps"] and fresh["lags"] == old["lags"]
            for objective, leads in fresh["lead"].items():
                assert leads == pytest.approx(old["lead"][objective], abs=2 * 10**-LEAD_DIGITS)
            assert fresh["on_policy"] == pytest.approx(old["on_policy"], abs=1e-10)


def test_the_entries_are_where_the_page_opens_the_view():
    defaults = Settings()
    assert entry_of(defaults.T, defaults.V, defaults.mismatch, defaults.sampler, defaults.baseline, TRAINING,
                    VIEW_DEFAULTS["staleness_draw"], VIEW_DEFAULTS["staleness_cap"]) == "page defaults"
    (lesson,) = [lesson for lesson in LESSONS if lesson.id == "stale_objectives_part"]
    chosen = lesson_settings(lesson)
    assert entry_of(chosen.T, chosen.V, chosen.mismatch, chosen.sampler, chosen.baseline, lessons.STALE, "fixed",
                    None) == "stale rollouts lesson"
    assert entry_of(chosen.T, chosen.V, chosen.mismatch, chosen.sampler, chosen.baseline, lessons.STALE, "uniform",
                    None) is None
    assert set(frozen()) == set(ENTRIES)
