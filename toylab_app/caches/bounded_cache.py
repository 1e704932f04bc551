"""A cache bounded by bytes, not entries: st.cache_resource and st.cache_data only bound the entry count, and
one entry (a toy at M = 4,194,304) can weigh a thousand times another. Shared by every session, and single-flight:
when many sessions ask for the same missing value at the same moment (a room following the presenter's link), one
builds it and the others wait for that value instead of building it again."""

import threading
from collections import OrderedDict


class _Flight:
    """One build of a value that other threads may wait for: its value, the Exception it raised, or abandoned (the
    builder was stopped by a BaseException that is not an Exception, e.g. Streamlit stopping its script: a waiter
    then builds the value itself)."""

    def __init__(self):
        self.done = threading.Event()
        self.value = self.error = None
        self.abandoned = False


class ByteBoundedCache:
    """The most recently used values, at most ``budget`` bytes in all, each weighed by ``size(value)`` at every
    use (a value may grow after it is stored, as a toy builds its M-vectors). Least recently used values go
    first; the value just asked for always stays. Shared by every session, so thread-safe; a value is built
    outside the lock, so one slow build does not hold up the other sessions, and built once for all the threads
    that ask for it while it is being built."""

    def __init__(self, budget, size):
        self.budget, self.size = budget, size
        self._values = OrderedDict()
        self._flights = {}
        self._lock = threading.Lock()

    def get(self, key, build):
        """The value for ``key``, built with ``build()`` if it is not kept and no other thread is building it (then
        that thread's value, or its Exception, which is not kept)."""
        while True:
            with self._lock:
                if key in self._values:
                    return self._use(key, self._values[key])
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    break
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if not flight.abandoned:
                with self._lock:
                    return self._use(key, self._values.get(key, flight.value))
        try:
            flight.value = build()
        except Exception as error:
            flight.error = error
            raise
        except BaseException:
            flight.abandoned = True
            raise
        finally:
            with self._lock:
                del self._flights[key]
                if flight.error is None and not flight.abandoned:
                    value = self._use(key, self._values.get(key, flight.value))
            flight.done.set()
        return value

    def __contains__(self, key):
        with self._lock:
            return key in self._values

    def discard(self, key):
        """Forget the value for ``key``, if kept."""
        with self._lock:
            self._values.pop(key, None)

    def total(self):
        """Bytes of the kept values, weighed now."""
        with self._lock:
            return sum(self.size(value) for value in self._values.values())

    def __len__(self):
        return len(self._values)

    def _use(self, key, value):
        self._values[key] = value
        self._values.move_to_end(key)
        sizes = {kept: self.size(stored) for kept, stored in self._values.items()}
        total = sum(sizes.values())
        for kept in list(self._values):
            if total <= self.budget:
                break
            if kept != key:
                del self._values[kept]
                total -= sizes[kept]
        return value
