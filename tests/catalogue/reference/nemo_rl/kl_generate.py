"""NeMo-RL 7ea279a: the KL to the reference as its code computes it: ClippedPGLossFn's KL term (on by default:
reference_policy_kl_penalty 0.01, k3, kl_input_clamp_value 20, kl_output_clamp_value 10), its weight
exp(log π − sg(log π)) by default or π_θ/μ with use_on_policy_kl_approximation, detached where the input clamp
applies; and the Reinforce++ advantage's token-level KL in the reward (use_kl_in_reward); writes kl_numbers.json
beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): calculate_kl (nemo_rl/algorithms/utils.py); the KL block of ClippedPGLossFn.__call__
(nemo_rl/algorithms/loss/loss_functions.py) and the KL lines of ReinforcePlusPlusAdvantageEstimator.compute_advantage
(nemo_rl/algorithms/advantage_estimator.py), each as a method of a stand-in holding what it reads (the penalty 1, the
clamps, loss_type token level, masked_mean summing the tokens; use_kl_in_reward, kl_coef β, kl_type). The
advantage's baseline and its global normalisation around these lines are left out: the lines compared are
adv − kl_coef·kl per token.

    python tests/catalogue/reference/nemo_rl/kl_generate.py
"""

import sys
from enum import Enum
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909"


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


class LossType(Enum):
    TOKEN_LEVEL = "token_level"
    SEQUENCE_LEVEL = "sequence_level"


def masked_mean(values, mask, dim=None, global_normalization_factor=None):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return (values * mask).sum()


class ClippedPG:
    def __init__(self, use_on_policy_kl_approximation):
        self.reference_policy_kl_penalty = 1.0
        self.reference_policy_kl_type = "k3"
        self.kl_input_clamp_value, self.kl_output_clamp_value = 20.0, 10.0
        self.use_on_policy_kl_approximation = use_on_policy_kl_approximation
        self.loss_type = LossType.TOKEN_LEVEL

    def kl(self, curr_logprobs_unfiltered, generation_logprobs, reference_policy_logprobs):
        mask = token_mask = sample_mask = torch.ones_like(curr_logprobs_unfiltered)
        global_valid_toks = global_valid_seqs = None
# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/loss/loss_functions.py 468-517
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
# end verbatim
        return kl


class ReinforcePlusPlus:
    def __init__(self, kl_coef):
        self.use_kl_in_reward, self.kl_coef, self.kl_type = True, kl_coef, "k3"

    def penalised(self, adv, logprobs_policy, logprobs_reference):
# verbatim: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/algorithms/advantage_estimator.py 248-259
        # add kl penalty to reward (token-level)
        if (
            self.use_kl_in_reward
            and logprobs_policy is not None
            and logprobs_reference is not None
        ):
            kl = calculate_kl(
                logprobs_policy,
                logprobs_reference,
                kl_type=self.kl_type,
            )
            adv = adv - self.kl_coef * kl
# end verbatim
        return adv


def loss_numbers(numbers):
    for preset, approximation in (("nemo_rl:kl_loss", False), ("nemo_rl:on_policy_kl_approximation", True)):
        tokens = kl_harness.loss_tokens("k3", 10.0, ratios=approximation)
        loss = ClippedPG(approximation)

        def term_of(log_pi, log_old, log_mu, log_ref, loss=loss):
            weights = torch.exp(log_pi - log_mu) if loss.use_on_policy_kl_approximation else \
                torch.exp(log_pi - log_pi.detach())
            return calculate_kl(log_pi, log_ref, "k3", 20.0, 10.0, torch.nan_to_num(weights, nan=0.0, posinf=0.0,
                                                                                    neginf=0.0))

        def loss_of(log_pi, log_old, log_mu, log_ref, loss=loss):
            return loss.kl(log_pi, log_mu, log_ref)

        term = kl_harness.per_token(term_of, tokens)[0]
        derivative = kl_harness.per_token(loss_of, tokens)[1]
        numbers.loss(preset, f"use_on_policy_kl_approximation={approximation}", tokens, term, derivative)


def reward_numbers(numbers):
    beta = 0.5
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    old, ref = (torch.tensor(batch[name], dtype=torch.float64) for name in ("log_old", "log_ref"))
    adv = torch.tensor(batch["rewards"], dtype=torch.float64)[:, None].expand(mask.shape)
    penalty = (ReinforcePlusPlus(0.0).penalised(adv, old, ref) - ReinforcePlusPlus(beta).penalised(adv, old, ref)) * mask
    numbers.reward("nemo_rl:kl_in_reward_reinforce_pp", f"use_kl_in_reward, reference_policy_kl_penalty {beta}, k3",
                   beta, [kl_harness.as_list(v) for v in calculate_kl(old, ref, "k3") * mask],
                   [kl_harness.as_list(v) for v in penalty],
                   probe=kl_harness.probe_values(lambda old, ref: calculate_kl(old, ref, "k3"), "k3", 10.0))


def main():
    numbers = kl_harness.KLNumbers("nemo_rl", REPOSITORY, COMMIT, "tests/catalogue/reference/nemo_rl/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
