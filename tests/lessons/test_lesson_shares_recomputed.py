"""Every toy of every lesson's population, recomputed: the tallies the page shows (toylab/lessons/shares.json) are
those of the lessons as they are. When this fails, a lesson, its check or its population changed without its tallies:
``python -m toylab.lessons.shares <lesson id>`` writes them again (then tests/lessons/test_lesson_shares.py checks
the claimed shares, and docs/lessons.md shows them)."""

import pytest

from toylab.lessons.shares import shipped, tally
from toylab.lessons.tour import LESSONS

SHIPPED = shipped()


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_shipped_tallies_are_the_lesson_s_own(lesson):
    for recomputed, shown in zip(tally(lesson), SHIPPED[lesson.id], strict=True):
        changed = [seed for seed, now, then in zip(recomputed.seeds, recomputed.holds, shown.holds, strict=True)
                   if now is not then]
        assert recomputed == shown, f"{lesson.id}, {recomputed}: seeds {changed} changed; shipped {shown}"
