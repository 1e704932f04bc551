"""The mismatch metrics frameworks log, under their own names, computed from a log's two log-prob columns.

Each is the framework's formula on the log's response tokens, read from its code at the commit named; a user
holds them against their own dashboard. Every number is still a sample statistic of this batch: a mean over
tokens carries its standard error clustered by sequence (``statistics.token_mean``), a mean over sequences
s/√B; extremes, spreads and correlations have none. With ρ = π/μ, log ρ = log π − log μ, tokens y ~ μ:

verl (b178a3c) — ``compute_offpolicy_metrics`` and ``compute_is_metrics`` (verl/trainer/ppo/rollout_corr_helper.py),
``calculate_debug_metrics`` (verl/utils/debug/metrics.py):
    rollout_corr/kl                     token mean of log μ − log π
    rollout_corr/k3_kl                  token mean of ρ − 1 − log ρ
    rollout_corr/training_ppl           mean over sequences of exp(−mean_t log π);  rollout_ppl: of log μ
    rollout_corr/training_log_ppl       mean over sequences of −mean_t log π;        rollout_log_ppl: of log μ
    rollout_corr/log_ppl_diff           mean over sequences of d_b = mean_t log μ − mean_t log π (_abs_diff:
                                        of |d_b|; _max, _min: its extremes)
    rollout_corr/ppl_ratio              mean over sequences of exp(d_b)
    rollout_corr/chi2_token             token mean of exp(2·clamp(log ρ, ±20)) − 1
    rollout_corr/chi2_seq               mean over sequences of exp(2·clamp(Σ_t log ρ, ±20)) − 1
    rollout_corr/rollout_is_eff_sample_size   1 / token mean of (w/w̄)², w = clamp(weight, 1/C, C), the weight
                                        exp(clamp(log ρ, ±20)) per token (rollout_is="token") or
                                        exp(clamp(Σ_t log ρ, ±20)) per sequence ("sequence"), C = 2 (its default)
    training/rollout_probs_diff_mean    token mean of |π − μ| (probabilities, though its docstring says log-prob
                                        diff); _max, _std (unbiased) over the tokens
    training/rollout_actor_probs_pearson_corr   Pearson correlation of π and μ over the tokens
NeMo-RL (7ea279a) — ``ClippedPGLossFn.__call__`` (nemo_rl/algorithms/loss/loss_functions.py) at its default
kl_type "k3", ``compute_and_apply_seq_logprob_error_masking`` (nemo_rl/algorithms/grpo.py):
    token_mult_prob_error               token mean of exp(|log ρ|)
    gen_kl_error                        token mean of ρ − 1 − log ρ   (k3 of KL(μ‖π))
    policy_kl_error                     token mean of 1/ρ − 1 + log ρ (k3 with the roles swapped; tokens are
                                        still drawn from μ, so it does not estimate KL(π‖μ))
    js_divergence_error                 token mean of ½(a − 1 − log a) + ½(g − 1 − log g), a = π/m, g = μ/m,
                                        m = ½(π + μ) of the sampled token: NeMo's per-token formula. Its docs call it
                                        the Jensen–Shannon divergence, which needs both whole next-token
                                        distributions; a log holds one token's probabilities, so no log can
                                        estimate the divergence itself.
    max/mean/min_seq_mult_prob_error    of each sequence's mean of exp(|log ρ|)
prime-rl (559b447) — ``compute_importance_ratio_and_mismatch_kl`` (src/prime_rl/trainer/rl/loss.py), logged by
``Tensors.compute_stats`` (src/prime_rl/trainer/utils.py):
    mismatch_kl/all/mean                token mean of ρ − 1 − log ρ; /max over the tokens
    kl_ent_ratio/mean                   mismatch_kl/all/mean over the token mean of the trainer's entropy (train.py
                                        670–673: Σ_t (ρ − 1 − log ρ) / Σ_t H_t over the loss-mask tokens). The entropy
                                        sums over the whole vocabulary: prime-rl's token export holds it per token
                                        (``entropy``), other logs do not, and then it has no value
slime (624b824) — ``train_rollout_logprob_abs_diff`` in slime/backends/megatron_utils/loss.py, reduced by
``get_sum_of_sample_mean`` (cp_utils.py) at its default (per-sample means):
    train_rollout_logprob_abs_diff      mean over sequences of each sequence's mean |log ρ|
open-instruct (e6c3044) — ``compute_vllm_local_debug_metrics`` (open_instruct/grpo_utils.py):
    debug/vllm_vs_local_logprob_diff_mean   token mean of |log ρ|; _max; _std (unbiased)
    debug/vllm_local_reverse_kl         token mean of μ·(log μ − log π)
TRL (f2cd577) — ``_generate_and_score_completions`` (trl/trainer/grpo_trainer.py):
    sampling/sampling_logp_difference/mean, /max   token mean and maximum of |log ρ|

A framework averages these over its own batch (verl and NeMo over the global batch; open-instruct over each
micro-batch, then over the micro-batches; TRL per process, then over processes), so on the same tokens a
token mean here equals its number where it takes one batch, and is within the standard error otherwise.
"""

