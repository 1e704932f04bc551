"""Every internal of Streamlit and Altair the page uses (``toylab_app/internals.py``) is still there and still does what the
page relies on. Each failure names the library, its installed version and what the page loses; the page itself falls
back without the gain."""

import inspect

import altair as alt
import streamlit
from streamlit.testing.v1 import AppTest

from toylab_app import chart_element, internals

STREAMLIT = f"streamlit {streamlit.__version__}"
ALTAIR = f"altair {alt.__version__}"


def _script_run_context():
    """A page that records what toylab_app/internals.py reads of the script-run context, and the flag it gives."""
    import streamlit as st

    from toylab_app import internals

    context = internals.get_script_run_ctx() if internals.get_script_run_ctx else None
    manager = getattr(context, "uploaded_file_mgr", None)
    st.session_state["seen"] = {
        "context": context is not None,
        "flag": type(getattr(context, "is_history_navigation", None)).__name__,
        "navigated": internals.history_navigation(),
        "remove_session_files": callable(getattr(manager, "remove_session_files", None)),
        "session_id": getattr(context, "session_id", None),
    }


def test_streamlit_flags_a_run_that_follows_back_or_forward():
    at = AppTest.from_function(_script_run_context).run()
    seen = at.session_state["seen"]
    assert seen["context"], f"{STREAMLIT}: streamlit.runtime.scriptrunner.get_script_run_ctx is gone or returns None " \
                            "in a run: Back and Forward no longer restore the page's views"
    assert seen["flag"] == "bool", f"{STREAMLIT}: the script-run context has no is_history_navigation flag: Back and " \
                                   "Forward no longer restore the page's views"
    assert seen["navigated"] is False


def test_streamlit_reads_at_most_the_links_the_page_says_it_reads():
    from streamlit.runtime.state import query_params

    constants = {name.lstrip("_").removeprefix("CLIENT_STATE_QUERY_STRING_MAX_").lower(): value
                 for name, value in vars(query_params).items() if "QUERY_STRING_MAX_" in name}
    assert constants == internals.QUERY_STRING_LIMITS, \
        f"{STREAMLIT}: the most parameters and characters of a link it reads are {constants or 'no longer constants'}, " \
        f"not {internals.QUERY_STRING_LIMITS}: the dropped-link notice (toylab_app/address.py) is wrong"
    assert query_params.sanitize_query_string("a=1&" * 1000 + "b=2") == "", \
        f"{STREAMLIT}: a link of 1,001 parameters is no longer dropped: the dropped-link notice is wrong"


def test_streamlit_lets_a_sessions_uploads_go():
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    assert AppTest.from_function(_script_run_context).run().session_state["seen"]["remove_session_files"], \
        f"{STREAMLIT}: its upload manager has no remove_session_files: every upload is held twice until its session ends"
    manager = MemoryUploadedFileManager("/upload")
    manager.add_file("session", UploadedFileRec("file", "log.jsonl", "application/json", b"{}"))
    assert [record.file_id for record in manager.get_files("session", ["file"])] == ["file"]

    class Context:
        uploaded_file_mgr, session_id = manager, "session"

    original = internals.get_script_run_ctx
    try:
        internals.get_script_run_ctx = lambda: Context()
        internals.drop_uploaded_copies()
    finally:
        internals.get_script_run_ctx = original
    assert manager.get_files("session", ["file"]) == [], f"{STREAMLIT}: remove_session_files kept the file"


