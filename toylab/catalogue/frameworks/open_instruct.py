"""open-instruct's train/infer ratio correction (use_rho_correction and the rho masks), from its code.

  open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d — open_instruct/grpo_utils.py (GRPOExperimentConfig's
  rho_* fields and their docstrings, compute_rho_correction, compute_grpo_loss, resolve_old_logprob),
  open_instruct/grpo_fast.py (the training step). Frozen numbers from running that code:
  tests/catalogue/reference/open_instruct/.

ρ = exp(clamp(log π_old − log π_vllm, ±10)), π_old the trainer's log-probs (use_vllm_logprobs false, one
mini-batch), so the PPO ratio is 1 on the toy's step. use_rho_correction (on by default) multiplies the per-token
loss by clamp(ρ, rho_clamp_lower_bound, rho_clamp_upper_bound) (0 disables a bound; the defaults 0 and 2) and zeroes
the tokens whose ρ is outside [rho_mask_lower_bound, rho_mask_upper_bound] (0 disables a bound; both off by
default); response_mask is left as it is.
"""

import math

from toylab.catalogue.frameworks.factors import ratio_band, weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "e6c3044"
CLAMP = 10.0
# GRPOExperimentConfig refuses a lower bound ≥ 1 and an upper bound ≤ 1 once set (0 turns a bound off): the ranges
# keep to what it accepts, an upper bound always set
CLAMPS = {"rho_clamp_lower_bound": Param(0.0, 0.0, 0.999, "clamp ρ from below (0: no lower clamp)"),
          "rho_clamp_upper_bound": Param(2.0, 1.001, 1000.0, "clamp ρ from above")}
MASKS = {"rho_mask_lower_bound": Param(0.5, 0.0, 0.999, "zero a token with ρ below it (0: off)"),
         "rho_mask_upper_bound": Param(2.0, 1.001, 1000.0, "zero a token with ρ above it")}
MASK_DEFAULTS = ("the mask bounds are open-instruct's test_rho_mask values (0.5, 2); the config's defaults, 0, "
                 "turn the mask off")


OPTIONS = {"use_rho_correction": "--use_rho_correction (on by default) --rho_clamp_lower_bound --rho_clamp_upper_bound",
           "rho_mask": "--rho_mask_lower_bound --rho_mask_upper_bound",
           "rho_mask_sequence_level": "--rho_mask_sequence_level --rho_mask_lower_bound --rho_mask_upper_bound",
           "rho_mask_tv_divergence": "--rho_mask_tv_divergence --rho_mask_lower_bound --rho_mask_upper_bound"}


def _row(option, alias, config, base, equals, params, note=""):
    full = {"use_rho_correction": True, "rho_mask_sequence_level": False, "rho_mask_tv_divergence": False,
            **{name: Ref(name) for name in params}, **config}
    return Preset(f"open_instruct:{option}", OPTIONS[option], alias, full, base, equals, params, note, COMMIT)


PRESETS = [
    _row("use_rho_correction", "clamped ρ (TIS)", {}, "tok_tis",
         "tok_clip(C_min = rho_clamp_lower_bound, C_max = rho_clamp_upper_bound) on ρ clamped at e^±10: "
         "tok_tis(C = 2) at the defaults", dict(CLAMPS)),
    _row("rho_mask", "clamped ρ × token mask (IcePop-like)", {}, "tok_mis",
         "tok_clip(rho_clamp bounds) × 1[rho_mask_lower_bound ≤ ρ_t ≤ rho_mask_upper_bound]; the masked tokens stay "
         "in response_mask", CLAMPS | MASKS, MASK_DEFAULTS),
    _row("rho_mask_sequence_level", "geometric clamp × geometric mask", {"rho_mask_sequence_level": True},
         "geo_clip", "geo_clip(rho_clamp bounds) × 1[rho_mask_lower_bound ≤ ρ_geo ≤ rho_mask_upper_bound], ρ_geo of "
         "the ±10-clamped ratios; nothing leaves response_mask", CLAMPS | MASKS,
         "the docstring says only the keep/drop decision becomes sequence-level; the weight becomes clamp(ρ_geo) "
         "too (rho_effective), and it writes the mean log ratio as log(π_old/π_θ), the code takes log(π_old/π_vllm); "
         + MASK_DEFAULTS),
    _row("rho_mask_tv_divergence", "TV-divergence mask (VACO)", {"rho_mask_tv_divergence": True}, "tv_mask",
         "tok_clip(rho_clamp bounds) × tv_mask(lo = rho_mask_lower_bound, hi = rho_mask_upper_bound): a token of a "
         "sequence whose mean |ρ_t − 1| is out of bounds loses its weight when sign(log ρ_t)·A > 0",
         CLAMPS | {"rho_mask_lower_bound": Param(0.0, 0.0, 0.999, "the smallest mean |ρ − 1| kept (0: off)"),
                   "rho_mask_upper_bound": Param(2.0, 1.001, 1000.0, "the largest mean |ρ − 1| kept")},
         "the docstring calls the statistic the sequence-level TV divergence abs(p_seq − 1); the code averages "
         "|ρ_t − 1| over the tokens; a lower bound drops tokens of the sequences closest to the sampler; the upper "
         "bound 2 is open-instruct's test_rho_mask_tv_divergence value (the config's default, 0, turns it off)"),
]

