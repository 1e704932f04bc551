"""The Lessons tab asks for every lesson's evidence on each run: the cache keeps one entry per lesson, so a second
pass over them computes nothing (with fewer entries than lessons, an LRU cache walked in order misses every time)."""

import dataclasses

from toylab.lessons.tour import LESSONS
from toylab_app import tour


def test_every_lesson_s_evidence_is_computed_once_over_two_passes(monkeypatch):
    computed = []

    def counted(lesson):
        def check(settings):
            computed.append(lesson.id)
            return lesson.check(settings)
        return dataclasses.replace(lesson, check=check)

    monkeypatch.setattr(tour, "LESSONS", tuple(counted(lesson) for lesson in LESSONS))
    tour.evidence.clear()
    try:
        for _ in range(2):
            for lesson in LESSONS:
                assert tour.evidence(lesson.id).numbers
        assert sorted(computed) == sorted(lesson.id for lesson in LESSONS)
    finally:
        tour.evidence.clear()
