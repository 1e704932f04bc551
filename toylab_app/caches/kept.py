"""What the page shows, kept for every session by the parameters that made it: a tab's charts ready to send, its
tables and its captions.

A room asks for the same pictures again and again: forty people on one link press the same slider through the same
values. A function decorated with ``@kept`` is a pure function of hashable arguments (a Settings, a TrainingConfig,
ids, numbers, strings; never session state or a data frame): its result is kept by its arguments — Python's hash
and ==, not a hash of anything's contents — in one cache shared by every session, bounded by bytes, and computed once
for concurrent callers (``ByteBoundedCache``). A second session's identical press then builds no frame and no chart:
it finds them. A value is shared, never copied: nobody changes it after it is made (charts are ``Prepared``, tables
Arrow tables, captions strings).

A value is computed behind a spinner when the function names one (``@kept(spinner="Computing…")``, or a function of
the arguments giving the text): shown only while it is computed, as st.cache_data shows its own, so a press that
finds its pictures kept costs no spinner (Streamlit starts a thread for each).

A kept function must read nothing but its arguments (and shared caches keyed on them). The tests check it:
``verifying()`` makes every use compute the value afresh and compare it with the kept one, so a page test that opens
one view after another fails when two views that differ share a key (a parameter the key left out).
"""

import contextlib
import functools
import sys
import threading
from dataclasses import fields, is_dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from toylab_app.caches.bounded_cache import ByteBoundedCache

KEPT_BYTES = 64 * 2**20            # every kept picture, over all sessions: a position of the mismatch slider on the four
                                   # tabs of a room is about 0.4 MB (Training's 0.27), so about 160 positions


def weight(value):
    """About how many bytes ``value`` holds (weighed once, when it is kept)."""
    if isinstance(getattr(value, "nbytes", None), int):        # an Arrow table, an array, a prepared chart
        return value.nbytes
    if isinstance(value, pd.DataFrame):
        return int(value.memory_usage(index=True, deep=False).sum())
    if isinstance(value, str | bytes):
        return len(value) + 50
    if isinstance(value, dict):
        return 64 + sum(weight(key) + weight(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return 56 + sum(weight(item) for item in value)
    if is_dataclass(value):
        return 56 + sum(weight(getattr(value, field.name)) for field in fields(value))
    return sys.getsizeof(value)


KEPT = ByteBoundedCache(KEPT_BYTES, weight, grows=False)
_verify = threading.Event()
_recording = threading.local()


def kept(function=None, *, spinner=None, ahead=True):
    """``function``'s results kept for every session by its arguments (positional and keyword, all hashable),
    computed behind ``spinner`` (a text, or a function of the arguments giving one) when it names one; made beside a
    run's mismatch while the server is idle (``caches.ahead``) unless ``ahead`` (True, False, or a function of the
    arguments) says not: a confirmation that costs more than the picture it confirms is made only when asked."""
    if function is None:
        return functools.partial(kept, spinner=spinner, ahead=ahead)

    @functools.wraps(function)
    def keeping(*args, **kwargs):
        key = (function, args, tuple(sorted(kwargs.items())))
        calls = getattr(_recording, "calls", None)
        if calls is not None:
            calls.append((keeping, args, kwargs))
        value = KEPT.get(key, lambda: _computed(function, spinner, args, kwargs))
        if _verify.is_set():
            fresh = function(*args, **kwargs)
            if not same(value, fresh):
                raise AssertionError(f"{function.__qualname__}{args}: the kept value is not the value its arguments "
                                     "make now (a parameter its key leaves out?)")
        return value

    def ready(*args, **kwargs):
        """Whether the value for these arguments is kept now (nothing is computed)."""
        return (function, args, tuple(sorted(kwargs.items()))) in KEPT

    def goes_ahead(*args, **kwargs):
        """Whether the value for these arguments may be made ahead (``caches.ahead``)."""
        return ahead(*args, **kwargs) if callable(ahead) else ahead

    keeping.ready, keeping.goes_ahead = ready, goes_ahead
    return keeping


def _computed(function, spinner, args, kwargs):
    if spinner is None or getattr(_recording, "background", False):      # no page to say it on
        return function(*args, **kwargs)
    with st.spinner(spinner if isinstance(spinner, str) else spinner(*args, **kwargs)):
        return function(*args, **kwargs)


@contextlib.contextmanager
def recorded():
    """The kept calls made in this thread within the block, as (kept function, args, kwargs), in order: a run's
    pictures, which ``caches.ahead`` makes again beside the run's mismatch."""
    _recording.calls = calls = []
    try:
        yield calls
    finally:
        _recording.calls = None


@contextlib.contextmanager
def in_background():
    """Within the block, this thread makes kept values for no page: no spinner (``caches.ahead``)."""
    _recording.background = True
    try:
        yield
    finally:
        _recording.background = False


@contextlib.contextmanager
def verifying():
    """Within the block, every use of a kept value computes it again and fails when the two differ (tests only)."""
    _verify.set()
    try:
        yield
    finally:
        _verify.clear()


def same(one, other):
    """Whether two kept values are equal: frames, tables and arrays by their contents (NaN equal to NaN)."""
    if type(one) is not type(other):
        return False
    if isinstance(one, pa.Table):
        return one.equals(other, check_metadata=True)
    if isinstance(one, pd.DataFrame):
        return one.equals(other) and list(one.columns) == list(other.columns)
    if isinstance(one, np.ndarray):
        return one.shape == other.shape and np.array_equal(one, other, equal_nan=one.dtype.kind == "f")
    if isinstance(one, dict):
        return one.keys() == other.keys() and all(same(one[key], other[key]) for key in one)
    if isinstance(one, list | tuple):
        return len(one) == len(other) and all(same(a, b) for a, b in zip(one, other, strict=True))
    if is_dataclass(one):
        return all(same(getattr(one, field.name), getattr(other, field.name)) for field in fields(one))
    if isinstance(one, float) and one != one:
        return other != other
    return one == other
