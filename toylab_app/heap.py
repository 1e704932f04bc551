"""The imports' heap, frozen once per server process.

Streamlit is told not to collect garbage after every run (.streamlit/config.toml), and the objects the imports made
(Streamlit, pandas, pyarrow, Altair) are moved out of Python's own collections by ``gc.freeze()`` on the server's
first run. Whether that was done is kept here, in a module (imported once per process), not asked of
``gc.get_freeze_count()``, which counts the frozen objects one by one: 15–20 ms a run, a quarter of a room's server
CPU (py-spy, 40 users, docs/performance.md).
"""

import gc
import threading

_frozen = threading.Event()


def freeze_imports():
    """``gc.freeze()`` once: on the first run of the page in this process."""
    if not _frozen.is_set():
        _frozen.set()
        gc.freeze()
