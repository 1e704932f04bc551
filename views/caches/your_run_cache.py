"""Cached computations of the Your run tab, keyed on the file's content hash and the chosen columns.

The file's bytes are passed as ``_data`` (not hashed by Streamlit: the sha256 ``digest`` stands for them).
The loaded log is a resource (one shared object, at most two kept); everything shown is data. A bad file
raises ``LogError``, which Streamlit does not cache, so the message comes back on every rerun.
"""

import hashlib
from dataclasses import dataclass, field

import streamlit as st

from toylab.presentation import run_frames as log_frames
from toylab.your_run import applied as log_estimators
from toylab.your_run.columns import detect
from toylab.your_run.files import PAGE_SIZE_LIMIT_MB, open_log_file, preview
from toylab.your_run.log import read_log
from toylab.your_run.matching import match_toy
from toylab.your_run.statistics import log_statistics


@dataclass(frozen=True)
class Source:
    """A file the tab shows: its name, content and the content's sha256."""
    name: str
    data: bytes = field(repr=False)
    digest: str = ""

    @classmethod
    def of(cls, name, data):
        return cls(name, data, hashlib.sha256(data).hexdigest())


def _file(source):
    return open_log_file(source.name, data=source.data, max_bytes=PAGE_SIZE_LIMIT_MB << 20)


@st.cache_data(max_entries=8, show_spinner=False)
def detection(digest, name, _source):
    """(Preview, Detection) of the file's first rows."""
    first_rows = preview(_file(_source))
    return first_rows, detect(first_rows)


@st.cache_resource(max_entries=2, show_spinner=False)
def rollout_log(digest, columns, _source):
    """The RolloutLog with these Columns."""
    file = _file(_source)
    return read_log(file, preview(file), columns)


@st.cache_data(max_entries=8, show_spinner="Reading the log …")
def summary(digest, columns, _source):
    """The log's statistics and the frames of its charts."""
    log = rollout_log(digest, columns, _source)
    return {"statistics": log_statistics(log), "tokens": log_frames.token_histogram_frame(log),
            "position": log_frames.position_frame(log), "probability": log_frames.probability_frame(log),
            "W": log_frames.sequence_histogram_frame(log, "W"),
            "geo": log_frames.sequence_histogram_frame(log, "geo")}


@st.cache_data(max_entries=32, show_spinner=False)
def matched(k1, T, V, seed, sampler):
    """The Match for the data's k1 Estimate at T, V, seed and the sidebar's sampler model."""
    return match_toy(k1, T, V, seed, sampler=sampler)


@st.cache_data(max_entries=16, show_spinner="Applying the estimators to the log …")
def estimators(digest, columns, selection, _source):
    """What the selected estimators do to the log: (their rows, the reward estimates or None, the threshold frames
    on log ρ_t, log W and log ρ_geo); ``selection`` is ((id, ((name, value), ...)), ...)."""
    log = rollout_log(digest, columns, _source)
    chosen = {id: dict(params) for id, params in selection}
    return (log_estimators.on_log(log, chosen), log_estimators.reward_estimates(log),
            {"tokens": log_frames.token_threshold_frame(log, chosen),
             "W": log_frames.sequence_threshold_frame(log, chosen, "W"),
             "geo": log_frames.sequence_threshold_frame(log, chosen, "geo")})
