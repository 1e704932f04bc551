"""The top of the page: what the toy is, its size, what π and μ score, how far apart they are, how much IS can pay,
the identity check E_μs[W] (with what it certifies) and, when the trainer scores another π, how far its objective
moved; the presentation-mode switch; and the menu's About text (the menu also holds the theme switch).

Normally: the title, the three-sentence introduction, and the numbers as metrics in a row that wraps rather than
cutting a number short. In presentation mode: one line — the toy's setting (the sidebar is collapsed) and the
same numbers — with the introduction and what each number is in its tooltip.
"""

import streamlit as st

from toylab.lessons.tour import INTRODUCTION, KEYS
from toylab.presentation.pipeline_text import identity_implied, identity_metric, objective_metric
from toylab.state.query import ESTIMATORS_TAB, YOUR_RUN_TAB
from toylab.text import headline
from toylab_app import screen_share
from toylab_app.caches import cache

TITLE = "toylab: sampler μ ≠ trainer π"
TAB_KEY = "tab"                     # the open tab (toylab_app.sidebar.TAB_KEY)
KEYS_TEXT = ", ".join(f"**{key}** {what}" for key, what in KEYS.items())
MENU = {"About": f"**{TITLE}**\n\n{INTRODUCTION}\n\nKeyboard: {KEYS_TEXT}. Every view is a link: copy the address."}


def metrics(settings):
    """(label, short label, value, help) of each headline number."""
    d = cache.toy_diagnostics(settings.toy_key)
    numbers = [
        ("M sequences", "M", f"{d.M:,}", "M = V**T: every sequence is enumerated, so every number here is exact."),
        ("J = E_π[r]", "J", headline(d.J), "The objective the trainer climbs: expected reward under the trainer π."),
        ("E_μ[r] logged", "E_μ[r]", headline(d.logged_reward),
         "The mean reward a rollout log shows: sequences come from the sampler μ, so this is not J."),
        ("‖∇J‖", "‖∇J‖", headline(d.grad_norm), "Norm of the true policy gradient; every relative error divides by it."),
        ("KL(μ‖π)", "KL(μ‖π)", headline(d.kl_mu_pi),
         "Σ_t KL_t(μ_t‖π_t) = −E_μ[log W]: how far the sampler is from the trainer (0 when they agree)."),
        ("χ²_seq", "χ²_seq", f"{d.chi2_seq:.4g}",
         "E_μ[W²] − 1 = ∏_t(1 + χ²_t) − 1: the variance of the sequence ratio W; it grows exponentially in T."),
        ("ESS fraction", "ESS", f"{d.ess:.1%}",
         "1/(1 + χ²_seq): the share of a batch that sequence-level IS effectively keeps."),
    ]
    if d.unreachable_mass:
        numbers[5:] = [
            ("χ²_seq", "χ²_seq", f"{d.chi2_seq:.4g}",
             "Over the sampler's support: E_μ[W²]/(E_μ W)² − 1 = ∏_t(1 + χ²_t) − 1, the χ² of π restricted to the "
             "sequences μ draws (renormalised) from μ."),
            ("ESS fraction", "ESS", f"{d.ess:.1%}",
             "(E_μ W)²/E_μ[W²] = 1/(1 + χ²_seq): the share of a batch that sequence-level IS effectively keeps, of "
             "the sequences μ can draw."),
            ("π-mass out of reach", "out of reach", f"{d.unreachable_mass:.4f}",
             "π(y ∉ S): the trainer's probability of the sequences the sampler never draws (top-k/top-p cut a token "
             "at some position). No importance weight brings it back: ∇J's part from there is a bias floor "
             f"(the {ESTIMATORS_TAB} tab splits each bias into this floor and the rest).")]
    objective = objective_metric(d)
    return numbers + [identity_metric(d)] + ([objective] if objective else [])


def one_line_metrics(settings, numbers):
    """Of the headline ``numbers``, those for one line: the identity check only where it adds to the others
    (``identity_implied``); the tooltip keeps them all."""
    implied = identity_implied(cache.toy_diagnostics(settings.toy_key))
    return [number for number in numbers if not (implied and number[1] == "E_μs[W]")]


def render(settings):
    """The header for the current mode."""
    numbers = metrics(settings)
    if screen_share.on():
        _one_line(settings, one_line_metrics(settings, numbers), numbers)
        return
    with st.container(horizontal=True, vertical_alignment="center"):
        st.title(TITLE, width="stretch")
        screen_share.button(st)
    st.caption(INTRODUCTION + (" The numbers below are the toy's (exact), not your file's: those are in the tab."
                               if st.session_state.get(TAB_KEY) == YOUR_RUN_TAB else ""))
    with st.container(horizontal=True, gap="medium", key="toylab_header"):
        for label, _, value, help in numbers:
            st.metric(label, value, help=help, width="content")


def _one_line(settings, numbers, every_number):
    toy = f"T {settings.T}, V {settings.V}, mismatch {settings.mismatch:.2f}, seed {settings.seed}, N {settings.N:,}" \
        + ("" if settings.sampler.is_default else ", " + settings.sampler.describe().replace("τ = ", "τ "))
    brand = "**toylab** · " if settings.sampler.is_default else ""        # a sampler setting takes its room
    if st.session_state.get(TAB_KEY) == YOUR_RUN_TAB:             # not the file's numbers: say whose
        brand = "**the toy (exact)** · " if settings.sampler.is_default else "**toy** · "
    about = "\n\n".join([INTRODUCTION, *(f"**{label}**: {help}" for label, _, _, help in every_number),
                           f"Keyboard: {KEYS_TEXT}."])
    with st.container(horizontal=True, vertical_alignment="center", key="toylab_header"):
        st.markdown(f"{brand}{toy} · " + " · ".join(f"{short} **{value}**" for _, short, value, _ in numbers[1:]),
                    width="stretch", help=about)
        screen_share.button(st)
