"""The files a session's Your run tab holds, and how its uploaders and example buttons change them.

A session holds (released when it disconnects): the Sources it shows (one log, a zip of a run, or a run's files),
the run uploaded file by file ({file id: Source}), a second log compared with the first, and the notices about them:
why new files were not kept, the error of files let go, how many files in the run's uploader were let go. The uploaders' callbacks and the example
buttons are the only ways to change them. Each callback takes a new file's bytes and drops Streamlit's references to
them (its upload manager's copy and the widget's value), so a file lives exactly as long as the session shows it.

Bounds:
- a session: RUN_UPLOAD_BYTES for a run's files (a log is at most ``PAGE_BOUNDS.file_bytes``: Streamlit's uploader);
- every session together: HELD_BYTES (``BUDGET``); a file that would pass it is not kept, with a notice;
- a refused file is dropped at once, keeping only its one-line error: a file whose detection failed (``refuse``), a
  run none of whose steps could be read, a second log that could not be read (``refuse_compared``). A log whose
  reading failed with the columns picked is kept: another pick may read it.
"""

import io
import threading
import uuid

import streamlit as st

from toylab.your_run.bounds import MB, PAGE_BOUNDS
from toylab_app.caches.your_run_cache import Source
from toylab_app.internals import drop_uploaded_copies

UPLOAD_KEY = "your_run_upload"
RUN_UPLOAD_KEY = "your_run_run_upload"
COMPARE_KEY = "your_run_compare"
SESSION_KEY = "_your_run_session"
RUN_UPLOAD_BYTES = 4 * PAGE_BOUNDS.file_bytes      # a run's files held by one session, in all
HELD_BYTES = 500 * MB                              # files held by every session together
FULL = ("The server holds {held:,.1f} MB of uploads for its users now, and keeps at most {limit:,.0f} MB at once: "
        "this file ({size:,.1f} MB) was not kept. Try again in a few minutes, or read it with python -m toylab "
        "inspect FILE.")


class Budget:
    """Bytes of files held per session, within ``limit`` in all; shared by every session, so thread-safe."""

    def __init__(self, limit):
        self.limit, self._bytes, self._lock = limit, {}, threading.Lock()

    def claim(self, token, size):
        """(whether the session ``token`` may hold ``size`` bytes — if every session's then fit, or if it holds less
        than before — and then it is counted; the bytes the other sessions hold)."""
        with self._lock:
            others = sum(held for owner, held in self._bytes.items() if owner != token)
            if others + size > self.limit and size > self._bytes.get(token, 0):
                return False, others
            self._bytes[token] = size
            return True, others

    def release(self, token):
        with self._lock:
            self._bytes.pop(token, None)

    def held(self, token=None):
        """Bytes held by the session ``token``, or by every session."""
        with self._lock:
            return sum(self._bytes.values()) if token is None else self._bytes.get(token, 0)


BUDGET = Budget(HELD_BYTES)


def _forget(held):
    """on_release of a session's files: they no longer count against the budget."""
    BUDGET.release(held["token"])


@st.cache_resource(scope="session", max_entries=1, show_spinner=False, on_release=_forget)
def _session_files(token):
    """The session's files and notices (a dict, see the module docstring), released with the session. ``token`` is
    kept in its session state (Streamlit's own session id is one fixed value in streamlit.testing)."""
    return {"token": token}


def _held():
    return _session_files(st.session_state.setdefault(SESSION_KEY, uuid.uuid4().hex))


def _size(held):
    """Bytes of the distinct files a session holds."""
    files = {id(source): len(source.data) for source in (*(held.get("source") or ()), held.get("compared"),
                                                          *held.get("run", {}).values()) if source is not None}
    return sum(files.values())


def _keep(**changes):
    """Apply ``changes`` to the session's files if the budget allows them, and say so; else keep what it held and set
    the notice ``refused``."""
    held = _held()
    after = held | changes
    kept, others = BUDGET.claim(held["token"], _size(after))
    if not kept:
        held["refused"] = FULL.format(held=others / MB, limit=BUDGET.limit / MB, size=(_size(after) - _size(held)) / MB)
        return False
    held.clear()
    held.update(after)
    return True


# -- what the tab shows ----------------------------------------------------------------------------------------

def shown():
    """The Sources this session's tab shows (one log, several step files, or a zip), or None."""
    return _held().get("source")


