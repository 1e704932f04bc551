"""PipelineRL 58d3934 (its newest snapshot: no commit of it is pinned elsewhere in toylab): rl_step's policy loss, its
"ppo" and "reinforce" policy_loss, run on one-token rows with π_θ, the rollout's logprobs (μ, PipelineRL's
old_logprobs) and a π_old it never reads apart; writes numbers.json beside this file (its "updates"; PipelineRL has
no correction presets, so no "cases").

Copied verbatim (blocks below): mask_sum and sum_sum (pipelinerl/finetune/rl/utils.py, which imports datasets),
linear_decay_coef and rl_step from its shifted values to policy_loss_total (pipelinerl/finetune/rl/__init__.py, which
imports pydantic, pandas and the model types), as a function of what rl_step has computed before them. Stubbed: the
batch (rewards, advantages, ref_logprobs, old_logprobs, group_tokens, num_labels, overflow: a prompt column and the
token's), the model outputs (no value head), new_logprobs (the given log-probs, already shifted), entropy 0, and the
RLConfig (conf/finetune/base.yaml's rl fields: epsilon_low/high 0.02, kl_coef 0, entropy_bonus 0, use_advantages,
clamp_log_ratio_ref_new_value 5; batch_size 1 so that tokens_weights = 1/batch_size is 1).

Each token's loss is policy_loss_total of its row; ref_logprobs are μ's (kl_coef 0: the KL term is 0).

    python tests/catalogue/reference/pipelinerl/generate.py
"""

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402

# verbatim: ServiceNow/PipelineRL 58d393458625ad63ed539f2dcd072c85700c557f pipelinerl/finetune/rl/utils.py 26-31
def mask_sum(values: torch.Tensor, mask: torch.Tensor, axis: Optional[int] = None) -> torch.Tensor:
    """Compute sum of tensor with a masked values."""
    if axis is not None:
        return (values * mask).nan_to_num(0).sum(axis=axis)  # type: ignore
    else:
        return (values * mask).nan_to_num(0).sum()
# end verbatim


# verbatim: ServiceNow/PipelineRL 58d393458625ad63ed539f2dcd072c85700c557f pipelinerl/finetune/rl/utils.py 71-92
def sum_sum(values: torch.Tensor, masks: torch.Tensor, segments: list | None):
    """
    Compute sum-sum of values with masking, handling both packed and unpacked sequences.

    Args:
        values (torch.Tensor): Input tensor of values to aggregate
        masks (torch.Tensor): Boolean mask tensor indicating valid positions
        segments (list | None): List of (start, end) tuples for packed sequences, or None for unpacked

    Returns:
        torch.Tensor: Sum-sum of masked values, computed differently for packed vs unpacked sequences:
            - For packed (segments provided): Computes sum within each segment then sums across segments
            - For unpacked (no segments): Computes masked sum across all values
    """
    is_sentinel_batch = values.shape[-1] == 1  # sentinel batch
    if segments and not is_sentinel_batch:
        # the values are seq packed, we drop the first dimension
        assert values.shape[0] == 1, "seq packed samples must have dimension 0 of 1"
        masked_sums = torch.stack([mask_sum(values[0, start:end], masks[0, start:end]) for start, end in segments])
        return (masked_sums).sum()
    else:
        return mask_sum(values, masks)
# end verbatim


# verbatim: ServiceNow/PipelineRL 58d393458625ad63ed539f2dcd072c85700c557f pipelinerl/finetune/rl/__init__.py 119-133
def linear_decay_coef(current_step: int, max_step: int, initial_coef: float, final_coef: float) -> float:
    """
    Linearly decay the coefficient from initial to final value over the course of training.

    Args:
        current_step (int): Current step in the training
        max_step (int): Maximum number of steps in the training
        initial_coef (float): Initial coefficient value
        final_coef (float): Final coefficient value

    Returns:
        float: Linearly decayed coefficient value

    """
    return initial_coef + (final_coef - initial_coef) * current_step / max_step
# end verbatim


def per_segment_sums(*args, **kwargs):
    raise NotImplementedError("per_segment_sums: GSPO only")


def policy_loss(new_logprobs, batch, config, masks_shifted, segments=None, has_value_head=False, outputs=None,
                entropy=None, use_entropy_loss=False, current_step=0, max_step=1, seq_parallel_group=None):
    """rl_step from its shifted values to policy_loss_total, what it computed before them given."""
