"""At most a few large computations at once, over all sessions: the server's memory then grows with the
slots, not with the number of users. And at most one rollout log read or summarised at a time (``log_work``), so
one user's upload takes at most one core and one log's working memory; freed memory is handed back to the system
after a log's reading and once no session holds it (``give_back_memory``).

A computation over M sequences holds a few M-vectors of temporaries (about 150 MB at M = 4,194,304); four
users opening tabs of the largest toy together would hold four such sets. With LARGE_WORK_SLOTS = 2 (the
cores of a small server, so no throughput is lost) the others wait their turn, behind a spinner. Small
computations never wait.
"""

import contextlib
import ctypes
import threading

import pyarrow as pa

LARGE_WORK = 2**18                 # sequences (or samples) from which a computation takes a slot: 8 MB a vector
LARGE_WORK_SLOTS = 2
LOG_WORK_SLOTS = 1                 # a log's reading takes up to ~300 MB (bounds.PAGE_BOUNDS): one at a time
WAIT_CHECK_S = 0.25
_slots = threading.BoundedSemaphore(LARGE_WORK_SLOTS)
_log_work = threading.BoundedSemaphore(LOG_WORK_SLOTS)
_held = threading.local()


@contextlib.contextmanager
def large_work(size):
    """Hold one of LARGE_WORK_SLOTS while the block runs, if ``size`` (sequences enumerated, or samples drawn)
    is at least LARGE_WORK. A thread that already holds a slot does not take a second (no nested waits)."""
    if size < LARGE_WORK or getattr(_held, "slot", False):
        yield
        return
    with _slots:
        _held.slot = True
        try:
            yield
        finally:
            _held.slot = False


@contextlib.contextmanager
def log_work(waiting):
    """Hold the log slot while the block runs (a thread that holds it already does not wait again); while another
    session holds it, call ``waiting()`` every WAIT_CHECK_S seconds (a page's progress message: Streamlit can stop
    the wait there)."""
    if getattr(_held, "log", False):
        yield
        return
    while not _log_work.acquire(timeout=WAIT_CHECK_S):
        waiting()
    _held.log = True
    try:
        yield
    finally:
        _held.log = False
        _log_work.release()


def give_back_memory():
    """Return freed memory to the system: pyarrow's pool keeps freed blocks, and glibc keeps freed heap pages (arrays
    of a few MB come from the heap once the first ones were freed); without this a released log stays resident."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):         # malloc_trim is glibc's (Linux)
        ctypes.CDLL("libc.so.6").malloc_trim(0)