CODE = {"*": "open_instruct/grpo_utils.py 410–463 (compute_rho_correction: the ±10 clamp at 419), 504–538 "
                 "(compute_grpo_loss)"}
PRESETS = with_code(PRESETS, CODE)


def _positive(bound):
    return bound if bound > 0 else None


def factors(config):
    """The Rules of GRPOExperimentConfig's rho fields."""
    if not config["use_rho_correction"]:
        return Rules([], CLAMP, False)
    lower, upper = config["rho_clamp_lower_bound"], config["rho_clamp_upper_bound"]
    sequence = config["rho_mask_sequence_level"]
    clamp = "geo_clip" if sequence else "tok_clip"
    factors = [(clamp, {"C_min": lower, "C_max": upper if upper > 0 else math.inf})]
    mask_lower = _positive(config.get("rho_mask_lower_bound", 0.0))
    mask_upper = _positive(config.get("rho_mask_upper_bound", 0.0))
    if config["rho_mask_tv_divergence"]:
        factors.append(("tv_mask", {"lo": mask_lower or 0.0, "hi": mask_upper or math.inf}))
    elif mask_lower or mask_upper:
        factors.append(weights_only(ratio_band("seq_mean" if sequence else "token", mask_lower, mask_upper)))
    return Rules(factors, CLAMP, False)


def latex(preset):
    ratio = r"\tilde\rho_{geo}" if preset.config["rho_mask_sequence_level"] else r"\tilde\rho_t"
    text = rf"c_t = \mathrm{{clamp}}({ratio}, a, b)"
    if preset.config["rho_mask_tv_divergence"]:
        text += r"\,\big(1-\mathbf 1[\tfrac1L\sum_s|\tilde\rho_s-1|\notin[\ell,u]]\,\mathbf 1[\mathrm{sign}(\log\rho_t)A>0]\big)"
    elif "rho_mask_lower_bound" in preset.params:
        text += rf"\,\mathbf 1[\ell\le {ratio}\le u]"
    return text + r",\quad \tilde\rho_t = e^{\mathrm{clip}(\log\rho_t,\pm10)},\ a, b:\ \texttt{rho\_clamp\_lower/upper\_bound}"


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

LOSS = ("open_instruct/grpo_utils.py compute_grpo_loss 504–538 (the ρ weight multiplies the clipped loss, 525), "
        "resolve_old_logprob 475–501; grpo_fast.py 691–716")
CONFIG = ("grpo_utils.py 102 (num_mini_batches 1), 106–110 (clip_lower 0.2, clip_higher 0.272, use_rho_correction), "
          "olmo_core_utils.py 89 (num_epochs 1); data_loader.py 413 (async_steps 8), 1405 (generation waits when "
          "more than async_steps ahead)")
ASYNC_NOTE = ("with one mini-batch and one epoch the old log-probs are the current ones (r = 1): the whole lag, up to "
              "async_steps = 8 (synchronous training is refused, data_loader.py 523–524), sits in ρ = π_old/μ, "
              "clamped at 2; the toy draws it uniformly in 0 … 8; the beta·KL term to the reference model "
              "(beta 0.05) is a separate loss term, left out")
CLIP = {"eps_low": 0.2, "eps_high": 0.272}
UPDATES = [
    UpdatePreset("open_instruct:default", "GRPOExperimentConfig defaults (loss_fn dapo, use_rho_correction)",
                 Update("recompute", "ppo", CLIP), "open_instruct:use_rho_correction", "open_instruct", 8, "uniform",
                 commit=COMMIT, code=f"{LOSS}; {CONFIG}", note=ASYNC_NOTE),
    UpdatePreset("open_instruct:cispo", "loss_fn=cispo", Update("recompute", "cispo", {"eps_low": 1.0, "eps_high": 0.272}),
                 "open_instruct:use_rho_correction", "open_instruct", 8, "uniform", commit=COMMIT,
                 code=f"{LOSS} (517–521: clamp(r, max=1 + clip_higher), no lower bound); {CONFIG}"),
    UpdatePreset("open_instruct:use_vllm_logprobs", "use_vllm_logprobs=true, use_rho_correction=false (the config "
                                                    "refuses both)",
                 Update("bypass", "ppo", CLIP), None, "open_instruct", 8, "uniform", commit=COMMIT,
                 code=f"{LOSS}; grpo_utils.py 246–249; {CONFIG}"),
]

