"""NeMo-RL's importance-sampling correction (loss_fn of ClippedPGLossFn) and its sequence-level logprob-error mask.

  NeMo-RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 — nemo_rl/algorithms/loss/loss_functions.py (ClippedPGLossConfig,
  ClippedPGLossFn.__call__), nemo_rl/algorithms/grpo.py (GRPOConfig.seq_logprob_error_threshold,
  compute_and_apply_seq_logprob_error_masking), nemo_rl/algorithms/utils.py (masked_mean, calculate_kl); the
  thresholds' values from examples/configs (grpo_math_1B_dynamo.yaml, prorlv2.v2.yaml, prorlv2_1_moe.v2.yaml) and
  docs/guides/nemotron-3-nano.md. Frozen numbers from running that code:
  tests/catalogue/reference/nemo_rl/.

use_importance_sampling_correction multiplies each token's clipped loss by exp(log π − log μ) (no clamp), or with
sequence_level_importance_ratios by exp(Σ_t log π − log μ); truncated_importance_sampling_type then clamps (tis),
zeroes outside [min, max] (icepop) or keeps only the sequences whose geometric mean is inside (seq-mask-tis) —
token_mask is left as it is. The PPO ratio is against prev_logprobs, the trainer's: 1 on the toy's step. Its
masked_mean divides by the count + 10⁻⁸.
"""

from toylab.catalogue.frameworks.factors import ratio_band, weights_only
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "7ea279a"
MEAN_EPSILON = 1e-8
LOSS = "loss_fn."
RATIO = "truncated_importance_sampling_ratio"


def _bounds(low, high):
    return {f"{RATIO}_min": Param(low, 0.0, 1.0, "lower bound (0: unset)"),
            RATIO: Param(high, 1.0, 1000.0, "upper bound")}


def _row(option, text, alias, config, base, equals, params, note=""):
    full = {"use_importance_sampling_correction": True, "sequence_level_importance_ratios": False,
            "truncated_importance_sampling_type": None, RATIO: None, f"{RATIO}_min": None, **config}
    return Preset(f"nemo_rl:{option}", text, alias, full, base, equals, params, note, COMMIT)


SEQUENCE_NOTE = ("ClippedPGLossFn raises when truncated_importance_sampling_ratio is set while the type is None "
                 "(loss_functions.py 596, 668): the type and the ratio come together; seq-mask-tis is refused at "
                 "the sequence level (its __init__ asserts)")


def _truncated(kind):
    return {"truncated_importance_sampling_type": kind, RATIO: Ref(RATIO), f"{RATIO}_min": Ref(f"{RATIO}_min")}


