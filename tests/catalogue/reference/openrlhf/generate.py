"""OpenRLHF 3c3be62: PolicyLoss with --algo.advantage.is_correction_enable and is_correction_type tis / icepop /
seq-mask-tis, and policy_loss_type gspo (its ratio against the vLLM log-probs), run on the batches of harness.py;
writes numbers.json beside this file.

Copied verbatim (blocks below): masked_mean (openrlhf/models/utils.py), aggregate_loss and PolicyLoss
(openrlhf/models/loss.py, whose package imports deepspeed and transformers). Nothing is stubbed.

old_log_probs are the trainer's (detached: the PPO ratio is 1), rollout_log_probs the sampler's. The loss runs
with batch_num_tokens = 1 (token level: c = −∂loss/∂log π / A_b) or, for gspo, which PolicyLoss makes a per-sample
mean, global_batch_size = 1 (c is multiplied back by L + 1e-8, the per-sample mean's divisor). Nothing leaves
action_mask, so there is no "kept".

Three policies (the "updates"): PolicyLoss with old_log_probs (π_old), rollout_log_probs (μ) and the current
log-probs (π_θ) apart, on one-token rows (batch_num_tokens 1: each token's own loss).

    python tests/catalogue/reference/openrlhf/generate.py
"""

import sys
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/models/utils.py 166-169
def masked_mean(tensor: torch.Tensor, mask: Optional[torch.Tensor], dim: int = None) -> torch.Tensor:
    if mask is None:
        return tensor.mean(dim=dim)
    return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim)
# end verbatim


# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/models/loss.py 11-39
def aggregate_loss(
    loss: torch.Tensor,
    loss_mask: torch.Tensor,
    token_level_loss: bool = True,
    dp_size: int = 1,
    batch_num_tokens: Optional[float] = None,
    global_batch_size: Optional[float] = None,
) -> torch.Tensor:
    """Aggregate a per-token loss matrix into a scalar using one of two reduction modes:

    - ``token_level_loss=True``  -> per-token: masked-sum / global token count.
    - ``token_level_loss=False`` -> per-sample: sum of per-sequence token-means / global
      sample count.

    ``batch_num_tokens`` (token mode) and ``global_batch_size`` (sample mode) carry the
    *global* batch totals so the loss is invariant to data-parallel sharding; ``dp_size``
    compensates for the gradient averaging that DeepSpeed/DDP applies across DP ranks.
    """
    if token_level_loss:
        if batch_num_tokens is None:
            return masked_mean(loss, loss_mask, dim=None)
        return (loss * loss_mask).sum() / batch_num_tokens * dp_size

    token_counts = loss_mask.sum(dim=-1)
    seq_loss = (loss * loss_mask).sum(dim=-1) / (token_counts + 1e-8)
    seq_mask = (token_counts > 0).float()  # exclude fully masked sequences
    if global_batch_size is None:
        return masked_mean(seq_loss, seq_mask, dim=None)
    return (seq_loss * seq_mask).sum() / global_batch_size * dp_size
# end verbatim


# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/models/loss.py 116-230
class PolicyLoss(nn.Module):
    """
    Policy Loss for PPO
    """

    def __init__(
        self,
        clip_eps_low: float = 0.2,
        clip_eps_high: float = 0.2,
        dual_clip: float = None,
        token_level_loss: bool = True,
        policy_loss_type: str = "ppo",
        enable_vllm_is_correction: bool = False,
        vllm_is_truncated_threshold: list = None,
        vllm_is_correction_type: str = "tis",
    ) -> None:
        super().__init__()
        self.clip_eps_low = clip_eps_low
        self.clip_eps_high = clip_eps_high
        self.token_level_loss = token_level_loss
        self.dual_clip = dual_clip
        self.policy_loss_type = policy_loss_type
        self.enable_vllm_is_correction = enable_vllm_is_correction
        self.vllm_is_truncated_threshold = vllm_is_truncated_threshold
        self.vllm_is_correction_type = vllm_is_correction_type

        # GSPO requires sequence-level loss (per-sample mean)
        if policy_loss_type == "gspo":
            self.token_level_loss = False

        # Dual-clip PPO: https://arxiv.org/pdf/1912.09729
        if dual_clip is not None:
            assert dual_clip > 1.0, f"dual_clip must be > 1.0, got {dual_clip}"

        if self.vllm_is_correction_type not in {"tis", "icepop", "seq-mask-tis"}:
            raise ValueError(
                f"Invalid vllm_is_correction_type: {self.vllm_is_correction_type}, must be one of tis/icepop/seq-mask-tis"
            )

    def forward(
        self,
        log_probs: torch.Tensor,
        old_log_probs: torch.Tensor,
        advantages: torch.Tensor,
        action_mask: Optional[torch.Tensor] = None,
        rollout_log_probs: Optional[torch.Tensor] = None,
        dp_size: int = 1,
        batch_num_tokens: Optional[float] = None,
        global_batch_size: Optional[float] = None,
    ) -> torch.Tensor:
        raw_policy_log_ratio = log_probs - old_log_probs
        if self.policy_loss_type == "ppo":
            policy_log_ratio = raw_policy_log_ratio.clamp(min=-20.0, max=20.0)
            ratio = policy_log_ratio.exp()
        elif self.policy_loss_type == "gspo":
            # GSPO: https://arxiv.org/pdf/2507.18071
            if self.enable_vllm_is_correction:
                log_ratio = log_probs - rollout_log_probs
            else:
                log_ratio = raw_policy_log_ratio
            ratio = (log_ratio * action_mask).sum(dim=-1) / action_mask.sum(dim=-1).clamp(min=1)
            ratio = ratio.exp().unsqueeze(-1) * action_mask
        else:
            raise ValueError(f"Invalid policy loss type: {self.policy_loss_type}")

        surr1 = ratio * advantages
        surr2 = ratio.clamp(1 - self.clip_eps_low, 1 + self.clip_eps_high) * advantages

        if self.dual_clip is None:
            # Standard PPO
            loss = -torch.min(surr1, surr2)
        else:
            # Standard PPO clipping
            clip1 = torch.min(surr1, surr2)
            # Dual-clip: additional lower bound for negative advantages
            clip2 = torch.max(clip1, self.dual_clip * advantages)
            # Apply dual-clip: use clip2 for negative advantages, clip1 for positive advantages
            loss = -torch.where(advantages < 0, clip2, clip1)

        # Your Efficient RL Framework Secretly Brings You Off-Policy RL Training: https://fengyao.notion.site/off-policy-rl
        vllm_kl = None
        if self.enable_vllm_is_correction and self.policy_loss_type == "ppo":
            low_threshold, high_threshold = self.vllm_is_truncated_threshold
            rollout_log_ratio = old_log_probs - rollout_log_probs
            if self.vllm_is_correction_type == "icepop":
                # ICEPOP: token-level filtering (set coefficients outside the interval to 0)
                vllm_is = torch.exp(rollout_log_ratio).detach()
                mask = (vllm_is >= low_threshold) & (vllm_is <= high_threshold)
                vllm_is = vllm_is * mask
                loss = vllm_is * loss
            elif self.vllm_is_correction_type == "seq-mask-tis":
                # seq-mask-tis: use sequence-level geometric mean only for filtering,
                # correction coefficients still use TIS (token-level clamp)
                seq_log_ratio = masked_mean(rollout_log_ratio, action_mask, dim=-1)
                seq_is = torch.exp(seq_log_ratio)
                seq_mask = (seq_is >= low_threshold) & (seq_is <= high_threshold)
                vllm_is = torch.exp(rollout_log_ratio).detach()
                loss = seq_mask.unsqueeze(-1) * vllm_is * loss
            else:
                # TIS: token-level clamp with low and high thresholds
                vllm_is = torch.exp(rollout_log_ratio).clamp(min=low_threshold, max=high_threshold).detach()
                loss = vllm_is * loss
            vllm_kl = masked_mean(rollout_log_probs - old_log_probs, action_mask, dim=None)

        loss = aggregate_loss(
            loss,
            action_mask,
            token_level_loss=self.token_level_loss,
            dp_size=dp_size,
            batch_num_tokens=batch_num_tokens,
            global_batch_size=global_batch_size,
        )
        clip_ratio = masked_mean(torch.lt(surr2, surr1).float(), action_mask, dim=None)
        ppo_kl = masked_mean(-raw_policy_log_ratio.detach(), action_mask, dim=None)
        return loss, clip_ratio, ppo_kl, vllm_kl
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "openrlhf", "OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7"
SETTINGS = {
    "tis": {"defaults": {}, "alternative": {"low": 0.8, "high": 1.5}},
    "icepop": {"defaults": {}, "alternative": {"low": 0.8, "high": 1.5}},
    "seq-mask-tis": {"defaults": {}, "alternative": {"low": 0.9, "high": 1.2}},
    "gspo": {"defaults": {}, "alternative": {"eps_clip_low": 0.05, "eps_clip_high": 0.1},
             "wide": {"eps_clip_low": 0.5, "eps_clip_high": 1.0}},
}


