"""SkyRL's off-policy corrections (trainer.algorithm.off_policy_correction) and its DPPO and rollout_is losses.

  SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 — skyrl/train/config/config.py (OffPolicyCorrectionConfig,
  DPPOConfig, AlgorithmConfig), skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py
  (compute_tis_ratio, compute_sequence_mask, compute_outlier_token_mask, compute_token_mask),
  skyrl/backends/skyrl_train/utils/ppo_utils.py (ppo_policy_loss, dppo_policy_loss, rollout_is_policy_loss);
  docs/content/docs/algorithms/off_policy_correction.mdx. Frozen numbers: tests/catalogue/reference/skyrl/.

The TIS ratio multiplies the loss; the sequence, outlier and token masks remove tokens from the loss mask. The
ratios are exp of the log ratio clamped at ±20 (safe_exp_delta, in float32): each token's, and for the sequence
weight and masks the clamp of the masked sum or mean of the raw log ratios (clamp_sums). The PPO ratio is against
the trainer's old log-probs (1 on the toy's step); dppo and rollout_is use the sampler's, and dppo's stays in the
loss's graph, so a token beyond ±20 has no gradient there.
"""

import math

from toylab.catalogue.frameworks.factors import ratio_band, weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "a956457"
SAFETY_BOUND = 20.0
BINARY_KL_EPSILON = 1e-8             # dppo_policy_loss: log((1 − μ + eps)/(1 − π + eps)), ppo_utils.py 910–913
PREFIX = "trainer.algorithm."
FLOAT32 = "SkyRL exponentiates in float32 (safe_exp_delta): its weights differ from these in the 7th digit"
ORDER = ("the outlier and token masks run first, and the sequence TIS ratio and the geometric mask are then taken "
         "over the tokens they left (compute_off_policy_correction): combined with a token mask they are not this "
         "preset times that mask")
STRICT = ("the docs write the sequence and outlier bands with strict inequalities (C_low < ρ < C_high); the code "
          "keeps the bounds themselves")


def _bound(default, low, high, help):
    return Param(default, low, high, help)


def _row(option, config_text, alias, config, base, equals, params, note=""):
    return Preset(f"skyrl:{option}", config_text, alias, config, base, equals, params, note, COMMIT)


def _off(**fields):
    return {"policy_loss_type": "regular", **{f"off_policy_correction.{key}": value for key, value in fields.items()}}


def _dppo(kind, delta, equals):
    return _row(f"dppo_{kind}", f'{PREFIX}policy_loss_type="dppo", {PREFIX}dppo.dppo_type="{kind}"', f"DPPO, {kind}",
                {"policy_loss_type": "dppo", "dppo.dppo_type": kind, "dppo.delta_low": Ref("delta_low"),
                 "dppo.delta_high": Ref("delta_high")}, "dppo", equals,
                {"delta_low": _bound(delta, 0.0, 1.0, "dppo.delta_low: the bound when A < 0"),
                 "delta_high": _bound(delta, 0.0, 1.0, "dppo.delta_high: the bound when A > 0")},
                f"{FLOAT32}; at A = 0 SkyRL masks nothing, toylab's dppo applies the A < 0 rule (c·A = 0 there either "
                "way)")


