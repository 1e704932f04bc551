"""The lessons about routing replay and version switches: the counts the replay lesson's text states for the parts
that hold only sometimes, and where its claim does not apply. Each claim over its population (30 seeds at its setting
and its neighbours) is tallied by tests/lessons/test_lesson_shares.py against the shipped shares.json."""

import pytest

from toylab.lessons import hidden
from toylab.lessons.lesson import settings_of
from toylab.lessons.population import SEEDS

BY_ID = {lesson.id: lesson for lesson in hidden.LESSONS}


def at(lesson_id, seed):
    """The lesson's Settings at ``seed``."""
    return settings_of(dict(BY_ID[lesson_id].controls) | {"seed": seed})


@pytest.mark.slow
def test_what_replay_buys_only_sometimes_is_counted_as_the_lesson_says():
    """'a smaller KL and a smaller spread of sequence IS (at 25 and 21 of the 29 toys here), and a mean nearer the
    served policy's gradient (29 of 29)': counted over the setting's 30 seeds, those where some decision flips."""
    parts = [hidden.sometimes_of_replay(at("replay_trades_unbiasedness", seed)) for seed in SEEDS
             if BY_ID["replay_trades_unbiasedness"].check(at("replay_trades_unbiasedness", seed)).holds is not None]
    assert len(parts) == 29
    assert [sum(part[index] for part in parts) for index in range(3)] == [25, 21, 29]


def test_the_claims_do_not_apply_where_nothing_flips():
    """A mixture whose router error never changes a routing is the dense toy: no claim about replay there."""
    found = [BY_ID["replay_trades_unbiasedness"].check(at("replay_trades_unbiasedness", seed)) for seed in range(30)]
    assert any(evidence.holds is None for evidence in found)
    assert all(evidence.numbers["sequences flipped"] == 0 for evidence in found if evidence.holds is None)
