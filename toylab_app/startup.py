"""The page, loaded before its first visitor: ``load_page`` imports it — numpy, pandas, Altair and the library
(1.2–1.4 CPU-s), and Streamlit's frontend then served from memory (toylab_app/internals.py). Otherwise the first
visitor's run imports them, and a class that arrives with it waits: a room of 40 on a server just started by
``streamlit run``, held to half a core, had page loads at p95 4–8 s (docs/performance.md).

``streamlit run streamlit_app.py`` (a clone, Community Cloud) and ``toylab app`` (installed: ``streamlit run`` on
``toylab_app/script/served.py``) each find an ``st.App`` in their main file, and Streamlit runs its lifespan,
``page_loaded_first``, before the server answers anyone. A page that cannot be imported does not stop the server:
the lifespan logs why, and each visit shows the error.
"""

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from importlib import import_module

PAGE_LOADED = "toylab: the page is loaded"      # the server's log line once it is (benchmarks/reading_group.py waits)
LOGGER = logging.getLogger("toylab.page")


def load_page():
    """Import the page, then print one line saying so and how long it took."""
    started = time.perf_counter()
    import_module("toylab_app.page")
    print(f"  {PAGE_LOADED} ({time.perf_counter() - started:.1f} s), before the server answers", flush=True)


@asynccontextmanager
async def page_loaded_first(app):
    """``st.App``'s lifespan: the page is loaded (on a worker thread, the server's event loop free meanwhile) before
    the server answers its first request; if it cannot be, the server starts all the same (uvicorn would exit on a
    lifespan's error), with the reason in its log."""
    try:
        await asyncio.to_thread(load_page)
    except Exception:
        LOGGER.exception("toylab: the page could not be loaded before the server answers; each visit will show why")
    yield