import math
from dataclasses import dataclass

import numpy as np

from toylab.your_run.statistics import (
    Estimate,
    log_sequence_sums,
    log_token_means,
    ratio_of_sums,
    sequence_means,
)
from toylab.your_run.token_pass import SAFETY_BOUND, SEQUENCE_MEANS, VERL_IS_THRESHOLD, quantity, token_pass

BEYOND_FLOAT64 = "beyond float64 on this log (its log-probabilities reach below −709, where e^−log p overflows)"
WHOLE_VOCABULARY = ("needs the trainer's entropy over the whole vocabulary at each token, which prime-rl's token "
                    "export holds ('entropy') and this log does not: a log of sampled tokens holds one token's "
                    "probabilities")
NO_ENTROPY = "undefined on this log: the trainer's entropy is 0 on every token (prime-rl then logs no value)"


@dataclass(frozen=True)
class FrameworkMetric:
    """One framework's metric on a log: its value and standard error (None: it has none, or the log cannot give
    the value, with the reason in ``note``)."""
    framework: str
    name: str
    value: float | None
    se: float | None = None
    note: str = ""

    def as_dict(self):
        return {"name": self.name, "value": self.value, "se": self.se, **({"note": self.note} if self.note else {})}


def framework_metrics(log):
    """[FrameworkMetric] of a RolloutLog, framework by framework in the order of the module docstring."""
    passed = token_pass(log)
    lengths = log.lengths
    # d = mean log μ − mean log π, without cancellation
    mean_log_mu, mean_log_pi, d, seq_mult, mean_abs_log_rho = _sequence_means_of(log, SEQUENCE_MEANS)
    log_W = -log_sequence_sums(log, "minus_log_rho")
    # every token mean at once; k3's and |log ρ|'s are each shown under several names
    kl, k3_mean, abs_mean, clamped_squares, gap_mean, mult_mean, policy_kl, js_mean, reverse_kl = log_token_means(log, [
        "minus_log_rho", "k3", "abs_log_rho", "clamped_squared", "probability_gap", "exp_abs_log_rho", "policy_kl", "js",
        "reverse_kl"])
    # every mean over sequences at once, the perplexities' scaled into range
    training_ppl, training_log_ppl, rollout_ppl, rollout_log_ppl = _finite_means(
        [_exp(-mean_log_pi), -mean_log_pi, _exp(-mean_log_mu), -mean_log_mu])
    log_ppl_diff, log_ppl_abs_diff, ppl_ratio, seq_chi2, mean_seq_mult, slime_abs_diff = sequence_means(
        [d, np.abs(d), np.exp(d), np.exp(2 * np.clip(log_W, -SAFETY_BOUND, SAFETY_BOUND)), seq_mult, mean_abs_log_rho])
    largest_abs_log_rho = max(-passed.log_rho_low, passed.log_rho_high)
    rows = [
        ("verl", "rollout_corr/kl", kl),
        ("verl", "rollout_corr/k3_kl", k3_mean),
        ("verl", "rollout_corr/training_ppl", training_ppl),
        ("verl", "rollout_corr/training_log_ppl", training_log_ppl),
        ("verl", "rollout_corr/rollout_ppl", rollout_ppl),
        ("verl", "rollout_corr/rollout_log_ppl", rollout_log_ppl),
        ("verl", "rollout_corr/log_ppl_diff", log_ppl_diff),
        ("verl", "rollout_corr/log_ppl_abs_diff", log_ppl_abs_diff),
        ("verl", "rollout_corr/log_ppl_diff_max", float(d.max())),
        ("verl", "rollout_corr/log_ppl_diff_min", float(d.min())),
        ("verl", "rollout_corr/ppl_ratio", ppl_ratio),
        ("verl", "rollout_corr/chi2_token", _shifted(clamped_squares, -1.0)),
        ("verl", "rollout_corr/chi2_seq", _shifted(seq_chi2, -1.0)),
        ("verl", "rollout_corr/rollout_is_eff_sample_size (rollout_is=token)", passed.verl_token_ess),
        ("verl", "rollout_corr/rollout_is_eff_sample_size (rollout_is=sequence)",
         _verl_ess(np.exp(np.clip(log_W, -SAFETY_BOUND, SAFETY_BOUND)), lengths)),
        ("verl", "training/rollout_probs_diff_mean", gap_mean),
        ("verl", "training/rollout_probs_diff_max", passed.probability_gap_high),
        ("verl", "training/rollout_probs_diff_std", passed.probability_gap_sd),
        ("verl", "training/rollout_actor_probs_pearson_corr", passed.probability_correlation),
        ("NeMo-RL", "token_mult_prob_error", mult_mean),
        ("NeMo-RL", "gen_kl_error", k3_mean),
        ("NeMo-RL", "policy_kl_error", policy_kl),
        ("NeMo-RL", "js_divergence_error", js_mean),
        ("NeMo-RL", "max_seq_mult_prob_error", float(seq_mult.max())),
        ("NeMo-RL", "mean_seq_mult_prob_error", mean_seq_mult),
        ("NeMo-RL", "min_seq_mult_prob_error", float(seq_mult.min())),
        ("prime-rl", "mismatch_kl/all/mean", k3_mean),
        ("prime-rl", "mismatch_kl/all/max", passed.k3_high),
        ("prime-rl", "kl_ent_ratio/mean", _kl_entropy_ratio(log)),
        ("slime", "train_rollout_logprob_abs_diff", slime_abs_diff),
        ("open-instruct", "debug/vllm_vs_local_logprob_diff_mean", abs_mean),
        ("open-instruct", "debug/vllm_vs_local_logprob_diff_max", largest_abs_log_rho),
        ("open-instruct", "debug/vllm_vs_local_logprob_diff_std", passed.abs_log_rho_sd),
        ("open-instruct", "debug/vllm_local_reverse_kl", reverse_kl),
        ("TRL", "sampling/sampling_logp_difference/mean", abs_mean),
        ("TRL", "sampling/sampling_logp_difference/max", largest_abs_log_rho),
    ]
    return [_metric(framework, name, value) for framework, name, value in rows]