PRESETS = [
    _row("use_importance_sampling_correction", f"{LOSS}use_importance_sampling_correction=true", "token IS", {},
         "tok_is", "tok_is (no clamp)", {}),
    _row("tis", f'{LOSS}truncated_importance_sampling_type="tis"', "token TIS", _truncated("tis"), "tok_tis",
         "tok_clip(C_min = …_ratio_min, C_max = …_ratio); tok_tis(C = …_ratio) with the _min unset (grpo_math_1B_dynamo: 2)",
         _bounds(0.0, 2.0)),
    _row("icepop", f'{LOSS}truncated_importance_sampling_type="icepop"', "IcePop", _truncated("icepop"), "tok_mis",
         "tok_mis(lo = …_ratio_min, hi = …_ratio) (prorlv2.v2: 0.5, 5); the masked tokens stay in token_mask",
         _bounds(0.5, 5.0), "examples/configs/prorlv2.v2.yaml calls the _min \"Lower bound (ICE-POP only)\"; "
         "seq-mask-tis and tis read it too"),
    _row("seq-mask-tis", f'{LOSS}truncated_importance_sampling_type="seq-mask-tis"',
         "geometric sequence mask × token IS", _truncated("seq-mask-tis"), "geo_rs",
         "tok_is × geo_rs(lo = …_ratio_min, hi = …_ratio): ρ_t·1[min ≤ ρ_geo ≤ max] (prorlv2_1_moe: 0.999, "
         "1.002), ρ_geo = exp(Σ log ρ/(L + 10⁻⁸)); nothing leaves token_mask", _bounds(0.999, 1.002)),
    _row("sequence_level_importance_ratios", f"{LOSS}sequence_level_importance_ratios=true (token_level_loss=false)",
         "sequence IS (GSPO's setting)", {"sequence_level_importance_ratios": True},
         "seq_is", "seq_is (no clamp); truncated_importance_sampling_ratio stays unset (set with type None, "
         "ClippedPGLossFn raises)", {}, SEQUENCE_NOTE),
    _row("sequence_level_tis", f'{LOSS}sequence_level_importance_ratios=true, truncated_importance_sampling_type="tis"',
         "sequence TIS", {"sequence_level_importance_ratios": True, **_truncated("tis")}, "seq_tis",
         "seq_clip(C_min = …_ratio_min, C_max = …_ratio); seq_tis(C = …_ratio) with the _min unset",
         _bounds(0.0, 2.0), SEQUENCE_NOTE),
    _row("sequence_level_icepop", f'{LOSS}sequence_level_importance_ratios=true, '
         'truncated_importance_sampling_type="icepop"', "sequence IcePop",
         {"sequence_level_importance_ratios": True, **_truncated("icepop")}, "seq_band",
         "seq_band(C_min = …_ratio_min, C_max = …_ratio): W·1[min ≤ W ≤ max]; the masked sequences stay in "
         "token_mask", _bounds(0.5, 5.0), SEQUENCE_NOTE),
    _row("seq_logprob_error_threshold", "grpo.seq_logprob_error_threshold", "multiplicative-error sequence mask",
         {"use_importance_sampling_correction": False,
          "grpo.seq_logprob_error_threshold": Ref("seq_logprob_error_threshold")}, "k3_rs",
         "naive × 1[mean_t e^{|log ρ_t|} ≤ threshold]: rs(mult_error, seq_mean, hi = threshold) (nemotron-3-nano: "
         "2); the sequence leaves sample_mask",
         {"seq_logprob_error_threshold": Param(2.0, 1.0, 1000.0, "the largest mean e^{|log π − log μ|} kept")},
         "with use_importance_sampling_correction the IS weights multiply this mask; its mean divides by L "
         "(grpo.py), not by L + 10⁻⁸ as masked_mean does"),
]

LOSS_FILE = "nemo_rl/algorithms/loss/loss_functions.py"
CODE = {"*": f"{LOSS_FILE} 374–788 (ClippedPGLossFn.__call__: the weights 568–595, their truncation 596–670)",
        "seq_logprob_error_threshold": "nemo_rl/algorithms/grpo.py 2513–2640 (compute_and_apply_seq_logprob_error_"
                                       "masking: the mean 2556–2561, ≤ threshold 2590)"}
PRESETS = with_code(PRESETS, CODE)


def check(config):
    """ClippedPGLossFn.__init__ (loss_functions.py 292–323): the ratio positive, the _min at most the ratio."""
    low, high = config[f"{RATIO}_min"], config[RATIO]
    if high is not None and low is not None and low > high:
        raise ValueError(f"NeMo-RL refuses {RATIO}_min = {low:g} above {RATIO} = {high:g}")


def factors(config):
    """The Rules of a ClippedPGLossConfig (+ GRPO's error mask): masked_mean's means divide by L + 10⁻⁸ (the
    geometric mean of seq-mask-tis), the error mask's by L itself (compute_and_apply_seq_logprob_error_masking)."""
    factors = _weights(config) if config["use_importance_sampling_correction"] else []
    if config.get("grpo.seq_logprob_error_threshold"):
        factors.append(("rs", {"statistic": "mult_error", "scope": "seq_mean", "lo": None,
                               "hi": config["grpo.seq_logprob_error_threshold"]}))
        return Rules(factors)
    return Rules(factors, mean_epsilon=MEAN_EPSILON)


