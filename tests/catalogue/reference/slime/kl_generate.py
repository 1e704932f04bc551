"""slime 624b824: the KL to the reference as its code computes it: --use-kl-loss with every --kl-loss-type (k1, k2,
k3, low_var_kl) and --use-unbiased-kl, and --kl-coef in the reward with the advantage estimators reinforce_plus_plus
(a return to go, --gamma 1) and reinforce_plus_plus_baseline (each token's own KL); and grpo, whose returns ignore
the KL; writes kl_numbers.json beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): compute_approx_kl (its @torch.compile(dynamic=True) decorator, line 11, left out: it
compiles the same function), get_grpo_returns, get_reinforce_plus_plus_returns,
get_reinforce_plus_plus_baseline_advantages and chunked_discounted_returns (slime/utils/ppo_utils.py), and the KL
block of policy_loss_function (slime/backends/megatron_utils/loss.py) inside a stand-in holding what it reads (args,
sum_of_sample_mean summing the tokens, a loss of 0 before it). megatron.core.mpu is stubbed (context parallel size 1).
compute_approx_kl casts the log-probabilities to float32 (.float()): its numbers are float32's.

    python tests/catalogue/reference/slime/kl_generate.py
"""

import sys
import types
from argparse import Namespace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPOSITORY, COMMIT = "THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515"
megatron = types.ModuleType("megatron")
megatron.core = types.ModuleType("megatron.core")
megatron.core.mpu = types.SimpleNamespace(get_context_parallel_world_size=lambda: 1)
sys.modules["megatron"], sys.modules["megatron.core"] = megatron, megatron.core


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/ppo_utils.py 12-51
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


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/ppo_utils.py 361-475
def get_grpo_returns(
    rewards: torch.Tensor,
    kl: list[torch.Tensor],
):
    returns = []
    for i in range(len(rewards)):
        returns.append(torch.ones_like(kl[i]) * rewards[i])
    return returns


def get_reinforce_plus_plus_returns(
    rewards: torch.Tensor,
    kl: list[torch.Tensor],
    loss_masks: list[torch.Tensor],
    response_lengths: list[int],
    total_lengths: list[int],
    kl_coef: float,
    gamma: float,
) -> list[torch.Tensor]:
    """
    Calculates discounted returns for REINFORCE++ (https://arxiv.org/pdf/2501.03262)

    Args:
        rewards (Tensor): A tensor of scalar rewards for each sequence.
        kl (List[Tensor]): List of per-token KL divergence tensors for sequence chunks.
        loss_masks (List[Tensor]): List of response-only loss masks for each full sequence.
        response_lengths (List[int]): The full length of each response sequence.
        total_lengths (List[int]): The full length of each sequence (prompt + response).
        kl_coef (float): Coefficient for the KL penalty.
        gamma (float): The discount factor.

    Returns:
        List[torch.Tensor]: A list of return (G_t) tensors for the
                            local sequence chunks owned by the current GPU rank.
    """
    from megatron.core import mpu

    cp_size = mpu.get_context_parallel_world_size()

    token_level_rewards = []
    for i in range(len(rewards)):
        local_kl_chunk = kl[i]
        total_len, response_len = total_lengths[i], response_lengths[i]

        if cp_size > 1:
            # Step 1,2:Gather all chunks and token_offsets from all ranks and reconstruct the full response tensor by splitting and placing each part
            from slime.backends.megatron_utils.cp_utils import all_gather_with_cp

            full_kl_response = all_gather_with_cp(local_kl_chunk, total_len, response_len)
        else:
            full_kl_response = local_kl_chunk

        # Step 3: Compute returns on full response kl tensor.
        full_mask = loss_masks[i]
        assert full_mask.sum().item() > 0, f"Sequence at index {i} is fully masked."
        masked_kl = full_kl_response * full_mask
        rewards_for_seq = -kl_coef * masked_kl
        last_idx = full_mask.nonzero(as_tuple=True)[0][-1]
        rewards_for_seq[last_idx] += rewards[i]
        token_level_rewards.append(rewards_for_seq)

    if not token_level_rewards:
        return []

    max_len = max(rewards_for_seq.size(0) for rewards_for_seq in token_level_rewards)
    padded_rewards = token_level_rewards[0].new_zeros(len(token_level_rewards), max_len)
    for i, rewards_for_seq in enumerate(token_level_rewards):
        padded_rewards[i, : rewards_for_seq.size(0)] = rewards_for_seq

    padded_returns = chunked_discounted_returns(padded_rewards, gamma)

    final_returns_chunks = []
    for i, returns_for_seq in enumerate(padded_returns):
        returns_for_seq = returns_for_seq[: token_level_rewards[i].size(0)]
        if cp_size > 1:
            from slime.backends.megatron_utils.cp_utils import slice_log_prob_with_cp

            total_len, response_len = total_lengths[i], response_lengths[i]
            local_returns_chunk = slice_log_prob_with_cp(returns_for_seq, total_len, response_len)
        else:
            local_returns_chunk = returns_for_seq

        final_returns_chunks.append(local_returns_chunk)

    return final_returns_chunks


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


# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/utils/ppo_utils.py 610-692
def chunked_discounted_returns(
    rewards: torch.Tensor,
    discount: float,
    chunk_size: int = 128,
) -> torch.Tensor:
    """
    Compute discounted returns using a parallel scan within fixed-size chunks.

    This reduces the sequential dependency length from O(T) to O(T / chunk_size),
    while keeping chunk computations fully parallelizable (O(C^2) per chunk).

    Args:
        rewards (Tensor): [B, T] reward sequence.
        discount (float): Discount factor applied at each step.
        chunk_size (int): sequence chunk length for parallel scan.

    Returns:
        Tensor: [B, T] discounted returns.
    """
    assert rewards.ndim == 2
    B, T = rewards.shape

    device = rewards.device
    dtype = rewards.dtype

    # Reformulate the backward recurrence as a forward scan on the reversed
    # sequence: S[i] = rewards[i] + discount * S[i - 1].
    rewards_rev = torch.flip(rewards, dims=[1])

    if T % chunk_size != 0:
        pad = chunk_size - (T % chunk_size)
        rewards_rev = F.pad(rewards_rev, (0, pad))
    else:
        pad = 0

    B, T_pad = rewards_rev.shape
    n_chunks = T_pad // chunk_size
    rewards_chunks = rewards_rev.view(B, n_chunks, chunk_size)

    idx = torch.arange(chunk_size, device=device)
    row = idx[:, None]
    col = idx[None, :]
    diff = col - row

    M = torch.zeros(chunk_size, chunk_size, device=device, dtype=dtype)
    mask = diff >= 0

    if discount == 0.0:
        M[mask & (diff == 0)] = 1.0
    else:
        M[mask] = discount ** diff[mask].to(dtype)

    if discount == 0.0:
        pow_vec = torch.zeros(chunk_size, device=device, dtype=dtype)
    else:
        pow_vec = discount ** torch.arange(1, chunk_size + 1, device=device, dtype=dtype)

    rewards_flat = rewards_chunks.reshape(B * n_chunks, chunk_size)
    S_local_flat = rewards_flat @ M
    S_local_chunks = S_local_flat.view(B, n_chunks, chunk_size)

    lengths = [chunk_size] * n_chunks
    if pad > 0:
        lengths[-1] = chunk_size - pad

    S_rev = rewards_rev.new_zeros(B, T_pad)
    s_prev = torch.zeros(B, device=device, dtype=dtype)

    for c in range(n_chunks):
        Lc = lengths[c]
        start = c * chunk_size
        end = start + Lc

        S_local = S_local_chunks[:, c, :Lc]
        S_global = S_local + s_prev.unsqueeze(1) * pow_vec[:Lc]

        S_rev[:, start:end] = S_global
        s_prev = S_global[:, -1]

    if pad > 0:
        S_rev = S_rev[:, :T]

    return torch.flip(S_rev, dims=[1])
# end verbatim


def sum_of_sample_mean(x):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return x.sum()


def kl_loss_block(args, batch, log_probs, old_log_probs):
    """policy_loss_function's KL block (loss.py 1116–1130) on a loss of 0."""
    loss = torch.zeros((), dtype=torch.float32)
