"""A test's time limit, for tests that wait on something outside the process (a Dask cluster, a peer that may never
answer): ``@pytest.mark.time_limit(SECONDS)`` on a test or a module (``tests/conftest.py`` applies it), or
``with at_most(SECONDS): …``. Not a test module.

The limit is a SIGALRM in the main thread (pytest and pytest-xdist's workers run tests there): the wait is
interrupted and the test fails with ``TimeLimitExceeded``. A wait a signal cannot interrupt (a C call that retries on
EINTR) is ended ``GRACE_SECONDS`` later by faulthandler, which prints every thread's stack and exits the process: the
run fails, it does not hang. No timed assertion: a limit is a bound on a hang, far above the test's usual time.
"""

import contextlib
import faulthandler
import signal
import sys
import threading

GRACE_SECONDS = 60.0


class TimeLimitExceeded(Exception):
    pass


@contextlib.contextmanager
def at_most(seconds):
    """The block, interrupted with TimeLimitExceeded after ``seconds`` (the process ended GRACE_SECONDS later)."""
    faulthandler.dump_traceback_later(seconds + GRACE_SECONDS, exit=True, file=sys.__stderr__)
    in_main = threading.current_thread() is threading.main_thread()

    def expired(signum, frame):
        raise TimeLimitExceeded(f"over its time limit of {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, expired) if in_main else None
    if in_main:
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()
