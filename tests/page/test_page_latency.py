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
