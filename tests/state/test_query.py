"""URL query ↔ Settings: round trips, per-control fallbacks with notices, the size limit."""

import pytest
from messages import says

from toylab.state.query import DEFAULTS, PAGE_SIZE_LIMIT, make_settings, parse_query, size_problem, to_query
from toylab.state.settings import Settings


def test_empty_query_gives_defaults_and_no_notices():
    assert parse_query({}) == (Settings(), [])
    assert to_query(Settings()) == {}


def test_shared_link_round_trips():
    settings = make_settings(T=10, V=3, mismatch=0.35, seed=42, estimators=("seq_is", "naive", "tok_tis", "grpo"),
                             thresholds={("tok_tis", "C"): 3.5, ("grpo", "weight"): "seq_tis"},
                             baseline="logged", N=1000)
    query = to_query(settings)
    assert query == {"T": "10", "V": "3", "mismatch": "0.35", "seed": "42", "N": "1000", "baseline": "logged",
                     "est": "naive,tok_tis,seq_is,grpo", "tok_tis.C": "3.5", "grpo.weight": "seq_tis"}
    assert parse_query(query) == (settings, [])


def test_repeated_parameters_use_the_last_with_a_notice():
    settings, notices = parse_query({"T": ["3", "5"], "N": ["10"]})
    assert (settings.T, settings.N) == (5, 10)
    assert len(notices) == 1 and says(notices[0], "'T'", "more than once", "last value")


def test_est_accepts_spaces():
    settings, notices = parse_query({"est": " naive , seq_is "})
    assert (settings.estimators, notices) == (("naive", "seq_is"), [])


@pytest.mark.parametrize("name, raw", [
    ("T", "abc"), ("T", "0"), ("T", "17"), ("T", "6.5"), ("V", "1"), ("V", "9"), ("V", ""),
    ("mismatch", "-0.1"), ("mismatch", "2.5"), ("mismatch", "nan"), ("mismatch", "inf"), ("mismatch", "x"),
    ("seed", "-1"), ("seed", "10001"), ("seed", "1e9"), ("N", "0"), ("N", "100001"), ("N", "ten"),
    ("baseline", "zero"), ("est", "nothing,known"),
])
def test_malformed_value_falls_back_to_that_default_only(name, raw):
    settings, notices = parse_query({name: raw, "seed": "7"} if name != "seed" else {name: raw, "N": "7"})
    field = "estimators" if name == "est" else name
    assert getattr(settings, field) == getattr(DEFAULTS, field)
    kept = ("seed", 7) if name != "seed" else ("N", 7)
    assert getattr(settings, kept[0]) == kept[1]                 # the other control is untouched
    assert len(notices) == 1 and name in notices[0] and repr(raw) in notices[0]


def test_valid_boundaries_are_accepted():
    settings, notices = parse_query({"T": "1", "V": "8", "mismatch": "2", "seed": "10000", "N": "100000"})
    assert notices == [] and (settings.T, settings.V, settings.mismatch, settings.seed, settings.N) == \
        (1, 8, 2.0, 10000, 100000)


def test_unknown_estimators_are_dropped_with_a_notice():
    settings, notices = parse_query({"est": "naive,bogus"})
    assert settings.estimators == ("naive",)
    assert len(notices) == 1 and "bogus" in notices[0]


def test_empty_estimator_list_is_a_valid_view():
    assert parse_query({"est": ""}) == (make_settings(estimators=()), [])
    assert to_query(make_settings(estimators=()))["est"] == ""


@pytest.mark.parametrize("key, raw, words", [
    ("tok_tis.C", "0.5", "outside"), ("tok_tis.C", "big", "number"), ("seq_is.C", "3", "no such"),
    ("nope.C", "3", "no such"), ("k3_rs.delta", "1", "not among"), ("grpo.weight", "on_policy", "exact"),
])
def test_bad_thresholds_fall_back_with_a_notice(key, raw, words):
    settings, notices = parse_query({"est": "tok_tis,seq_is,grpo", key: raw})
    assert settings.thresholds == ()
    assert len(notices) == 1 and key in notices[0] and words in notices[0]


