"""Masks the catalogue lacked that look at the tokens' probabilities, not only their ratio.

With Δp_t = π_t(y_t) − μ_t(y_t), the change of the sampled token's probability between sampler and trainer:

    dppo     c_t = ρ_t·1[Δp_t ≤ δ_high] when A > 0,  ρ_t·1[Δp_t ≥ −δ_low] when A ≤ 0           (dppo_type binary_tv)
             c_t = ρ_t·1[Δp_t ≤ 0 or KL_B(μ_t‖π_t) ≤ δ_high] when A > 0,
                   ρ_t·1[Δp_t ≥ 0 or KL_B(μ_t‖π_t) ≤ δ_low] when A ≤ 0                      (dppo_type binary_kl)
             the trust region of DPPO: a token whose probability moved too far in the direction its advantage
             pushes gets no gradient; it stays in the loss's denominator
    kpop     c_t = 1[max(KL_B(π_t‖μ_t), KL_B(μ_t‖π_t)) ≤ δ]: a token leaves the loss mask when the Bernoulli KL
             ("this token or not") is above δ either way
    tv_mask  c_t = w_t·(1 − out(y)·1[sign(log ρ_t)·A > 0]),  out(y) = 1[mean_t |ρ_t − 1| ∉ [lo, hi]]: in a sequence
             whose mean |ρ_t − 1| is out of bounds, the tokens whose update would widen the gap get no gradient;
             times the weight w of any exact estimator (the registry chains it)

KL_B(p‖q) = p·log(p/q) + (1 − p)·log((1 − p)/(1 − q)) (``statistics.bernoulli_kl``).

Sources, read at these commits:
- dppo: prime-rl 559b447 src/prime_rl/trainer/rl/loss.py default_loss_fn (dppo_mask_low/high, default 0.2; the
  mask by the advantage's sign, A > 0 or not; the ratio exp(trainer − inference) is differentiated, so the
  gradient weight is ρ_t; the loss is normalised by the loss-mask tokens, masked ones included). SkyRL a956457
  skyrl/backends/skyrl_train/utils/ppo_utils.py dppo_policy_loss (delta_low/high; dppo_type binary_tv, and
  binary_kl with KL_B(μ‖π) computed with 1e-8 added inside its second logarithm; it masks nothing where A = 0,
  where the gradient is 0 anyway, so only the marks there differ; its ratio safe_exp_delta(·, clip=20), line 890,
  stays in the loss's graph, and torch.clamp passes no gradient beyond ±20: such a token's coefficient is 0).
- kpop: verl PR #6800 (rollout_rs="binary_kl", unmerged; read from its description and review, not its code:
  the token is kept when max(KL(train‖rollout), KL(rollout‖train)) ≤ φ, probabilities clamped to [1e-6, 1 − 1e-6]
  there, not here), after AReaL's KPop (the Ring team's "kpop" note); AReaL 4aef98d has no binary_kl.
- tv_mask: open-instruct e6c3044 open_instruct/grpo_utils.py compute_rho_correction with rho_mask_tv_divergence
  (VACO): the sequence-level mean of |ρ_t − 1| against rho_mask_lower_bound/upper_bound (0 disables each there;
  here lo = 0 never rejects), tokens dropped where sign(log ρ_t)·A > 0; open-instruct clamps log ρ_t to ±10
  first, this family does not.

Exact moments: each is a sequence weight times token tables that depend on the sequence's class (the sign of A,
and out(y) for tv_mask), which the O(M) pass sums class by class; kpop is a token mask, so the count recursion
covers it at any T.
"""

import numpy as np

from toylab.catalogue.families import rejection_mask
from toylab.catalogue.statistics import bernoulli_kl
from toylab.catalogue.weights import TokenClass, Weights

DPPO_TYPES = ("binary_tv", "binary_kl")


def dppo(stats, delta_low, delta_high, dppo_type, kl_epsilon=0.0):
    """ρ_t times DPPO's trust-region mask, by the sign of the advantage; a mask zeroes a weight only. The ratio is
    differentiated, so a token beyond a framework's clamp of the log ratio (SkyRL's safe_exp_delta) has none.
    ``kl_epsilon`` is added to both probabilities inside the binary KL's second logarithm (SkyRL: 10⁻⁸, which
    moves the KL where π or μ is within ~10⁻⁵ of 1)."""
    moved = np.exp(stats.log_pi) - np.exp(stats.log_mu)
    if dppo_type == "binary_tv":
        positive, negative = moved <= delta_high, moved >= -delta_low
    else:
        divergence = bernoulli_kl(stats.log_mu, stats.log_pi, kl_epsilon)
        positive, negative = (moved <= 0) | (divergence <= delta_high), (moved >= 0) | (divergence <= delta_low)
    live = ~stats.clamped_out
    positive, negative = positive & live, negative & live
    rho = stats.rho
    return Weights(token=np.where(positive, rho, 0.0), token_affected=~positive,
                   classes=(TokenClass(stats.advantage <= 0, np.where(negative, rho, 0.0), ~negative),))


def kpop(stats, delta):
    return rejection_mask(stats, "kpop", "token", None, delta)


def tv_mask(stats, lo, hi):
    """1 − out(y)·1[sign(log ρ_t)·A > 0]: two token classes, the out-of-bounds sequences with A > 0 and with A < 0."""
    gap = stats.sequence_statistic("tv", "mean")
    out = (gap < lo) | (gap > hi)
    log_rho, advantage = stats.log_rho, stats.advantage
    widening_up, widening_down = log_rho > 0, log_rho < 0
    return Weights(classes=(TokenClass(out & (advantage > 0), (~widening_up).astype(float), widening_up),
                            TokenClass(out & (advantage < 0), (~widening_down).astype(float), widening_down)))
