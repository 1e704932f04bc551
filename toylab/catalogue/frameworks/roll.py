"""ROLL's train-infer correction (train_infer_correction: is_weight and filters) and its TOPR loss, from its code.

  ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a — roll/configs/base_config.py (TrainInferISWeightConfig,
  TrainInferFilterConfig, TrainInferCorrectionConfig), roll/utils/train_infer_corrections.py
  (compute_train_infer_correction), roll/utils/functionals.py (masked_mean, agg_loss),
  roll/pipeline/agentic/agentic_actor_pg_worker.py (loss_func, _compute_topr_loss), roll/pipeline/agentic/
  agentic_pipeline.py (apply_train_infer_correction_to_batch on the default path). Frozen numbers from running that
  code on both paths: tests/catalogue/reference/roll/.

is_weight multiplies the policy loss by clamp(ratio, 0, upper_bound), the ratio per token (ρ_t), its geometric mean
(ρ_geo) or its product (W), no log-ratio clamp; each enabled filter
multiplies response_mask by 1[low ≤ ratio ≤ high] at its agg_type. The policy ratio is against the trainer's old
log-probs: 1 on the toy's step. ROLL's masked_mean divides by mask_sum + 10⁻⁸, but the response mask is an integer
tensor, so mask_sum + 1e-8 is a float32 in which the 10⁻⁸ is lost: its means divide by L exactly.

Two paths compute the same coefficients. With enable_old_logprobs_recompute false the actor worker's loss_func
calls compute_train_infer_correction; ROLL's default init_kl_coef 0.2 turns the recompute on (PPOConfig,
base_config.py 817–819), and the pipeline then calls apply_train_infer_correction_to_batch before training, which
stores the weight and filters response_mask, and loss_func reads them. They differ only in aggregation: on the
default path the filtered response_mask also multiplies the log-probs (op_compute_log_probs), so token-mean, which
never reads loss_mask, removes the filtered tokens there and keeps them on the worker's path.
"""

from toylab.catalogue.frameworks.factors import ratio_band
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "8eb27cc"
SCOPES = {"token": "token", "geometric": "seq_mean", "sequence": "seq_sum"}
TOKEN_MEAN_NOTE = ("agg_loss's token-mean sums loss_mat without loss_mask: with loss_agg_mode token-mean and "
                   "enable_old_logprobs_recompute off a filter removes nothing from the loss; on the default path "
                   "(init_kl_coef 0.2 turns the recompute on) the filtered response_mask zeroes the log-probs "
                   "first (op_compute_log_probs), so there it does; seq-mean-token-mean applies it on both")


def _row(option, text, alias, config, base, equals, params, note=""):
    return Preset(f"roll:{option}", text, alias, config, base, equals, params, note, COMMIT)


def _is_weight(level, base, equals):
    return _row(f"is_weight_{level}", f"train_infer_correction.is_weight: {{enabled: true, weight_type: {level}}}",
                f"{level} IS weight, truncated", {"is_weight.weight_type": level,
                                                  "is_weight.upper_bound": Ref("upper_bound")},
                base, equals, {"upper_bound": Param(1.2, 1.0, 1000.0, "is_weight.upper_bound: clamp(ratio, 0, it)")})


def _ratio_filter(agg, base, equals):
    return _row(f"ratio_filter_{agg}",
                f"train_infer_correction.filters: [{{enabled: true, agg_type: {agg}, ratio_enabled: true}}]",
                f"{agg} ratio filter", {"filter.agg_type": agg, "filter.ratio_low": Ref("ratio_low"),
                                        "filter.ratio_high": Ref("ratio_high")}, base, equals,
                {"ratio_low": Param(0.8, 0.001, 1.0, "filter ratio_low"),
                 "ratio_high": Param(1.2, 1.0, 1000.0, "filter ratio_high")}, TOKEN_MEAN_NOTE)


def _diff_filter(agg, equals):
    return _row(f"diff_filter_{agg}",
                f"train_infer_correction.filters: [{{enabled: true, agg_type: {agg}, ratio_enabled: false, "
                "diff_enabled: true}]", f"{agg} probability-difference filter",
                {"filter.agg_type": agg, "filter.ratio_enabled": False, "filter.diff_enabled": True,
                 "filter.diff_low": Ref("diff_low"), "filter.diff_high": Ref("diff_high")}, "tok_mis", equals,
                {"diff_low": Param(-0.2, -1000.0, 0.0, "filter diff_low"),
                 "diff_high": Param(0.2, 0.0, 1000.0, "filter diff_high")},
                DIFF_NOTE + "; " + TOKEN_MEAN_NOTE)


DIFF_NOTE = ("agg_type geometric of the difference is the arithmetic mean of Δp_t over the tokens, not a "
             "geometric mean; ratio_enabled defaults to true, so a diff-only filter must turn it off")