def _weights(config):
    kind = config["truncated_importance_sampling_type"]
    sequence = config["sequence_level_importance_ratios"]
    if kind is None:
        if config["truncated_importance_sampling_ratio"] is not None:
            raise ValueError("NeMo-RL raises when truncated_importance_sampling_ratio is set without a type")
        return [("seq_is" if sequence else "tok_is", {})]
    low, high = config["truncated_importance_sampling_ratio_min"], config["truncated_importance_sampling_ratio"]
    if kind == "tis":
        return [("seq_clip" if sequence else "tok_clip", {"C_min": low, "C_max": high})]
    if kind == "icepop":
        return [weights_only(("seq_band", {"C_min": low, "C_max": high}) if sequence else
                             ("tok_mis", {"lo": low, "hi": high}))]
    return [("tok_is", {}), weights_only(ratio_band("seq_mean", low, high))]


LATEX = {"use_importance_sampling_correction": r"c_t = \rho_t",
         "seq_logprob_error_threshold": r"c_t = \mathbf 1\big[\tfrac1T\sum_s e^{|\log\rho_s|}\le\tau\big],\quad \tau:\ "
                                        r"\texttt{seq\_logprob\_error\_threshold}",
         "tis": r"c_t = \mathrm{clamp}(\rho_t, \ell, u)",
         "icepop": r"c_t = \rho_t\,\mathbf 1[\ell\le\rho_t\le u]",
         "seq-mask-tis": r"c_t = \rho_t\,\mathbf 1[\ell\le\rho_{geo}\le u]",
         "sequence_level_importance_ratios": r"c_t = W",
         "sequence_level_tis": r"c_t = \mathrm{clamp}(W, \ell, u)",
         "sequence_level_icepop": r"c_t = W\,\mathbf 1[\ell\le W\le u]"}


def latex(preset):
    option = preset.id.partition(":")[2]
    symbols = "" if option in ("use_importance_sampling_correction", "seq_logprob_error_threshold",
                               "sequence_level_importance_ratios") else \
        r",\quad \ell, u:\ \texttt{truncated\_importance\_sampling\_ratio\_min, \_ratio}"
    return LATEX[option] + symbols


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

LOSS = ("nemo_rl/algorithms/loss/loss_functions.py ClippedPGLossFn.__call__ 374– (ratio 527, clip 545–562, weight "
        "579–584 and 674–690)")
RECOMPUTE = "nemo_rl/algorithms/grpo.py grpo_train 3238–3241 (prev_logprobs = policy.get_logprobs)"
CONFIG = ("examples/configs/grpo_math_1B.yaml 3–4 (32 prompts × 16 generations), 86–88 (ratio_clip 0.2/0.2, c null), "
          "93 (use_importance_sampling_correction false), 132 (train_global_batch_size 512: one update per batch)")
CLIP = {"eps_low": 0.2, "eps_high": 0.2}
UPDATES = [
    UpdatePreset("nemo_rl:default", "grpo_math_1B.yaml", Update("recompute", "ppo", CLIP), None, "nemo_rl", 0,
                 commit=COMMIT, code=f"{LOSS}; {RECOMPUTE}; {CONFIG}",
                 note="use_importance_sampling_correction multiplies the clipped loss by π_old/μ "
                      "(truncated_importance_sampling_type: tis, icepop, seq-mask-tis)"),
    UpdatePreset("nemo_rl:async", "grpo.async_grpo.enabled=true (max_trajectory_age_steps 1), "
                                  "loss_fn.use_importance_sampling_correction=true",
                 Update("recompute", "ppo", CLIP), "nemo_rl:use_importance_sampling_correction", "nemo_rl", 1,
                 "uniform", commit=COMMIT,
                 code=f"{LOSS}; grpo.py async_grpo_train 4074– (4127–4129: asserts the correction; 4784–4787: "
                      "prev_logprobs recomputed); grpo_math_1B.yaml 56–64",
                 note="the yaml comment asks for the correction, async_grpo_train asserts it; max_trajectory_age_steps "
                      "bounds the lag, the toy draws it uniformly in 0 … 1"),
    UpdatePreset("nemo_rl:cispo", "loss_fn.use_cispo=true", Update("recompute", "cispo", CLIP), None, "nemo_rl", 0,
                 commit=COMMIT, code=f"{LOSS}; {CONFIG}",
                 note="clips both sides with ratio_clip_min/max (0.2/0.2 in grpo_math_1B.yaml)"),
]