PRESETS = [
    _row("tis_ratio_type_token", f'{PREFIX}off_policy_correction.tis_ratio_type="token"', "token TIS",
         _off(tis_ratio_type="token", token_tis_ratio_clip_high=Ref("token_tis_ratio_clip_high")), "tok_tis",
         "tok_tis(C = token_tis_ratio_clip_high)",
         {"token_tis_ratio_clip_high": _bound(2.0, 1.0, 100.0, "cap C on ρ_t")}, f"{FLOAT32}; {ORDER}"),
    _row("tis_ratio_type_sequence", f'{PREFIX}off_policy_correction.tis_ratio_type="sequence"', "sequence TIS",
         _off(tis_ratio_type="sequence", sequence_tis_ratio_clip_high=Ref("sequence_tis_ratio_clip_high")),
         "seq_tis", "seq_tis(C = sequence_tis_ratio_clip_high)",
         {"sequence_tis_ratio_clip_high": _bound(5.0, 1.0, 1000.0, "cap C on W")}, f"{FLOAT32}; {ORDER}"),
    _row("sequence_mask_metric_geometric", f'{PREFIX}off_policy_correction.sequence_mask_metric="geometric"',
         "geometric sequence mask",
         _off(sequence_mask_metric="geometric", geo_mask_low=Ref("geo_mask_low"), geo_mask_high=Ref("geo_mask_high")),
         "geo_rs", "geo_rs(lo = geo_mask_low, hi = geo_mask_high); rejected sequences leave the loss mask",
         {"geo_mask_low": _bound(0.99, 0.01, 1.0, "lower bound on ρ_geo"),
          "geo_mask_high": _bound(1.01, 1.0, 100.0, "upper bound on ρ_geo")}, f"{STRICT}; {ORDER}"),
    _row("sequence_mask_metric_product", f'{PREFIX}off_policy_correction.sequence_mask_metric="product"',
         "product sequence mask",
         _off(sequence_mask_metric="product", product_mask_low=Ref("product_mask_low"),
              product_mask_high=Ref("product_mask_high")),
         "seq_band", "naive × 1[product_mask_low ≤ W ≤ product_mask_high] (a mask, no weight): rs(log_ratio, "
         "seq_sum, log low, log high)",
         {"product_mask_low": _bound(0.5, 0.001, 1.0, "lower bound on W"),
          "product_mask_high": _bound(2.0, 1.0, 1000.0, "upper bound on W")}, STRICT),
    _row("outlier_token_is_threshold", f"{PREFIX}off_policy_correction.outlier_token_is_threshold_low/_high",
         "outlier-token sequence mask",
         _off(outlier_token_is_threshold_low=Ref("outlier_token_is_threshold_low"),
              outlier_token_is_threshold_high=Ref("outlier_token_is_threshold_high")),
         "outlier_rs", "outlier_rs(lo = low, hi = high): two-sided, low·high ≠ 1 at the docs' 10⁻⁴ and 100 (the "
         "config's defaults, None, disable it); trm(ε) when low = e^−ε, high = e^ε",
         {"outlier_token_is_threshold_low": _bound(1e-4, 1e-12, 1.0, "reject a sequence with any ρ_t below it"),
          "outlier_token_is_threshold_high": _bound(100.0, 1.0, 1e12, "reject a sequence with any ρ_t above it")},
         STRICT),
    _row("token_mask_is_threshold", f"{PREFIX}off_policy_correction.token_mask_is_threshold_low/_high",
         "token mask (IcePop without the weight)",
         _off(token_mask_is_threshold_low=Ref("token_mask_is_threshold_low"),
              token_mask_is_threshold_high=Ref("token_mask_is_threshold_high")),
         "tok_mis", "naive × 1[low ≤ ρ_t ≤ high] per token, the masked tokens leave the loss mask (the docs' 0.5 "
         "and 2; the config's None disables it)",
         {"token_mask_is_threshold_low": _bound(0.5, 0.001, 1.0, "mask a token with ρ_t below it"),
          "token_mask_is_threshold_high": _bound(2.0, 1.0, 1000.0, "mask a token with ρ_t above it")},
         "the docs present it as IcePop; IcePop also weights the kept tokens by ρ_t, this mask alone does not"),
    _dppo("binary_tv", 0.2, "dppo(delta_low, delta_high, binary_tv): ρ_t·1[Δp_t ≤ δ_high] when A > 0, "
          "ρ_t·1[Δp_t ≥ −δ_low] when A < 0, Δp_t = π_t(y_t) − μ_t(y_t)"),
    _dppo("binary_kl", 0.2, "dppo(…, binary_kl): ρ_t, zeroed where the Bernoulli KL(μ_t‖π_t) > δ and Δp_t moves "
          "with A (the config's δ 0.2; its docstring recommends 0.05 for KL)"),
    _row("rollout_is", f'{PREFIX}policy_loss_type="rollout_is"', "rollout IS (GLM-5's agentic loss)",
         {"policy_loss_type": "rollout_is", "eps_clip_low": Ref("eps_clip_low"),
          "eps_clip_high": Ref("eps_clip_high")},
         "tok_mis", "tok_mis(lo = 1 − eps_clip_low, hi = 1 + eps_clip_high), the bounds excluded, the masked tokens "
         "kept in the loss mask",
         {"eps_clip_low": _bound(0.2, 0.0, 1.0, "ρ_t at or below 1 − eps_clip_low is zeroed"),
          "eps_clip_high": _bound(0.2, 0.0, 10.0, "ρ_t at or above 1 + eps_clip_high is zeroed")}, FLOAT32),
]