def _served(handler, path, headers=(), method="GET"):
    """(status, headers, body) of one request to an ASGI app, as uvicorn hands it one."""
    import asyncio

    sent, asked = [], []

    async def receive():                      # the request, then a disconnect once the response is whole
        if not asked:
            asked.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        while not sent or sent[-1]["type"] != "http.response.body" or sent[-1].get("more_body"):
            await asyncio.sleep(0.001)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "headers": [(name.encode(), value.encode()) for name, value in headers],
             "scheme": "http", "server": ("127.0.0.1", 8501), "client": ("127.0.0.1", 1), "http_version": "1.1"}
    asyncio.run(handler(scope, receive, send))
    start = next(message for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return start["status"], {name.decode(): value.decode() for name, value in start["headers"]}, body


def test_streamlit_s_frontend_served_from_memory_is_what_its_own_handler_serves():
    """Streamlit's own static handler (``create_streamlit_static_handler``), asked the same requests with Starlette's
    ``file_response`` and with the page's: the same status and headers, and the same bytes once un-gzipped."""
    import gzip

    from starlette.staticfiles import StaticFiles
    from streamlit import file_util
    from streamlit.web.server.starlette.starlette_static_routes import create_streamlit_static_handler

    from tests.browser import frontend_assets

    assert internals.STATIC_FILE_RESPONSE is not None and "file_response" not in vars(
        type(create_streamlit_static_handler(file_util.get_static_dir(), None))), \
        f"{STREAMLIT}: its static files no longer go through Starlette's StaticFiles.file_response: each page load " \
        "reads them all again (toylab_app/internals.py serve_static_files_from_memory)"
    internals.serve_static_files_from_memory()
    static, assets = frontend_assets()
    etag = _served(create_streamlit_static_handler(str(static), None), f"/{assets[0]}")[1]["etag"]
    asks = [(f"/{path}", (), "GET") for path in assets[:8]] + [
        ("/", (), "GET"), ("/a/route/of/the/app", (), "GET"), ("/static/missing.js", (), "GET"),
        (f"/{assets[0]}", (("accept-encoding", "gzip, deflate, br"),), "GET"),
        ("/", (("accept-encoding", "gzip"),), "GET"),
        (f"/{assets[0]}", (("accept-encoding", "gzip"), ("range", "bytes=0-99")), "GET"),
        (f"/{assets[0]}", (("accept-encoding", "gzip"),), "HEAD"),
        (f"/{assets[0]}", (("accept-encoding", "gzip"), ("if-none-match", etag)), "GET")]
    handler = create_streamlit_static_handler(str(static), None)
    for path, headers, method in asks:
        ours = _served(handler, path, headers, method)
        StaticFiles.file_response = internals.STATIC_FILE_RESPONSE
        try:
            theirs = _served(handler, path, headers, method)
        finally:
            internals.serve_static_files_from_memory()
        status, ours_headers, body = ours
        if ours_headers.get("content-encoding") == "gzip":
            assert "gzip" in dict(headers).get("accept-encoding", ""), path
            body = gzip.decompress(body)
        assert (status, body) == (theirs[0], theirs[2]), f"{path} {headers} {method}"
        assert method == "HEAD" or len(body) == int(theirs[1].get("content-length", len(body)))
        leave = {"content-length", "content-encoding", "vary"}
        assert {k: v for k, v in ours_headers.items() if k not in leave} == \
            {k: v for k, v in theirs[1].items() if k not in leave}, f"{path} {headers} {method}"
    gzipped = _served(handler, f"/{assets[0]}", (("accept-encoding", "gzip"),))[1]
    assert gzipped["content-encoding"] == "gzip" and gzipped["vary"] == "Accept-Encoding"


def test_altair_copies_and_compares_as_the_page_replaces_them():
    assert "copy" not in vars(alt.TopLevelMixin) or alt.TopLevelMixin.copy is internals._whole_chart_copy, \
        f"{ALTAIR}: TopLevelMixin defines its own copy: charts are copied deeply again (slower layering)"
    assert list(inspect.signature(internals.SCHEMA_COPY).parameters) == ["self", "deep", "ignore"], \
        f"{ALTAIR}: SchemaBase.copy takes {inspect.signature(internals.SCHEMA_COPY)}, not (self, deep, ignore)"
    assert internals.ALTAIR_PARAMETER_DICT is not None, \
        f"{ALTAIR}: {internals.ALTAIR_API.__name__} has no _viewless_dict: layered selections are validated again"
    assert chart_element.alt.TopLevelMixin.copy is internals._whole_chart_copy
    assert internals.ALTAIR_API._viewless_dict is internals._parameter_dict
    parameter = alt.selection_point(name="pick", fields=["estimator"])
    assert internals._parameter_dict(parameter.param) == internals.ALTAIR_PARAMETER_DICT(parameter.param), \
        f"{ALTAIR}: a selection parameter's dict without views is not what _viewless_dict gives"
    assert internals.ALTAIR_LIFT is not None, \
        f"{ALTAIR}: {internals.ALTAIR_API.__name__} has no _prepare_to_lift: layered selections are validated again"
    assert internals.ALTAIR_API._prepare_to_lift is internals._lifted_parameter
    for lifted in (parameter.param, alt.param(name="size", value=3).param,
                   alt.selection_interval(name="zoom", bind="scales").param):
        assert internals._lifted_parameter(lifted).to_dict() == internals.ALTAIR_LIFT(lifted).to_dict(), \
            f"{ALTAIR}: a parameter lifted to a layered chart's top is not what _prepare_to_lift gives"
    assert callable(getattr(alt.utils.schemapi, "disable_debug_mode", None)), \
        f"{ALTAIR}: alt.utils.schemapi.disable_debug_mode is gone: every schema object is validated as it is built"
    assert not alt.utils.schemapi.DEBUG_MODE
