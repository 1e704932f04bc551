"""Every use the page makes of Streamlit's and Altair's internals, in one place.

No public API gives these. Each says why it is here and what it gains (docs/performance.md, "Library internals",
measured by benchmarks/internals.py); each falls back to the page without its gain when the internal is gone, never
to an error; and tests/page/test_internals.py fails, naming the library and its version, when one of them changes.

Streamlit
- ``history_navigation()``: whether this run follows the browser's Back or Forward button. Streamlit (1.65 and
  later) reruns the script with that history entry's address and flags the run in its script-run context; its own
  URL-bound widgets follow the flag. Gain: Back and Forward restore the views the page showed. Without it the page
  keeps what it shows and writes its own link back.
- ``QUERY_STRING_LIMITS``: the most parameters and characters of a link Streamlit reads (1.60 and later); past
  either it hands the page no parameter at all. Gain: the page says that a link was dropped, instead of silently
  opening the default view. Streamlit keeps them in module constants (private before 1.66), so the page holds the
  numbers and the test checks them against the installed Streamlit's.
- ``serve_static_files_from_memory()`` (process-wide, once): Streamlit serves its frontend (about 60 files a new
  browser fetches) through Starlette's ``StaticFiles``, whose ``FileResponse`` reads each file again for every request,
  64 kB at a time on a worker thread, uncompressed: two thirds of the server's CPU for a page load (0.085 of 0.125
  CPU-s, benchmarks/reading_group.py). Its files are served from memory instead, each read once, and gzipped once for
  a browser that accepts it; the same status and headers otherwise, and Starlette's own response for ranges and HEAD.
- ``drop_uploaded_copies()``: Streamlit keeps every uploaded file's bytes until its session ends or the user
  removes the file in the widget. The Your run tab takes its own copy and lets Streamlit's go. Gain: a file's bytes
  are held once, not twice, and a file the tab let go is freed at once (a 50 MB log in a session is 50 MB, not 100).

Altair
- ``disable_debug_mode()`` (process-wide, once): Altair validates every schema object it builds while "debug mode"
  is on, its default. Charts are validated by the tests instead (every chart's ``to_dict()``).
- ``copy_whole_charts_one_level()``: Altair deep-copies every sub-chart each time it layers or stacks charts, at
  each level of nesting, and validates the selection parameters it compares, and each one it lifts to the top of
  the layered chart (``_prepare_to_lift``: a quarter of the building of Training's charts), while layering. The
  page's chart builders never change a chart after layering it, so a whole chart is copied one level deep and the
  parameters compared and lifted unvalidated: tests/page/test_chart_element.py checks that every chart of every tab
  and lesson equals the chart Altair's own copies build.
"""

import gzip
import sys
from pathlib import Path

import altair as alt

try:
    from streamlit.runtime.scriptrunner import get_script_run_ctx
except ImportError:                                       # moved: no flag, no uploads to drop
    get_script_run_ctx = None

try:
    from starlette.datastructures import Headers
    from starlette.responses import FileResponse, Response
    from starlette.staticfiles import StaticFiles
    STATIC_FILE_RESPONSE = StaticFiles.file_response
except ImportError:                                       # moved: files read for every request
    STATIC_FILE_RESPONSE = None

QUERY_STRING_LIMITS = {"fields": 1000, "length": 512 * 1024}     # streamlit/runtime/state/query_params.py
STATIC_BYTES_LIMIT = 64 * 2**20          # static files held in memory, plain and gzipped (index.html's 61: 3 MB)


def _context():
    return get_script_run_ctx() if get_script_run_ctx is not None else None


def history_navigation():
    """Whether this run follows the browser's Back or Forward button (False when Streamlit does not say)."""
    return bool(getattr(_context(), "is_history_navigation", False))


def drop_uploaded_copies():
    """Let Streamlit's copy of this session's uploaded files go (nothing when its upload manager cannot)."""
    context = _context()
    remove = getattr(getattr(context, "uploaded_file_mgr", None), "remove_session_files", None)
    if remove is not None:
        remove(context.session_id)