UTILS = "skyrl/backends/skyrl_train/utils/"
CODE = {"tis_ratio_type_token": f"{UTILS}off_policy_correction_utils.py 24–72 (compute_tis_ratio)",
        "tis_ratio_type_sequence": f"{UTILS}off_policy_correction_utils.py 24–72 (compute_tis_ratio: the sum "
                                   "clamped at 63–64)",
        "sequence_mask_metric_geometric": f"{UTILS}off_policy_correction_utils.py 191–254 (compute_sequence_mask: "
                                          "the clamp after the masked mean at 222–224)",
        "sequence_mask_metric_product": f"{UTILS}off_policy_correction_utils.py 191–254 (compute_sequence_mask: the "
                                        "clamp after the masked sum at 239–240)",
        "outlier_token_is_threshold": f"{UTILS}off_policy_correction_utils.py 75–134 (compute_outlier_token_mask)",
        "token_mask_is_threshold": f"{UTILS}off_policy_correction_utils.py 137–188 (compute_token_mask)",
        "dppo_binary_tv": f"{UTILS}ppo_utils.py 867–935 (dppo_policy_loss: the ratio in the graph at 890)",
        "dppo_binary_kl": f"{UTILS}ppo_utils.py 867–935 (dppo_policy_loss: the ratio in the graph at 890, the "
                          "binary KL at 910–913)",
        "rollout_is": f"{UTILS}ppo_utils.py 825–863 (rollout_is_policy_loss: the strict band at 850)"}
PRESETS = with_code(PRESETS, CODE)


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

PPO_LOSS = ("skyrl/backends/skyrl_train/utils/ppo_utils.py ppo_policy_loss 557–587 (log r clamped to ±20, "
            "exponentiated in float32: torch_utils.py safe_exp_delta)")
RECOMPUTE = "skyrl/train/trainer.py fwd_logprobs_values_reward 1307–1381 (the policy's log-probs recomputed)"
BATCHES = ("skyrl/train/config/config.py 1387–1396: train_batch_size 1024 over policy_mini_batch_size 256, "
           "update_epochs_per_batch 1")
CLIP = {"eps_low": 0.2, "eps_high": 0.2, "clamp": SAFETY_BOUND}
CISPO = {"eps_low": 1.0, "eps_high": 4.0, "clamp": SAFETY_BOUND}
CISPO_CODE = "ppo_utils.py compute_policy_loss_cispo 733–821; config.py CISPOConfig 749–772"
ASYNC = ("skyrl/train/fully_async_trainer.py 376–379 (train_batch_size = policy_mini_batch_size: one update per "
         "batch), config.py FullyAsyncConfig 951 (max_staleness_steps 4)")
UPDATES = [
    UpdatePreset("skyrl:regular", "trainer.algorithm.policy_loss_type=regular", Update("recompute", "ppo", CLIP, 4),
                 None, "skyrl", 0, commit=COMMIT, code=f"{PPO_LOSS}; {RECOMPUTE}; {BATCHES}",
                 note="off_policy_correction.tis_ratio_type None by default (config.py 794): no correction; when set "
                      "it multiplies the clipped loss by the detached weight of π_old/μ (apply_off_policy_correction)"),
    UpdatePreset("skyrl:dual_clip", "trainer.algorithm.policy_loss_type=dual_clip",
                 Update("recompute", "ppo", {**CLIP, "dual_clip": 3.0}, 4), None, "skyrl", 0, commit=COMMIT,
                 code=f"{PPO_LOSS}; config.py 910 (clip_ratio_c 3.0)"),
    UpdatePreset("skyrl:cispo", "trainer.algorithm.policy_loss_type=cispo (cispo_anchor old)",
                 Update("recompute", "cispo", CISPO, 4), None, "skyrl", 0, commit=COMMIT, code=CISPO_CODE),
    UpdatePreset("skyrl:cispo_rollout", "trainer.algorithm.policy_loss_type=cispo, cispo.cispo_anchor=rollout",
                 Update("bypass", "cispo", CISPO, 4), None, "skyrl", 0, commit=COMMIT, code=CISPO_CODE,
                 note="refuses a TIS correction on top (it would count the rollout ratio twice)"),
    UpdatePreset("skyrl:fully_async", "trainer.fully_async.enabled=true (policy_loss_type regular)",
                 Update("recompute", "ppo", CLIP), None, "skyrl", 4, "uniform", commit=COMMIT,
                 code=f"{PPO_LOSS}; {ASYNC}; fully_async_trainer.py _run_training 853–857 (log-probs recomputed "
                      "with the current policy)",
                 note="the old log-probs are the current policy's, so r = 1 at the single update and the clip never "
                      "binds; the whole lag sits in π_old/μ (SkyRL #1315); max_staleness_steps bounds the lag, the "
                      "toy draws it uniformly in 0 … 4"),
]