def policy_loss(option, params):
    """PolicyLoss as train_ppo_ray.py builds it (is_correction_threshold [0.5, 5.0], eps_clip_low_high 0.2 0.2)."""
    if option == "gspo":
        return PolicyLoss(params.get("eps_clip_low", 0.2), params.get("eps_clip_high", 0.2), policy_loss_type="gspo",
                          enable_vllm_is_correction=True, vllm_is_truncated_threshold=[0.5, 5.0])
    return PolicyLoss(0.2, 0.2, enable_vllm_is_correction=True, vllm_is_correction_type=option,
                      vllm_is_truncated_threshold=[params.get("low", 0.5), params.get("high", 5.0)])


def thresholds(option, loss):
    if option == "gspo":
        return [1 - loss.clip_eps_low, 1 + loss.clip_eps_high]
    return list(loss.vllm_is_truncated_threshold)


def run(loss_fn, batch):
    trainer, sampler, mask, advantages = harness.tensors(batch)
    token_advantages = advantages[:, None].expand_as(trainer)
    gspo = loss_fn.policy_loss_type == "gspo"
    loss, *_ = loss_fn(trainer, trainer.detach(), token_advantages, action_mask=mask, rollout_log_probs=sampler,
                       batch_num_tokens=None if gspo else 1.0, global_batch_size=1.0 if gspo else None)
    scale = mask.sum(dim=1, keepdim=True) + 1e-8 if gspo else 1.0
    return harness.coefficients(loss, trainer, advantages, scale)


# -- three policies: PolicyLoss with π_θ, π_old and μ apart --------------------------------------------------------

# (update preset, setting, PolicyLoss's arguments as train_ppo_ray.py builds them, the loss parameters in toylab's
# terms, the correction and its parameters); old_log_probs are the actor's (recomputed in make_experience_batch)
UPDATE_SETTINGS = [
    ("openrlhf:default", "defaults", {"clip_eps_low": 0.2, "clip_eps_high": 0.2}, {}, None, {}),
    ("openrlhf:default", "alternative", {"clip_eps_low": 0.1, "clip_eps_high": 0.28, "dual_clip": 3.0},
     {"eps_low": 0.1, "eps_high": 0.28, "dual_clip": 3.0}, None, {}),
    ("openrlhf:default", "tis", {"clip_eps_low": 0.2, "clip_eps_high": 0.2, "enable_vllm_is_correction": True,
                                 "vllm_is_truncated_threshold": [0.5, 5.0]}, {}, "openrlhf:tis", {}),
    ("openrlhf:default", "icepop", {"clip_eps_low": 0.2, "clip_eps_high": 0.2, "enable_vllm_is_correction": True,
                                    "vllm_is_truncated_threshold": [0.5, 5.0], "vllm_is_correction_type": "icepop"},
     {}, "openrlhf:icepop", {}),
]


def run_update(numbers, preset, setting, arguments, params, correction, correction_params):
    loss_fn = PolicyLoss(**arguments)
    ratios = [1 - loss_fn.clip_eps_low, 1 + loss_fn.clip_eps_high] + ([loss_fn.dual_clip] if loss_fn.dual_clip else [])
    weights = loss_fn.vllm_is_truncated_threshold if loss_fn.enable_vllm_is_correction else []
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights))

    def token_loss(b, trainer, old, sampler, mask, advantages):
        loss, *_ = loss_fn(trainer, old, advantages[:, None], action_mask=mask, rollout_log_probs=sampler,
                           batch_num_tokens=1.0)
        return loss

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, arguments, params, correction, correction_params, name, loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/openrlhf/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            loss_fn = policy_loss(option, params)
            probes = numbers.batch(f"probes/{option}/{setting}", harness.probe_batch(thresholds(option, loss_fn)))
            for batch in (ragged, probes):
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, run(loss_fn, numbers.batches[batch]),
                            setting=setting)
    for preset, setting, arguments, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, arguments, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
