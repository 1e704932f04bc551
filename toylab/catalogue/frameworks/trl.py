"""TRL's vLLM importance-sampling modes (GRPOConfig.vllm_importance_sampling_mode), from TRL's code.

  TRL f2cd57710ae345ea6428ae95363267fcf38a3dc8 — trl/trainer/grpo_trainer.py (the vLLM importance-sampling
  ratio in _generate_and_score_completions, _compute_loss), trl/trainer/grpo_config.py (defaults). Frozen numbers
  from running that code: tests/catalogue/test_frameworks.py.

TRL's GRPO ratio is against the trainer's own old log-probs, 1 on the toy's single step, so a TRL mode is its IS
weight alone; TRL does not clamp, and its masks zero a weight but leave the token in the loss's denominator.
"""

from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "f2cd577"
SAME_NAME = ("name collision: ms-swift's rollout_importance_sampling_mode of the same name ({ms_swift}) uses the "
             "geometric mean ρ_geo where TRL uses the product W")

PARAMS = {"clip_min": Param(0.0, 0.0, 1000.0, "TRL vllm_importance_sampling_clip_min C_min (0: TRL's None)"),
          "clip_max": Param(3.0, 0.01, 1000.0, "TRL vllm_importance_sampling_clip_max C_max")}
_TRL = [("token_truncate", "token-level TIS", "tok_tis",
         "tok_clip(C_min = clip_min, C_max = clip_max); tok_tis(C = clip_max) when clip_min is unset",
         "the docstring calls token_truncate the default mode; the default is sequence_mask"),
        ("token_mask", "token-level MIS", "tok_mis", "tok_mis(lo = clip_min, hi = clip_max)", ""),
        ("sequence_truncate", "sequence-level TIS", "seq_tis",
         "seq_clip(C_min = clip_min, C_max = clip_max); seq_tis(C = clip_max) when clip_min is unset",
         SAME_NAME.format(ms_swift="ms_swift:sequence_truncate, min(ρ_geo, C)")),
        ("sequence_mask", "sequence-level MIS (TRL's default)", "seq_mis",
         "seq_band(C_min = clip_min, C_max = clip_max); seq_mis(C = clip_max) when clip_min is unset",
         SAME_NAME.format(ms_swift="ms_swift:sequence_mask, ρ_t·1[ρ_geo ≤ C]"))]
PRESETS = [Preset(f"trl:{mode}", f'GRPOConfig(vllm_importance_sampling_mode="{mode}")', alias,
                  {"mode": mode, "clip_min": Ref("clip_min"), "clip_max": Ref("clip_max")}, base, equals,
                  dict(PARAMS), note, COMMIT) for mode, alias, base, equals, note in _TRL]
CODE = {"*": "trl/trainer/grpo_trainer.py 2579–2623 (the vLLM importance-sampling ratio), 2991–3150 "
                 "(_compute_loss)"}
PRESETS = with_code(PRESETS, CODE)


def check(config):
    """GRPOConfig.__post_init__ (trl/trainer/grpo_config.py 1131–1139): a set clip_min must be below clip_max."""
    if config["clip_min"] and config["clip_min"] >= config["clip_max"]:
        raise ValueError(f"TRL refuses vllm_importance_sampling_clip_min {config['clip_min']:g} ≥ clip_max "
                         f"{config['clip_max']:g}")


def factors(config):
    """The Rules of TRL's vllm_importance_sampling_mode."""
    bounds = {"C_min": config["clip_min"], "C_max": config["clip_max"]}
    factor = {"token_truncate": ("tok_clip", bounds),
              "token_mask": ("tok_mis", {"lo": bounds["C_min"], "hi": bounds["C_max"]}),
              "sequence_truncate": ("seq_clip", bounds),
              "sequence_mask": ("seq_band", bounds)}[config["mode"]]
    return Rules([factor], None, False)


def latex(preset):
    """The mode's coefficient, its bounds named after TRL's parameters."""
    config = preset.config
    ratio = r"\rho_t" if config["mode"].startswith("token") else "W"
    formula = (rf"\mathrm{{clamp}}({ratio}, C_{{\min}}, C_{{\max}})" if config["mode"].endswith("truncate")
               else rf"{ratio}\,\mathbf 1[C_{{\min}}\le {ratio}\le C_{{\max}}]")
    return rf"c_t = {formula},\quad C_{{\min}}, C_{{\max}}:\ \texttt{{clip\_min, clip\_max}}"


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

LOSS = "trl/trainer/grpo_trainer.py _compute_loss 3020–3150 (ratio 3066, weight 3118)"
OLD = ("grpo_trainer.py 2561–2576 (old log-probs recomputed at generation only with num_iterations > 1, misaligned "
       "steps or the vLLM correction; otherwise the current log-probs, detached)")
STEPS = ("grpo_config.py 679 (num_iterations 1), 518 (steps_per_generation None: gradient_accumulation_steps): one "
         "update per generated batch")
ASYNC = ("trl/experimental/async_grpo/async_grpo_trainer.py compute_loss 911–954 (old_log_probs are the engine's); "
         "async_grpo_config.py 247 (epsilon 0.2), 282–288 (max_staleness 4), 293 (weight_sync_steps 1); "
         "async_grpo_trainer.py 277–279 (older samples dropped)")
UPDATES = [
    UpdatePreset("trl:grpo", "GRPOConfig defaults (loss_type dapo, epsilon 0.2, use_vllm False)",
                 Update("recompute", "ppo", {"eps_low": 0.2, "eps_high": 0.2}), None, None, 0, commit=COMMIT,
                 code=f"{LOSS}; {OLD}; {STEPS}",
                 note="delta (INTELLECT-2's two-sided clip) clamps r at delta before the min: the dual clip c = delta "
                      "when delta > 1 + epsilon_high"),
    UpdatePreset("trl:grpo_vllm", "use_vllm=True (vllm_importance_sampling_correction True, mode sequence_mask, "
                                  "clip_max 3)",
                 Update("recompute", "ppo", {"eps_low": 0.2, "eps_high": 0.2}), "trl:sequence_mask", "trl_colocate",
                 0, commit=COMMIT, code=f"{LOSS}; {OLD}; 2579–2623 (the weight); {STEPS}"),
    UpdatePreset("trl:cispo", "loss_type=cispo, epsilon_high=5.0 (its help's recommendation)",
                 Update("recompute", "cispo", {"eps_low": 1.0, "eps_high": 4.0}), None, None, 0, commit=COMMIT,
                 code=f"{LOSS} (3080–3082: clamp(r, max=epsilon_high)); {STEPS}",
                 note="the cap is epsilon_high itself, not 1 + epsilon_high; with epsilon_high unset it is epsilon "
                      "(0.2): every weight capped below 1, not a CISPO of this API"),
    UpdatePreset("trl:async_grpo", "AsyncGRPOConfig defaults (trl/experimental/async_grpo)",
                 Update("bypass", "ppo", {"eps_low": 0.2, "eps_high": 0.2}), None, "trl_server", 4, "uniform",
                 commit=COMMIT, code=ASYNC,
                 note="clips π_θ/μ with no other correction; max_staleness bounds the lag, the toy draws it "
                      "uniformly in 0 … 4"),
]