# verbatim: THUDM/slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 slime/backends/megatron_utils/loss.py 1116-1130
    if args.use_kl_loss:
        ref_log_probs = batch["ref_log_probs"]
        ref_log_probs = torch.cat(ref_log_probs, dim=0)
        importance_ratio = None
        if args.use_unbiased_kl:
            importance_ratio = torch.exp(log_probs - old_log_probs)
        kl = compute_approx_kl(
            log_probs,
            ref_log_probs,
            kl_loss_type=args.kl_loss_type,
            importance_ratio=importance_ratio,
        )
        kl_loss = sum_of_sample_mean(kl)

        loss = loss + args.kl_loss_coef * kl_loss
# end verbatim
    return loss


LOSS_PRESETS = {"slime:kl_loss": ("k1", False), "slime:kl_loss_low_var_kl": ("low_var_kl", False),
                "slime:unbiased_kl": ("low_var_kl", True)}
OTHER_TYPES = {"slime:kl_loss": ("k1",)}


def loss_numbers(numbers):
    for preset, (kl_loss_type, unbiased) in LOSS_PRESETS.items():
        tokens = kl_harness.loss_tokens("k3" if kl_loss_type != "k1" else "k1",
                                        10.0 if kl_loss_type == "low_var_kl" else None, ratios=unbiased)
        args = Namespace(use_kl_loss=True, use_unbiased_kl=unbiased, kl_loss_type=kl_loss_type, kl_loss_coef=1.0)

        def term_of(log_pi, log_old, log_mu, log_ref, args=args):
            ratio = torch.exp(log_pi[0] - log_old[0]) if args.use_unbiased_kl else None
            return compute_approx_kl(log_pi[0], log_ref[0], kl_loss_type=args.kl_loss_type,
                                     importance_ratio=ratio)[None]

        def loss_of(log_pi, log_old, log_mu, log_ref, args=args):
            return kl_loss_block(args, {"ref_log_probs": [log_ref[0]]}, log_pi[0], log_old[0])

        term = kl_harness.per_token(term_of, tokens)[0]
        derivative = kl_harness.per_token(loss_of, tokens)[1]
        numbers.loss(preset, f"--kl-loss-type {kl_loss_type}" + (" --use-unbiased-kl" if unbiased else ""), tokens,
                     term, derivative, float32=True)


def reward_batch():
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float32)
    lengths = [int(m.sum()) for m in mask]
    kl = [compute_approx_kl(torch.tensor(o[:n], dtype=torch.float64), torch.tensor(r[:n], dtype=torch.float64),
                            kl_loss_type="k1")
          for o, r, n in zip(batch["log_old"], batch["log_ref"], lengths)]
    return batch, mask, lengths, kl


def padded(tensors, width):
    return [kl_harness.as_list(torch.nn.functional.pad(t, (0, width - len(t)))) for t in tensors]


def reward_numbers(numbers):
    beta = 0.5
    batch, mask, lengths, kl = reward_batch()
    rewards = torch.tensor(batch["rewards"], dtype=torch.float32)
    masks = [torch.ones(n) for n in lengths]
    width = mask.shape[1]

    def to_go(coef):
        return get_reinforce_plus_plus_returns(rewards, kl, masks, lengths, lengths, kl_coef=coef, gamma=1.0)

    def baseline(coef):
        return get_reinforce_plus_plus_baseline_advantages(rewards, kl, masks, kl_coef=coef)

    for preset, returns, setting in (("slime:kl_in_reward_reinforce_pp", to_go, "reinforce_plus_plus, gamma 1"),
                                     ("slime:kl_in_reward_reinforce_pp_baseline", baseline,
                                      "reinforce_plus_plus_baseline")):
        penalty = [a - b for a, b in zip(returns(0.0), returns(beta))]
        numbers.reward(preset, f"--kl-coef {beta} --kl-loss-type k1 --advantage-estimator {setting}", beta,
                       padded(kl, width), padded(penalty, width), float32=True,
                       probe=kl_harness.probe_values(lambda old, ref: compute_approx_kl(old, ref, kl_loss_type="k1"), "k1"))
    grpo = get_grpo_returns(rewards, kl)
    numbers.findings["grpo_ignores_kl_coef"] = {
        "returns": padded(grpo, width), "rewards": batch["rewards"],
        "note": "get_grpo_returns(rewards, kl) gives each token its sequence's reward whatever --kl-coef is"}


def main():
    numbers = kl_harness.KLNumbers("slime", REPOSITORY, COMMIT, "tests/catalogue/reference/slime/kl_generate.py")
    numbers.findings = numbers.data.setdefault("findings", {})
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
