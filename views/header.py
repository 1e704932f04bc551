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
    for column, (label, value, help) in zip(st.columns(len(metrics)), metrics, strict=True):
        column.metric(label, value, help=help)
