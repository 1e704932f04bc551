"""The pipeline in a link: logged and scored, or a framework's pipeline preset that sets both; written only when not
the default, read back to the same Settings, and a contradiction or a flat objective explained and replaced."""

import itertools

import pytest

from toylab.catalogue.pipelines import LOGGED, PIPELINES, SCORED
from toylab.state.query import DEFAULTS, make_settings, parse_query, to_query


@pytest.mark.parametrize("logged, scored", list(itertools.product(LOGGED, SCORED)))
def test_every_combination_round_trips_through_a_link(logged, scored):
    chosen = make_settings(temperature=0.7, top_p=0.95, logged=logged, scored=scored)
    query = to_query(chosen)
    assert {name: query.get(name) for name in ("logged", "scored")} == {
        "logged": None if logged == DEFAULTS.logged else logged, "scored": None if scored == DEFAULTS.scored else scored}
    reopened, notices = parse_query(query)
    assert reopened == chosen and not notices and reopened.sampler.parameters()["logged"] == logged


@pytest.mark.parametrize("preset", list(PIPELINES))
def test_a_pipeline_preset_writes_only_its_name_and_sets_both_choices(preset):
    chosen = make_settings(temperature=0.6, top_p=0.9, pipeline=preset)
    query = to_query(chosen)
    assert query["pipeline"] == preset and "logged" not in query and "scored" not in query
    reopened, notices = parse_query(query)
    assert reopened == chosen and not notices
    assert (reopened.logged, reopened.scored) == PIPELINES[preset].choices(0.9)


def test_a_link_that_contradicts_its_pipeline_keeps_the_pipeline_with_a_notice():
    settings, notices = parse_query({"pipeline": "skyrl", "logged": "processed", "scored": "temperature"})
    assert (settings.logged, settings.scored, settings.pipeline) == ("raw", "temperature", "skyrl")
    assert len(notices) == 1 and "pipeline = skyrl sets logged = raw" in notices[0] and "ignored" in notices[0]


def test_slime_s_choices_follow_the_top_p():
    assert (parse_query({"pipeline": "slime", "top_p": "0.9"})[0].scored,
            parse_query({"pipeline": "slime"})[0].scored) == ("keep_mask", "temperature")


@pytest.mark.parametrize("query, words", [({"logged": "post"}, "is not one of processed, raw, temperature"),
                                          ({"scored": "mask"}, "is not one of plain, temperature, keep_mask"),
                                          ({"pipeline": "verl2"}, "is not one of the 20 allowed")])
def test_a_bad_pipeline_value_falls_back_to_its_default(query, words):
    settings, notices = parse_query(query)
    assert settings.sampler.is_default and len(notices) == 1 and words in notices[0]


def test_a_flat_scored_objective_falls_back_to_the_default_pipeline():
    """keep_mask with token 0 cut at two of three positions (tests/engine/test_pipeline.py): J does not depend on θ."""
    settings, notices = parse_query({"T": "3", "mismatch": "0.5", "temperature": "0.6", "top_p": "0.8",
                                     "scored": "keep_mask"})
    assert settings.sampler.is_default and settings.T == 3
    assert len(notices) == 1 and "does not depend on θ" in notices[0]
