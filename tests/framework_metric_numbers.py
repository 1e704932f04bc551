"""Framework metrics frozen from running each framework's own code on two hand-made batches (never re-derived here).

How they were made: the function text of each framework at its commit was taken from the repository (git show) and
executed with torch 2.13.0 (CPU, float64), imports stubbed, on the batches below (log μ = SAMPLER, log π = SAMPLER +
the log ratio, MASK the response tokens):

  verl b178a3cd56f58b2d502255daba591e92833930a7 — compute_offpolicy_metrics, compute_rollout_correction_weights →
  compute_is_metrics (rollout_is "token" and "sequence", threshold 2.0), verl/trainer/ppo/rollout_corr_helper.py;
  calculate_debug_metrics, verl/utils/debug/metrics.py; masked_mean/masked_sum from verl/utils/torch_functional.py.
  NeMo-RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 — the metric block of ClippedPGLossFn.__call__ (from
  "lp_error = ..." to "# Calculate KL regularization."), nemo_rl/algorithms/loss/loss_functions.py, kl_type "k3",
  global_valid_toks = the response tokens; compute_and_apply_seq_logprob_error_masking, nemo_rl/algorithms/grpo.py
  (a zero column prepended: NeMo drops column 0).
  prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 — compute_importance_ratio_and_mismatch_kl,
  src/prime_rl/trainer/rl/loss.py; mean and max over the loss-mask tokens, as Tensors.compute_stats takes them.
  slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 — get_sum_of_sample_mean (cp_size 1),
  slime/backends/megatron_utils/cp_utils.py, on |log_probs − rollout_log_probs|, divided by the 4 samples.
  open-instruct e6c3044aa — compute_vllm_local_debug_metrics, open_instruct/grpo_utils.py.

verl's and NeMo's means divide by the count + 1e-8, so they differ from an exact mean by ~1e-8 relative (and,
for χ² = mean − 1 near 0, by ~1e-9 absolute).
"""

SAMPLER = [[-1.2, -0.7, -2.0, -0.9, -1.5], [-0.8, -2.5, -0.6, -9.0, -0.2], [-1.0, -25.0, -3.0, -0.4, -1.1],
           [-0.3, -0.5, -0.9, -1.3, -4.0]]
