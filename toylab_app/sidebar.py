"""The sidebar: every control, read into a Settings; and the link the session opened, read into the controls.

Session-state keys (a callback may set any of them, e.g. a Lessons button; the page picks them up on
the rerun that follows, and the URL follows the page):

    "T", "V", "mismatch", "seed"   the toy                          (int, int, float, int)
    "est"                          the selected estimator ids        (list of str; presets framework:option)
    "<id>.<param>"                 a selected estimator's threshold  (float; str for a choice or text)
    "baseline"                     "none" | "logged" | "true"
    "N"                            the batch size                    (int)
    "agg"                          the Monte Carlo loss aggregation  (str, toylab.catalogue.aggregation)
    "top_p", "top_k", "temperature", "precision"   the sampler model (toylab_app/sampler_controls.py)
    "preset"                       derived from the toy each run; picking one sets T, V, mismatch, seed
    "group_toy", "group_sampler", "group_estimators", "group_batch"   whether a sidebar group is open (bool)
    "tab", "present", …            view parameters (``toylab.state.query.VIEW_PARAMETERS``), e.g. the open tab, and
                                   "framework", whose presets the estimator picker lists first

The URL names are the keys. On a session's first run, and when the browser goes Back or Forward, ``open_link``
parses the address with ``toylab.state.query.parse_link`` (bad values fall back to defaults with notices) into
session state; ``toylab_app.address.write`` puts the page's link back into the address at the end of every run.
"""

import math

import streamlit as st

from toylab.catalogue.aggregation import AGGREGATIONS
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, EXACT_IDS
from toylab.state.query import (
    ANY_FRAMEWORK,
    DEFAULTS,
    ERRORS_TAB,
    ESTIMATORS_TAB,
    INTEGER_RANGES,
    MISMATCH_RANGE,
    NO_COMPARISON,
    SAMPLER_FIELDS,
    VIEW_PARAMETERS,
    controls_of,
    make_settings,
    parse_link,
)
from toylab_app import address, sampler_controls

TAB_KEY = "tab"
COMPARE_KEY = "compare_baseline"         # a view parameter of the Estimators tab (toylab.state.query), set here
FRAMEWORK_KEY = "framework"
FRAMEWORK_NAMES = {ANY_FRAMEWORK: "none (catalogue first)"}
SELECT_ALL_UP_TO = 30                    # "Select all matches" once a search leaves at most this many ids
PRESET_KEY = "preset"
LOADED_KEY = "_toylab_url_settings"      # the Settings the URL opened, and its notices
NOTICES_KEY = "_toylab_url_notices"
CUSTOM = "custom"
PRESETS = {
    "sampler = trainer (mismatch 0)": {"T": 6, "V": 4, "mismatch": 0.0, "seed": 0},
    "default (mismatch 0.3)": {"T": 6, "V": 4, "mismatch": 0.3, "seed": 0},
    "mild, FP16-like (mismatch 0.05)": {"T": 6, "V": 4, "mismatch": 0.05, "seed": 0},
    "heavy (mismatch 1.0)": {"T": 6, "V": 4, "mismatch": 1.0, "seed": 0},
    "long sequences (T = 10)": {"T": 10, "V": 4, "mismatch": 0.3, "seed": 0},
}
PLAIN_SAMPLER = {name: getattr(DEFAULTS, name) for name in SAMPLER_FIELDS}
BASELINE_NAMES = {"none": "none (b = 0)", "logged": "logged (b = E_μ[r])", "true": "true (b = J)"}
POLICY_ESTIMATORS = [id for id in EXACT_IDS if not ESTIMATORS[id].on_policy]
GROUP_PREFIX = "group_"                  # a group's expander key: group_toy, …
GROUPS = {"toy": "Toy: preset, T, V, seed", "sampler": "Sampler (inference engine)",
          "estimators": "Estimators and their thresholds", "batch": "Baseline, batch size N, loss aggregation"}


def open_link():
    """On a session's first run, or after Back or Forward: the address's Settings into the controls and its view
    into session state; its notices are kept until the user changes a control."""
    navigation = address.navigated()
    if LOADED_KEY not in st.session_state or navigation:
        link = address.query()
        settings, view, notices = parse_link(link)
        st.session_state[LOADED_KEY], st.session_state[NOTICES_KEY] = settings, notices
        set_controls(settings)
        address.open_view(view, linked=link.keys(), navigation=navigation)
        if sampler_controls.is_set():                # a link that sets the sampler shows it
            st.session_state[f"{GROUP_PREFIX}sampler"] = True


def render():
    """(Settings, notices): the notices about the URL stay until the user changes a control. Only the mismatch is
    always built; a group's widgets are built only while it is open (closed, it costs a step one element instead of
    its widgets' redraw), and each keeps its value for the session while its group is closed."""
    state = st.session_state
    with st.sidebar:
        st.slider("mismatch", *MISMATCH_RANGE, step=0.01, key="mismatch",
                  help="How far the sampler μ is from the trainer π: μ_t = softmax(θ_t + mismatch·b_t).")
        _in_group("toy", _toy_controls)
        sampler = sampler_controls.render(group("sampler"))
        _in_group("estimators", _estimator_controls)
        _in_group("batch", _batch_controls)
    thresholds = {(id, name): state.setdefault(f"{id}.{name}", param.default)
                  for id in state["est"] for name, param in ESTIMATORS[id].params.items()}
    settings = make_settings(state["T"], state["V"], state["mismatch"], state["seed"], state["est"],
                             thresholds, state["baseline"], state["N"], state["agg"], **sampler)
    return settings, state[NOTICES_KEY] if settings == state[LOADED_KEY] else []