_static_bodies = {}                      # (path, mtime, size) → (its bytes, gzipped)


def _static_body(path, stat_result):
    """A static file's (bytes, gzipped bytes), read and compressed once; None once ``STATIC_BYTES_LIMIT`` is held."""
    key = (str(path), stat_result.st_mtime_ns, stat_result.st_size)
    if key not in _static_bodies:
        held = sum(len(plain) + len(packed) for plain, packed in _static_bodies.values())
        if held + 2 * stat_result.st_size > STATIC_BYTES_LIMIT:
            return None
        plain = Path(path).read_bytes()
        _static_bodies[key] = (plain, gzip.compress(plain, compresslevel=6, mtime=0))
    return _static_bodies[key]


def _file_response_from_memory(self, full_path, stat_result, scope, status_code=200):
    """Starlette's ``StaticFiles.file_response`` with the file's body from memory (gzipped when the browser accepts
    it and it is smaller): Starlette's own response for a HEAD, a range, a "not modified" or a file not held."""
    response = STATIC_FILE_RESPONSE(self, full_path, stat_result, scope, status_code)
    request = Headers(scope=scope)
    if type(response) is not FileResponse or scope.get("method") != "GET" or "range" in request:
        return response
    body = _static_body(full_path, stat_result)
    if body is None:
        return response
    plain, packed = body
    headers = {name: value for name, value in response.headers.items() if name != "content-length"}
    if "gzip" in request.get("accept-encoding", "") and len(packed) < len(plain):
        return Response(packed, status_code, headers | {"content-encoding": "gzip", "vary": "Accept-Encoding"})
    return Response(plain, status_code, headers | {"vary": "Accept-Encoding"})


def serve_static_files_from_memory():
    """Serve Starlette's static files from memory, process-wide (where Starlette still has ``file_response``)."""
    if STATIC_FILE_RESPONSE is not None and StaticFiles.file_response is STATIC_FILE_RESPONSE:
        StaticFiles.file_response = _file_response_from_memory


# -- Altair ------------------------------------------------------------------------------------------------------

ALTAIR_API = sys.modules[alt.TopLevelMixin.__module__]          # altair.vegalite.v5.api or v6.api
SCHEMA_COPY = alt.SchemaBase.copy
ALTAIR_PARAMETER_DICT = getattr(ALTAIR_API, "_viewless_dict", None)
ALTAIR_LIFT = getattr(ALTAIR_API, "_prepare_to_lift", None)


def _whole_chart_copy(chart, deep=True, ignore=None):
    """A whole chart's copy, one level deep, where Altair asks for a deep one (``deep=True``); its copies of named
    fields (``deep=[…]``) as Altair makes them."""
    return SCHEMA_COPY(chart, deep=False if deep is True else deep, ignore=ignore)


def _parameter_dict(parameter):
    """A selection parameter as Altair compares it when it layers charts (its dict without ``views``), unvalidated."""
    return {key: value for key, value in parameter.to_dict(validate=False).items() if key != "views"}


def _lifted_parameter(parameter):
    """A selection parameter lifted to the top of a layered chart, as Altair lifts it (a top-level selection with no
    views yet), its dict unvalidated; any other parameter as Altair lifts it."""
    if isinstance(parameter, alt.SelectionParameter):
        return alt.TopLevelSelectionParameter(**parameter.to_dict(validate=False), views=[])
    return ALTAIR_LIFT(parameter)


def copy_whole_charts_one_level():
    """Make Altair copy whole charts one level deep and compare and lift parameters unvalidated, process-wide (only
    where Altair has what this replaces)."""
    if "copy" not in vars(alt.TopLevelMixin) and "copy" in vars(alt.SchemaBase):
        alt.TopLevelMixin.copy = _whole_chart_copy
    if ALTAIR_PARAMETER_DICT is not None:
        ALTAIR_API._viewless_dict = _parameter_dict
    if ALTAIR_LIFT is not None:
        ALTAIR_API._prepare_to_lift = _lifted_parameter


def disable_debug_mode():
    alt.utils.schemapi.disable_debug_mode()