# verbatim: ServiceNow/PipelineRL 58d393458625ad63ed539f2dcd072c85700c557f pipelinerl/finetune/rl/__init__.py 237-365
    # get shifted values and compute ratios
    rewards = batch.rewards[:, 1:]
    ref_logprobs = batch.ref_logprobs[:, 1:]
    old_logprobs = batch.old_logprobs[:, 1:]
    group_tokens = batch.group_tokens[:, 1:]
    num_labels_in_seq = batch.num_labels[:, 1:] # sequence dependent normalization
    overflow = batch.overflow[:, 1:]

    if config.group_normalization:
        # assert that group_tokens is not zero
        assert (group_tokens > 0).all(), "group_tokens must be greater than zero for group normalization"
        tokens_weights = torch.ones_like(group_tokens) / group_tokens
    else:
        tokens_weights = torch.ones_like(group_tokens) / config.batch_size

    if config.overlong_filtering:
        # filter out sequences that do not have eos_token_id
        overflow = torch.tensor(overflow, device=overflow.device)
        tokens_weights = tokens_weights * (1 - overflow)

    assert new_logprobs.shape == ref_logprobs.shape

    log_ratio_new_old = new_logprobs - old_logprobs
    abs_log_ratio_new_old = torch.abs(log_ratio_new_old)
    ratio_new_old = torch.exp(log_ratio_new_old)
    log_ratio_ref_new = ref_logprobs - new_logprobs
    assert torch.isfinite(log_ratio_ref_new).all(), f"log_ratio_ref_new is not finite: {log_ratio_ref_new}"

    if has_value_head:
        # Get value predictions if available
        value_predictions = outputs.value[:, :-1] # no target for the last token 
        # Compute value-based advantages: A(s,a) = MC_return - V(s)
        # where MC_return is the Monte Carlo return (rewards) and V(s) is the value prediction
        #FIXME: if this works better it should be a config
        #advantages = rewards - torch.clamp(value_predictions, 0, 1)
        advantages = rewards - value_predictions
    else:
        advantages = batch.advantages[:, 1:]

    log_p_weights = advantages.detach() if config.use_advantages else rewards
    if config.relu_log_p_weights:
        log_p_weights = torch.clamp(log_p_weights, min=0)

    clamp_log_ratio_ref_new_indicators = torch.abs(log_ratio_ref_new) > config.clamp_log_ratio_ref_new_value

    log_ratio_ref_new_clamp = torch.clamp(
        log_ratio_ref_new,
        min=-config.clamp_log_ratio_ref_new_value,
        max=config.clamp_log_ratio_ref_new_value,
    )

    approx_kl = torch.exp(log_ratio_ref_new_clamp) - log_ratio_ref_new_clamp - 1  # Schulman KL approx
    approx_kl_new_old = torch.exp(log_ratio_new_old) - log_ratio_new_old - 1  # Schulman KL approx

    assert torch.isfinite(approx_kl).all(), f"approx_kl is not finite: {approx_kl}"
    entropy_bonus_coef = linear_decay_coef(current_step, max_step, config.entropy_bonus, config.final_entropy_bonus)
    kl_coef = linear_decay_coef(current_step, max_step, config.kl_coef, config.final_kl_coef)

    # compute algorithm-specific losses
    policy_loss_total = None
    match config.policy_loss:
        case "ppo":
            surr1 = ratio_new_old * log_p_weights
            clamped_ratio = torch.clamp(ratio_new_old, 1 - config.epsilon_low, 1 + config.epsilon_high)
            clamp_log_ratio_new_old_indicators = clamped_ratio != ratio_new_old
            surr2 = clamped_ratio * log_p_weights
            policy_loss = torch.min(surr1, surr2)
        case "reinforce":
            surr1 = torch.zeros_like(ratio_new_old)
            surr2 = torch.zeros_like(ratio_new_old)
            clamp_log_ratio_new_old_indicators = ratio_new_old > 1 + config.epsilon_high
            ratio_new_old = torch.clamp(ratio_new_old, 0, 1 + config.epsilon_high)
            policy_loss = new_logprobs * log_p_weights * ratio_new_old.detach()
        case "gspo":
            if segments is None:
                raise ValueError("GSPO loss requires packed sequences with segments")
            lrn_sum, adv_sum, tok_count = per_segment_sums(
                batch.segment_ids,
                masks_shifted,
                log_ratio_new_old,
                advantages,
                seq_parallel_group=seq_parallel_group,
            )
            group_ratio_new_old = torch.exp(lrn_sum / tok_count.clamp(min=1e-6)).unsqueeze(1).unsqueeze(2)
            group_advantages_t = (adv_sum / tok_count.clamp(min=1e-6)).unsqueeze(1).unsqueeze(2).detach()
            zero_weights = torch.zeros_like(tokens_weights)
            weight_sum, _, _ = per_segment_sums(
                batch.segment_ids,
                masks_shifted,
                tokens_weights,
                zero_weights,
                seq_parallel_group=seq_parallel_group,
            )
            valid_mask = (tok_count > 0) & (weight_sum > 0)
            valid_mask_3d = valid_mask.unsqueeze(1).unsqueeze(2)
            surr1 = group_ratio_new_old * group_advantages_t
            clamped_group_ratio = torch.clamp(group_ratio_new_old, 1 - config.epsilon_low, 1 + config.epsilon_high)
            clamp_log_ratio_new_old_indicators = (clamped_group_ratio != group_ratio_new_old) & valid_mask_3d
            surr2 = clamped_group_ratio * group_advantages_t
            # Length-proportional weighting is intentional: longer sequences carry more
            # gradient, which complements difficulty-aware penalty (DAP) — DAP reduces the
            # length penalty for successful hard rollouts, and length-proportional weights
            # amplify that signal into the update. Uniform weighting hurts training dynamics.
            sequence_weights = weight_sum.unsqueeze(1).unsqueeze(2)
            if batch.sentinel or surr1.numel() == 0:
                policy_loss_total = new_logprobs[..., :1].sum() * 0.0
            else:
                mask_float = valid_mask_3d.to(dtype=surr1.dtype)
                min_terms = torch.min(surr1, surr2) * mask_float * sequence_weights
                policy_loss_total = -min_terms.sum()
            expanded_indicators = torch.zeros_like(masks_shifted, dtype=torch.float)
            for (start, end), val in zip(segments, clamp_log_ratio_new_old_indicators.flatten()):
                expanded_indicators[0, start:end] = float(val)
            clamp_log_ratio_new_old_indicators = expanded_indicators
        case _:
            raise ValueError(f"Unknown algorithm {config.policy_loss}")

    # combine loss components
    if config.policy_loss != "gspo":
        if use_entropy_loss:
            loss = policy_loss - kl_coef * approx_kl + entropy_bonus_coef * entropy
        else:
            loss = policy_loss - kl_coef * approx_kl
        assert loss.shape == tokens_weights.shape, (
            f"Loss shape {loss.shape} does not match example weights shape {tokens_weights.shape}"
        )
        loss = loss * tokens_weights  # 1 x (BxL) x 1

        policy_loss_total = -sum_sum(loss, masks_shifted, segments)
