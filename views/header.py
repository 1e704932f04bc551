"""The toy at a glance: its size, what π and μ score, how far apart they are, and how much IS can pay."""

import streamlit as st

from views.caches import cache


def render(settings):
    d = cache.toy_diagnostics(settings.toy_key)
    metrics = [
        ("M sequences", f"{d.M:,}", "M = V**T: every sequence is enumerated, so every number here is exact."),
        ("J = E_π[r]", f"{d.J:.4f}", "The objective the trainer climbs: expected reward under the trainer π."),
        ("logged reward E_μ[r]", f"{d.logged_reward:.4f}",
         "The mean reward a rollout log shows: sequences come from the sampler μ, so this is not J."),
        ("‖∇J‖", f"{d.grad_norm:.4f}", "Norm of the true policy gradient; every relative error divides by it."),
        ("KL(μ‖π)", f"{d.kl_mu_pi:.4f}",
         "Σ_t KL_t(μ_t‖π_t) = −E_μ[log W]: how far the sampler is from the trainer (0 when they agree)."),
        ("χ²_seq", f"{d.chi2_seq:.4g}",
         "E_μ[W²] − 1 = ∏_t(1 + χ²_t) − 1: the variance of the sequence ratio W; it grows exponentially in T."),
        ("ESS fraction", f"{d.ess:.1%}",
         "1/(1 + χ²_seq): the share of a batch that sequence-level IS effectively keeps."),
    ]
    if d.unreachable_mass:
        metrics[5:] = [
            ("χ²_seq", f"{d.chi2_seq:.4g}", "Over the sampler's support: E_μ[W²]/(E_μ W)² − 1 = ∏_t(1 + χ²_t) − 1, the "
                                            "χ² of π restricted to the sequences μ draws (renormalised) from μ."),
            ("ESS fraction", f"{d.ess:.1%}", "(E_μ W)²/E_μ[W²] = 1/(1 + χ²_seq): the share of a batch that sequence-level "
                                             "IS effectively keeps, of the sequences μ can draw."),
            ("π-mass out of reach", f"{d.unreachable_mass:.4f}",
             "π(y ∉ S): the trainer's probability of the sequences the sampler never draws (top-k/top-p cut a token "
             "at some position). No importance weight brings it back: ∇J's part from there is a bias floor "
             "(the Estimators tab splits each bias into this floor and the rest).")]
    for column, (label, value, help) in zip(st.columns(len(metrics)), metrics, strict=True):
        column.metric(label, value, help=help)
