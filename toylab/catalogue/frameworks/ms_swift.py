"""ms-swift's rollout importance-sampling modes (rollout_importance_sampling_mode), from its code.

  ms-swift 3602360a562313afbf2ef6065fdf61f271a2c5b9 — swift/rlhf_trainers/args_mixin.py (GRPOArgumentsMixin:
  rollout_importance_sampling_mode, rollout_importance_sampling_threshold 2.0), swift/rlhf_trainers/grpo_trainer.py
  (_apply_rollout_importance_sampling, _compute_sequence_level_ratios; the Megatron trainer's copy is the same),
  docs/source_en/Instruction/GRPO/AdvancedResearch/training_inference_mismatch.md. Frozen numbers from running
  that code: tests/catalogue/reference/ms_swift/.

The weights multiply the per-token loss (its PPO ratio against the trainer's old log-probs: 1 on the toy's step);
nothing leaves completion_mask. Each token's log ratio is clamped at ±20 first; the "sequence" ratio is the
geometric mean of the clamped token ratios, exp(Σ log ρ̃_t / L).
"""

from toylab.catalogue.frameworks.factors import ratio_band, weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.weights import Param

COMMIT = "3602360"
SAFETY_BOUND = 20.0
THRESHOLD = {"threshold": Param(2.0, 1.0, 1000.0, "rollout_importance_sampling_threshold")}
COLLISION = "name collision: TRL's {mode} (trl:{mode}) is {trl}, on the product W; this one is geometric"
MASK_DOCS = ("the docs define sequence_mask as w·1[w ≤ τ] with w the geometric-mean sequence weight; the code "
             "keeps the token ratios ρ_t and applies only the mask by ρ_geo")


def _row(mode, alias, base, equals, note=""):
    return Preset(f"ms_swift:{mode}", f'rollout_importance_sampling_mode="{mode}"', alias,
                  {"rollout_importance_sampling_mode": mode, "rollout_importance_sampling_threshold": Ref("threshold")},
                  base, equals, dict(THRESHOLD), note, COMMIT)


PRESETS = [
    _row("token_truncate", "token TIS", "tok_tis", "tok_tis(C = threshold) (differs where log ρ_t < −20: e^−20 there)"),
    _row("token_mask", "token MIS, one-sided", "tok_mis",
         "ρ_t·1[ρ_t ≤ threshold]: tok_mis(lo = 0, hi = threshold); the masked tokens stay in the loss mask"),
    _row("sequence_truncate", "geometric TIS", "geo_tis", "geo_tis(C = threshold), ρ_geo of the ±20-clamped ratios",
         COLLISION.format(mode="sequence_truncate", trl="min(W, C) (clamp(W, C_min, C_max))")),
    _row("sequence_mask", "geometric sequence mask × token IS", "geo_rs",
         "tok_is × 1[ρ_geo ≤ threshold]: ρ_t·1[ρ_geo ≤ threshold]; nothing leaves the loss mask",
         COLLISION.format(mode="sequence_mask", trl="W·1[C_min ≤ W ≤ C_max]") + "; " + MASK_DOCS),
]

CODE = {"*": "swift/rlhf_trainers/grpo_trainer.py 2328–2376 (_apply_rollout_importance_sampling: the ±20 clamp at 2346), "
                 "2311–2326 (_compute_sequence_level_ratios)"}
PRESETS = with_code(PRESETS, CODE)


def factors(config):
    """The Rules of rollout_importance_sampling_mode."""
    mode, threshold = config["rollout_importance_sampling_mode"], config["rollout_importance_sampling_threshold"]
    factor = {"token_truncate": [("tok_tis", {"C": threshold})],
              "token_mask": [("tok_mis", {"lo": 0.0, "hi": threshold})],
              "sequence_truncate": [("geo_tis", {"C": threshold})],
              "sequence_mask": [("tok_is", {}), weights_only(ratio_band("seq_mean", None, threshold))]}[mode]
    return Rules(factor, SAFETY_BOUND, False)


LATEX = {"token_truncate": r"c_t = \min(\tilde\rho_t, \tau)",
         "token_mask": r"c_t = \tilde\rho_t\,\mathbf 1[\tilde\rho_t\le\tau]",
         "sequence_truncate": r"c_t = \min(\tilde\rho_{geo}, \tau)",
         "sequence_mask": r"c_t = \tilde\rho_t\,\mathbf 1[\tilde\rho_{geo}\le\tau]"}


def latex(preset):
    return LATEX[preset.id.partition(":")[2]] + r",\quad \tau:\ \texttt{rollout\_importance\_sampling\_threshold}"
