"""OpenRLHF's vLLM importance-sampling correction and its GSPO loss against the sampler, from its code.

  OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 — openrlhf/cli/train_ppo_ray.py
  (--algo.advantage.is_correction_enable, is_correction_threshold [0.5, 5.0], is_correction_type,
  --actor.policy_loss_type, --actor.eps_clip_low_high), openrlhf/models/loss.py (PolicyLoss, aggregate_loss).
  Frozen numbers from running PolicyLoss: tests/catalogue/reference/openrlhf/.

With is_correction_enable the PPO loss (ratio against the trainer's old log-probs: 1 on the toy's step) is
multiplied per token by the vLLM weight; nothing leaves action_mask and there is no log-ratio clamp. With
policy_loss_type="gspo" and is_correction_enable the GSPO ratio itself is taken against the vLLM log-probs,
exp(mean_t log π/μ), and PPO-clipped: the vLLM weights are not applied.
"""

import math

from toylab.catalogue.frameworks.factors import ratio_band, weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "3c3be62"
THRESHOLDS = {"low": Param(0.5, 0.001, 1.0, "is_correction_threshold[0]: lower bound"),
              "high": Param(5.0, 1.0, 1000.0, "is_correction_threshold[1]: upper bound")}
CLIP = {"eps_clip_low": Param(0.2, 0.0, 1.0, "eps_clip_low_high[0]: A < 0 keeps ρ_geo ≥ 1 − eps_clip_low"),
        "eps_clip_high": Param(0.2, 0.0, 10.0, "eps_clip_low_high[1]: A ≥ 0 keeps ρ_geo ≤ 1 + eps_clip_high")}
SEQ_MASK_NOTE = ("the code comment says the correction coefficients \"still use TIS (token-level clamp)\"; the code "
                 "multiplies by the unclamped exp(log ρ_t)")
ICEPOP_NOTE = "README_ja.md names a --use_icepop flag; there is none (it is is_correction_type icepop)"


def _row(option, alias, config, base, equals, params, note=""):
    text = (f"--actor.policy_loss_type {option} --algo.advantage.is_correction_enable" if option == "gspo" else
            f"--algo.advantage.is_correction_enable --algo.advantage.is_correction_type {option}")
    return Preset(f"openrlhf:{option}", text, alias, config, base, equals, params, note, COMMIT)


def _correction(kind):
    return {"policy_loss_type": "ppo", "is_correction_enable": True, "is_correction_type": kind,
            "is_correction_threshold": (Ref("low"), Ref("high"))}


PRESETS = [
    _row("tis", "token TIS, two-sided", _correction("tis"), "tok_tis", "tok_clip(C_min = low, C_max = high)",
         dict(THRESHOLDS)),
    _row("icepop", "IcePop", _correction("icepop"), "tok_mis",
         "tok_mis(lo = low, hi = high); the masked tokens stay in action_mask", dict(THRESHOLDS), ICEPOP_NOTE),
    _row("seq-mask-tis", "geometric sequence mask × token IS", _correction("seq-mask-tis"), "geo_rs",
         "tok_is × geo_rs(lo = low, hi = high): ρ_t·1[low ≤ ρ_geo ≤ high], ρ_t unclamped; nothing leaves action_mask",
         dict(THRESHOLDS), SEQ_MASK_NOTE),
    _row("gspo", "GSPO against the sampler",
         {"policy_loss_type": "gspo", "is_correction_enable": True, "eps_clip_low": Ref("eps_clip_low"),
          "eps_clip_high": Ref("eps_clip_high")}, "gspo_geo",
         "gspo_clip(eps_low = eps_clip_low, eps_high = eps_clip_high, no dual clip): ρ_geo·1[ρ_geo ≤ 1 + ε_high] "
         "when A ≥ 0, ρ_geo·1[ρ_geo ≥ 1 − ε_low] when A < 0", dict(CLIP),
         "the docs call it GSPO; GSPO's ratio is against the old policy, this one against the vLLM log-probs; "
         "--actor.dual_clip (default off) is not a parameter here"),
]

