"""The page under streamlit.testing: default run, every control, URL-seeded runs, every tab, exact numbers."""

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest
from tiers import fast_then_slow

from toylab import exact_table, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import monte_carlo, summarise
from toylab.catalogue.estimators import ESTIMATORS
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.tour import LESSONS
from toylab.state.query import VIEW_DEFAULTS, VIEW_PARAMETERS, parse_query
from toylab.state.settings import Settings
from toylab_app.caches import cache
from toylab_app.caches.cache import MONTE_CARLO_REPLICATES, MONTE_CARLO_SIZES
from toylab_app.estimators_tab import FORMULAS_KEY, plain
from toylab_app.sidebar import GROUP_PREFIX, GROUPS

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
TIMEOUT = 60
TAB_CHARTS = {"Estimators": 1, "Ratios": 3, "Error vs batch size": 1, "Threshold sweep": 1, "Mismatch sweep": 1,
              "Sequence length": 2, "Training": 5, "Experts & versions": 3, "Your run": 0, "Lessons": 0}
HEADER = ["M sequences", "J = E_π[r]", "E_μ[r] logged", "‖∇J‖", "KL(μ‖π)", "χ²_seq", "ESS fraction", "E_μs[W] check"]


def run(query=None, **state):
    """The page at a link, every sidebar group open (so that a test reaches every control), and ``state`` set."""
    at = open_sidebar(AppTest.from_file(APP, default_timeout=TIMEOUT))
    at.query_params.update(query or {})
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def open_sidebar(at):
    """Open every group of the sidebar (a group's widgets are built only while it is open)."""
    for name in GROUPS:
        at.session_state[GROUP_PREFIX + name] = True
    return at


def tab_content(at, label):
    """Element types rendered inside the tab called ``label``."""
    tab = next(tab for tab in at.tabs if tab.label == label)
    return [node.type for node in _descendants(tab)]


