"""prime-rl's default loss (DPPO binary-TV mask + a squared log-ratio penalty) and its IPO loss, from its code.

  prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 — packages/prime-rl-configs/src/prime_rl/configs/trainer.py
  (DefaultLossConfig: dppo_mask_low/high 0.2, adv_tau 1, kl_tau 10⁻³; IPOLossConfig: ipo_threshold 0.1),
  src/prime_rl/trainer/rl/loss.py (default_loss_fn, ipo_loss_fn, compute_loss). Frozen numbers from running that
  code: tests/catalogue/reference/prime_rl/.

The loss is per token −adv_tau·A·ρ_t·keep_t + kl_tau·(log ρ_t)², ρ_t = π/μ against the inference log-probs,
summed over the loss mask: the mask only zeroes the policy term, and the penalty's gradient −2·kl_tau·log ρ_t
does not depend on A (toylab's k2_penalty). adv_tau rescales A, hence the whole policy term: it is left at its
default 1 (a different adv_tau is this estimator times adv_tau with kl_tau/adv_tau).
"""

from toylab.catalogue.frameworks.factors import weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "559b447"
KL_TAU = Param(1e-3, 0.0, 10.0, "kl_tau: the weight of (log π − log μ)² in the loss")
IPO_NOTE = ("IPOLossConfig's docstring calls ipo_threshold the “Upper DPPO masking threshold”; the mask is "
            "two-sided, |π_t(y_t) − μ_t(y_t)| > ipo_threshold")

PRESETS = [
    Preset("prime_rl:default", 'trainer.loss = {type = "default"} (DefaultLossConfig)', "DPPO-Binary-TV + KL",
           {"type": "default", "dppo_mask_low": Ref("dppo_mask_low"), "dppo_mask_high": Ref("dppo_mask_high"),
            "adv_tau": 1.0, "kl_tau": Ref("kl_tau")}, "dppo",
           "k2_penalty(tau = kl_tau) × dppo(delta_low = dppo_mask_low, delta_high = dppo_mask_high, binary_tv): "
           "ĝ = Σ_t (ρ_t·keep_t·A − 2·kl_tau·log ρ_t)·s_t",
           {"dppo_mask_low": Param(0.2, 0.0, 1.0, "dppo_mask_low: A < 0 drops tokens with π − μ < −it"),
            "dppo_mask_high": Param(0.2, 0.0, 1.0, "dppo_mask_high: A > 0 drops tokens with π − μ > it"),
            "kl_tau": KL_TAU},
           "the masked tokens stay in the loss mask (the penalty still reaches them); at A = 0 the A < 0 rule "
           "applies (torch.where(A > 0, high, low))", COMMIT),
    Preset("prime_rl:ipo", 'trainer.loss = {type = "ipo"} (IPOLossConfig)', "IPO trust region + KL",
           {"type": "ipo", "ipo_threshold": Ref("ipo_threshold"), "adv_tau": 1.0, "kl_tau": Ref("kl_tau")}, "dppo",
           "k2_penalty(tau = kl_tau) × tok_is × 1[|Δp_t| ≤ ipo_threshold] (rs on prob_diff, weights only)",
           {"ipo_threshold": Param(0.1, 0.0, 1.0, "ipo_threshold: drops tokens with |π − μ| above it"),
            "kl_tau": KL_TAU}, IPO_NOTE, COMMIT),
]

CODE = {"default": "src/prime_rl/trainer/rl/loss.py 109–162 (default_loss_fn)",
        "ipo": "src/prime_rl/trainer/rl/loss.py 164–196 (ipo_loss_fn)"}
PRESETS = with_code(PRESETS, CODE)


def factors(config):
    """The Rules of trainer.loss."""
    penalty = ("k2_penalty", {"tau": config["kl_tau"]})
    if config["type"] == "ipo":
        threshold = config["ipo_threshold"]
        band = ("rs", {"statistic": "prob_diff", "scope": "token", "lo": -threshold, "hi": threshold})
        return Rules([("tok_is", {}), weights_only(band), penalty], None, False)
    keep = ("dppo", {"delta_low": config["dppo_mask_low"], "delta_high": config["dppo_mask_high"],
                     "dppo_type": "binary_tv"})
    return Rules([keep, penalty], None, False)


def latex(preset):
    if preset.config["type"] == "ipo":
        keep = r"\mathbf 1[|\Delta p_t|\le\delta]"
        symbols = r"\delta, \tau:\ \texttt{ipo\_threshold, kl\_tau}"
    else:
        keep = r"\mathbf 1[\Delta p_t\le\delta_h\ (A>0),\ \Delta p_t\ge-\delta_l\ (A\le0)]"
        symbols = r"\delta_l, \delta_h, \tau:\ \texttt{dppo\_mask\_low, dppo\_mask\_high, kl\_tau}"
    return (rf"\hat g = \sum_t \big(\rho_t\,{keep}\,A - 2\tau\log\rho_t\big)\,s_t,\ \Delta p_t = \pi_t - \mu_t,"
            rf"\quad {symbols}")


# -- the update: one ratio π_θ/μ, a mask on probability gaps, a (log r)² term; one step per batch --------------

STEP = ("src/prime_rl/trainer/rl/train.py 261–567 (each batch's micro-batches accumulate into one optimizer.step)")
STALENESS = ("packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py 532–533 (max_off_policy_steps 8: older "
             "rollouts are dropped)")
LAG_NOTE = "max_off_policy_steps bounds the lag, the toy draws it uniformly in 0 … 8; no π_old: the ratio is π_θ/μ"
UPDATES = [
    UpdatePreset("prime_rl:default", 'trainer.loss = {type = "default"}',
                 Update("bypass", "dppo_kl", {"delta_low": 0.2, "delta_high": 0.2, "tau": 1e-3}), None, "prime_rl", 8,
                 "uniform", commit=COMMIT, code=f"src/prime_rl/trainer/rl/loss.py default_loss_fn 109–162; {STEP}; "
                                                f"{STALENESS}", note=LAG_NOTE),
    UpdatePreset("prime_rl:ipo", 'trainer.loss = {type = "ipo"}',
                 Update("bypass", "ipo_kl", {"delta": 0.1, "tau": 1e-3}), None, "prime_rl", 8, "uniform",
                 commit=COMMIT, code=f"src/prime_rl/trainer/rl/loss.py ipo_loss_fn 164–196; {STEP}; {STALENESS}",
                 note=LAG_NOTE),
]