# end verbatim
    return policy_loss_total


FRAMEWORK, REPOSITORY, COMMIT = "pipelinerl", "ServiceNow/PipelineRL", "58d393458625ad63ed539f2dcd072c85700c557f"
# conf/finetune/base.yaml 100–112 (rl:), with RLConfig's defaults for the fields it leaves out
BASE_YAML = {"policy_loss": "reinforce", "divide_advantage_by_std": False, "kl_coef": 0.0, "final_kl_coef": 0.0,
             "entropy_bonus": 0.0, "final_entropy_bonus": 0.0, "reward_minus_kl_coef": 0.0, "epsilon_low": 2e-2,
             "epsilon_high": 2e-2, "use_advantages": True, "relu_log_p_weights": False,
             "clamp_log_ratio_ref_new_value": 5, "group_normalization": False, "overlong_filtering": False,
             "value_loss_coef": 0.0, "batch_size": 1}
UPDATE_SETTINGS = [
    ("pipelinerl:reinforce", "defaults", {}, {}, None, {}),
    ("pipelinerl:reinforce", "alternative", {"epsilon_high": 0.2}, {"eps_high": 0.2}, None, {}),
    ("pipelinerl:ppo", "defaults", {"policy_loss": "ppo"}, {}, None, {}),
    ("pipelinerl:ppo", "alternative", {"policy_loss": "ppo", "epsilon_low": 0.2, "epsilon_high": 0.28},
     {"eps_low": 0.2, "eps_high": 0.28}, None, {}),
]


def run_update(numbers, preset, setting, fields, params, correction, correction_params):
    config = SimpleNamespace(**{**BASE_YAML, **fields})
    high = 1 + config.epsilon_high
    ratios = [1 - config.epsilon_low, high] if config.policy_loss == "ppo" else [high]
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, combined=ratios))

    def token_loss(b, trainer, old, sampler, mask, advantages):
        column = torch.zeros(1, 1, dtype=torch.float64)
        pair = lambda x: torch.cat([column, x], dim=1)          # noqa: E731  (the prompt column, then the token)
        batch = SimpleNamespace(rewards=pair(advantages[:, None]), advantages=pair(advantages[:, None]),
                                ref_logprobs=pair(sampler), old_logprobs=pair(sampler), group_tokens=pair(mask),
                                num_labels=pair(mask), overflow=pair(torch.zeros_like(mask)))
        return policy_loss(trainer, batch, config, mask.bool())

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, {**BASE_YAML, **fields}, params, correction, correction_params, name, loss,
                   gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/pipelinerl/generate.py")
    for preset, setting, fields, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