def _sequence_means_of(log, names):
    """Each named quantity's mean over each sequence's tokens: from the log's one pass (Σ_b / L_b), or, when the pass
    leaves the sums to the whole arrays, all at once (a row each), each array scaled by its own power of two
    (log-probs may be as low as −1e308)."""
    sums = token_pass(log).sums
    if sums is not None:
        return [sums[name] / log.lengths for name in names]
    arrays = [quantity(log, name) for name in names]
    scales = np.array([_headroom(values) for values in arrays])[:, None]
    return list(np.add.reduceat(np.stack(arrays) / scales, log.offsets[:-1], axis=1) / log.lengths * scales)


def _kl_entropy_ratio(log):
    """prime-rl's kl_ent_ratio: Σ k3 / Σ entropy over the response tokens, clustered by sequence."""
    if log.entropy_sums is None:
        return WHOLE_VOCABULARY
    if not np.sum(log.entropy_sums) > 0:
        return NO_ENTROPY
    return ratio_of_sums(log_sequence_sums(log, "k3"), log.entropy_sums)


def _metric(framework, name, value):
    if isinstance(value, str):
        return FrameworkMetric(framework, name, None, note=value)
    if value is None:
        return FrameworkMetric(framework, name, None, note="undefined on this log: it needs two tokens whose "
                                                           "values differ")
    if isinstance(value, Estimate):
        return FrameworkMetric(framework, name, value.value, value.se)
    return FrameworkMetric(framework, name, value)


def _headroom(values):
    """A power of two to divide by so that sums of a million values, and of their squares, stay finite (1 unless
    they exceed 2^500; dividing by a power of two is exact)."""
    top = float(np.abs(values).max()) if np.size(values) else 0.0
    return 2.0 ** max(0, math.floor(math.log2(top)) - 500) if top > 0 else 1.0


def _exp(values):
    """e^values, inf where that is beyond float64 (a perplexity of log-probs below −709)."""
    with np.errstate(over="ignore"):
        return np.exp(values)


def _finite_means(arrays):
    """[sequence_mean of each array scaled into range, or the reason it has no value], taken together."""
    scales = [_headroom(values) if np.all(np.isfinite(values)) else None for values in arrays]
    with np.errstate(invalid="ignore", over="ignore"):        # an array beyond float64 is averaged, then not shown
        estimates = sequence_means([values / (scale or 1.0) for values, scale in zip(arrays, scales, strict=True)])
    return [BEYOND_FLOAT64 if scale is None else
            Estimate(estimate.value * scale, None if estimate.se is None else estimate.se * scale)
            for estimate, scale in zip(estimates, scales, strict=True)]


def _shifted(estimate, offset):
    return Estimate(estimate.value + offset, estimate.se)


def _verl_ess(weights, counts=None, threshold=VERL_IS_THRESHOLD):
    """verl's rollout_is_eff_sample_size: 1 / mean((w / mean w)²) over the tokens, w clamped to [1/threshold,
    threshold]; ``counts`` repeats each weight (a sequence weight on each of its tokens)."""
    clamped = np.clip(weights, 1 / threshold, threshold)
    mean = np.average(clamped, weights=counts)
    return float(1.0 / np.average((clamped / mean) ** 2, weights=counts))


def by_framework(metrics):
    """{framework: [metric as a dict]}, frameworks in order: the JSON's "frameworks" block."""
    block = {}
    for metric in metrics:
        block.setdefault(metric.framework, []).append(metric.as_dict())
    return block
