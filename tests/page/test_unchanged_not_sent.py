"""A chart or table a step did not change is not sent again: a real server (``streamlit run`` with the project's
config) and a client of Streamlit's own websocket protocol that keeps the frontend's message cache
(benchmarks/reading_group.py's ``Page``). A step back to the value the page showed two runs before gets every chart
and table as a reference to the message the browser keeps, and a first step gets them whole."""

import asyncio
import time
import urllib.parse

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

from benchmarks.reading_group import Page
from tests.browser import running_app

pytestmark = pytest.mark.slow
LARGE = ("vega_lite_chart", "dataframe")


async def _runs(url, tab, values):
    """For the page load and each slider value: {"sent": element types sent whole, "references": how many messages
    were references to the browser's cache}."""
    page, runs = Page("mismatch"), []
    query = urllib.parse.urlencode({"tab": tab})
    async with connect(url.replace("http", "ws", 1) + "/_stcore/stream", max_size=None,
                       subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"]) as socket:
        for value in (None, *values):
            widgets = {} if value is None else {page.slider.id: value}
            await socket.send(page.client_state(BackMsg(), page.query or query, widgets).SerializeToString())
            run, started, deadline = {"sent": [], "references": 0}, False, time.monotonic() + 120
            while True:
                message = ForwardMsg()
                message.ParseFromString(await asyncio.wait_for(socket.recv(), deadline - time.monotonic()))
                kind = message.WhichOneof("type")
                started = started or kind == "new_session"
                if kind == "ref_hash":
                    run["references"] += 1
                elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                    run["sent"].append(message.delta.new_element.WhichOneof("type"))
                page.seen(message, {"exceptions": [], "errors": [], "told": False}, "Waiting")
                if kind == "script_finished" and started:
                    page.finished_run(message.script_finished)
                    break
            runs.append(run)
    return runs


@pytest.mark.parametrize("tab, large", [("Estimators", 2), ("Training", 6)])
def test_a_step_back_sends_the_unchanged_charts_and_tables_as_references(tab, large):
    with running_app("streamlit_app.py") as url:
        load, up, back, up_again = asyncio.run(_runs(url, tab, (0.31, 0.3, 0.31)))
    for run in (load, up):                                       # new values: every chart and table sent whole
        assert sum(kind in LARGE for kind in run["sent"]) == large and run["references"] == 0
    for run in (back, up_again):                                 # seen two runs before: none sent again
        assert not [kind for kind in run["sent"] if kind in LARGE] and run["references"] == large