def _descendants(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _descendants(child)


def table(at):
    return at.dataframe[0].value


def assert_table_is_library(at, settings):
    expected = exact_table(make_toy(*settings.toy_key), settings.selection(True), settings.baseline, settings.N)
    shown = table(at)
    assert list(shown["estimator"]) == [row["estimator"] for row in expected]
    truncates = any(row["rel_out_of_reach"] > 0 for row in expected)     # then "unbiased" is the split's to say
    assert ("unbiased" in shown) != truncates
    for column in ("rel_bias", "rel_std", "rel_rmse", "tokens_affected", "sequences_affected",
                   *(() if truncates else ("unbiased",))):
        np.testing.assert_array_equal(shown[column], [row[column] for row in expected], err_msg=column)
    assert list(shown["cosine"]) == ["—" if row["cosine"] is None else f"{row['cosine']:+.4f}" for row in expected]


@pytest.fixture(scope="module")
def default():
    return run()


def test_default_run_shows_header_table_and_chart(default):
    assert not default.exception and not default.error and not default.warning
    assert [m.label for m in default.metric] == HEADER
    d = diagnostics(make_toy(*Settings().toy_key))
    assert default.metric[0].value == f"{d.M:,}" and default.metric[1].value == f"{d.J:.4f}"
    assert default.metric[4].value == f"{d.kl_mu_pi:.4f}" and default.metric[6].value == f"{d.ess:.1%}"
    assert default.metric[7].value == f"{d.identity:.4f}" == "1.0000"
    assert "vega_lite_chart" in tab_content(default, "Estimators")
    assert_table_is_library(default, Settings())
    assert default.query_params == {}


def test_the_csv_download_is_made_on_the_click_and_starts_no_run(default):
    """A click that started a run could lose the file (tests/page/test_browser.py says why)."""
    buttons = default.get("download_button")
    assert [button.proto.label for button in buttons] == ["Download CSV"]
    assert buttons[0].proto.deferred_file_id and buttons[0].proto.ignore_rerun


def test_formulas_give_every_selected_estimator_its_latex_and_source(default):
    assert not next(expander for expander in default.expander if expander.label.startswith("Formulas")).children
    opened = run(**{FORMULAS_KEY: True})                          # built only when opened
    expander = next(expander for expander in opened.expander if expander.label.startswith("Formulas"))
    text = expander.markdown[0].value
    for id in Settings().estimators:
        assert f"**{id} · {ESTIMATORS[id].label}**" in text and f"$$\n{ESTIMATORS[id].latex}\n$$" in text
        assert plain(ESTIMATORS[id].source) in text
    assert plain("rollout_rs (token_k*, [x]) $y$") == r"rollout\_rs \(token\_k\*, \[x\]\) \$y\$"


def test_closed_tabs_do_not_render(default):
    assert [label for label in TAB_CHARTS if tab_content(default, label)] == ["Estimators"]


@pytest.mark.parametrize("label, charts", TAB_CHARTS.items())
def test_every_tab_renders_when_opened(label, charts):
    at = run(tab=label)
    assert not at.exception and not at.error
    assert [tab.label for tab in at.tabs] == list(TAB_CHARTS)
    assert tab_content(at, label).count("vega_lite_chart") == charts
    assert all(tab_content(at, other) == [] for other in TAB_CHARTS if other != label)


@pytest.mark.slow
def test_a_lesson_button_sets_the_sidebar_the_url_and_the_tab():
    at = run(tab="Lessons")
    for lesson in LESSONS:
        button = at.button(key=f"lesson.{lesson.id}")
        button.click().run()
        assert not at.exception and not at.error, lesson.id
        shown = lesson_settings(lesson)
        assert at.session_state["tab"] == lesson.tab
        assert parse_query(dict(at.query_params)) == (shown, []), lesson.id
        assert at.slider(key="T").value == shown.T and at.slider(key="mismatch").value == shown.mismatch
        assert tab_content(at, lesson.tab), lesson.id            # the lesson's tab is the open one
        assert all(at.session_state[name] == value for name, value in lesson.view.items()), lesson.id
        at = run(tab="Lessons")


def shown_lesson(at):
    """(the banner's first line, the values of the view parameters that matter in this view) of a page: a sweep's
    panel matters only in presentation mode, and only there is it in the link."""
    banner = [block for block in at.markdown if block.value.startswith("**Lesson ")]
    view = {name: at.session_state[name] for name in VIEW_DEFAULTS}
    return (banner[0].value.split(".**")[0] if banner else None), \
        {name: value for name, value in view.items() if VIEW_PARAMETERS[name].shown(view)}


NUMBERED = list(enumerate(LESSONS, start=1))
ONE_A_TAB = [(number, lesson) for number, lesson in NUMBERED
             if lesson is next(other for other in LESSONS if other.tab == lesson.tab)]   # every path, fast


@pytest.mark.parametrize("number, lesson", fast_then_slow(NUMBERED, ONE_A_TAB), ids=[lesson.id for lesson in LESSONS])
def test_a_lessons_button_leaves_a_link_that_reopens_exactly_its_view(number, lesson):
    at = run(tab="Lessons")
    at.button(key=f"lesson.{lesson.id}").click().run()
    link = dict(at.query_params)
    reopened = run(link)
    assert not reopened.exception and not reopened.warning
    assert shown_lesson(reopened) == shown_lesson(at) and shown_lesson(at)[0] == f"**Lesson {number} of {len(LESSONS)}"
    assert dict(reopened.query_params) == link
    why = " ".join(markdown.value for markdown in reopened.markdown)          # the marks in words, under Why
    assert lesson.text in why and all(mark.text in why for mark in lesson.check(lesson_settings(lesson)).marks)


def test_next_and_previous_step_through_the_lessons_and_a_change_leaves_the_lesson():
    at = run(tab="Lessons")
    at.button(key="lesson_start").click().run()
    assert shown_lesson(at)[0] == f"**Lesson 1 of {len(LESSONS)}"
    at.button(key="lesson_next").click().run()
    assert shown_lesson(at)[0] == f"**Lesson 2 of {len(LESSONS)}" and at.session_state["tab"] == LESSONS[1].tab
    at.button(key="lesson_previous").click().run()
    assert shown_lesson(at)[0] == f"**Lesson 1 of {len(LESSONS)}"
    at.button(key="lessons_button").click().run()
    assert at.session_state["tab"] == "Lessons"
    at.button(key="lesson_start").click().run()
    at.slider(key="mismatch").set_value(0.7).run()
    assert shown_lesson(at)[0] is None                     # another setting: the page shows it, not the lesson


def test_tab_opens_from_the_url():
    at = run({"tab": "Ratios"})
    assert not at.exception and "vega_lite_chart" in tab_content(at, "Ratios")


@pytest.mark.parametrize("change, url", [
    (lambda at: at.slider(key="T").set_value(4), {"T": "4"}),
    (lambda at: at.slider(key="V").set_value(3), {"V": "3"}),
    (lambda at: at.slider(key="mismatch").set_value(0.8), {"mismatch": "0.8"}),
    (lambda at: at.number_input(key="seed").set_value(5), {"seed": "5"}),
    (lambda at: at.number_input(key="N").set_value(1000), {"N": "1000"}),
    (lambda at: at.radio(key="baseline").set_value("true"), {"baseline": "true"}),
    (lambda at: at.multiselect(key="est").set_value(["naive", "seq_is", "k3_rs"]), {"est": "naive,seq_is,k3_rs"}),
    (lambda at: at.number_input(key="tok_tis.C").set_value(1.5), {"tok_tis.C": "1.5"}),
    (lambda at: at.number_input(key="geo_rs.hi").set_value(1.2), {"geo_rs.hi": "1.2"}),
    (lambda at: at.selectbox(key="preset").set_value("heavy (mismatch 1.0)"), {"mismatch": "1"}),
])
def test_each_control_reruns_updates_the_url_and_the_table(change, url):
    at = run()
    before = table(at)
    change(at).run()
    assert not at.exception and not at.error
    assert at.query_params == url
    settings, notices = parse_query(url)
    assert notices == []
    assert_table_is_library(at, settings)
    assert not table(at).equals(before)


def test_preset_picker_follows_the_toy_and_sets_it():
    at = run()
    assert at.selectbox(key="preset").value == "default (mismatch 0.3)"
    at.selectbox(key="preset").set_value("long sequences (T = 10)").run()
    assert (at.slider(key="T").value, at.slider(key="mismatch").value) == (10, 0.3)
    assert at.metric[0].value == f"{4**10:,}"
    at.slider(key="mismatch").set_value(0.4).run()
    assert at.selectbox(key="preset").value == "custom"


def test_grpo_weight_control_and_batch_coupled_note():
    at = run({"est": "naive,grpo", "tab": "Error vs batch size"})
    assert not at.exception
    at.selectbox(key="grpo.weight").set_value("seq_tis").run()
    assert not at.exception and at.query_params["grpo.weight"] == "seq_tis"
    assert at.query_params["est"] == "naive,grpo"


def test_error_tab_monte_carlo_dots_are_a_toggle_in_the_link():
    at = run({"tab": "Error vs batch size"})
    assert not at.exception and at.toggle(key="mc_dots").value is False
    assert not any("rms" in data for data in _chart_data(at))          # the exact lines alone
    assert any("Turn on the Monte Carlo check" in caption.value for caption in at.caption)
    at.toggle(key="mc_dots").set_value(True).run()
    assert not at.exception and at.query_params == {"tab": "Error vs batch size", "mc_dots": "1"}
    (dots,) = [data for data in _chart_data(at) if "rms" in data]
    settings = Settings()
    errors = monte_carlo(make_toy(*settings.toy_key), settings.selection(), settings.baseline, MONTE_CARLO_SIZES,
                         MONTE_CARLO_REPLICATES, seed=0, aggregation=settings.aggregation)
    expected = pd.DataFrame(summarise(errors, MONTE_CARLO_SIZES))
    np.testing.assert_array_equal(dots["rms"], expected["rms"])
    assert list(dots["estimator"]) == list(expected["estimator"])
    at.toggle(key="mc_dots").set_value(False).run()
    assert at.query_params == {"tab": "Error vs batch size"}


def test_error_tab_samples_only_the_estimators_whose_errors_are_not_kept(monkeypatch):
    sampled = []
    library = cache.monte_carlo
    monkeypatch.setattr(cache, "monte_carlo", lambda toy, selection, *args, **kwargs: sampled.append(set(selection))
                        or library(toy, selection, *args, **kwargs))
    at = run({"tab": "Error vs batch size", "mc_dots": "1", "est": "naive,tok_tis,seq_is", "seed": "4321"})
    assert not at.exception and sampled == [{"naive", "tok_tis", "seq_is"}]
    at.number_input(key="tok_tis.C").set_value(2.5).run()
    assert not at.exception and sampled[1:] == [{"tok_tis"}]                 # a new threshold: that estimator alone
    (dots,) = [data for data in _chart_data(at) if "rms" in data]
    settings, _ = parse_query(at.query_params)
    errors = monte_carlo(make_toy(*settings.toy_key), settings.selection(), settings.baseline, MONTE_CARLO_SIZES,
                         MONTE_CARLO_REPLICATES, seed=0, aggregation=settings.aggregation)
    np.testing.assert_array_equal(dots["rms"], pd.DataFrame(summarise(errors, MONTE_CARLO_SIZES))["rms"])


def test_error_tab_with_only_batch_coupled_estimators_asks_for_the_dots():
    at = run({"est": "grpo", "tab": "Error vs batch size"})
    assert not at.exception and "only the Monte Carlo check" in at.info[0].value
    assert tab_content(at, "Error vs batch size").count("vega_lite_chart") == 0
    at.toggle(key="mc_dots").set_value(True).run()
    assert not at.exception and tab_content(at, "Error vs batch size").count("vega_lite_chart") == 1


def _chart_data(at):
    """Every dataset of every chart on the page, as DataFrames."""
    return [pa.ipc.open_stream(dataset.data.data).read_all().to_pandas()
            for chart in at.get("vega_lite_chart") for dataset in chart.proto.datasets]


def test_ratio_tab_controls():
    at = run(tab="Ratios")
    at.toggle(key="ratio_panels").set_value(True).run()
    assert not at.exception and tab_content(at, "Ratios").count("vega_lite_chart") == 3
    assert not at.warning
    draw = at.markdown[0].value
    next(button for button in at.button if button.label == "Resample the batch").click().run()
    assert not at.exception and at.markdown[0].value != draw and "draw 1" in at.markdown[0].value
    assert at.query_params == {"tab": "Ratios", "ratio_panels": "1", "draw": "1"}


def test_shared_link_opens_that_view():
    query = {"T": "5", "V": "3", "mismatch": "0.9", "seed": "11", "N": "256", "baseline": "logged",
             "est": "naive,tok_tis,seq_is,seq_mis", "tok_tis.C": "1.5", "seq_mis.C": "3"}
    at = run(query)
    assert not at.exception and not at.warning
    settings, _ = parse_query(query)
    assert (at.slider(key="T").value, at.slider(key="V").value, at.slider(key="mismatch").value) == (5, 3, 0.9)
    assert at.number_input(key="tok_tis.C").value == 1.5 and at.radio(key="baseline").value == "logged"
    assert_table_is_library(at, settings)
    assert at.query_params == query


def test_malformed_link_falls_back_with_notices():
    at = run({"T": "banana", "mismatch": "9", "N": "-3", "est": "naive,bogus", "tok_tis.C": "x"})
    assert not at.exception and not at.error
    notices = " ".join(w.value for w in at.warning)
    for words in ("T = 'banana'", "mismatch = '9'", "N = '-3'", "'bogus'", "tok_tis.C"):
        assert words in notices
    assert at.slider(key="T").value == 6 and at.slider(key="mismatch").value == 0.3
    assert at.query_params == {"est": "naive"}
    assert list(table(at)["estimator"]) == ["naive"]
    at.slider(key="T").set_value(5).run()
    assert not at.warning                           # the notices go once the user changes the view


def test_link_over_the_size_limit_is_refused_with_a_suggestion():
    at = run({"T": "16", "V": "8"})
    assert not at.exception
    assert len(at.warning) == 1 and "fewer tokens" in at.warning[0].value and "smaller vocabulary" in at.warning[0].value
    assert at.metric[0].value == "4,096"


def test_sliding_over_the_size_limit_is_refused_and_recoverable():
    at = run()
    at.slider(key="T").set_value(16).run()
    assert not at.exception and len(at.error) == 1 and "T ≤ 11 at V = 4" in at.error[0].value
    assert not at.metric and not at.dataframe
    at.slider(key="T").set_value(11).run()
    assert not at.exception and not at.error and at.metric[0].value == f"{4**11:,}"


def test_per_position_toggle_lives_in_the_url():
    at = run({"tab": "Ratios", "ratio_panels": "true"})
    assert not at.exception and not at.warning
    assert at.toggle(key="ratio_panels").value is True


def test_presets_are_selectable_with_their_framework_thresholds():
    at = run({"est": "naive,verl:decoupled_geo_rs"})
    assert not at.exception and not at.warning
    assert list(table(at)["estimator"]) == ["naive", "verl:decoupled_geo_rs"]
    at.text_input(key="verl:decoupled_geo_rs.rs_threshold").set_value("0.8_1.1").run()
    assert not at.exception and at.query_params["verl:decoupled_geo_rs.rs_threshold"] == "0.8_1.1"
    settings, _ = parse_query(at.query_params)
    assert_table_is_library(at, settings)
    at.multiselect(key="est").set_value(["naive", "verl:decoupled_geo_rs", "trl:token_mask"]).run()
    assert not at.exception and list(table(at)["estimator"])[-1] == "trl:token_mask"


def test_aggregation_control_lives_in_the_url_and_reaches_the_error_tab():
    at = run({"est": "naive,geo_rs", "geo_rs.lo": "0.9", "geo_rs.hi": "1.1", "tab": "Error vs batch size", "mc_dots": "1"})
    assert "seq-mean-token-sum" in " ".join(c.value for c in at.caption)
    at.selectbox(key="agg").set_value("token-mean").run()
    assert not at.exception and at.query_params["agg"] == "token-mean"
    assert "token-mean (verl's default)" in " ".join(c.value for c in at.caption)
    assert tab_content(at, "Error vs batch size").count("vega_lite_chart") == 1
