"""Property-based tests (hypothesis, derandomized: the same examples on every run) of the two doors user input
comes through: any link gives Settings and short notices, never an exception; any argument list gives exit 0
with finite output, or exit 2 with one line on stderr.

Toy sizes are capped through the strategies (T ≤ 5, V ≤ 4 when valid), so every passing example is quick.
"""

import contextlib
import io
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toylab.catalogue.estimators import BASELINES, ESTIMATORS
from toylab.cli.main import main
from toylab.state.query import (
    CONTROL_NAMES,
    INTEGER_RANGES,
    MISMATCH_RANGE,
    PAGE_SIZE_LIMIT,
    TAB_LABELS,
    VIEW_PARAMETERS,
    parse_link,
    to_query,
    view_query,
)
from toylab.text import QUOTE_LIMIT

NOTICE_LIMIT = 600
PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                    suppress_health_check=[HealthCheck.too_slow])
THRESHOLD_KEYS = [f"{id}.{name}" for id, estimator in ESTIMATORS.items() for name in estimator.params]

numbers = st.one_of(st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["1e9", "1e308", "-0", "nan", "inf", "", " 3 ", "1_0", "0x10", "9" * 500]))
words = st.one_of(st.text(max_size=60), st.sampled_from([*BASELINES, *ESTIMATORS, *TAB_LABELS, "true", "TRUE",
                                                         "maybe", ",".join(ESTIMATORS), "naive,bogus", "x" * 5000]))
values = st.one_of(numbers, words)
names = st.one_of(st.sampled_from([*CONTROL_NAMES, *VIEW_PARAMETERS, *THRESHOLD_KEYS, "nope.C", "tok_tis.D"]),
                  st.text(min_size=1, max_size=60))
queries = st.dictionaries(names, st.one_of(values, st.lists(values, max_size=3)), max_size=12)


@PROPERTY
@given(queries)
def test_any_link_gives_settings_and_short_notices(query):
    settings_, view, notices = parse_link(query)
    for name, (low, high) in INTEGER_RANGES.items():
        assert low <= getattr(settings_, name) <= high
    assert MISMATCH_RANGE[0] <= settings_.mismatch <= MISMATCH_RANGE[1] and math.copysign(1, settings_.mismatch) == 1
    assert settings_.V**settings_.T <= PAGE_SIZE_LIMIT and settings_.baseline in BASELINES
    assert all(id in ESTIMATORS for id in settings_.estimators)
    for id in settings_.estimators:
        settings_.params(id)                                   # every threshold within its range
    assert view["tab"] in TAB_LABELS and isinstance(view["ratio_panels"], bool)
    assert all(isinstance(notice, str) and len(notice) <= NOTICE_LIMIT for notice in notices)
    assert len(notices) <= 30
    shown = {**to_query(settings_), **view_query(view)}                  # the cleaned address opens the same view
    reopened_settings, reopened_view, reopened_notices = parse_link(shown)
    assert (reopened_settings, reopened_notices) == (settings_, [])
    assert visible(reopened_view) == visible(view)


def visible(view):
    """The view parameters of every tab and of the open one: a closed tab's values live in session state, not the
    address (``query.view_query``)."""
    return {name: value for name, value in view.items() if VIEW_PARAMETERS[name].tab in (None, view["tab"])}


def test_quoting_keeps_notices_short():
    _, _, notices = parse_link({"T": "7" * 10_000})
    assert len(notices) == 1 and "7" * (QUOTE_LIMIT + 1) not in notices[0]


small_integers = st.one_of(st.integers(0, 5).map(str), numbers)
options = st.one_of(
    st.tuples(st.just("--T"), small_integers), st.tuples(st.just("--V"), st.one_of(st.integers(1, 4).map(str), numbers)),
    st.tuples(st.just("--mismatch"), numbers), st.tuples(st.just("--seed"), numbers),
    st.tuples(st.just("--N"), numbers), st.tuples(st.just("--baseline"), words),
    st.tuples(st.just("--set"), st.one_of(st.builds("{}={}".format, st.sampled_from(THRESHOLD_KEYS), numbers), words)),
    st.tuples(st.sampled_from(["--json", "--j", "--s", "--", "-x", "--T=3", "--mismatch=-1"])),
    st.tuples(words),
)
argument_lists = st.lists(options, max_size=6).map(lambda groups: [item for group in groups for item in group])


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
    return code or 0, out.getvalue(), err.getvalue()


@PROPERTY
@given(argument_lists)
def test_any_argument_list_gives_finite_output_or_one_error_line(argv):
    code, out, err = run(argv)
    if code == 0:
        assert err == ""
        if out.startswith("{"):
            json.loads(out, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))   # no NaN/Infinity
        else:
            assert not {"nan", "inf", "-inf"} & set(out.lower().split())
    else:
        assert code == 2 and out == ""
        assert err.startswith("toylab: error: ") and err.count("\n") == 1 and err.endswith("\n")
