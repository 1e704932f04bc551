"""The sidebar's pipeline model: how the inference engine turns the logits into μ (``toylab.engine.sampler``), what it
logs as μ and what the trainer scores (``toylab.catalogue.pipelines``).

Session-state keys (and URL names): "top_p", "top_k", "temperature", "precision", "pipeline", "logged", "scored".
A pipeline preset sets logged and scored (their radios then show its choices, disabled). ``render`` draws the
controls in the sidebar's group when it is open and returns their values as make_settings' keyword arguments; a link
that sets any of them opens the group (``is_set``).
"""

import streamlit as st

from toylab.catalogue.pipelines import CUSTOM, LOGGED, PIPELINE_IDS, PIPELINES, SCORED
from toylab.engine.sampler import PRECISIONS, TEMPERATURE_RANGE
from toylab.presentation.pipeline_text import (
    LOGGED_HELP,
    LOGGED_NAMES,
    PIPELINE_HELP,
    SCORED_HELP,
    SCORED_NAMES,
)
from toylab.state.query import DEFAULTS, SAMPLER_FIELDS, TOP_K_RANGE, TOP_P_RANGE

PRECISION_NAMES = {"none": "none (float64)", "bf16": "bf16", "fp16": "fp16"}
PIPELINE_NAMES = {CUSTOM: "custom (the two choices below)"} | {id: pipeline.label for id, pipeline in PIPELINES.items()}


def render(group):
    """The controls, in ``group`` (the sidebar's expander, built only while it is open); {field: value}."""
    state = st.session_state
    state["top_k"] = min(state["top_k"], state["V"])               # a smaller V: keep at most V, i.e. all of them
    if state["pipeline"] != CUSTOM:                                  # a preset's choices follow the top-p
        state["logged"], state["scored"] = PIPELINES[state["pipeline"]].choices(state["top_p"])
    if group.open:
        with group:
            _controls()
    return {name: state[name] for name in SAMPLER_FIELDS}


def is_set():
    """Whether any of the sampler's controls is off its default (a link that sets one opens the group)."""
    return any(st.session_state[name] != getattr(DEFAULTS, name) for name in SAMPLER_FIELDS)


def _controls():
    state = st.session_state
    st.caption("μ_t = softmax of the engine's logits z = θ_t + mismatch·b_t, rounded to the precision, divided by "
               "τ, cut to the top-k, then to the top-p (vLLM's order). π is unchanged.")
    st.slider("top-p", *TOP_P_RANGE, step=0.01, key="top_p", persist_state="session",
              help="Keep a token while the probability of the tokens strictly more likely than it is below p "
                   "(1: off). A token cut has μ = 0 while π > 0: no weight brings its π-mass back.")
    st.slider("top-k", TOP_K_RANGE[0], state["V"], key="top_k", persist_state="session",
              help="Keep the k most likely tokens, ties at the k-th included (0: off).")
    st.slider("temperature τ", *TEMPERATURE_RANGE, step=0.05, key="temperature", persist_state="session",
              help="The sampler's temperature, μ ∝ exp(z/τ); the trainer's π has none unless it scores with τ.")
    st.radio("precision", PRECISIONS, key="precision", horizontal=True, format_func=PRECISION_NAMES.get,
             persist_state="session",
             help="The engine's logits cast to float32, then rounded to bf16 or fp16 (to nearest, ties to even, "
                  "as torch's .to(torch.bfloat16)).")
    st.selectbox("framework pipeline", PIPELINE_IDS, key="pipeline", format_func=PIPELINE_NAMES.get,
                 persist_state="session", help=PIPELINE_HELP)
    preset = state["pipeline"] != CUSTOM
    st.radio("logged μ (what the correction divides by)", LOGGED, key="logged", horizontal=True,
             format_func=LOGGED_NAMES.get, disabled=preset, persist_state="session", help=LOGGED_HELP)
    st.radio("scored π (what the trainer recomputes)", SCORED, key="scored", horizontal=True,
             format_func=SCORED_NAMES.get, disabled=preset, persist_state="session", help=SCORED_HELP)
