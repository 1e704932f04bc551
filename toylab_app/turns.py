"""A room's presses answered in turn: at most TURNS script runs work at once over all sessions, the others wait in the
order they came, and a waiting page says so, with how many presses are ahead of it.

Streamlit runs each session's script in a thread of its own; forty runs at once share one interpreter lock, so each
takes forty times as long and every page waits for all of them, silently (its stale content greyed out). In turn,
the first presses are answered at their own speed and the later ones wait in line, each page saying where it
stands. A session keeps its place across its own reruns (a user who presses again while waiting is not sent to the
back), and a place whose session stopped asking (a closed page) is given up after STALE_S.

A turn is taken by the page's run around all its work; the work slots (``toylab_app.caches.work_slots``) and the shared
caches (``toylab_app.caches.bounded_cache``, st.cache_data) are taken inside it, so nothing waits for a run that waits
for a turn.
"""

import contextlib
import threading
import time

TURNS = 2                   # the cores of a small server: two runs overlap their numpy and their waits for the socket
CHECK_S = 0.5               # a waiting page's notice is refreshed this often (a Streamlit call: a rerun stops the wait)
STALE_S = 4 * CHECK_S       # a waiting place not checked for this long is given up

_changed = threading.Condition()
_working = 0
_places = {}                # a waiting session's ticket → when its run last checked; in the order the sessions came


class Ticket:
    """A session's place in the line (kept in its session state)."""


def _ahead(ticket, now):
    """The live places ahead of ``ticket`` (stale ones are dropped on the way)."""
    ahead = 0
    for other, checked in list(_places.items()):
        if other is ticket:
            return ahead
        if now - checked > STALE_S:
            del _places[other]
        else:
            ahead += 1
    return ahead


@contextlib.contextmanager
def turn(ticket, waiting, served):
    """Hold one of TURNS while the block runs. While the run waits, ``waiting(ahead)`` is called every CHECK_S
    seconds with the number of presses ahead of it (those being answered included); ``served()`` once its turn
    comes after a wait. A run stopped while waiting (Streamlit stops a run at its next Streamlit call when the user
    presses again) leaves its session's place in the line for the next run."""
    global _working
    waited, said = False, 0.0
    try:
        while True:
            with _changed:
                if waited:
                    _changed.wait(CHECK_S)              # until a turn is given back, or CHECK_S
                now = time.monotonic()
                _places[ticket] = now                  # a new place goes last; a kept one keeps its rank
                ahead = _ahead(ticket, now)
                if ahead == 0 and _working < TURNS:
                    del _places[ticket]
                    _working += 1
                    break
                ahead += _working
            waited = True
            if now - said >= CHECK_S:                   # at most one notice a CHECK_S, however often turns pass
                waiting(ahead)
                said = now
    except Exception:
        with _changed:
            _places.pop(ticket, None)
            _changed.notify_all()
        raise
    try:
        if waited:
            served()
        yield
    finally:
        with _changed:
            _working -= 1
            _changed.notify_all()


def notice(ahead):
    """What a waiting page says."""
    return (f"Waiting: {ahead} {'press' if ahead == 1 else 'presses'} ahead of yours. The server answers {TURNS} at a "
            "time, in the order they came; this page updates when its turn comes.")


def line():
    """(runs working, places waiting) now: for the tests and the benchmarks."""
    with _changed:
        return _working, len(_places)
