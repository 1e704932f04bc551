"""Download a log's per-sequence and per-token results as CSV or Parquet, built only when asked for."""

import streamlit as st

from toylab.presentation import run_frames

FORMATS = {"CSV": ("csv", "text/csv"), "Parquet": ("parquet", "application/vnd.apache.parquet")}


def render(log, stem, key):
    """Two download buttons (per sequence, per token) in the chosen format; ``stem`` names the files."""
    chosen = st.radio("export as", list(FORMATS), horizontal=True, key=f"{key}.format")
    extension, mime = FORMATS[chosen]
    left, right = st.columns(2)
    left.download_button("Per-sequence results", lambda: run_frames.export_bytes(
        run_frames.sequence_results_frame(log), extension), file_name=f"{stem}.sequences.{extension}", mime=mime,
        key=f"{key}.sequences", on_click="ignore", icon=":material/download:",
        help="A row per sequence: its row in the file, tokens, log W, log ρ_geo, max |log ρ|, mean k3, reward")
    right.download_button("Per-token results", lambda: run_frames.export_bytes(
        run_frames.token_results_frame(log), extension), file_name=f"{stem}.tokens.{extension}", mime=mime,
        key=f"{key}.tokens", on_click="ignore", icon=":material/download:",
        help="A row per response token: sequence, position, log μ, log π, log ρ")
