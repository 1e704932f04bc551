"""The sampler's four controls and the new view parameters in a link: written only when not the default, read back
to the same Settings, and every bad value explained and replaced."""

import pytest

from toylab.engine.sampler import Sampler
from toylab.state.query import DEFAULTS, make_settings, parse_link, parse_query, to_query, toy_problem


def test_the_sampler_round_trips_through_a_link():
    chosen = make_settings(T=5, V=3, top_p=0.9, top_k=2, temperature=0.7, precision="fp16")
    query = to_query(chosen)
    assert query == {"T": "5", "V": "3", "top_p": "0.9", "top_k": "2", "temperature": "0.7", "precision": "fp16"}
    reopened, notices = parse_query(query)
    assert reopened == chosen and not notices and reopened.sampler == Sampler(0.9, 2, 0.7, "fp16")
    assert to_query(DEFAULTS) == {} and DEFAULTS.sampler.is_default


@pytest.mark.parametrize("query, field, words", [
    ({"top_p": "1.5"}, "top_p", "is outside 0.01 to 1"), ({"top_k": "-1"}, "top_k", "is outside 0 to 8"),
    ({"top_k": "2.5"}, "top_k", "is not an integer"), ({"temperature": "0"}, "temperature", "is outside 0.25 to 4"),
    ({"precision": "BF16"}, "precision", "is not one of none, bf16, fp16"),
    ({"V": "3", "top_k": "4"}, "top_k", "top_k = 4 is above V = 3"),
])
def test_a_bad_sampler_value_falls_back_to_its_default(query, field, words):
    settings, notices = parse_query(query)
    assert getattr(settings, field) == getattr(DEFAULTS, field)
    assert len(notices) == 1 and words in notices[0]


def test_a_sampler_that_leaves_float64_falls_back_to_plain_softmax():
    query = {"T": "4", "mismatch": "2", "seed": "3558", "temperature": "0.25"}
    settings, notices = parse_query(query)
    assert settings.sampler.is_default and settings.mismatch == 2.0
    assert len(notices) == 1 and "reaches e^803" in notices[0] and "plain softmax" in notices[0]
    assert "beyond float64's range" in toy_problem(make_settings(4, 4, 2.0, 3558, temperature=0.25))
    assert toy_problem(make_settings(4, 4, 2.0, 3558, temperature=0.3)) is None


@pytest.mark.parametrize("name, value, tab", [("train_noise", "redrawn", "Training"), ("sweep", "top_p", "Mismatch sweep")])
def test_the_new_view_parameters_are_read_from_a_link(name, value, tab):
    _, view, notices = parse_link({"tab": tab, name: value})
    assert view[name] == value and not notices