def factors(config):
    """The Rules of an AlgorithmConfig's policy loss and off-policy correction."""
    factors = []
    if config["policy_loss_type"] == "rollout_is":              # (ratio > 1 − eps_low) & (ratio < 1 + eps_high)
        bounds = {"lo": math.nextafter(1 - config["eps_clip_low"], math.inf),
                  "hi": math.nextafter(1 + config["eps_clip_high"], -math.inf)}
        factors.append(weights_only(("tok_mis", bounds)))
    off = {key.partition(".")[2]: value for key, value in config.items() if key.startswith("off_policy_correction.")}
    if config["policy_loss_type"] == "dppo":
        factors.append(("dppo", {"delta_low": config["dppo.delta_low"], "delta_high": config["dppo.delta_high"],
                                 "dppo_type": config["dppo.dppo_type"], "kl_epsilon": BINARY_KL_EPSILON}))
    if "outlier_token_is_threshold_low" in off:
        factors.append(("outlier_rs", {"lo": off["outlier_token_is_threshold_low"],
                                       "hi": off["outlier_token_is_threshold_high"]}))
    if "token_mask_is_threshold_low" in off:
        factors.append(ratio_band("token", off["token_mask_is_threshold_low"], off["token_mask_is_threshold_high"]))
    if off.get("tis_ratio_type") == "token":
        factors.append(("tok_tis", {"C": off["token_tis_ratio_clip_high"]}))
    if off.get("tis_ratio_type") == "sequence":
        factors.append(("seq_tis", {"C": off["sequence_tis_ratio_clip_high"]}))
    if off.get("sequence_mask_metric") == "geometric":
        factors.append(ratio_band("seq_mean", off["geo_mask_low"], off["geo_mask_high"]))
    if off.get("sequence_mask_metric") == "product":
        factors.append(ratio_band("seq_sum", off["product_mask_low"], off["product_mask_high"]))
    return Rules(factors, SAFETY_BOUND, True, clamp_sums=True)


LATEX = {
    "tis_ratio_type_token": r"c_t = \min(\tilde\rho_t, C),\quad C:\ \texttt{token\_tis\_ratio\_clip\_high}",
    "tis_ratio_type_sequence": r"c_t = \min(\tilde W, C),\quad C:\ \texttt{sequence\_tis\_ratio\_clip\_high}",
    "sequence_mask_metric_geometric": r"c_t = \mathbf 1[\ell\le\rho_{geo}\le u],\quad \ell, u:\ \texttt{geo\_mask\_low, geo\_mask\_high}",
    "sequence_mask_metric_product": r"c_t = \mathbf 1[\ell\le W\le u],\quad \ell, u:\ \texttt{product\_mask\_low, product\_mask\_high}",
    "outlier_token_is_threshold": r"c_t = \mathbf 1[\ell\le\rho_s\le u\ \forall s],\quad \ell, u:\ \texttt{outlier\_token\_is\_threshold\_low, \_high}",
    "token_mask_is_threshold": r"c_t = \mathbf 1[\ell\le\rho_t\le u],\quad \ell, u:\ \texttt{token\_mask\_is\_threshold\_low, \_high}",
    "rollout_is": r"c_t = \rho_t\,\mathbf 1[1-\varepsilon_l<\rho_t<1+\varepsilon_h],\quad \varepsilon_l, \varepsilon_h:\ \texttt{eps\_clip\_low, eps\_clip\_high}",
    "dppo_binary_tv": r"c_t = \rho_t\,\mathbf 1[\Delta p_t\le\delta_h]\ (A>0),\ \rho_t\,\mathbf 1[\Delta p_t\ge-\delta_l]\ (A<0),\quad \delta_l, \delta_h:\ \texttt{delta\_low, delta\_high}",
    "dppo_binary_kl": r"c_t = \rho_t\,\mathbf 1[\mathrm{KL_B}(\mu_t\|\pi_t)\le\delta\ \text{or}\ \Delta p_t\,A\le0],\quad \delta:\ \texttt{delta\_low, delta\_high}",
}


def latex(preset):
    return LATEX[preset.id.partition(":")[2]]
