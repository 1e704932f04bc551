"""Miles 31f1ca9: the KL to the reference as its code computes it: --use-kl-loss with --kl-loss-type low_var_kl (its
log ratio clamped to ±20 by _safe_clamp_log_ratio, which slime's has not) and k1, k2, k3, --use-unbiased-kl, and
--kl-coef in the reward with reinforce_plus_plus_baseline (each token's own KL); and grpo, whose returns ignore the
KL; writes kl_numbers.json beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): _LOG_RATIO_EXP_CLAMP, _safe_clamp_log_ratio, compute_approx_kl (its
@torch.compile(dynamic=True) decorator, line 138, left out), get_grpo_returns and
get_reinforce_plus_plus_baseline_advantages (miles/backends/training_utils/loss_hub/math_utils.py), and the KL block
of the policy loss (loss_hub/losses.py) inside a stand-in holding what it reads (args, reference_log_probs,
active_tokens all true, sum_of_sample_mean summing the tokens, a loss of 0 before it). compute_approx_kl casts the
log-probabilities to float32: its numbers are float32's.

    python tests/catalogue/reference/miles/kl_generate.py
"""

import sys
from argparse import Namespace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "radixark/miles", "31f1ca961a94cb860cec3b2dea34ec332bfa8f76"


# verbatim: radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 miles/backends/training_utils/loss_hub/math_utils.py 18-28
_LOG_RATIO_EXP_CLAMP = 20.0


def _safe_clamp_log_ratio(log_ratio: torch.Tensor) -> torch.Tensor:
    log_ratio = torch.nan_to_num(
        log_ratio.float(),
        nan=0.0,
        posinf=_LOG_RATIO_EXP_CLAMP,
        neginf=-_LOG_RATIO_EXP_CLAMP,
    )
    return torch.clamp(log_ratio, min=-_LOG_RATIO_EXP_CLAMP, max=_LOG_RATIO_EXP_CLAMP)
# end verbatim


# verbatim: radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 miles/backends/training_utils/loss_hub/math_utils.py 139-180
def compute_approx_kl(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    kl_loss_type: str,
    importance_ratio: torch.Tensor | None = None,
) -> torch.Tensor:
    """
    Compute the approximate KL divergence between two distributions.
    Schulman blog: http://joschu.net/blog/kl-approx.html

    Args:
        log_probs: Log probabilities of the new distribution.
        log_probs_base: Log probabilities of the base distribution.
        kl_loss_type: Type of KL estimator (k1, k2, k3, low_var_kl).
        importance_ratio: Optional IS ratio (π_θ/π_old) for unbiased KL estimation.
    """
    log_ratio = log_probs.float() - log_probs_base.float()

    if kl_loss_type == "k1":
        kl = log_ratio
    elif kl_loss_type == "k2":
        kl = log_ratio**2 / 2.0
    elif kl_loss_type in ["k3", "low_var_kl"]:
        # The non negative kl approximation in
        # http://joschu.net/blog/kl-approx.html
        # Besides non negative, it is also unbiased and have lower variance.
        log_ratio = -log_ratio
        if kl_loss_type == "low_var_kl":
            log_ratio = _safe_clamp_log_ratio(log_ratio)
        kl = log_ratio.exp() - 1 - log_ratio
    else:
        raise ValueError(f"Unknown kl_loss_type: {kl_loss_type}")

    # Apply IS ratio for unbiased KL estimation (DeepSeek-V3.2)
    if importance_ratio is not None:
        kl = importance_ratio * kl

    # Clamp only for low_var_kl for numerical stability
    if kl_loss_type == "low_var_kl":
        kl = torch.clamp(kl, min=-10, max=10)

    return kl
# end verbatim


# verbatim: radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 miles/backends/training_utils/loss_hub/math_utils.py 436-443
def get_grpo_returns(
    rewards: torch.Tensor,
    kl: list[torch.Tensor],
):
    returns = []
    for i in range(len(rewards)):
        returns.append(torch.ones_like(kl[i]) * rewards[i])
    return returns
# end verbatim


# verbatim: radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 miles/backends/training_utils/loss_hub/math_utils.py 510-537
def get_reinforce_plus_plus_baseline_advantages(
    rewards: torch.Tensor,
    kl: list[torch.Tensor],
    loss_masks: list[torch.Tensor],
    kl_coef: float,
) -> list[torch.Tensor]:
    """
    Calculates the unwhitened advantages for the REINFORCE++-baseline algorithm.
    Broadcasting the scalar (reward - group_baseline) to each token.

    Args:
        rewards (Tensor): A tensor of scalar rewards, where the group-wise
                                baseline has already been subtracted.
        kl (list[Tensor]): A list of per-token KL divergence tensors. Used to
                                 get the shape for broadcasting.
        loss_masks (list[Tensor]): A list of per-token loss masks.
        kl_coef (float): Coefficient for the KL penalty.

    Returns:
        list[Tensor]: A list of tensors containing the unwhitened advantages.
    """
    # Broadcast to get unwhitened advantages
    unwhitened_advantages = [
        torch.ones_like(kl_tensor) * reward_val - kl_coef * kl_tensor
        for kl_tensor, reward_val in zip(kl, rewards, strict=False)
    ]

    return unwhitened_advantages
