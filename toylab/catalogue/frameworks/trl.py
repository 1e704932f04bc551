"""TRL's vLLM importance-sampling modes (GRPOConfig.vllm_importance_sampling_mode), from TRL's code.

  TRL f2cd57710ae345ea6428ae95363267fcf38a3dc8 — trl/trainer/grpo_trainer.py (the vLLM importance-sampling
  ratio in _generate_and_score_completions, _compute_loss), trl/trainer/grpo_config.py (defaults). Frozen numbers
  from running that code: tests/catalogue/test_frameworks.py.

TRL's GRPO ratio is against the trainer's own old log-probs, 1 on the toy's single step, so a TRL mode is its IS
weight alone; TRL does not clamp, and its masks zero a weight but leave the token in the loss's denominator.
"""

from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
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
