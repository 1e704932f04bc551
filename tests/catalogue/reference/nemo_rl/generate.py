"""NeMo-RL 7ea279a: ClippedPGLossFn with use_importance_sampling_correction, truncated_importance_sampling_type
tis / icepop / seq-mask-tis, and sequence_level_importance_ratios (alone, with tis, with icepop); and
grpo.seq_logprob_error_threshold through compute_and_apply_seq_logprob_error_masking; run on the batches of
harness.py; writes numbers.json beside this file.

Copied verbatim (blocks below): LossType, MetricNormalizer, LossInputType (nemo_rl/algorithms/loss/interfaces.py),
calculate_kl and masked_mean (nemo_rl/algorithms/utils.py, which imports transformers), ClippedPGLossConfig,
ClippedPGLossDataDict and ClippedPGLossFn (nemo_rl/algorithms/loss/loss_functions.py, which imports Megatron and
Ray), compute_and_apply_seq_logprob_error_masking (nemo_rl/algorithms/grpo.py). Stubbed: pydantic's BaseModel (a
class whose keyword arguments override its defaults), LossFunction (a Protocol: type only), BatchedDataDict (a
dict) and torch's Tensor name.

NeMo drops the first column of its data (the token before the response): a zero column is prepended. The loss
runs with global_valid_toks = global_valid_seqs = 1, reference_policy_kl_penalty 0 and the PPO ratio against
prev_logprobs = the trainer's (detached): c = −∂loss/∂log π / A_b × (1 + 1e-8), masked_mean's denominator; the
sequence-level loss is a per-sample mean (÷ L + 1e-8) of a ratio whose log is itself a mean (÷ L + 1e-8), so
there c is multiplied back by (1 + 1e-8)·(L + 1e-8)²/L. "kept" is token_mask × sample_mask (the error masking
edits sample_mask; the importance weights never edit a mask).

Three policies (the "updates"): ClippedPGLossFn with prev_logprobs (π_old, the policy's recomputation),
generation_logprobs (μ) and the current log-probs (π_θ) apart, on one-token rows: the loss and its gradient of each
token × (1 + 1e-8), masked_mean's denominator with global_valid_toks 1 (reference_policy_kl_penalty 0: no reference
model here).

    python tests/catalogue/reference/nemo_rl/generate.py
"""

import contextlib
import enum
import io
import math
import sys
from pathlib import Path
from typing import Any, NotRequired, Optional, TypedDict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402


class BaseModel:
    """pydantic's BaseModel as ClippedPGLossConfig uses it: keyword arguments override the class defaults."""

    def __init_subclass__(cls, **options):
        super().__init_subclass__()

    def __init__(self, **fields):
        unknown = set(fields) - set(type(self).__annotations__)
        if unknown:
            raise TypeError(f"unknown fields {unknown}")
        self.__dict__.update(fields)


LossFunction = object
BatchedDataDict = dict

# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/loss/interfaces.py 23-57
class LossType(enum.Enum):
    TOKEN_LEVEL = "token_level"
    SEQUENCE_LEVEL = "sequence_level"


class MetricNormalizer(enum.Enum):
    """Global denominator a loss-returned metric was normalized by.

    Losses reduce most metrics with ``masked_mean(...,
    global_normalization_factor=...)`` where the factor is the global valid
    *token* count, the global valid *sequence* count, or absent entirely (raw
    counts, per-microbatch means, extrema). Split-API trainers run each
    microbatch with placeholder ``global_valid_*=1`` (collecting raw sums) and
    rescale once per optimizer step — to do that they must know, per metric,
    which denominator applies.

    Losses advertise the mapping via a ``metric_normalizations:
    dict[str, MetricNormalizer]`` instance attribute, built in ``__init__``
    from the same flags that pick the denominators, so it lives next to the
    metric definitions instead of in a consumer-side table. Metrics absent
    from the mapping fall back to the gradient normalization (the
    ``loss_type`` denominator) on the consumer side.
    """

    TOKENS = "tokens"  # divided by global_valid_toks
    SEQUENCES = "sequences"  # divided by global_valid_seqs
    NONE = "none"  # not normalized: raw counts, local means, min/max


class LossInputType(enum.Enum):
    LOGIT = "logit"
    LOGPROB = "logprob"
    DISTILLATION = "distillation"
    DISTILLATION_CROSS_TOKENIZER = "distillation_cross_tokenizer"
    DRAFT = "draft"
# end verbatim


# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/utils.py 42-101
def calculate_kl(
    logprobs: torch.Tensor,
    logprobs_reference: torch.Tensor,
    kl_type: str = "k3",
    input_clamp_value: float | None = 20.0,
    output_clamp_value: float | None = 10.0,
    importance_sampling_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Calculates a per-token estimate of the KL Divergence between two logprobs.

    From Schulman 2020, http://joschu.net/blog/kl-approx.html.

    Args:
        logprobs: torch.Tensor (b, s)
        logprobs_reference: torch.Tensor (b, s)
        kl_type: Type of KL approximation to use. Valid values: "k1", "k2", "k3".
        input_clamp_value: Optional clamping value for logr to prevent numerical instability.
                           If None, no clamping is applied.
        output_clamp_value: Optional clamping value for kl to prevent numerical instability.
                           If None, no clamping is applied.
        importance_sampling_weights: Optional per-token importance weights. When
                                     provided, weights are multiplied into the KL
                                     before output clamping. If input clamping
                                     applies to a token, the corresponding weight
                                     is detached so the clamp suppresses both KL
                                     and sampling-weight gradients.

    Returns:
        torch.Tensor: Per-token KL penalty values (b, s)
    """
    logr = logprobs_reference - logprobs
    if input_clamp_value is not None:
        logr_clamped = logr.clamp(min=-input_clamp_value, max=input_clamp_value)
        if importance_sampling_weights is not None:
            importance_sampling_weights = torch.where(
                logr == logr_clamped,
                importance_sampling_weights,
                importance_sampling_weights.detach(),
            )
        logr = logr_clamped

    if kl_type == "k1":
        kl = -logr

    elif kl_type == "k2":
        kl = torch.square(logr) / 2

    elif kl_type == "k3":
        kl = torch.exp(logr) - 1 - logr

    else:
        raise ValueError(f"Invalid KL type: {kl_type}")

    if importance_sampling_weights is not None:
        kl = importance_sampling_weights * kl

    if output_clamp_value is not None:
        kl = kl.clamp(min=-output_clamp_value, max=output_clamp_value)

    return kl
# end verbatim


# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/utils.py 212-224
def masked_mean(
    values: torch.Tensor,
    mask: torch.Tensor,
    dim: Optional[int] = None,
    global_normalization_factor: Optional[torch.Tensor | float] = None,
):
    """Computes the mean of a microbatch, using a global statistic as the normalization factor."""
    normalization_factor = (
        torch.sum(mask, dim=dim)
        if global_normalization_factor is None
        else global_normalization_factor
    )
    return torch.sum(values * mask, dim=dim) / (normalization_factor + 1e-8)
# end verbatim


# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/loss/loss_functions.py 111-788
class ClippedPGLossConfig(BaseModel, extra="allow"):
    # --- Loss type ---
    disable_ppo_ratio: bool = False
    token_level_loss: bool = True
    # If True, apply the off-policy importance-sampling correction at the
    # sequence level (one weight per generated sample), as in GSPO.
    # If False (default), correction is applied at the token level as in the
    # original GRPO paper.
    sequence_level_importance_ratios: bool = False

    # --- Clipping ---
    ratio_clip_min: float = 0.2
    ratio_clip_max: float = 0.2
    # Dual-clipping value (should be >1 if enabled; usually set to 3 empirically). None to disable.
    ratio_clip_c: Optional[float] = None

    # --- KL regularization ---
    reference_policy_kl_penalty: float = 0.01
    # Can be set to k1, k2, k3
    # For more details, see http://joschu.net/blog/kl-approx.html
    reference_policy_kl_type: str = "k3"
    kl_input_clamp_value: Optional[float] = 20.0
    kl_output_clamp_value: Optional[float] = 10.0
    # If True, add KL penalty to reward instead of loss (used by Reinforce++)
    use_kl_in_reward: bool = False

    # --- Importance sampling correction ---
    # Async GRPO requires importance sampling correction enabled
    # Set to true when async_grpo.enabled is true
    use_importance_sampling_correction: bool = False
    # --- Truncated importance sampling ---
    # Type of truncated importance sampling:
    #   "tis"          – clamp IS weights to [min, max], where min defaults to 0
    #   "icepop"       – zero out tokens with IS weight outside [min, max]
    #   "seq-mask-tis" – zero out sequences by geometric-mean IS ratio, non-truncated token IS correction
    truncated_importance_sampling_type: Optional[str] = None
    truncated_importance_sampling_ratio: Optional[float] = None
    # Lower bound for TIS clipping, ICE-POP filtering, or seq-mask-tis filtering
    truncated_importance_sampling_ratio_min: Optional[float] = None

    # --- On-policy ---
    # (default off) loss formulation improvements (docs/guides/grpo.md#loss)
    use_on_policy_kl_approximation: bool = False
    # If True, force the ratio to 1.0 for truly on-policy behavior,
    # eliminating any importance sampling effects.
    # NOTE: This should only be used when doing exactly one update per rollout
    # (i.e., num_prompts_per_step * num_generations_per_prompt == train_global_batch_size)
    force_on_policy_ratio: bool = False
    # If True, use CISPO (Clipped IS-weight Policy Optimization) from MiniMax-M1.
    use_cispo: bool = False
    # VAPO: weight μ for positive-example NLL loss on correct samples.
    # L = L_PPO + μ·L_NLL(correct)   (arXiv:2504.05118, Eq. 10)
    # Set to 0 to disable.
    positive_example_nll_weight: float = 0.0


class ClippedPGLossDataDict(TypedDict):
    """Required keys for the Clipped Policy Gradient loss function."""

    input_ids: torch.Tensor
    advantages: torch.Tensor
    prev_logprobs: torch.Tensor
    generation_logprobs: torch.Tensor
    reference_policy_logprobs: torch.Tensor
    token_mask: torch.Tensor
    sample_mask: torch.Tensor
    __extra__: Any


class ClippedPGLossFn(LossFunction):
    """Generalized Clipped Policy Gradient loss function w/ KL regularization.

    This implements:

    - PPO (Clipped) - https://arxiv.org/abs/1707.06347
    - GRPO - https://arxiv.org/abs/2402.03300
    - REINFORCE/RLOO (set disable_ppo_ratio = True and ignores ratio_clip_min/ratio_clip_max) - https://arxiv.org/abs/2402.14740
    - GSPO (set sequence_level_importance_ratios = True and token_level_loss = False) - https://arxiv.org/abs/2507.18071
    - CISPO (set use_cispo = True) - https://arxiv.org/abs/2506.13585
    - Truly on-policy (set force_on_policy_ratio = True to force ratio = 1.0, requires one update per rollout)

    Formula:
    L(θ) = E_t [ min(r_t(θ) * A_t, clip(r_t(θ), 1-ε, 1+ε) * A_t) ] - β * KL(π_θ || π_ref)

    where:
    - r_t(θ) = π_θ(a_t|s_t) / π_θ_old(a_t|s_t) is the probability ratio
    - A_t is the advantage estimate
    - ε is the clip parameter (ratio_clip_min/ratio_clip_max)
        - As proposed in the DAPO paper (https://arxiv.org/pdf/2503.14476),
          we allow setting a distinct minimum and maximum value for the clip parameter (set to the same value for PPO/GRPO/etc.)
            - ratio_clip_min: minimum value for the clip parameter
            - ratio_clip_max: maximum value for the clip parameter
    - β is the KL penalty coefficient (reference_policy_kl_penalty)
    - KL(π_θ || π_ref) is the KL divergence between the current policy and reference policy (Schulman Approx.)

    For REINFORCE/RLOO (when disable_ppo_ratio=True), the formula simplifies to:
    L(θ) = E_t [ log π_θ(a_t|s_t) * A_t ] - β * KL(π_θ || π_ref)

    Formula (CISPO):
    L(θ) = E_t [ sg(clip(r_t(θ), 1-ε_low, 1+ε_high)) * A_t * log π_θ(a_t|s_t) ]


    Also supports "Dual-Clipping" from https://arxiv.org/pdf/1912.09729, which
    imposes an additional upper bound on the probability ratio when advantages are negative.
    This prevents excessive policy updates. $rA << 0$ -> $cA$(clipped)
    The loss function is modified to the following when A_t < 0:
    L(θ) = E_t [ max(min(r_t(θ) * A_t, clip(r_t(θ), 1-ε, 1+ε) * A_t), c * A_t) ] - β * KL(π_θ || π_ref)

    where:
    - c is the dual-clip parameter (ratio_clip_c), which must be greater than 1 and is
      usually set as 3 empirically.

    Due to potential numerical instability, we cast the logits to float32 before computing the loss.
    """

    input_type = LossInputType.LOGPROB

    def __init__(
        self, cfg: ClippedPGLossConfig, use_fused_linear_logprobs: bool = False
    ):
        # When True, the model forward is patched to return precomputed next-token
        # logprobs (via chunked linear CE fusion) instead of full logits. This is
        # consumed by prepare_loss_input, which short-circuits the logits->logprobs
        # conversion. See nemo_rl/distributed/model_utils.py for the fused forward.
        self.use_fused_linear_logprobs = use_fused_linear_logprobs
        self.disable_ppo_ratio = cfg.disable_ppo_ratio
        self.ratio_clip_min = cfg.ratio_clip_min
        self.ratio_clip_max = cfg.ratio_clip_max
        self.ratio_clip_c = cfg.ratio_clip_c  # set to None to disable dual-clipping
        self.reference_policy_kl_penalty = (
            cfg.reference_policy_kl_penalty if not cfg.use_kl_in_reward else 0
        )
        self.reference_policy_kl_type = cfg.reference_policy_kl_type
        self.kl_input_clamp_value = cfg.kl_input_clamp_value
        self.kl_output_clamp_value = cfg.kl_output_clamp_value
        self.use_importance_sampling_correction = cfg.use_importance_sampling_correction
        # Type of truncated importance sampling: "tis" | "icepop" | "seq-mask-tis"
        self.truncated_importance_sampling_type = cfg.truncated_importance_sampling_type
        self.truncated_importance_sampling_ratio = (
            cfg.truncated_importance_sampling_ratio
        )
        # Lower bound for TIS clipping, ICE-POP filtering, or seq-mask-tis filtering
        self.truncated_importance_sampling_ratio_min = (
            cfg.truncated_importance_sampling_ratio_min
        )
        self.use_on_policy_kl_approximation = cfg.use_on_policy_kl_approximation
        self.force_on_policy_ratio = cfg.force_on_policy_ratio  # Force ratio to 1.0

        # Whether to compute importance weights per-sequence instead of per-token.
        self.sequence_level_importance_ratios = cfg.sequence_level_importance_ratios
        self.positive_example_nll_weight = cfg.positive_example_nll_weight
        self.loss_type = (
            LossType.TOKEN_LEVEL if cfg.token_level_loss else LossType.SEQUENCE_LEVEL
        )
        if self.sequence_level_importance_ratios:
            assert self.loss_type == LossType.SEQUENCE_LEVEL, (
                "sequence-level importance sampling (e.g. GSPO) is mutually exclusive with token-level loss"
            )

        self.use_cispo = cfg.use_cispo
        if self.use_cispo:
            assert not self.disable_ppo_ratio, (
                "use_cispo is incompatible with disable_ppo_ratio; "
                "CISPO needs the pi_theta/pi_theta_old ratio but disable_ppo_ratio removes it"
            )
            assert not self.force_on_policy_ratio, (
                "use_cispo is incompatible with force_on_policy_ratio; "
                "forcing ratio=1 removes the clipped IS-weight that CISPO optimizes"
            )
            assert not self.sequence_level_importance_ratios, (
                "use_cispo is incompatible with sequence_level_importance_ratios; "
                "CISPO uses token-level importance weights"
            )
            assert self.ratio_clip_c is None, (
                "use_cispo is incompatible with dual clipping (ratio_clip_c); "
                "the dual-clip block runs after the CISPO loss assembly and would "
                "silently overwrite it. Set ratio_clip_c=null when use_cispo=True."
            )
            assert self.loss_type == LossType.TOKEN_LEVEL, (
                "use_cispo requires token_level_loss=True (LossType.TOKEN_LEVEL)."
            )
        if self.truncated_importance_sampling_type is not None:
            assert self.use_importance_sampling_correction, (
                "truncated importance sampling is only supported when use_importance_sampling_correction is True"
            )
            assert self.truncated_importance_sampling_type in (
                "tis",
                "icepop",
                "seq-mask-tis",
            ), (
                f"truncated_importance_sampling_type must be 'tis', 'icepop', or 'seq-mask-tis', "
                f"got {self.truncated_importance_sampling_type}"
            )
            assert (
                self.truncated_importance_sampling_ratio is not None
                and self.truncated_importance_sampling_ratio > 0
            ), "truncated_importance_sampling_ratio should be positive"
            if self.truncated_importance_sampling_ratio_min is not None:
                assert (
                    self.truncated_importance_sampling_ratio_min
                    <= self.truncated_importance_sampling_ratio
                ), (
                    "truncated_importance_sampling_ratio_min must be <= "
                    "truncated_importance_sampling_ratio"
                )
            if self.truncated_importance_sampling_type in ("icepop", "seq-mask-tis"):
                assert self.truncated_importance_sampling_ratio_min is not None, (
                    "truncated_importance_sampling_ratio_min should be set when truncated_importance_sampling_type is 'icepop' or 'seq-mask-tis'"
                )
            if self.truncated_importance_sampling_type == "seq-mask-tis":
                assert not self.sequence_level_importance_ratios, (
                    "seq-mask-tis uses token-level IS correction with sequence-level masking, "
                    "and is incompatible with sequence_level_importance_ratios=True"
                )

        # Advertise, per returned metric, the global denominator it was
        # normalized by (see MetricNormalizer). Built here — next to the flags
        # that pick the denominators — so split-API trainers can undo the
        # placeholder global_valid_*=1 normalization without maintaining a
        # consumer-side table. Keep in sync with __call__'s return dict.
        grad_normalizer = (
            MetricNormalizer.TOKENS
            if self.loss_type == LossType.TOKEN_LEVEL
            else MetricNormalizer.SEQUENCES
        )
        self.metric_normalizations: dict[str, MetricNormalizer] = {
            # Normalized like the gradient (loss_type-dependent).
            "loss": grad_normalizer,
            "kl_penalty": grad_normalizer,
            # Token-normalized diagnostics, independent of loss_type.
            "probs_ratio": MetricNormalizer.TOKENS,
            "probs_ratio_clamped": MetricNormalizer.TOKENS,
            "token_mult_prob_error": MetricNormalizer.TOKENS,
            "gen_kl_error": MetricNormalizer.TOKENS,
            "policy_kl_error": MetricNormalizer.TOKENS,
            "js_divergence_error": MetricNormalizer.TOKENS,
            "approx_entropy": MetricNormalizer.TOKENS,
            # Keyed on sequence_level_importance_ratios, NOT loss_type.
            "sampling_importance_ratio": (
                MetricNormalizer.SEQUENCES
                if self.sequence_level_importance_ratios
                else MetricNormalizer.TOKENS
            ),
            # Raw count — the downstream per-microbatch sum IS the value.
            "num_valid_samples": MetricNormalizer.NONE,
            # Normalized by the microbatch's own correct-token count, not a
            # global factor — already a per-microbatch mean.
            "positive_nll_loss": MetricNormalizer.NONE,
            # Extrema — combined downstream with min/max, never scaled.
            "probs_ratio_min": MetricNormalizer.NONE,
            "probs_ratio_max": MetricNormalizer.NONE,
            "probs_ratio_clamped_min": MetricNormalizer.NONE,
            "probs_ratio_clamped_max": MetricNormalizer.NONE,
        }
        if self.truncated_importance_sampling_type is not None:
            # Keyed on the TIS type, NOT loss_type: seq-mask-tis masks whole
            # sequences (÷ global_valid_seqs); tis/icepop are token-level.
            self.metric_normalizations["is_oob_ratio"] = (
                MetricNormalizer.SEQUENCES
                if self.truncated_importance_sampling_type == "seq-mask-tis"
                else MetricNormalizer.TOKENS
            )

    def __call__(
        self,
        next_token_logprobs: Tensor,
        data: BatchedDataDict[ClippedPGLossDataDict],
        global_valid_seqs: torch.Tensor,
        global_valid_toks: torch.Tensor,
    ) -> tuple[torch.Tensor, dict]:
        """Clipped Policy Gradient RL loss function."""
        curr_logprobs = next_token_logprobs
        token_mask = data["token_mask"][:, 1:]
        sample_mask = data["sample_mask"]
        advantages = data["advantages"][:, 1:]
        # Skip loading prev_logprobs when force_on_policy_ratio=True (will use curr_logprobs instead)
        prev_logprobs = (
            None if self.force_on_policy_ratio else data["prev_logprobs"][:, 1:]
        )
        generation_logprobs = data["generation_logprobs"][:, 1:]
        if self.reference_policy_kl_penalty != 0:
            reference_policy_logprobs = data["reference_policy_logprobs"][:, 1:]
            curr_logprobs_unfiltered = data.get(
                "curr_logprobs_unfiltered", curr_logprobs
            )

        mask = token_mask * sample_mask.unsqueeze(-1)

        # For truly on-policy training, use curr_logprobs as prev_logprobs
        # This avoids computing prev_logprobs upstream
        if self.force_on_policy_ratio:
            prev_logprobs = curr_logprobs.detach()

        # token_mult_prob_error
        # See more details and other metrics in docs/guides/grpo.md#metrics
        lp_error = torch.abs(generation_logprobs - prev_logprobs)  # noqa: F841  (precommit ignore for now)
        # average over all tokens in the microbatch
        mult_prob_error = masked_mean(
            torch.exp(lp_error * mask),
            mask,
            global_normalization_factor=global_valid_toks,
        ).item()

        # gen-kl: kl(P_gen || P_train)
        # where log_ratio = prev_logprobs - generation_logprobs
        gen_kl_error = calculate_kl(
            logprobs=generation_logprobs,
            logprobs_reference=prev_logprobs,
            kl_type=self.reference_policy_kl_type,
            input_clamp_value=None,
            output_clamp_value=None,
        )
        gen_kl_error = masked_mean(
            gen_kl_error,
            mask,
            global_normalization_factor=global_valid_toks,
        ).item()

        # policy-kl: kl(P_train || P_gen)
        # where log_ratio = generation_logprobs - prev_logprobs
        policy_kl_error = calculate_kl(
            logprobs=prev_logprobs,
            logprobs_reference=generation_logprobs,
            kl_type=self.reference_policy_kl_type,
            input_clamp_value=None,
            output_clamp_value=None,
        )
        policy_kl_error = masked_mean(
            policy_kl_error,
            mask,
            global_normalization_factor=global_valid_toks,
        ).item()

        # Jensen-Shannon divergence
        # M = 0.5 * (P_train + P_gen)
        # JSD = 0.5 * KL(P_train || M) + 0.5 * KL(P_gen || M)
        log_mixture = torch.log(
            0.5 * torch.exp(prev_logprobs) + 0.5 * torch.exp(generation_logprobs)
        )
        # KL(P_train || M)
        kl_prev_to_mixture = (
            torch.exp(prev_logprobs - log_mixture) - (prev_logprobs - log_mixture) - 1
        )

        # KL(P_gen || M)
        kl_gen_to_mixture = (
            torch.exp(generation_logprobs - log_mixture)
            - (generation_logprobs - log_mixture)
            - 1
        )

        js_divergence_error = masked_mean(
            0.5 * kl_prev_to_mixture + 0.5 * kl_gen_to_mixture,
            mask,
            global_normalization_factor=global_valid_toks,
        ).item()

        # Calculate KL regularization.
        if self.reference_policy_kl_penalty != 0:
            # When top-k/top-p filtering is enabled, we need special handling for KL:
            # - reference_policy_logprobs is computed **without** filtering (see use_reference_model)
            # - curr_logprobs/prev_logprobs are computed **with** filtering (for actor loss compatibility)
            # - For KL, we need curr_logprobs **without** filtering to be consistent with ref logprobs
            # - For importance weights, we also use unfiltered curr_logprobs_unfiltered since we're
            #   reweighting samples from π_gen_filtered to π_curr_unfiltered

            # On-policy KL approximation
            # KL samples come from the optimized policy, so the KL loss must include
            # the score-function gradient through the sampling probability; see
            # https://arxiv.org/abs/2506.09477v1. In the non-IS case,
            # exp(x - x.detach()) has forward value 1 while preserving that gradient.
            if self.use_on_policy_kl_approximation:
                # See: docs/guides/grpo.md#on-policy-kl-approximation
                kl_importance_weights = torch.exp(
                    curr_logprobs_unfiltered - generation_logprobs
                )
            else:
                kl_importance_weights = torch.exp(
                    curr_logprobs_unfiltered - curr_logprobs_unfiltered.detach()
                )
            kl_importance_weights = torch.nan_to_num(
                kl_importance_weights, nan=0.0, posinf=0.0, neginf=0.0
            )

            # Compute KL loss
            kl = self.reference_policy_kl_penalty * calculate_kl(
                logprobs=curr_logprobs_unfiltered,
                logprobs_reference=reference_policy_logprobs,
                kl_type=self.reference_policy_kl_type,
                input_clamp_value=self.kl_input_clamp_value,
                output_clamp_value=self.kl_output_clamp_value,
                importance_sampling_weights=kl_importance_weights,
            )

            # Reduce KL loss
            if self.loss_type == LossType.TOKEN_LEVEL:
                kl = masked_mean(
                    kl, mask, global_normalization_factor=global_valid_toks
                )
            else:
                kl = masked_mean(
                    masked_mean(kl, token_mask, dim=-1),
                    sample_mask,
                    global_normalization_factor=global_valid_seqs,
                )
        else:
            kl = torch.tensor(0.0)

        # Calculate clipped loss function if ppo ratio is enabled.
        if self.force_on_policy_ratio:
            # Force ratio to 1.0 for truly on-policy behavior
            # Use curr_logprobs twice so ratio=1 but gradients still flow
            log_ratios = curr_logprobs - curr_logprobs.detach()
            ratios = log_ratios.exp()  # = exp(0) = 1.0, but depends on curr_logprobs
            ratios_clamped = ratios
        elif not self.disable_ppo_ratio:
            log_ratios = curr_logprobs - prev_logprobs
            if self.sequence_level_importance_ratios:
                seq_log_ratio_mean = masked_mean(
                    log_ratios,
                    token_mask,
                    dim=-1,
                ).unsqueeze(-1)
                seq_ratio = seq_log_ratio_mean.exp()
                ratios = seq_ratio.repeat(1, advantages.shape[1])
            else:
                ratios = log_ratios.exp()
            ratios_clamped = ratios.clamp(
                1.0 - self.ratio_clip_min, 1.0 + self.ratio_clip_max
            )
        else:
            ratios = curr_logprobs
            ratios_clamped = curr_logprobs

        if self.use_cispo:
            clip_loss = -advantages * ratios_clamped.detach() * curr_logprobs
        else:
            loss1 = -advantages * ratios
            loss2 = -advantages * ratios_clamped

            # Determine which value to use for clipping (max for pessimistic estimate)
            clip_loss = torch.max(loss1, loss2)
        # Dual-clipping see https://arxiv.org/pdf/1912.09729
        if self.ratio_clip_c is not None:
            assert self.ratio_clip_c > 1, (
                f"ratio_clip_c must exceed 1 representing a lower bound of the ratios, got {self.ratio_clip_c}."
            )
            loss3 = -advantages * self.ratio_clip_c
            clip_loss = torch.where(
                advantages < 0, torch.min(clip_loss, loss3), clip_loss
            )

        # -------------------------------------------------------------
        # Off-policy (actor) importance-sampling correction
        # -------------------------------------------------------------
        _is_filter_metrics: dict = {}  # populated for icepop / seq-mask-tis
        # See: docs/guides/grpo.md#importance-sampling-correction
        if self.sequence_level_importance_ratios:
            # importance weight w_i = exp(Σ_t (log π_actor − log π_behaviour))
            seq_lp_diff = ((prev_logprobs - generation_logprobs) * mask).sum(dim=-1)
            actor_importance_weights = torch.exp(seq_lp_diff).detach()
            actor_importance_weights = torch.nan_to_num(
                actor_importance_weights, nan=0.0, posinf=0.0, neginf=0.0
            )
            # Broadcast to token dimension so we can reuse existing reduction
            actor_importance_weights_expanded = actor_importance_weights.unsqueeze(-1)
        else:
            # Token-level correction
            actor_importance_weights_expanded = torch.exp(
                prev_logprobs - generation_logprobs
            )
            actor_importance_weights_expanded = torch.nan_to_num(
                actor_importance_weights_expanded, nan=0.0, posinf=0.0, neginf=0.0
            )
        # ---- Truncated Importance Sampling ----
        # "tis"          – clamp IS weights to [min, max], where min defaults to 0
        # "icepop"       – zero out tokens whose IS weight ∉ [min, max]   (ref bounds: 0.5–5)
        # "seq-mask-tis" – zero out entire sequences whose geometric-mean
        #                  IS ratio ∉ [min, max]; retained sequences keep
        #                  raw (non-truncated) token-level IS weights      (ref bounds: 0.999–1.002)
        #   Blog: https://yingru.notion.site/When-Speed-Kills-Stability-Demystifying-RL-Collapse-from-the-Training-Inference-Mismatch-271211a558b7808d8b12d403fd15edda
        # is_oob_ratio: fraction of tokens (tis/icepop) or sequences (seq-mask-tis)
        # whose importance weight falls outside the truncation bounds. Each microbatch
        # contributes its out-of-bounds count divided by the *global* valid token/seq
        # count, so the np.sum aggregation in grpo.py recovers the correct global fraction.
        if self.truncated_importance_sampling_ratio is not None:
            if self.truncated_importance_sampling_type == "tis":
                tis_min = self.truncated_importance_sampling_ratio_min
                if tis_min is None:
                    tis_min = 0.0
                token_oob_mask = (
                    actor_importance_weights_expanded
                    > self.truncated_importance_sampling_ratio
                ) | (actor_importance_weights_expanded < tis_min)
                _is_filter_metrics = {
                    "is_oob_ratio": masked_mean(
                        token_oob_mask.float(),
                        mask,
                        global_normalization_factor=global_valid_toks,
                    ).item(),
                }
                actor_importance_weights_expanded = torch.clamp(
                    actor_importance_weights_expanded,
                    min=tis_min,
                    max=self.truncated_importance_sampling_ratio,
                )
            elif self.truncated_importance_sampling_type == "icepop":
                token_kept_mask = (
                    actor_importance_weights_expanded
                    >= self.truncated_importance_sampling_ratio_min
                ) & (
                    actor_importance_weights_expanded
                    <= self.truncated_importance_sampling_ratio
                )
                _is_filter_metrics = {
                    "is_oob_ratio": masked_mean(
                        (~token_kept_mask).float(),
                        mask,
                        global_normalization_factor=global_valid_toks,
                    ).item(),
                }
                actor_importance_weights_expanded = torch.where(
                    token_kept_mask,
                    actor_importance_weights_expanded,
                    torch.zeros_like(actor_importance_weights_expanded),
                )
            elif self.truncated_importance_sampling_type == "seq-mask-tis":
                # geo_mean_i = exp( mean_t( log(π_prev / π_gen) ) )
                log_is_ratio = torch.nan_to_num(
                    prev_logprobs - generation_logprobs,
                    nan=0.0,
                    posinf=0.0,
                    neginf=0.0,
                )
                seq_log_is_ratio_mean = masked_mean(
                    log_is_ratio, token_mask, dim=-1
                )  # [B]
                seq_geomean_is_ratio = torch.exp(seq_log_is_ratio_mean).detach()  # [B]
                seq_kept_mask = (
                    (
                        seq_geomean_is_ratio
                        >= self.truncated_importance_sampling_ratio_min
                    )
                    & (seq_geomean_is_ratio <= self.truncated_importance_sampling_ratio)
                ).float()  # [B]
                _is_filter_metrics = {
                    "is_oob_ratio": masked_mean(
                        1.0 - seq_kept_mask,
                        sample_mask,
                        global_normalization_factor=global_valid_seqs,
                    ).item(),
                }
                actor_importance_weights_expanded = (
                    actor_importance_weights_expanded * seq_kept_mask.unsqueeze(-1)
                )
            else:
                raise ValueError(
                    f"Invalid truncated importance sampling type: {self.truncated_importance_sampling_type}"
                )

        actor_importance_weights = actor_importance_weights_expanded
        del actor_importance_weights_expanded
        if self.use_importance_sampling_correction:
            importance_weights_to_use = actor_importance_weights
        else:
            importance_weights_to_use = torch.ones_like(prev_logprobs)

        if self.loss_type == LossType.TOKEN_LEVEL:
            actor_loss = masked_mean(
                importance_weights_to_use * clip_loss,
                mask,
                global_normalization_factor=global_valid_toks,
            )
        else:
            actor_loss = masked_mean(
                masked_mean(
                    importance_weights_to_use * clip_loss,
                    token_mask,
                    dim=-1,
                ),
                sample_mask,
                global_normalization_factor=global_valid_seqs,
            )

        # Metric: sampling importance ratio (mean over samples)
        # See: docs/guides/grpo.md#sampling-importance-ratio
        if self.sequence_level_importance_ratios:
            sample_importance_ratio = masked_mean(
                actor_importance_weights,
                sample_mask,
                global_normalization_factor=global_valid_seqs,
            )
        else:
            sample_importance_ratio = masked_mean(
                actor_importance_weights,
                mask,
                global_normalization_factor=global_valid_toks,
            )

        # Approximating entropy as E_{s ~ \pi_{gen}(s)}[-(\pi_{curr}/\pi_{gen})log(\pi_{curr}(s))]
        # See more details and other metrics in docs/guides/grpo.md#metrics
        with torch.no_grad():
            seq_entropy_approx = -masked_mean(
                torch.exp(curr_logprobs - generation_logprobs) * curr_logprobs,
                mask,
                global_normalization_factor=global_valid_toks,
            )

        # -----------------------------------------------------------------
        # VAPO: positive-example NLL loss on correct samples (reward > 0)
        # L = L_PPO + μ · L_NLL(correct)
        # -----------------------------------------------------------------
        nll_loss = torch.tensor(0.0, device=mask.device)
        if self.positive_example_nll_weight > 0 and "rewards" in data:
            correct_sample_mask = (data["rewards"] > 0).float()  # [batch]
            correct_mask = mask * correct_sample_mask.unsqueeze(-1)
            correct_valid_toks = correct_mask.sum()
            if correct_valid_toks > 0:
                nll_loss = masked_mean(
                    -curr_logprobs,
                    correct_mask,
                    global_normalization_factor=correct_valid_toks,
                )

        loss = actor_loss + kl + self.positive_example_nll_weight * nll_loss
        with torch.no_grad():
            probs_ratio = masked_mean(
                ratios.detach(),
                mask,
                global_normalization_factor=global_valid_toks,
            ).item()
            probs_ratio_clamped = masked_mean(
                ratios_clamped.detach(),
                mask,
                global_normalization_factor=global_valid_toks,
            ).item()

            # Calculate min/max values for ratios (only for valid tokens)
            masked_ratios = ratios.detach()[mask.bool()]
            masked_ratios_clamped = ratios_clamped.detach()[mask.bool()]

            # Handle edge case where there might be no valid tokens
            if masked_ratios.numel() > 0:
                probs_ratio_min = masked_ratios.min().item()
                probs_ratio_max = masked_ratios.max().item()
                probs_ratio_clamped_min = masked_ratios_clamped.min().item()
                probs_ratio_clamped_max = masked_ratios_clamped.max().item()
            else:
                probs_ratio_min = float("inf")
                probs_ratio_max = float("-inf")
                probs_ratio_clamped_min = float("inf")
                probs_ratio_clamped_max = float("-inf")

        # If you provided a global_valid_{seqs/toks}, all metrics here are globally normalized
        # by either sequence or token count, depending on particular metric.
        # To get the true metric, you'll need to sum over the microbatch.
        return (
            loss,
            {
                "loss": loss.item(),
                "probs_ratio": probs_ratio,
                "probs_ratio_clamped": probs_ratio_clamped,
                "probs_ratio_min": probs_ratio_min,
                "probs_ratio_max": probs_ratio_max,
                "probs_ratio_clamped_min": probs_ratio_clamped_min,
                "probs_ratio_clamped_max": probs_ratio_clamped_max,
                "kl_penalty": kl.item() / self.reference_policy_kl_penalty if kl else 0,
                "token_mult_prob_error": mult_prob_error,
                "gen_kl_error": gen_kl_error,
                "policy_kl_error": policy_kl_error,
                "js_divergence_error": js_divergence_error,
                "sampling_importance_ratio": sample_importance_ratio.item(),
                "num_valid_samples": sample_mask.sum().item(),
                "approx_entropy": seq_entropy_approx.item(),
                **_is_filter_metrics,
                "positive_nll_loss": nll_loss.item(),
            },
        )
# end verbatim


# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/grpo.py 2513-2640
def compute_and_apply_seq_logprob_error_masking(
    train_data: BatchedDataDict,
    rewards: torch.Tensor,
    seq_logprob_error_threshold: Optional[float],
) -> dict:
    """Compute sequence-level logprob error metrics and optionally mask high-error sequences.

    This function computes the multiplicative probability error per sequence
    (same calculation as token_mult_prob_error but aggregated per-sequence) and
    optionally masks sequences that exceed the configured threshold.

    Args:
        train_data: Training data dict containing token_mask, sample_mask,
                   prev_logprobs, and generation_logprobs. If masking is applied,
                   sample_mask will be updated in-place.
        rewards: Reward tensor for computing statistics on masked sequences.
        seq_logprob_error_threshold: If set, mask sequences with mult_prob_error
                                    exceeding this threshold. If None, only compute metrics.

    Returns:
        Dict with keys: max_seq_mult_prob_error, mean_seq_mult_prob_error,
        min_seq_mult_prob_error, max/mean/min_seq_mult_prob_error_after_mask,
        num_masked_seqs, masked_correct_pct
    """
    # Compute sequence-level logprob error metrics (always)
    token_mask = train_data["token_mask"][:, 1:]
    sample_mask = train_data["sample_mask"]
    prev_logprobs = train_data["prev_logprobs"][:, 1:]
    generation_logprobs = train_data["generation_logprobs"][:, 1:]
    lp_error = torch.abs(generation_logprobs - prev_logprobs)

    # Use combined mask exactly as in loss function
    mask = token_mask * sample_mask.unsqueeze(-1)

    # Calculate sequence-level multiplicative prob error.
    #
    # NOTE: When a sequence is fully masked (mask.sum == 0), it should not contribute to
    # min/mean/max statistics; otherwise, it would yield a spurious 0 due to denominator
    # clamping and incorrectly drag min_seq_mult_prob_error to 0.
    denom = mask.sum(dim=-1)
    valid_seq_mask = denom > 0

    # EXACT same calculation as token_mult_prob_error but per-sequence (for valid sequences)
    seq_mult_prob_error = torch.zeros_like(denom, dtype=lp_error.dtype)
    if valid_seq_mask.any():
        num = (torch.exp(lp_error * mask) * mask).sum(dim=-1)
        seq_mult_prob_error[valid_seq_mask] = num[valid_seq_mask] / denom[
            valid_seq_mask
        ].clamp(min=1)

        valid_errors = seq_mult_prob_error[valid_seq_mask]
        max_seq_mult_prob_error = valid_errors.max().item()
        mean_seq_mult_prob_error = valid_errors.mean().item()
        min_seq_mult_prob_error = valid_errors.min().item()
    else:
        max_seq_mult_prob_error = 0.0
        mean_seq_mult_prob_error = 0.0
        min_seq_mult_prob_error = 0.0

    # Apply sequence-level masking if configured
    num_masked_seqs = 0
    masked_correct_pct = 0.0

    # After-mask metrics (same as before if no threshold)
    max_seq_mult_prob_error_after_mask = max_seq_mult_prob_error
    mean_seq_mult_prob_error_after_mask = mean_seq_mult_prob_error
    min_seq_mult_prob_error_after_mask = min_seq_mult_prob_error

    if seq_logprob_error_threshold is not None:
        print(
            f"▶ Applying sequence-level logprob error masking (threshold={seq_logprob_error_threshold})...",
            flush=True,
        )

        original_sample_mask = sample_mask.clone()

        # Create mask for sequences below threshold
        seq_error_mask = (
            seq_mult_prob_error <= seq_logprob_error_threshold
        ).float() * original_sample_mask

        diff_mask = original_sample_mask - seq_error_mask
        num_masked_seqs = int(diff_mask.sum().item())

        if num_masked_seqs > 0:
            diff_mask_bool = diff_mask.bool()
            masked_correct_count = int(
                (rewards.view(-1)[diff_mask_bool] == 1).sum().item()
            )
            masked_correct_pct = masked_correct_count / num_masked_seqs

        # Compute after-mask metrics (only for sequences that passed the threshold)
        kept_mask = seq_error_mask.bool() & valid_seq_mask
        if kept_mask.sum() > 0:
            kept_errors = seq_mult_prob_error[kept_mask]
            max_seq_mult_prob_error_after_mask = kept_errors.max().item()
            mean_seq_mult_prob_error_after_mask = kept_errors.mean().item()
            min_seq_mult_prob_error_after_mask = kept_errors.min().item()
        else:
            # All sequences were masked
            max_seq_mult_prob_error_after_mask = 0.0
            mean_seq_mult_prob_error_after_mask = 0.0
            min_seq_mult_prob_error_after_mask = 0.0

        # Update sample_mask in train_data
        train_data["sample_mask"] = seq_error_mask

        print(
            f"  Masked {num_masked_seqs} sequences with mult_prob_error > {seq_logprob_error_threshold}",
            flush=True,
        )
        if num_masked_seqs > 0:
            print(
                f"  • {masked_correct_count}/{num_masked_seqs} masked sequences were correct (reward=1)"
                f" → {masked_correct_pct:.2%}",
                flush=True,
            )

    return {
        "max_seq_mult_prob_error": max_seq_mult_prob_error,
        "mean_seq_mult_prob_error": mean_seq_mult_prob_error,
        "min_seq_mult_prob_error": min_seq_mult_prob_error,
        "max_seq_mult_prob_error_after_mask": max_seq_mult_prob_error_after_mask,
        "mean_seq_mult_prob_error_after_mask": mean_seq_mult_prob_error_after_mask,
        "min_seq_mult_prob_error_after_mask": min_seq_mult_prob_error_after_mask,
        "num_masked_seqs": num_masked_seqs,
        "masked_correct_pct": masked_correct_pct,
    }
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "nemo_rl", "NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909"
RATIO, RATIO_MIN = "truncated_importance_sampling_ratio", "truncated_importance_sampling_ratio_min"
TYPES = {"tis": "tis", "icepop": "icepop", "seq-mask-tis": "seq-mask-tis", "sequence_level_tis": "tis",
         "sequence_level_icepop": "icepop"}
# the presets' defaults: examples/configs grpo_math_1B_dynamo.yaml (tis 2), prorlv2.v2.yaml (icepop 0.5, 5),
# prorlv2_1_moe.v2.yaml (seq-mask-tis 0.999, 1.002), docs/guides/nemotron-3-nano.md (error threshold 2)
DEFAULTS = {"tis": {RATIO_MIN: 0.0, RATIO: 2.0}, "icepop": {RATIO_MIN: 0.5, RATIO: 5.0},
            "seq-mask-tis": {RATIO_MIN: 0.999, RATIO: 1.002}, "sequence_level_tis": {RATIO_MIN: 0.0, RATIO: 2.0},
            "sequence_level_icepop": {RATIO_MIN: 0.5, RATIO: 5.0},
            "seq_logprob_error_threshold": {"seq_logprob_error_threshold": 2.0}}
SETTINGS = {
    "use_importance_sampling_correction": {"defaults": {}},
    "tis": {"defaults": {}, "alternative": {RATIO_MIN: 0.5, RATIO: 1.5}},
    "icepop": {"defaults": {}, "alternative": {RATIO_MIN: 0.8, RATIO: 1.5}},
    "seq-mask-tis": {"defaults": {}, "alternative": {RATIO_MIN: 0.9, RATIO: 1.2}},
    "sequence_level_importance_ratios": {"defaults": {}},
    "sequence_level_tis": {"defaults": {}, "alternative": {RATIO_MIN: 0.5, RATIO: 1.5}},
    "sequence_level_icepop": {"defaults": {}, "alternative": {RATIO_MIN: 0.8, RATIO: 1.5}},
    "seq_logprob_error_threshold": {"defaults": {}, "alternative": {"seq_logprob_error_threshold": 1.6}},
}


def settings(option, params):
    """(ClippedPGLossConfig fields, the error threshold or None) of a preset's parameters."""
    values = {**DEFAULTS.get(option, {}), **params}
    sequence = option.startswith("sequence_level")
    fields = {"reference_policy_kl_penalty": 0.0, "use_importance_sampling_correction": True,
              "sequence_level_importance_ratios": sequence, "token_level_loss": not sequence}
    if option in TYPES:
        fields |= {"truncated_importance_sampling_type": TYPES[option], RATIO: values[RATIO],
                   RATIO_MIN: values[RATIO_MIN] if values[RATIO_MIN] > 0 or TYPES[option] != "tis" else None}
    if option == "seq_logprob_error_threshold":
        fields["use_importance_sampling_correction"] = False
    return fields, values.get("seq_logprob_error_threshold")


def thresholds(fields, threshold):
    return [value for value in (fields.get(RATIO), fields.get(RATIO_MIN), threshold) if value]


def extra_rows(threshold):
    """The sequence mean of e^|log ρ| at the error threshold ·e^∓10⁻⁴."""
    return [] if threshold is None else harness.statistic_rows(lambda x: math.exp(abs(x)), threshold, sums=False)


def run(fields, threshold, batch):
    trainer, sampler, mask, advantages = harness.tensors(batch)
    column = torch.zeros(trainer.shape[0], 1, dtype=torch.float64)
    data = {"token_mask": torch.cat([column, mask], dim=1), "sample_mask": torch.ones(trainer.shape[0], dtype=torch.float64),
            "advantages": torch.cat([column, advantages[:, None].expand_as(trainer)], dim=1),
            "prev_logprobs": torch.cat([column, trainer.detach()], dim=1),
            "generation_logprobs": torch.cat([column, sampler], dim=1)}
    if threshold is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            compute_and_apply_seq_logprob_error_masking(data, torch.zeros(trainer.shape[0]), threshold)
    loss_fn = ClippedPGLossFn(ClippedPGLossConfig(**fields))
    one = torch.tensor(1.0, dtype=torch.float64)
    loss, _ = loss_fn(trainer, data, global_valid_seqs=one, global_valid_toks=one)
    if fields["sequence_level_importance_ratios"]:
        lengths = mask.sum(dim=1, keepdim=True)
        scale = (1 + 1e-8) * (lengths + 1e-8) ** 2 / lengths.clamp(min=1)
    else:
        scale = 1 + 1e-8
    return harness.coefficients(loss, trainer, advantages, scale), mask * data["sample_mask"][:, None]


# -- three policies: ClippedPGLossFn with π_θ, π_old and μ apart ---------------------------------------------------

# (update preset, setting, ClippedPGLossConfig's fields as run, the loss parameters in toylab's terms, the correction
# and its parameters); examples/configs/grpo_math_1B.yaml: ratio_clip_min/max 0.2, ratio_clip_c null, no correction
GRPO_MATH = {"reference_policy_kl_penalty": 0.0, "ratio_clip_min": 0.2, "ratio_clip_max": 0.2, "ratio_clip_c": None,
             "use_importance_sampling_correction": False, "token_level_loss": True}
UPDATE_SETTINGS = [
    ("nemo_rl:default", "defaults", GRPO_MATH, {}, None, {}),
    ("nemo_rl:default", "alternative", {**GRPO_MATH, "ratio_clip_min": 0.1, "ratio_clip_max": 0.28, "ratio_clip_c": 3.0},
     {"eps_low": 0.1, "eps_high": 0.28, "dual_clip": 3.0}, None, {}),
    ("nemo_rl:default", "tis", {**GRPO_MATH, "use_importance_sampling_correction": True,
                                "truncated_importance_sampling_type": "tis", RATIO: 2.0}, {}, "nemo_rl:tis", {}),
    ("nemo_rl:async", "defaults", {**GRPO_MATH, "use_importance_sampling_correction": True}, {},
     "nemo_rl:use_importance_sampling_correction", {}),
    ("nemo_rl:cispo", "defaults", {**GRPO_MATH, "use_cispo": True}, {}, None, {}),
]


def run_update(numbers, preset, setting, fields, params, correction, correction_params):
    ratios = [1 - fields["ratio_clip_min"], 1 + fields["ratio_clip_max"]]
    ratios += [fields["ratio_clip_c"]] if fields["ratio_clip_c"] else []
    weights = [fields[RATIO]] if fields.get(RATIO) else []
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights))
    loss_fn = ClippedPGLossFn(ClippedPGLossConfig(**fields))
    one = torch.tensor(1.0, dtype=torch.float64)

    def token_loss(b, trainer, old, sampler, mask, advantages):
        column = torch.zeros(1, 1, dtype=torch.float64)
        data = {"token_mask": torch.cat([column, mask], dim=1), "sample_mask": torch.ones(1, dtype=torch.float64),
                "advantages": torch.cat([column, advantages[:, None]], dim=1),
                "prev_logprobs": torch.cat([column, old], dim=1), "generation_logprobs": torch.cat([column, sampler], dim=1)}
        loss, _ = loss_fn(trainer, data, global_valid_seqs=one, global_valid_toks=one)
        return loss * (1 + 1e-8)

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, fields, params, correction, correction_params, name, loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/nemo_rl/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, cases in SETTINGS.items():
        for setting, params in cases.items():
            fields, threshold = settings(option, params)
            probe = harness.probe_batch(thresholds(fields, threshold), extra_rows(threshold))
            probes = numbers.batch(f"probes/{option}/{setting}", probe)
            for batch in (ragged, probes):
                c, kept = run(fields, threshold, numbers.batches[batch])
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, c, kept, setting)
    for preset, setting, fields, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