def test_good_threshold_is_used():
    settings, _ = parse_query({"est": "tok_tis", "tok_tis.C": "4"})
    assert settings.params("tok_tis") == {"C": 4.0}


def test_over_limit_toy_falls_back_with_a_suggestion():
    settings, notices = parse_query({"T": "12", "V": "4", "mismatch": "0.5"})
    assert (settings.T, settings.V, settings.mismatch) == (DEFAULTS.T, DEFAULTS.V, 0.5)
    assert len(notices) == 1
    assert "16,777,216" in notices[0] and "T ≤ 11 at V = 4" in notices[0] and "V ≤ 3 at T = 12" in notices[0]


@pytest.mark.parametrize("T, V", [(11, 4), (22, 2), (7, 8), (1, 8)])
def test_largest_allowed_toys_have_no_problem(T, V):
    assert V**T <= PAGE_SIZE_LIMIT and size_problem(T, V) is None


def test_size_problem_suggests_only_what_exists():
    message = size_problem(16, 8)
    assert "T ≤ 7 at V = 8" in message and "V ≤ 2 at T = 16" in message
    assert "smaller vocabulary" not in size_problem(23, 2)


def test_unknown_parameters_are_reported_but_the_tab_is_not():
    _, notices = parse_query({"zzz": "1", "tab": "Ratios"})
    assert notices == ["Unknown URL parameter 'zzz' ignored."]


def test_make_settings_is_canonical():
    a = make_settings(estimators=("seq_is", "naive", "tok_tis"), thresholds={("tok_tis", "C"): 2.0,
                                                                           ("seq_tis", "C"): 5.0})
    b = make_settings(estimators=("naive", "tok_tis", "seq_is"), mismatch=0.30000000000000004)
    assert a == b and a.estimators == ("naive", "tok_tis", "seq_is") and a.thresholds == ()


def test_presets_thresholds_and_aggregation_round_trip():
    settings = make_settings(estimators=("trl:sequence_mask", "naive", "verl:decoupled_geo_rs", "rs"),
                             thresholds={("verl:decoupled_geo_rs", "rs_threshold"): "0.8_1.1",
                                         ("trl:sequence_mask", "clip_min"): 0.5, ("rs", "scope"): "seq_max"},
                             aggregation="token-mean")
    query = to_query(settings)
    assert query == {"est": "naive,rs,verl:decoupled_geo_rs,trl:sequence_mask", "agg": "token-mean",
                     "rs.scope": "seq_max", "verl:decoupled_geo_rs.rs_threshold": "0.8_1.1",
                     "trl:sequence_mask.clip_min": "0.5"}
    assert parse_query(query) == (settings, [])
    assert settings.params("verl:decoupled_geo_rs") == {"rs_threshold": "0.8_1.1"}


@pytest.mark.parametrize("query, words", [
    ({"agg": "mean"}, "agg = 'mean'"),
    ({"est": "verl:decoupled_geo_rs", "verl:decoupled_geo_rs.rs_threshold": "0.8_x"}, "not a number"),
    ({"est": "rs", "rs.statistic": "k9"}, "must be one of"),
    ({"est": "trl:token_mask", "trl:token_mask.clip_min": "0.9", "trl:token_mask.clip_max": "0.5"}, "above"),
])
def test_bad_preset_and_aggregation_values_fall_back_with_a_notice(query, words):
    settings, notices = parse_query(query)
    assert len(notices) == 1 and words in notices[0]
    assert settings.aggregation == DEFAULTS.aggregation and settings.thresholds == ()


def test_a_threshold_the_framework_refuses_is_a_problem_not_a_traceback():
    """The page stops with this message when a typed threshold is one the preset's framework refuses."""
    from toylab.state.query import threshold_problem
    good = make_settings(estimators=("naive", "areal:token_mask"))
    bad = make_settings(estimators=("naive", "areal:token_mask"), thresholds={("areal:token_mask", "upper"): 0.8})
    assert threshold_problem(good) is None
    assert "ratio metric" in threshold_problem(bad)
