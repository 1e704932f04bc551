"""AppTest runs of the sweep and lessons tabs: no exception, the expected charts and elements."""

import json

import pyarrow.ipc
import pytest
from streamlit.testing.v1 import AppTest

from toylab import make_toy
from toylab.analysis.repeated import CAPPED_W, repeated_lengths, repeated_position
from toylab.engine.sampler import Sampler
from toylab.lessons.lesson import settings
from toylab.lessons.tour import LESSONS
from toylab_app import tour
from toylab_app.lessons_tab import NUMBERS_KEY


def _render(module, state=None, **settings_fields):
    """The tab ``module`` rendered for these Settings, with session ``state`` (its view values) set first."""
    def script(module, settings_fields, state):
        import importlib

        import streamlit as st

        from toylab.state.settings import Settings
        st.session_state.update(state)
        importlib.import_module(f"toylab_app.{module}").render(Settings(**settings_fields))

    return AppTest.from_function(script, args=(module, settings_fields, state or {}), default_timeout=120).run()


def _charts(app):
    return [json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")]


def _chart_data(app):
    """Every dataset of every chart, as DataFrames (Streamlit ships them as Arrow beside the spec)."""
    return [pyarrow.ipc.open_stream(dataset.data.data).read_pandas()
            for chart in app.get("vega_lite_chart") for dataset in chart.proto.datasets]


def test_threshold_sweep_tab_shows_the_chart_and_the_rule_of_thumb():
    app = _render("threshold_sweep_tab", estimators=("naive", "tok_tis", "seq_tis", "seq_mis", "trm"))
    assert not app.exception
    (chart,) = _charts(app)
    assert len(chart["vconcat"]) == 3
    assert "C* = sqrt(2(1 + χ²_seq))" in app.markdown[0].value
    assert list(app.dataframe[0].value["estimator"]) == ["tok_tis", "seq_tis", "seq_mis", "trm"]


def test_threshold_sweep_tab_asks_for_a_thresholded_estimator():
    app = _render("threshold_sweep_tab", estimators=("naive", "seq_is"))
    assert not app.exception and not _charts(app)
    assert "Select an estimator with a threshold" in app.info[0].value


def test_mismatch_sweep_tab_shows_estimators_and_divergences():
    app = _render("mismatch_sweep_tab", estimators=("naive", "tok_tis", "seq_is", "grpo"), baseline="logged")
    assert not app.exception
    (chart,) = _charts(app)
    assert len(chart["vconcat"]) == 3
    assert "coincides with naive" in app.caption[0].value


def test_length_tab_labels_exact_and_monte_carlo_points():
    app = _render("length_tab", {"length_mc": True}, V=3, estimators=("naive", "seq_is", "seq_tis"))
    assert not app.exception and not app.warning
    chart, _ = _charts(app)
    methods = {method for data in _chart_data(app) if "method" in data for method in data["method"]}
    assert methods == {"exact (enumeration)", "exact (recursion)", "Monte Carlo"}
    assert "Monte Carlo" in app.caption[0].value and "first T positions of one 256-position toy" in app.caption[0].value
    assert "std ÷ on-policy std" in json.dumps(chart, ensure_ascii=False)


def test_length_tab_without_its_monte_carlo_draws_only_exact_points():
    app = _render("length_tab", V=3, estimators=("naive", "seq_is", "seq_tis"))
    assert not app.exception and not app.warning and app.toggle(key="length_mc").value is False
    rows = [data for data in _chart_data(app) if "method" in data]
    assert {method for data in rows for method in data["method"]} == {"exact (enumeration)", "exact (recursion)"}
    seq_tis = {T for data in rows if "estimator" in data for T in data.loc[data["estimator"] == "seq_tis", "T"]}
    assert seq_tis and max(seq_tis) == 10                  # enumerated up to 3**10 = 59,049 ≤ 65,536, not beyond
    seq_is = {T for data in rows if "estimator" in data for T in data.loc[data["estimator"] == "seq_is", "T"]}
    assert max(seq_is) == 256                              # factorises: exact by recursion at every T
    assert "turn on the Monte Carlo above" in app.caption[0].value


def test_views_ask_for_an_exact_estimator():
    for module in ("mismatch_sweep_tab", "length_tab"):
        app = _render(module, estimators=("grpo",))
        assert not app.exception and "Select at least one exact estimator" in app.info[0].value
    assert len(_charts(app)) == 1              # the length tab's repeated position needs no estimator


@pytest.mark.parametrize(("V", "top_k", "longest"), [(4, 0, 64), (8, 0, 12), (8, 2, 256)])
def test_length_tab_draws_one_position_repeated_with_the_library_numbers(V, top_k, longest):
    fields = {"T": 3, "V": V, "mismatch": 0.4, "seed": 5, "estimators": ("naive", "seq_tis"), "top_k": top_k,
              "thresholds": (("seq_tis", "C", 2.5),)}
    app = _render("length_tab", **fields)
    assert not app.exception
    _, capped = _charts(app)
    assert "one position repeated" in json.dumps(capped["title"])
    assert "capped at C = 2.5" in json.dumps(capped, ensure_ascii=False)
    capped_element = app.get("vega_lite_chart")[1]
    (drawn,) = [pyarrow.ipc.open_stream(dataset.data.data).read_pandas() for dataset in capped_element.proto.datasets
                if dataset.name == capped["layer"][0]["data"]["name"]]
    toy = make_toy(3, V, 0.4, 5, Sampler(top_k=top_k))
    lengths = repeated_lengths(top_k or V)
    found = repeated_position(toy.log_rho[0], toy.mu[0], lengths, 2.5)
    assert drawn["T"].max() == longest == lengths[-1]
    for row in drawn.itertuples():
        assert row.value == found[row.T][0 if row.quantity == CAPPED_W else 1]
    assert "repeated T times" in app.caption[-1].value and "C = 2.5" in app.caption[-1].value
    assert ("E_μ[W] = 1 at every T" in app.caption[-1].value) == (not top_k)       # a truncating sampler's is below 1


def test_lessons_tab_lists_every_lesson_with_a_button():
    app = _render("lessons_tab")
    assert not app.exception
    assert [button.key for button in app.button] == ["lesson_start", *(f"lesson.{lesson.id}" for lesson in LESSONS)]
    assert all(lesson.text in "".join(m.value for m in app.markdown) for lesson in LESSONS)
    assert all("holds" in expander.label and "NOT" not in expander.label for expander in app.expander)
    assert not app.dataframe                                         # each lesson's numbers are built when opened


def test_a_lessons_numbers_are_its_evidence_when_opened():
    lesson = LESSONS[3]
    app = _render("lessons_tab", {f"{NUMBERS_KEY}.{lesson.id}": True})
    shown = app.dataframe[0].value
    numbers = tour.evidence(lesson.id).numbers
    assert len(app.dataframe) == 1 and list(shown["quantity"]) == list(numbers)
    assert list(shown["value"]) == [f"{value:.6g}" for value in numbers.values()]


@pytest.mark.parametrize("index", [0, 2, 4])
def test_show_me_sets_the_sidebar_controls_and_the_tab(index):
    lesson = LESSONS[index]
    app = _render("lessons_tab")
    app.button(key=f"lesson.{lesson.id}").click().run()
    assert not app.exception
    chosen = settings(lesson)
    state = app.session_state
    assert state["tab"] == lesson.tab
    assert (state["T"], state["V"], state["mismatch"], state["seed"]) == chosen.toy_key[:4]
    assert all(state[name] == getattr(chosen, name) for name in ("top_p", "top_k", "temperature", "precision"))
    assert (state["baseline"], state["N"], tuple(state["est"])) == (chosen.baseline, chosen.N, chosen.estimators)
    for id in chosen.estimators:
        for name, value in chosen.params(id).items():
            assert state[f"{id}.{name}"] == value


def test_length_tab_stops_where_the_relative_error_is_undefined_and_draws_the_lengths_before():
    """top-k 2 with the trainer keeping the sampler's mask: from T = 6 the kept tokens fix the reward (∇J = 0)."""
    app = _render("length_tab", top_k=2, scored="keep_mask", estimators=("naive", "seq_is"))
    assert not app.exception
    [warning] = app.warning
    assert warning.value.startswith("Stopped at T = 6:") and "does not depend on θ" in warning.value
    rows = [data for data in _chart_data(app) if "estimator" in data]
    assert {T for data in rows for T in data["T"]} == {1, 2, 3, 4}
