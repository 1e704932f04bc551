"""Cached computations of a run on the Your run tab: its step summaries, keyed on the files' content hash.

The summaries are small (a few kilobytes a step) and are what is kept; the steps' logs are read one at a time
and dropped (``toylab.your_run.run.step_logs``). The uploads' bytes are passed as ``_uploads`` (not hashed by
Streamlit: ``digest`` stands for them). A run whose every step is malformed raises ``LogError``, which Streamlit
does not cache.
"""

import hashlib

import streamlit as st

from toylab.your_run.bounds import PAGE_BOUNDS
from toylab.your_run.files import LogError
from toylab.your_run.run import step_logs, uploaded_files, zip_files
from toylab.your_run.steps import departures, failed_step, step_summary


def digest(uploads):
    """One sha256 over the uploads' names and contents, in order."""
    hashed = hashlib.sha256()
    for name, data in uploads:
        hashed.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return hashed.hexdigest()


def run_files(uploads):
    """The RunFiles of the uploads: the members of a zip, or the files themselves."""
    if len(uploads) == 1 and uploads[0][0].lower().endswith(".zip"):
        return zip_files(uploads[0][0], uploads[0][1], PAGE_BOUNDS)
    return uploaded_files(uploads)


@st.cache_data(max_entries=4, show_spinner="Reading the run, step by step …")
def run_summaries(key, selection, _uploads):
    """(summaries, departures) of the run; ``selection`` is ((id, ((name, value), ...)), ...)."""
    chosen = {id: dict(params) for id, params in selection}
    summaries = []
    for step in step_logs(run_files(_uploads), bounds=PAGE_BOUNDS, allow_torch=False):
        summaries.append(failed_step(step.step, step.files, step.error) if step.log is None
                         else step_summary(step.step, step.files, step.log, chosen))
    if all("error" in summary for summary in summaries):
        raise LogError(summaries[0]["error"])
    return summaries, departures(summaries)