PRESETS = [
    _is_weight("token", "tok_tis", "tok_tis(C = upper_bound)"),
    _is_weight("geometric", "geo_tis", "geo_tis(C = upper_bound)"),
    _is_weight("sequence", "seq_tis", "seq_tis(C = upper_bound)"),
    _ratio_filter("token", "tok_mis", "naive × 1[ratio_low ≤ ρ_t ≤ ratio_high], the token leaves response_mask"),
    _ratio_filter("geometric", "geo_rs", "geo_rs(lo = ratio_low, hi = ratio_high)"),
    _ratio_filter("sequence", "seq_band", "naive × 1[ratio_low ≤ W ≤ ratio_high]"),
    _diff_filter("token", "naive × 1[diff_low ≤ Δp_t ≤ diff_high], Δp_t = π_t(y_t) − μ_t(y_t): rs(prob_diff, token)"),
    _diff_filter("geometric", "naive × 1[diff_low ≤ mean_t Δp_t ≤ diff_high]: rs(prob_diff, seq_mean)"),
    _diff_filter("sequence", "naive × 1[diff_low ≤ Σ_t Δp_t ≤ diff_high]: rs(prob_diff, seq_sum)"),
    _row("topr", 'actor_train.pg_variant="topr"', "TOPR (tapered off-policy REINFORCE)",
         {"pg_variant": "topr", "topr_positive_weight": 1.0, "topr_negative_weight": 1.0}, "naive",
         "naive: its clamped ratio is π/π_old, 1 on the toy's step (topr_positive/negative_weight 1)", {},
         "_compute_topr_loss's docstring gives TOPR as [π(τ)/μ(τ)]₀¹ on whole trajectories with μ the behaviour "
         "policy; the code clamps the token ratio π/π_old (the trainer's old log-probs), not the sampler's, and "
         "splits by score > 0, not by the advantage"),
]

CODE = {"*": "roll/utils/train_infer_corrections.py 65–173 (compute_train_infer_correction), 176–255 "
                 "(apply_train_infer_correction_to_batch, ROLL's default path); roll/pipeline/agentic/"
                 "agentic_actor_pg_worker.py 29–147 (loss_func)",
        "topr": "roll/pipeline/agentic/agentic_actor_pg_worker.py 260–349 (_compute_topr_loss)"}
PRESETS = with_code(PRESETS, CODE)


def factors(config):
    """The Rules of a train_infer_correction setting (or pg_variant topr)."""
    if config.get("pg_variant") == "topr":
        return Rules([])
    if "is_weight.weight_type" in config:
        level = config["is_weight.weight_type"]
        weight = {"token": "tok_tis", "geometric": "geo_tis", "sequence": "seq_tis"}[level]
        return Rules([(weight, {"C": config["is_weight.upper_bound"]})])
    scope = SCOPES[config["filter.agg_type"]]
    factors = []
    if config.get("filter.ratio_enabled", True):
        factors.append(ratio_band(scope, config["filter.ratio_low"], config["filter.ratio_high"]))
    if config.get("filter.diff_enabled"):
        factors.append(("rs", {"statistic": "prob_diff", "scope": scope, "lo": config["filter.diff_low"],
                               "hi": config["filter.diff_high"]}))
    return Rules(factors)


RATIO = {"token": r"\rho_t", "geometric": r"\rho_{geo}", "sequence": "W"}


def latex(preset):
    option = preset.id.partition(":")[2]
    if option == "topr":
        return r"c_t = 1"
    level = option.rpartition("_")[2]
    if option.startswith("is_weight"):
        return rf"c_t = \min({RATIO[level]}, C),\quad C:\ \texttt{{upper\_bound}}"
    if option.startswith("diff_filter"):
        diff = {"token": r"\Delta p_t", "geometric": r"\tfrac1L\sum_s\Delta p_s", "sequence": r"\sum_s\Delta p_s"}[level]
        return rf"c_t = \mathbf 1[\ell\le {diff}\le u],\ \Delta p = \pi - \mu,\quad \ell, u:\ \texttt{{diff\_low, diff\_high}}"
    return rf"c_t = \mathbf 1[\ell\le {RATIO[level]}\le u],\quad \ell, u:\ \texttt{{ratio\_low, ratio\_high}}"


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

LOSS = ("roll/pipeline/agentic/agentic_actor_pg_worker.py loss_func 29– (pg_variant 73, the IS weight 97–98), "
        "_compute_ppo_loss 150–198, _compute_vanilla_pg_loss 200–212")
RECOMPUTE = ("roll/configs/base_config.py 535–537 (init_kl_coef 0.2), 817–819 (then enable_old_logprobs_recompute): "
             "old log-probs recomputed before the update")
BATCHES = ("base_config.py 510 (ppo_epochs 1); the minibatches are rollout_batch_size × num_return_sequences over "
           "per_device_train_batch_size × gradient_accumulation_steps × dp, no default (the examples' yaml)")
UPDATE_NOTE = ("train_infer_correction.is_weight off by default (base_config.py 426–429); on, its weight (token, "
               "upper_bound 1.2) multiplies the loss; async_generation_ratio 0 (502–507): synchronous")
UPDATES = [
    UpdatePreset("roll:vanilla", "actor_train.pg_variant unset (loss_func's default \"vanilla\")",
                 Update("recompute", "reinforce"), None, "roll", 0, commit=COMMIT, code=f"{LOSS}; {BATCHES}",
                 note="the default policy loss is REINFORCE, −log π·A, with no ratio; " + UPDATE_NOTE),
    UpdatePreset("roll:ppo", "actor_train.pg_variant=ppo (pg_clip 0.2, dual_clip_loss false)",
                 Update("recompute", "ppo", {"eps_low": 0.2, "eps_high": 0.2}), None, "roll", 0, commit=COMMIT,
                 code=f"{LOSS}; {RECOMPUTE}; base_config.py 515–522, 574; {BATCHES}",
                 note="dual_clip_loss bounds the loss at (1 + 2·pg_clip)·|A| for A < 0: its dual clip c is tied to "
                      "pg_clip (1.4 at the default); " + UPDATE_NOTE),
]

