"""The mismatch slider's next positions, made while the server is idle.

The slider has finitely many positions (0 … 2 in steps of 0.01), and a room walks them one press at a time. After
a run, each kept picture it used (``kept.recorded``) whose parameters hold a Settings is made again, in the
background, at the two positions beside the run's mismatch — the same function, the same other parameters — unless
it is kept already. So the next press, by this user or another, finds its pictures made; the press after a turn
costs the picture beside it, made a moment too early. A kept function says which of its values are not made ahead
(``kept(ahead=…)``): the Monte Carlo dots, sampled runs and the staleness view cost more than the picture they confirm.

Work is done only while no page's run works or waits for its turn (``turns.line``), one picture at a time, so a press
that arrives waits for at most one picture (a Training run: 0.07 s); on toys of at most AHEAD_SEQUENCES sequences
(beyond, one picture can cost seconds); and at most AHEAD_ITEMS pictures are waiting, the newest first (a walk makes
the oldest useless).
"""

import logging
import threading
from collections import deque
from dataclasses import replace

from toylab.state.query import MISMATCH_RANGE, clean_float
from toylab.state.settings import Settings
from toylab_app import turns
from toylab_app.caches import kept

STEP = 0.01                        # the mismatch slider's step (toylab_app/sidebar.py)
AHEAD_SEQUENCES = 2**16            # V**T at most: a picture of such a toy takes at most a few hundredths of a second
AHEAD_ITEMS = 64
IDLE_CHECK_S = 0.05
THREAD = "toylab-ahead"            # the background thread's name
LOGGER = logging.getLogger("toylab.page")

_waiting = deque(maxlen=AHEAD_ITEMS)       # (kept function, args, kwargs), the newest on the right
_changed = threading.Condition()
_busy = threading.Event()                  # set while a picture is being made
_worker = None


def note(calls):
    """After a run: the kept calls it made ((function, args, kwargs), in order), to be made beside its mismatch."""
    shifted = [call for delta in (STEP, -STEP) for call in _beside(calls, delta)]
    if not shifted:
        return
    with _changed:
        _waiting.extend(reversed(shifted))         # the first call of the run is made first
        _start()
        _changed.notify()


def _beside(calls, delta):
    """The calls with each Settings' mismatch moved by ``delta`` (none beyond the slider's ends or for a large toy)."""
    for function, args, kwargs in calls:
        settings = [value for value in args if isinstance(value, Settings)]
        if not settings or any(s.V**s.T > AHEAD_SEQUENCES for s in settings):
            continue
        mismatch = clean_float(settings[0].mismatch + delta)
        if not MISMATCH_RANGE[0] <= mismatch <= MISMATCH_RANGE[1]:
            continue
        moved = tuple(replace(value, mismatch=mismatch) if isinstance(value, Settings) else value for value in args)
        if function.goes_ahead(*moved, **kwargs) and not function.ready(*moved, **kwargs):
            yield function, moved, kwargs


def _start():
    global _worker
    if _worker is None or not _worker.is_alive():
        _worker = threading.Thread(target=_work, name=THREAD, daemon=True)
        _worker.start()


def _work():
    while True:
        with _changed:
            while not _waiting:
                _changed.wait()
        while turns.line() != (0, 0):                  # a page is working or waiting: it goes first
            threading.Event().wait(IDLE_CHECK_S)
        with _changed:
            if not _waiting:
                continue
            function, args, kwargs = _waiting.pop()
            _busy.set()
        try:
            if not function.ready(*args, **kwargs):
                with kept.in_background():
                    function(*args, **kwargs)
        except Exception:  # noqa: BLE001 — a picture made ahead that fails is made (and shown failing) when asked
            LOGGER.debug("a picture made ahead failed", exc_info=True)
        finally:
            _busy.clear()


def settled(timeout):
    """Wait until nothing is waiting or being made (tests); True if so within ``timeout`` seconds."""
    deadline = threading.Event()
    for _ in range(int(timeout / IDLE_CHECK_S)):
        with _changed:
            if not _waiting and not _busy.is_set():
                return True
        deadline.wait(IDLE_CHECK_S)
    return False