# end verbatim


def sum_of_sample_mean(x):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return x.sum()


def kl_loss_block(args, reference_log_probs, log_probs, old_log_probs):
    """The policy loss's KL block (losses.py 314–334) on a loss of 0."""
    loss = torch.zeros((), dtype=torch.float32)
    active_tokens = torch.ones_like(log_probs, dtype=torch.bool)
# verbatim: radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 miles/backends/training_utils/loss_hub/losses.py 314-334
    if args.use_kl_loss:
        assert reference_log_probs is not None, "ref_log_probs must be provided when --use-kl-loss is set"
        ref_log_probs = torch.cat(reference_log_probs, dim=0)
        importance_ratio = None
        if args.use_unbiased_kl:
            importance_ratio = torch.exp(log_probs - old_log_probs)
        kl = compute_approx_kl(
            log_probs,
            ref_log_probs,
            kl_loss_type=args.kl_loss_type,
            importance_ratio=importance_ratio,
        )
        kl = torch.where(
            active_tokens,
            torch.nan_to_num(kl, nan=0.0, posinf=0.0, neginf=0.0),
            kl.new_zeros(()),
        )
        kl_loss = sum_of_sample_mean(kl)

        if args.kl_loss_coef != 0:
            loss = loss + args.kl_loss_coef * kl_loss
# end verbatim
    return loss


LOSS_PRESETS = {"miles:kl_loss_low_var_kl": ("low_var_kl", False), "miles:unbiased_kl": ("low_var_kl", True)}


def loss_numbers(numbers):
    for preset, (kl_loss_type, unbiased) in LOSS_PRESETS.items():
        tokens = kl_harness.loss_tokens("k3", 10.0, ratios=unbiased)
        args = Namespace(use_kl_loss=True, use_unbiased_kl=unbiased, kl_loss_type=kl_loss_type, kl_loss_coef=1.0)

        def term_of(log_pi, log_old, log_mu, log_ref, args=args):
            ratio = torch.exp(log_pi[0] - log_old[0]) if args.use_unbiased_kl else None
            return compute_approx_kl(log_pi[0], log_ref[0], kl_loss_type=args.kl_loss_type,
                                     importance_ratio=ratio)[None]

        def loss_of(log_pi, log_old, log_mu, log_ref, args=args):
            return kl_loss_block(args, [log_ref[0]], log_pi[0], log_old[0])

        term = kl_harness.per_token(term_of, tokens)[0]
        derivative = kl_harness.per_token(loss_of, tokens)[1]
        numbers.loss(preset, f"--kl-loss-type {kl_loss_type}" + (" --use-unbiased-kl" if unbiased else ""), tokens,
                     term, derivative, float32=True)


def padded(tensors, width):
    return [kl_harness.as_list(torch.nn.functional.pad(t, (0, width - len(t)))) for t in tensors]


def reward_numbers(numbers):
    beta = 0.5
    batch = kl_harness.REWARD_BATCH
    lengths = [sum(m) for m in batch["mask"]]
    kl = [compute_approx_kl(torch.tensor(o[:n], dtype=torch.float64), torch.tensor(r[:n], dtype=torch.float64),
                            kl_loss_type="k1") for o, r, n in zip(batch["log_old"], batch["log_ref"], lengths)]
    rewards = torch.tensor(batch["rewards"], dtype=torch.float32)
    masks = [torch.ones(n) for n in lengths]
    width = len(batch["mask"][0])
    penalty = [a - b for a, b in zip(get_reinforce_plus_plus_baseline_advantages(rewards, kl, masks, 0.0),
                                     get_reinforce_plus_plus_baseline_advantages(rewards, kl, masks, beta))]
    numbers.reward("miles:kl_in_reward_reinforce_pp_baseline", f"--kl-coef {beta} --kl-loss-type k1 "
                   "--advantage-estimator reinforce_plus_plus_baseline", beta, padded(kl, width),
                   padded(penalty, width), float32=True,
                   probe=kl_harness.probe_values(lambda old, ref: compute_approx_kl(old, ref, kl_loss_type="k1"), "k1"))
    numbers.data["findings"] = {"grpo_ignores_kl_coef": {
        "returns": padded(get_grpo_returns(rewards, kl), width), "rewards": batch["rewards"],
        "note": "get_grpo_returns(rewards, kl) gives each token its sequence's reward whatever --kl-coef is"}}


def main():
    numbers = kl_harness.KLNumbers("miles", REPOSITORY, COMMIT, "tests/catalogue/reference/miles/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