CODE = {"*": "openrlhf/models/loss.py 155–230 (PolicyLoss.forward: the vLLM weights 197–218)",
        "gspo": "openrlhf/models/loss.py 155–230 (PolicyLoss.forward: the GSPO ratio against the vLLM log-probs 170–177)"}
PRESETS = with_code(PRESETS, CODE)


def factors(config):
    """The Rules of OpenRLHF's PolicyLoss configuration."""
    if config["policy_loss_type"] == "gspo":
        clip = {"eps_low": config["eps_clip_low"], "eps_high": config["eps_clip_high"], "C_dual": math.inf}
        return Rules([("gspo_clip", clip)], None, False)
    low, high = config["is_correction_threshold"]
    kind = config["is_correction_type"]
    if kind == "icepop":
        return Rules([("tok_mis", {"lo": low, "hi": high})], None, False)
    if kind == "seq-mask-tis":
        return Rules([("tok_is", {}), weights_only(ratio_band("seq_mean", low, high))], None, False)
    return Rules([("tok_clip", {"C_min": low, "C_max": high})], None, False)


LATEX = {"tis": r"c_t = \mathrm{clamp}(\rho_t, \ell, u)",
         "icepop": r"c_t = \rho_t\,\mathbf 1[\ell\le\rho_t\le u]",
         "seq-mask-tis": r"c_t = \rho_t\,\mathbf 1[\ell\le\rho_{geo}\le u]"}


def latex(preset):
    option = preset.id.partition(":")[2]
    if option == "gspo":
        return (r"c_t = \rho_{geo}\,\mathbf 1[\rho_{geo}\le 1+\varepsilon_h]\ (A\ge0),\ "
                r"\rho_{geo}\,\mathbf 1[\rho_{geo}\ge 1-\varepsilon_l]\ (A<0),\quad \varepsilon_l, \varepsilon_h:\ "
                r"\texttt{eps\_clip\_low\_high}")
    return LATEX[option] + r",\quad \ell, u:\ \texttt{is\_correction\_threshold}"


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

LOSS = ("openrlhf/models/loss.py PolicyLoss 116–230 (log r clamped to ±20; the correction's weight multiplies the "
        "clipped loss); openrlhf/trainer/ray/ppo_actor.py training_step 306–313 (old = experience.action_log_probs, "
        "recomputed by make_experience_batch, ppo_trainer.py 216)")
CONFIG = ("openrlhf/cli/train_ppo_ray.py 373 (rollout.batch_size 1024), 394 (train.batch_size 128), 378 "
          "(max_epochs 1): eight updates per batch at n_samples_per_prompt 1; 387–389 (eps_clip 0.2, dual_clip None), "
          "257 (is_correction_enable false)")
CLIP = {"eps_low": 0.2, "eps_high": 0.2, "clamp": 20.0}
UPDATES = [
    UpdatePreset("openrlhf:default", "train_ppo_ray.py defaults", Update("recompute", "ppo", CLIP, 8), None,
                 "openrlhf", 0, commit=COMMIT, code=f"{LOSS}; {CONFIG}",
                 note="--algo.advantage.is_correction_enable multiplies the clipped loss by the detached weight of "
                      "π_old/μ (tis [0.5, 5], icepop, seq-mask-tis)"),
    UpdatePreset("openrlhf:async", "--train.async_enable (async_queue_size 1)", Update("recompute", "ppo", CLIP, 8),
                 None, "openrlhf", 1, commit=COMMIT,
                 code=f"{LOSS}; {CONFIG}; train_ppo_ray.py 274–275; ppo_trainer_async.py 202–233 (the next batch "
                      "generated while this one trains; experience made at training time)",
                 note="the old log-probs are recomputed by the current actor: the lag sits in π_old/μ, corrected "
                      "only with is_correction_enable"),
]

