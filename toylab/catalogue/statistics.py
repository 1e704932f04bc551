"""Per-token statistics by name: what rejections compare with their bounds, and what sequence statistics reduce.

Each is a function of a view of sequences (``engine.sequences``), which gives log ρ_t, log π_t(y_t) and
log μ_t(y_t) per token; with ρ = π/μ and Δp = π_t(y_t) − μ_t(y_t):

    log_ratio = log ρ,  k1 = −log ρ,  k2 = ½(log ρ)²,  k3 = ρ − 1 − log ρ,  abs_log_ratio = |log ρ|
    k3_reverse = 1/ρ − 1 + log ρ       AReaL's kl_k3 as its code computes it (4aef98d areal/utils/data.py
                                       KLEstimator._compute_approx_kl negates the log ratio first; its docs call it
                                       r − log r − 1); NeMo-RL's policy_kl_error (7ea279a
                                       nemo_rl/algorithms/loss/loss_functions.py, calculate_kl k3 with the
                                       generation log-probs as reference)
    mult_error = e^{|log ρ|}           NeMo-RL's multiplicative probability error (7ea279a nemo_rl/algorithms/grpo.py
                                       compute_and_apply_seq_logprob_error_masking: its mean over the sequence)
    tv = |ρ − 1|                       open-instruct's per-token TV proxy (e6c3044 grpo_utils.compute_rho_correction)
    prob_diff = Δp                     ROLL's diff filters (8eb27cc roll/utils/train_infer_corrections.py)
    kpop = max(KL_B(π_t‖μ_t), KL_B(μ_t‖π_t))     the Bernoulli KL ("this token or not") both ways (verl PR #6800)
    binary_kl = kpop with both probabilities clamped to [10⁻⁸, 1 − 10⁻⁸] first: AReaL's KPop metric as coded
                                       (cbff54d areal/utils/functional/functional.py compute_binary_kl_divergence)

Each stays finite or +∞ (never NaN) where μ_t(y_t) = 0 (log ρ = +∞), a token the sampler never produces.
``RATIO_STATISTICS`` read log ρ only (a clamp of the log ratios changes them; it does not change probabilities).
"""

import numpy as np


def bernoulli_kl(log_p, log_q, epsilon=0.0):
    """KL(Bern(p)‖Bern(q)) = p·log(p/q) + (1 − p)·log((1 − p + ε)/(1 − q + ε)) from log p, log q; 0·log 0 = 0;
    ε = 0 but for a framework that guards the second logarithm (SkyRL's binary_kl: 10⁻⁸)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        not_p = -np.expm1(log_p)
        first = np.where(log_p > -np.inf, np.exp(log_p) * (log_p - log_q), 0.0)
        second = np.where(not_p > 0, not_p * (np.log(not_p + epsilon) - np.log(-np.expm1(log_q) + epsilon)), 0.0)
    return first + second


BINARY_KL_FLOOR = 1e-8          # AReaL's compute_binary_kl_divergence(eps=1e-8)


def _clamped_binary_kl(view):
    """max of the two Bernoulli KLs of p = clamp(π_t(y_t)), q = clamp(μ_t(y_t)) in [ε, 1 − ε]: always finite."""
    p = np.clip(np.exp(view.log_pi), BINARY_KL_FLOOR, 1 - BINARY_KL_FLOOR)
    q = np.clip(np.exp(view.log_mu), BINARY_KL_FLOOR, 1 - BINARY_KL_FLOOR)

    def kl(a, b):
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    return np.maximum(kl(p, q), kl(q, p))


def _k3(log_rho):
    """ρ − 1 − log ρ, +∞ where log ρ = +∞ (not ∞ − ∞)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isposinf(log_rho), np.inf, np.exp(log_rho) - 1 - log_rho)


def _k3_reverse(log_rho):
    with np.errstate(over="ignore"):
        return np.exp(-log_rho) - 1 + log_rho


def _tv(log_rho):
    with np.errstate(over="ignore"):
        return np.abs(np.exp(log_rho) - 1)


def _mult_error(log_rho):
    with np.errstate(over="ignore"):
        return np.exp(np.abs(log_rho))


STATISTICS = {
    "log_ratio": lambda view: view.log_rho,
    "k1": lambda view: -view.log_rho,
    "k2": lambda view: 0.5 * view.log_rho**2,
    "k3": lambda view: _k3(view.log_rho),
    "abs_log_ratio": lambda view: np.abs(view.log_rho),
    "k3_reverse": lambda view: _k3_reverse(view.log_rho),
    "mult_error": lambda view: _mult_error(view.log_rho),
    "tv": lambda view: _tv(view.log_rho),
    "prob_diff": lambda view: np.exp(view.log_pi) - np.exp(view.log_mu),
    "kpop": lambda view: np.maximum(bernoulli_kl(view.log_pi, view.log_mu), bernoulli_kl(view.log_mu, view.log_pi)),
    "binary_kl": _clamped_binary_kl,
}
RATIO_STATISTICS = ("log_ratio", "k1", "k2", "k3", "abs_log_ratio", "k3_reverse", "mult_error", "tv")   # read log ρ only
