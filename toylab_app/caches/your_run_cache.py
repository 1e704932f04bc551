"""The Your run tab's logs and computations, keyed on the file's content hash and the chosen columns.

A loaded log is the only large thing here, and it is bounded three ways:

- by bytes across sessions: LOGS keeps at most LOG_CACHE_BYTES of logs, least recently used first out (like the
  toy cache); a log dropped while a session still shows it is read again when that session next needs it;
- by session: each session leases the log it shows and the one it compares with it (session-scoped resources,
  released when the session disconnects or shows another file or columns), and a log no session leases is dropped
  at once; the file's own bytes are held for the session the same way (``toylab_app.your_run_uploads``, which bounds them
  over all sessions), and Streamlit's copy of an upload is dropped as soon as the tab has taken it (Streamlit keeps
  uploads until a session is shut down, which a closed browser tab's never is: streamlit/streamlit#12607, #9218);
- while it is read or summarised: that work takes the server's one log slot (``work_slots.log_work``), so at most
  one log's working memory exists at a time and one upload keeps at most one core busy, and the file's
  ``bounds.PAGE_BOUNDS`` cap what that work can take.

``read_log`` calls ``progress(share)`` after every chunk of the file; the tab draws a progress bar there, and since
Streamlit stops a script at its next Streamlit call once the user leaves the tab or uploads another file, the
reading stops within one chunk (a chunk is about 4 MB of text, or a million Parquet values).

Everything shown — statistics, chart frames, estimator rows — is small and kept per (digest, columns[, selection])
in entry-bounded caches, so a rerun that needs nothing new never touches the log. A bad file raises ``LogError``,
which no cache keeps, so the message comes back on every rerun.
"""

import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field

import streamlit as st

from toylab.presentation import run_frames as log_frames
from toylab.text import clipped
from toylab.your_run import applied as log_estimators
from toylab.your_run.bounds import PAGE_BOUNDS
from toylab.your_run.columns import detect
from toylab.your_run.dumps import canonical_file, dump_kind
from toylab.your_run.files import open_log_file, preview
from toylab.your_run.log import read_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import match_toy
from toylab.your_run.parity import by_framework, framework_metrics
from toylab.your_run.statistics import log_statistics
from toylab.your_run.suggestions import suggestions
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.work_slots import give_back_memory, log_work

LOG_CACHE_BYTES = 200 * 2**20        # logs kept over all sessions (a log at the page's bound is 32 MB and more)
SHOWN_ENTRIES = 32                   # summaries, and estimator rows, kept
LOGS = ByteBoundedCache(LOG_CACHE_BYTES, lambda log: log.nbytes())
SUMMARIES = ByteBoundedCache(SHOWN_ENTRIES, lambda summary: 1)
ESTIMATOR_ROWS = ByteBoundedCache(SHOWN_ENTRIES, lambda rows: 1)
_leases = Counter()
_leases_lock = threading.Lock()


@dataclass(frozen=True)
class Source:
    """A file the tab shows: its name (unprintable characters escaped, at most 40 characters, the extension kept),
    content and the content's sha256."""
    name: str
    data: bytes = field(repr=False)
    digest: str = ""

    @classmethod
    def of(cls, name, data):
        return cls(clipped(name), data, hashlib.sha256(data).hexdigest())


def _file(source):
    """The source's LogFile: a framework's dump (NeMo-RL, prime-rl) as its canonical table; a torch or pickle file
    refused (an upload is never unpickled)."""
    kind = dump_kind(source.name, source.data[:1 << 16])
    if kind is not None:
        return canonical_file(source.name, kind, data=source.data, allow_torch=False, bounds=PAGE_BOUNDS)
    return open_log_file(source.name, data=source.data, bounds=PAGE_BOUNDS)


@st.cache_data(max_entries=8, show_spinner=False)
def detection(digest, name, _source, _progress):
    """(Preview, Detection) of the file's first rows (at most 100 rows and about 1 MB of them), read in the log slot
    (a Parquet footer is parsed there too)."""
    with log_work(waiting=lambda: _progress(None)):
        try:
            first_rows = preview(_file(_source))
        finally:
            give_back_memory()
    return first_rows, detect(first_rows)


def rollout_log(source, columns, progress, compared=False):
    """The RolloutLog with these Columns, leased by this session (as the log it shows, or as the one it compares with
    it: two leases, so that each is read once); read (reporting ``progress``) if no session has it."""
    key = (source.digest, columns)

    def build():
        with log_work(waiting=lambda: progress(None)):
            try:
                file = _file(source)
                return read_log(file, preview(file), columns, progress)
            finally:
                give_back_memory()            # the reading's buffers, whether it finished, failed or was stopped
    log = LOGS.get(key, build)
    (_lease_compared if compared else _lease)(key)
    return log


def _release(key):
    """A session let go of the log ``key``: drop it once no session holds it, and give the memory back."""
    with _leases_lock:
        _leases[key] -= 1
        if _leases[key] > 0:
            return
        del _leases[key]
        LOGS.discard(key)
    give_back_memory()


@st.cache_resource(scope="session", max_entries=1, show_spinner=False, on_release=_release)
def _lease(key):
    """This session's hold on the log ``key`` it shows: one per session, released when it disconnects or leases
    another."""
    return _take(key)


@st.cache_resource(scope="session", max_entries=1, show_spinner=False, on_release=_release)
def _lease_compared(key):
    """This session's hold on the log ``key`` it compares with the one it shows, as ``_lease``."""
    return _take(key)


def _take(key):
    with _leases_lock:
        _leases[key] += 1
    return key


def summary(source, columns, progress, compared=False):
    """The log's statistics, magnitudes, frameworks' metrics, notices and the frames of its charts (``compared``: of
    the log compared with the one shown, ``rollout_log``)."""
    def build():
        with log_work(waiting=lambda: progress(None)):
            log = rollout_log(source, columns, progress, compared)
            return {"statistics": log_statistics(log), "magnitudes": magnitudes(log),
                    "frameworks": by_framework(framework_metrics(log)), "notices": log.notices,
                    "tokens": log_frames.token_histogram_frame(log),
                    "position": log_frames.position_frame(log), "probability": log_frames.probability_frame(log),
                    "W": log_frames.sequence_histogram_frame(log, "W"),
                    "geo": log_frames.sequence_histogram_frame(log, "geo")}
    return SUMMARIES.get((source.digest, columns), build)


def estimators(source, columns, selection, progress):
    """What the selected estimators do to the log: (their rows, the reward estimates or None, the threshold
    suggestions, the threshold frames on log ρ_t, log W and log ρ_geo); ``selection`` is ((id, ((name, value),
    ...)), ...)."""
    def build():
        with log_work(waiting=lambda: progress(None)):
            log = rollout_log(source, columns, progress)
            chosen = {id: dict(params) for id, params in selection}
            return (log_estimators.on_log(log, chosen), log_estimators.reward_estimates(log),
                    suggestions(log, chosen),
                    {"tokens": log_frames.token_threshold_frame(log, chosen),
                     "W": log_frames.sequence_threshold_frame(log, chosen, "W"),
                     "geo": log_frames.sequence_threshold_frame(log, chosen, "geo")})
    return ESTIMATOR_ROWS.get((source.digest, columns, selection), build)


@st.cache_data(max_entries=32, show_spinner=False)
def matched(kl, T, V, seed, sampler, statistic="k1"):
    """The Match for the data's per-token KL Estimate (the one with the smaller se, k1 or k3: ``statistic``) at T, V,
    seed and the sidebar's pipeline model."""
    return match_toy(kl, T, V, seed, sampler=sampler, statistic=statistic)
