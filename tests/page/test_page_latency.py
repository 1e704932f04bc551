"""The page-latency benchmark's helpers work: they time a real run of the floor app. No time is asserted."""

import os

import pytest

from benchmarks.page_latency import FLOOR_APP, Page, RunLog, environment, message_parts, served, viewport_size
from tests.browser import browser_available, launch_browser, skip_or_fail


def test_environment_sets_and_restores(monkeypatch):
    monkeypatch.setenv("TOYLAB_TEST_KEEP", "before")
    monkeypatch.delenv("TOYLAB_TEST_NEW", raising=False)
    with environment({"TOYLAB_TEST_KEEP": None, "TOYLAB_TEST_NEW": "inside"}):
        assert "TOYLAB_TEST_KEEP" not in os.environ and os.environ["TOYLAB_TEST_NEW"] == "inside"
    assert os.environ["TOYLAB_TEST_KEEP"] == "before" and "TOYLAB_TEST_NEW" not in os.environ


def test_a_viewport_is_width_x_height():
    assert viewport_size("1280x720") == {"width": 1280, "height": 720}


def test_message_parts_splits_a_chart_into_spec_and_data():
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    chart = message.delta.new_element.vega_lite_chart
    chart.spec = '{"mark": "point"}'
    chart.datasets.add().name = "x" * 100
    frame = message.SerializeToString()
    parts = dict(message_parts(frame))
    assert parts["chart spec"] == len(chart.spec)
    assert parts["chart data"] == len(frame) - len(chart.spec) > 100
    finished = ForwardMsg(script_finished=ForwardMsg.FINISHED_SUCCESSFULLY).SerializeToString()
    assert message_parts(finished) == [("script_finished", len(finished))]


@pytest.mark.browser
def test_a_press_on_the_floor_app_is_timed(tmp_path):
    ok, reason = browser_available()
    if not ok:
        skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    log = RunLog(tmp_path / "runs.jsonl")
    with served(FLOOR_APP, log) as url, sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = Page(browser, log)
            load = page.load(url)
            presses = [page.press() for _ in range(2)]
        finally:
            browser.close()
    assert load["to_idle"] > 0 and load["runs"] == 1 and load["server_runs"] == ["completed"]
    for press in presses:
        assert 0 < press["to_running"] <= press["to_idle"] <= press["to_drawn"]
        assert press["runs"] == 1 and press["server_runs"] == ["completed"] and press["server"] > 0
        assert press["messages"] > 0 and press["bytes"] > 0 and press["browser"]["busy"] > 0
    assert page.page.url.startswith(url)
    assert len(log.runs_since(0)) == 3


def test_without_charts_the_timed_page_sends_a_placeholder_for_each_chart_and_nothing_else_changes(tmp_path,
                                                                                                     monkeypatch):
    """page_latency's --without-charts: the page run by timed_script.py with each chart an empty placeholder, every
    other element as it was, so that the charts' share of a press can be told apart."""
    from test_layout_app import ROOT, element_kinds

    from toylab_app import chart_element

    monkeypatch.setattr(chart_element, "draw", chart_element.draw)         # as it was, after the script replaces it
    monkeypatch.setenv("TOYLAB_TIMED_SCRIPT", str(ROOT / "toylab_app" / "script" / "streamlit_app.py"))
    monkeypatch.setenv("TOYLAB_TIMED_LOG", str(tmp_path / "runs.jsonl"))
    monkeypatch.delenv("TOYLAB_PROFILE_DIR", raising=False)
    monkeypatch.delenv("TOYLAB_TIMED_WITHOUT_CHARTS", raising=False)
    timed = ROOT / "benchmarks" / "timed_script.py"
    page = element_kinds(timed)
    monkeypatch.setenv("TOYLAB_TIMED_WITHOUT_CHARTS", "1")
    without_charts = element_kinds(timed)
    charts = page.pop("vega_lite_chart")
    assert charts >= 1 and "vega_lite_chart" not in without_charts
    assert without_charts.pop("empty") == page.pop("empty", 0) + charts
    assert without_charts == page
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 2
