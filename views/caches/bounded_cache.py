"""A cache bounded by bytes, not entries: st.cache_resource and st.cache_data only bound the entry count, and
one entry (a toy at M = 4,194,304) can weigh a thousand times another."""

import threading
from collections import OrderedDict


class ByteBoundedCache:
    """The most recently used values, at most ``budget`` bytes in all, each weighed by ``size(value)`` at every
    use (a value may grow after it is stored, as a toy builds its M-vectors). Least recently used values go
    first; the value just asked for always stays. Shared by every session, so thread-safe; a value is built
    outside the lock, so one slow build does not hold up the other sessions."""

    def __init__(self, budget, size):
        self.budget, self.size = budget, size
        self._values = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, build):
        """The value for ``key``, built with ``build()`` if it is not kept (an exception is not kept)."""
        with self._lock:
            if key in self._values:
                return self._use(key, self._values[key])
        value = build()
        with self._lock:
            return self._use(key, self._values.get(key, value))

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