def group(name):
    """The sidebar's group ``name`` (GROUPS): an expander that reruns the page when opened or closed, so that its
    content is built only while it is open (``.open``)."""
    return st.expander(GROUPS[name], key=GROUP_PREFIX + name, on_change="rerun")


def _in_group(name, controls):
    expander = group(name)
    if expander.open:
        with expander:
            controls()


def _toy_controls():
    _preset_picker()
    st.slider("T — tokens per sequence", *INTEGER_RANGES["T"], key="T", persist_state="session",
              help="Sequence length. The toy enumerates all M = V**T sequences exactly.")
    st.slider("V — vocabulary size", *INTEGER_RANGES["V"], key="V", persist_state="session",
              help="Tokens per position.")
    st.number_input("seed", *INTEGER_RANGES["seed"], step=1, key="seed", persist_state="session",
                    help="Draws θ and b; the same seed gives the reading group's reference toy.")


def _estimator_controls():
    framework = st.selectbox("my framework", VIEW_PARAMETERS[FRAMEWORK_KEY].choices, key=FRAMEWORK_KEY,
                             persist_state="session", format_func=lambda name: FRAMEWORK_NAMES.get(name, name),
                             help="Lists this framework's presets first in the estimator picker.")
    st.multiselect("estimators", picker_order(framework), key="est", filter_mode="contains",
                   select_all=SELECT_ALL_UP_TO, persist_state="session",
                   help="Which gradient estimators to compare (their formulas are in the Estimators "
                        "tab); batch-coupled ones (seq_snis, grpo, rloo, tis_bn, m2po) have Monte Carlo results "
                        "only. framework:option ids (verl:…, slime:…, …) are the frameworks' own options, as their "
                        "code computes them: type a framework's name to list its presets (and select them all).")
    _threshold_controls(st.session_state["est"])


def _batch_controls():
    st.radio("baseline b", BASELINES, key="baseline", horizontal=True, format_func=BASELINE_NAMES.get,
             persist_state="session",
             help="Subtracted from the reward: A = r(y) − b. 'logged' is the mean reward a rollout log "
                  "shows, E_μ[r]; 'true' is J = E_π[r].")
    st.radio(f"compare with the baseline ({ESTIMATORS_TAB})", (NO_COMPARISON, *BASELINES), key=COMPARE_KEY,
             horizontal=True, persist_state="session",
             format_func=lambda name: name if name == NO_COMPARISON else BASELINE_NAMES[name].split(" (")[0],
             help=f"The {ESTIMATORS_TAB} tab's scatter draws each estimator also at this baseline, hollow, with a line to "
                  "where it is at the baseline above: what the baseline moves. Here, not in the tab: a control of "
                  "the first tab kept while another is open would cost every fresh page a second run.")
    st.number_input("batch size N", *INTEGER_RANGES["N"], step=1, key="N", persist_state="session",
                    help="Sequences per gradient estimate: the std shrinks as 1/√N, the bias does not.")
    st.selectbox("loss aggregation", AGGREGATIONS, key="agg", persist_state="session",
                 help=f"How a Monte Carlo batch's token losses become one gradient ({ERRORS_TAB} tab): "
                      "seq-mean-token-sum divides by N; verl's token-mean by the tokens left after rejection; "
                      "seq-mean-token-mean by each sequence's kept tokens; TRL's dapo by all response tokens.")


def picker_order(framework):
    """Every estimator id: the chosen framework's presets first, then the registry's order (the catalogue, then
    each framework's presets together)."""
    return sorted(ESTIMATORS, key=lambda id: ESTIMATORS[id].framework != framework)


def set_controls(settings):
    """Put a Settings into the controls' session state (call before the widgets, e.g. from a callback)."""
    st.session_state.update(controls_of(settings))


def _threshold_controls(estimators):
    """A number input per threshold of the selected estimators; a select box for a choice (an estimator's
    weight, a statistic), a text input for a text threshold (verl's "lower_upper" ratio bounds)."""
    for id in estimators:
        for name, param in ESTIMATORS[id].params.items():
            key = f"{id}.{name}"
            st.session_state.setdefault(key, param.default)
            if param.choices is not None:
                st.selectbox(key, param.choices, key=key, persist_state="session", help=param.help)
            elif param.parse is not None:
                st.text_input(key, key=key, persist_state="session", help=param.help)
            elif isinstance(param.default, str):
                st.selectbox(key, POLICY_ESTIMATORS, key=key, persist_state="session", help=param.help)
            else:
                step = 10.0 ** math.floor(math.log10(abs(param.default))) / 10 if param.default else 0.01
                st.number_input(key, param.low, param.high, step=step, format="%g", key=key, persist_state="session",
                                help=f"{param.help} ({ESTIMATORS[id].label}); {param.low:g} to {param.high:g}")


def _preset_picker():
    """A preset is a toy with the plain-softmax sampler: with the sampler set otherwise the toy is "custom"."""
    toy = {name: st.session_state[name] for name in ("T", "V", "mismatch", "seed", *SAMPLER_FIELDS)}
    st.session_state[PRESET_KEY] = next((name for name, preset in PRESETS.items() if preset | PLAIN_SAMPLER == toy),
                                        CUSTOM)
    st.selectbox("preset", [*PRESETS, CUSTOM], key=PRESET_KEY, on_change=_apply_preset,
                 help="Sets T, V, mismatch and seed in one go, with the sampler as plain softmax.")


def _apply_preset():
    if st.session_state[PRESET_KEY] in PRESETS:
        st.session_state.update(PRESETS[st.session_state[PRESET_KEY]] | PLAIN_SAMPLER)
