"""Cached computations of a run on the Your run tab: its step summaries, keyed on the files' content hash.

The summaries are small (a few kilobytes a step) and are what is kept; the steps' logs are read one at a time
(``toylab.your_run.run_map.run_summaries``, in this process) in the server's one log slot (``work_slots.log_work``), so a run's reading
takes no more memory than a log's, each file within ``bounds.PAGE_BOUNDS``, a zip's members read only when their
step is. A run whose every step is malformed raises ``LogError``, which is not cached.
"""

import hashlib

from toylab.your_run.bounds import PAGE_BOUNDS
from toylab.your_run.files import LogError
from toylab.your_run.run import uploaded_files, zip_files
from toylab.your_run.run_map import run_summaries as summarised_run
from toylab.your_run.steps import departures
from toylab_app.caches.bounded_cache import ByteBoundedCache
from toylab_app.caches.work_slots import give_back_memory, log_work

RUNS = ByteBoundedCache(4, lambda summaries: 1)          # the last four runs' summaries, over all sessions


def digest(sources):
    """One sha256 over the sources' names and contents' digests, in order."""
    hashed = hashlib.sha256()
    for source in sources:
        hashed.update(source.name.encode() + b"\0" + source.digest.encode())
    return hashed.hexdigest()


def run_files(sources):
    """The RunFiles of the sources: the members of a zip, or the files themselves; LogError if they are more text
    in all than one log may be (``PAGE_BOUNDS.text_bytes``)."""
    if len(sources) == 1 and sources[0].name.lower().endswith(".zip"):
        return zip_files(sources[0].name, sources[0].data, PAGE_BOUNDS)
    total = sum(len(source.data) for source in sources)
    if total > PAGE_BOUNDS.text_bytes:
        raise PAGE_BOUNDS.exceeded(f"{len(sources)} files", "text_bytes", f"the run ({total:,} bytes)")
    return uploaded_files([(source.name, source.data) for source in sources])


def run_summaries(sources, selection, progress):
    """(summaries, departures, notice: how many steps were read if the page's bounds cut the run short, else "")
    of the run, read in this process (``run_map.run_summaries``); ``selection`` is ((id, ((name, value), ...)), ...);
    ``progress(share, text)`` is called before the first step and after each: steps read, tokens per second, the
    time left (share None: waiting for the reading slot)."""
    def build():
        chosen = {id: dict(params) for id, params in selection}
        with log_work(waiting=lambda: progress(None, "Waiting for another log to be read (one at a time) …")):
            try:
                def reading(read):
                    progress(read.share(), f"Reading the run: {read.text()} …")
                summaries, cut = summarised_run(run_files(sources), chosen, PAGE_BOUNDS, progress=reading)
            finally:
                give_back_memory()            # the steps' buffers, whether the reading finished, failed or was stopped
        if all("error" in summary for summary in summaries):
            raise LogError(summaries[0]["error"])
        return summaries, departures(summaries), cut
    return RUNS.get((digest(sources), selection), build)
