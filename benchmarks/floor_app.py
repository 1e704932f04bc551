"""Streamlit's floor: one slider and one metric, the least any rerun can cost (run by page_latency.py).

The slider is named "mismatch", like the toylab page's, so the benchmark presses it the same way.
"""

import streamlit as st

mismatch = st.slider("mismatch", 0.0, 2.0, 0.3, step=0.01)
st.metric("mismatch", f"{mismatch:.2f}")