def run_in_view():
    """{file id: Source} of the run uploaded file by file that this session's tab shows ({} when it shows none)."""
    return _held().get("run", {})


def compared():
    """The Source this session's tab shows side by side with the first (a second upload), or None."""
    return _held().get("compared")


def notices():
    """(why new files were not kept or "", the one-line error of the files let go because they could not be read or
    "", how many files in the run's uploader were let go before)."""
    held = _held()
    return held.get("refused", ""), held.get("error", ""), held.get("lost", 0)


def compared_notice():
    """Why the second log was refused, or ""."""
    return _held().get("compared_refused", "")


def show(sources):
    """Show these Sources (a tuple: one log, or a zip of a run), or nothing (None); a run uploaded file by file is let
    go."""
    _keep(source=sources, run={}, refused="", error="", lost=0)


def show_run(run, refused="", lost=0):
    """Show the run ``run`` ({file id: Source}, in upload order); ``refused``: why its files were not kept; ``lost``:
    how many files in its uploader were let go before."""
    _keep(source=tuple(run.values()) or None, run=dict(run), refused=refused, error="", lost=lost)


def show_compared(source):
    _keep(compared=source, compared_refused="")


def refuse(error):
    """The files shown could not be read: let them go at once, keeping the one-line ``error``."""
    _keep(source=None, run={}, refused="", error=error, lost=0)


def refuse_compared(error):
    """The second log could not be read: let it go at once, keeping the one-line ``error``."""
    _keep(compared=None, compared_refused=error)


# -- the uploaders' callbacks ------------------------------------------------------------------------------------

def _new(file):
    """Whether an uploader's value is a file with its bytes (Streamlit's UploadedFile, a BytesIO), not the mark of
    one whose bytes were let go."""
    return isinstance(file, io.BytesIO)


def uploaded():
    """on_change of the log's uploader: a new file replaces what is in view. The widget then reports the file as
    deleted on a later run (its bytes are gone from Streamlit): that changes nothing; a removed file (None) clears the
    tab unless a run from the run's uploader is in view."""
    file = st.session_state.get(UPLOAD_KEY)
    if file is None:
        if not run_in_view():
            show(None)
    elif _new(file):
        source = Source.of(file.name, file.getvalue())
        drop_uploaded_copies()
        del st.session_state[UPLOAD_KEY]
        show((source,))


def run_uploaded():
    """on_change of the run's uploader: the run in view is the files in that uploader, so a file dropped there joins
    the run and a file removed there leaves it. A file taken before is reported deleted by the widget and is kept by
    its file id. The callback also runs after the widget's value was dropped, with no file added or removed: that
    changes nothing. A file whose bytes were let go (another log was shown since, or the run was refused) cannot come
    back: the tab says so. Over RUN_UPLOAD_BYTES in all, nothing new is kept."""
    files = st.session_state.get(RUN_UPLOAD_KEY) or []
    held = run_in_view()
    added = [file for file in files if _new(file)]
    removed = set(held) - {file.file_id for file in files}
    if not added and not removed:
        return
    kept = [file for file in files if file.file_id in held or _new(file)]   # not the lost ones
    total = sum(len(held[file.file_id].data) if file.file_id in held else file.size for file in kept)
    if total > RUN_UPLOAD_BYTES:
        drop_uploaded_copies()
        st.session_state.pop(RUN_UPLOAD_KEY, None)
        show_run({}, refused=f"These files hold {total / MB:,.0f} MB in all, over the page's "
                             f"{RUN_UPLOAD_BYTES / MB:,.0f} MB for a run: read a larger run with python -m toylab "
                             "inspect DIR.")
        return
    run = {file.file_id: held[file.file_id] if file.file_id in held else Source.of(file.name, file.getvalue())
           for file in kept}
    drop_uploaded_copies()
    st.session_state.pop(RUN_UPLOAD_KEY, None)
    show_run(run, lost=len(files) - len(run))


def use_example(path):
    show((Source.of(f"examples/{path.name}", path.read_bytes()),))


def compared_uploaded():
    """on_change of the second log's uploader: taken as ``uploaded`` takes the first."""
    file = st.session_state.get(COMPARE_KEY)
    if file is None:
        show_compared(None)
    elif _new(file):
        source = Source.of(file.name, file.getvalue())
        drop_uploaded_copies()
        del st.session_state[COMPARE_KEY]
        show_compared(source)