MASK = [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
LOG_RATIOS = {
    # large: verl's ±20 clamp bites at row 2 (−22, 20)
    "extreme": [[0.1, -0.05, 0.2, -0.3, 0.02], [0.4, 1.2, -1.1, 5.0, -7.0], [-22.0, 20.0, 1.5, 0.0, 0.1],
                [0.001, -0.002, 0.0005, 0.0015, 3.0]],
    # a realistic size (|log ρ| ~ 1e-3): mean(ρ²) − 1 is negative here, noise
    "mild": [[1.2e-3, -8e-4, 3e-5, -2.1e-3, 4e-4], [-6e-4, 2.5e-3, -1.7e-3, 0.0, 0.0], [9e-4, -3e-4, 1.1e-3, -4e-4, 2e-4],
             [-1.5e-3, 7e-4, 5e-5, -9e-4, 0.0]],
}

FRAMEWORK_METRICS = {
    "extreme": {
        "rollout_corr/training_ppl": 122.94026284110178,
        "rollout_corr/training_log_ppl": 2.332270828197295,
        "rollout_corr/kl": -0.0041764705857786355,
        "rollout_corr/k3_kl": 28539129.342641063,
        "rollout_corr/rollout_ppl": 113.79237069647398,
        "rollout_corr/rollout_log_ppl": 2.352499994767917,
        "rollout_corr/log_ppl_diff": -0.020229166570621765,
        "rollout_corr/log_ppl_abs_diff": 0.06322916648462126,
        "rollout_corr/log_ppl_diff_max": 0.07999999983999917,
        "rollout_corr/log_ppl_diff_min": -0.16666666611111092,
        "rollout_corr/ppl_ratio": 0.9838842150381317,
        "rollout_corr/chi2_token": 1.3846192158738712e+16,
        "rollout_corr/chi2_seq": 0.2778443318736292,
        "training/rollout_probs_diff_max": 0.36787944106882353,
        "training/rollout_probs_diff_mean": 0.09169661808724852,
        "training/rollout_probs_diff_std": 0.12661078720808183,
        "training/rollout_actor_probs_pearson_corr": 0.7424932486868596,
        "rollout_corr/rollout_is_eff_sample_size (rollout_is=token)": 0.8671843662773084,
        "rollout_corr/rollout_is_eff_sample_size (rollout_is=sequence)": 0.9053819484444012,
        "token_mult_prob_error": 239416356.6648879,
        "gen_kl_error": 28539129.342641063,
        "policy_kl_error": 210877226.01772746,
        "js_divergence_error": 1.1897191379880467,
        "max_seq_mult_prob_error": 814015609.6256483,
        "mean_seq_mult_prob_error": 203503903.59546235,
        "min_seq_mult_prob_error": 1.0012509380210641,
        "mismatch_kl/all/mean": 28539129.359428786,
        "mismatch_kl/all/max": 485165174.4097903,
        "train_rollout_logprob_abs_diff": 2.4388125000000005,
        "debug/vllm_vs_local_logprob_diff_mean": 2.763235294117647,
        "debug/vllm_vs_local_logprob_diff_max": 22.0,
        "debug/vllm_vs_local_logprob_diff_std": 6.88934834345212,
        "debug/vllm_local_reverse_kl": 0.4938735560546936,
    },
    "mild": {
        "rollout_corr/training_ppl": 113.75931748004145,
        "rollout_corr/training_log_ppl": 2.352574953101071,
        "rollout_corr/kl": 7.176470584009588e-05,
        "rollout_corr/k3_kl": 6.474602992287053e-07,
        "rollout_corr/rollout_ppl": 113.79237069647398,
        "rollout_corr/rollout_log_ppl": 2.352499994767917,
        "rollout_corr/log_ppl_diff": 7.495833315387945e-05,
        "rollout_corr/log_ppl_abs_diff": 0.00025829166607629905,
        "rollout_corr/log_ppl_diff_max": 0.00041249999896864065,
        "rollout_corr/log_ppl_diff_min": -0.00029999999940066857,
        "rollout_corr/ppl_ratio": 1.000074999475211,
        "rollout_corr/chi2_token": -0.00014094012776288967,
        "rollout_corr/chi2_seq": -0.0006066883499898923,
        "training/rollout_probs_diff_max": 0.001110394327078379,
        "training/rollout_probs_diff_mean": 0.0003313803636607887,
        "training/rollout_probs_diff_std": 0.0003357663088113535,
        "training/rollout_actor_probs_pearson_corr": 0.9999983500077859,
        "rollout_corr/rollout_is_eff_sample_size (rollout_is=token)": 0.9999987293374472,
        "rollout_corr/rollout_is_eff_sample_size (rollout_is=sequence)": 0.9999983162052771,
        "token_mult_prob_error": 1.0009053531283356,
        "gen_kl_error": 6.474602992123785e-07,
        "policy_kl_error": 6.474459628502242e-07,
        "js_divergence_error": 1.6186321143824113e-07,
        "max_seq_mult_prob_error": 1.0016015844869939,
        "mean_seq_mult_prob_error": 1.0009691063206303,
        "min_seq_mult_prob_error": 1.0005802310719845,
        "mismatch_kl/all/mean": 6.474602996095643e-07,
        "mismatch_kl/all/max": 3.127605795016919e-06,
        "train_rollout_logprob_abs_diff": 0.0009683749999999662,
        "debug/vllm_vs_local_logprob_diff_mean": 0.0009047058823529022,
        "debug/vllm_vs_local_logprob_diff_max": 0.0024999999999999467,
        "debug/vllm_vs_local_logprob_diff_std": 0.0007114695851463304,
        "debug/vllm_local_reverse_kl": 0.0001482933261349946,
    },
}
