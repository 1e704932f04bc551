"""In presentation mode a sweep shows one panel at a time: the picker (its choice is in the link), or None."""

import streamlit as st

from toylab.state.query import VIEW_PARAMETERS
from toylab_app import screen_share

NAMES = {"rmse": "relative RMSE", "bias": "relative bias", "std": "relative std", "divergence": "KL and χ²_seq",
         "std_ratio": "std ÷ on-policy", "probability": "tail probabilities"}


def picker(key, where=st):
    """The panel to show alone (presentation mode: a horizontal radio under ``key``, in ``where``), or None: every
    panel."""
    if not screen_share.on():
        return None
    return where.radio("panel", VIEW_PARAMETERS[key].allowed()[0], key=key, horizontal=True, persist_state="session",
                    format_func=NAMES.get, label_visibility="collapsed")
