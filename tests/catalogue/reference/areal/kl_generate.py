"""AReaL cbff54d: the KL to the reference as its code computes it: actor.kl_ctl with actor.kl_estimator (k1 by
default; k2, k3), a per-token reward −kl_ctl·k(old_logp, ref_logp) fed to GAE (discount = gae_lambda = 1 by
default; no critic: values 0), so a return to go; every estimator's value clamped to ±10; writes kl_numbers.json
beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): KLEstimator (areal/utils/data.py), _compute_token_level_gae (areal/trainer/ppo/gae.py)
and PPOActor._compute_advantages (areal/trainer/ppo/actor.py), the latter as a method of a stand-in holding the
defaults it reads (reward_bias 0, reward_scaling 1, reward_clip 20, no reward or advantage normalisation, token-level
GAE, mask_no_eos_with_zero false; use_decoupled_loss and recompute_logprob false, so old_logp is the engine's
logprobs rolled by one). Each sequence is one prompt token then its response, padded to a width it does not fill
(so every sequence ends with EOS); the engine's logprobs are per token, ref_logp in the rolled (next-token)
convention, as rl_trainer stores it. KLEstimator casts to float32. The reward's penalty is the advantages with
kl_ctl 0 minus with kl_ctl β at the response positions.

    python tests/catalogue/reference/areal/kl_generate.py
"""

import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "areal-project/AReaL", "cbff54d645d2cd8ee1f1c358a82f3f473588433d"
TrajBatchMeta = object
reward_overlong_penalty = _compute_turn_level_gae = None        # not reached: no overlong penalty, token GAE


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/utils/data.py 1640-1698
class KLEstimator:
    """
    KL divergence estimator, supports k1, k2 and k3.
    """

    def __init__(self, kl_estimator: str = "k1", apply_clamp: bool = True):
        self.kl_estimator = kl_estimator
        if kl_estimator not in ["k1", "k2", "k3"]:
            raise ValueError(
                f"Invalid KL estimator: {kl_estimator}. Valid choices: k1, k2, k3"
            )
        self.apply_clamp = apply_clamp

    def __call__(
        self, log_probs: torch.Tensor, log_probs_base: torch.Tensor
    ) -> torch.Tensor:
        return self._compute_approx_kl(
            log_probs, log_probs_base, self.kl_estimator, self.apply_clamp
        )

    # adapted from https://github.com/OpenRLHF/OpenRLHF/blob/main/openrlhf/models/utils.py#L7
    @staticmethod
    def _compute_approx_kl(
        log_probs: torch.Tensor,
        log_probs_base: torch.Tensor,
        kl_estimator: str = "k1",
        apply_clamp: bool = True,
    ) -> torch.Tensor:
        """
        Compute the approximate KL divergence between two distributions.
        Schulman blog: http://joschu.net/blog/kl-approx.html

        Args:
            log_probs: Log probabilities of the new distribution.
            log_probs_base: Log probabilities of the base distribution.
        """

        if kl_estimator == "k1":
            log_ratio = log_probs.float() - log_probs_base.float()

        # The k2 estimator is the non negative kl approximation in
        # http://joschu.net/blog/kl-approx.html
        # The k2_loss is approximately equivalent to the
        # one-step KL divergence penalty with the k1 estimator
        # used in https://arxiv.org/pdf/2310.10505.
        if kl_estimator == "k2":
            log_ratio = log_probs.float() - log_probs_base.float()
            log_ratio = log_ratio**2 / 2.0

        # The k3 estimator is the non negative kl approximation in
        # http://joschu.net/blog/kl-approx.html
        if kl_estimator == "k3":
            log_ratio = log_probs.float() - log_probs_base.float()
            log_ratio = -log_ratio
            log_ratio = log_ratio.exp() - 1 - log_ratio

        if apply_clamp:
            log_ratio = log_ratio.clamp(min=-10, max=10)
        return log_ratio
# end verbatim


# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/trainer/ppo/gae.py 10-37
def _compute_token_level_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    loss_mask: torch.Tensor,
    seq_no_eos_mask: torch.Tensor,
    discount: float,
    gae_lambda: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compute GAE with each generated token treated as one timestep."""
    bs, max_seqlen = rewards.shape
    advantages_reversed = [torch.zeros(bs, dtype=torch.float32, device=values.device)]
    lastgaelam = torch.zeros(bs, dtype=torch.float32, device=values.device)
    nextvalues = values[:, max_seqlen - 1] * seq_no_eos_mask
    discounted_lambda = discount * gae_lambda
    for t in reversed(range(max_seqlen - 1)):
        delta = rewards[:, t] + discount * nextvalues - values[:, t]
        newgaelam = delta + discounted_lambda * lastgaelam

        # Skip tokens that do not contribute to the loss.
        mask = loss_mask[:, t]
        inverse_mask = 1 - mask
        nextvalues = nextvalues * inverse_mask + values[:, t] * mask
        lastgaelam = lastgaelam * inverse_mask + newgaelam * mask
        advantages_reversed.append(lastgaelam)

    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    return advantages, advantages + values

# end verbatim


class Actor:
    def __init__(self, kl_ctl, kl_estimator):
        self.config = SimpleNamespace(overlong_reward_penalty=False, use_decoupled_loss=False, recompute_logprob=False)
        self.reward_bias, self.reward_scaling, self.reward_clip = 0.0, 1.0, 20.0
        self.reward_norm = self.adv_norm = None
        self.kl_ctl = kl_ctl
        self.kl_estimator = KLEstimator(kl_estimator)
        self.discount, self.gae_lambda, self._gae_lambda_is_custom = 1.0, 1.0, False
        self.gae_timestep_unit = "token"
        self.mask_no_eos_with_zero = False

# verbatim: areal-project/AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d areal/trainer/ppo/actor.py 178-323
    def _compute_advantages(
        self, data: dict[str, Any], meta: TrajBatchMeta | None = None
    ) -> dict[str, Any]:
        bs = data["input_ids"].shape[0]
        batch_indices = torch.arange(
            bs, device=data["input_ids"].device, dtype=torch.long
        )

        # Reward Penalty on length
        if self.config.overlong_reward_penalty:
            overlong_tokens = self.config.overlong_tokens
            overlong_penalty_factor = self.config.overlong_penalty_factor

            assert overlong_tokens is not None
            assert overlong_penalty_factor is not None
            data = reward_overlong_penalty(
                data,
                overlong_tokens=overlong_tokens,
                overlong_penalty_factor=overlong_penalty_factor,
                max_response_length=self.config.max_new_tokens,
            )

        # Reward Scaling
        reward_score = data["rewards"]
        reward_score = (reward_score + self.reward_bias) * self.reward_scaling
        reward_score = torch.clip(
            reward_score, max=self.reward_clip, min=-self.reward_clip
        )
        # Use actual trajectory group sizes when available so group-level
        # normalization handles failed/filtered rollout samples without slicing
        # across prompts. Direct calls without batched metadata keep the legacy
        # fixed-group-size behavior.
        group_sizes = meta.traj_group_sizes if meta is not None else None
        if self.reward_norm:
            reward_score = self.reward_norm(reward_score, group_sizes=group_sizes)

        loss_mask = data["loss_mask"].float()
        loss_mask = torch.roll(loss_mask, shifts=-1, dims=-1)

        # Align structural turn IDs to the same next-token prediction
        # convention used by loss_mask and log probabilities.
        turn_ids = data.get("turn_ids")
        if turn_ids is not None:
            turn_ids = torch.roll(turn_ids, shifts=-1, dims=-1)
            turn_ids[:, -1] = -1
        elif self.gae_timestep_unit == "turn":
            raise ValueError(
                "actor.gae_timestep_unit='turn' requires rollout data to "
                "include 'turn_ids'."
            )
        # Apply the mask to log probabilities.
        if not self.config.use_decoupled_loss and self.config.recompute_logprob:
            # Overwrite logprobs produced by the inference engine
            prox_logp_value = data["prox_logp"]
            if prox_logp_value is None:
                raise ValueError(
                    "prox_logp is None but recompute_logprob=True. "
                    "This indicates compute_logp() was skipped incorrectly."
                )
            old_logp = data["logprobs"] = prox_logp_value
        else:
            old_logp = torch.roll(data["logprobs"], shifts=-1, dims=-1)
            if not self.config.use_decoupled_loss:
                # prox logp not available, use inferenced logp
                data["prox_logp"] = old_logp
        ref_logp = data.get("ref_logp")
        if ref_logp is None:
            ref_logp = torch.zeros_like(old_logp)
        ref_logp *= loss_mask
        old_logp *= loss_mask

        # Compute KL-regularized rewards.
        attn_mask = data["attention_mask"]
        seqlens = attn_mask.sum(-1).long()
        seq_no_eos_mask = seqlens == attn_mask.shape[1]
        rewards = -self.kl_ctl * self.kl_estimator(old_logp, ref_logp)
        kl_rewards = rewards.clone()
        # KL rewards at the next token after eos is zero.
        rewards[batch_indices, seqlens - 1] = 0
        gae_kl_rewards = rewards.clone()
        indices = torch.clip(seqlens - 2, min=0)
        gae_outcome_rewards = torch.zeros_like(rewards)
        if self.mask_no_eos_with_zero:
            gae_outcome_rewards[batch_indices, indices] = torch.where(
                seq_no_eos_mask, 0, reward_score
            )
        else:
            gae_outcome_rewards[batch_indices, indices] = reward_score

        # Turn-level GAE treats each generated turn as a macro timestep. Keep
        # token KL as a local actor penalty rather than broadcasting a turn's
        # summed KL into every token and into critic targets.
        if self.gae_timestep_unit == "turn":
            rewards = gae_outcome_rewards
        else:
            rewards = gae_kl_rewards + gae_outcome_rewards

        # Compute GAE.
        if "values" not in data:
            values = torch.zeros_like(rewards)
        else:
            values = data["values"]
        if self._gae_lambda_is_custom:
            gae_lambda = self._compute_gae_lambda(loss_mask, turn_ids)
        else:
            gae_lambda = float(self.gae_lambda)
            if not math.isfinite(gae_lambda):
                raise ValueError(f"Static gae_lambda must be finite, got {gae_lambda}")
        if self.gae_timestep_unit == "turn":
            assert turn_ids is not None
            advantages, returns = _compute_turn_level_gae(
                rewards=rewards,
                values=values,
                loss_mask=loss_mask,
                turn_ids=turn_ids,
                seq_no_eos_mask=seq_no_eos_mask,
                discount=self.discount,
                gae_lambda=gae_lambda,
            )
            advantages = advantages + gae_kl_rewards
        else:
            advantages, returns = _compute_token_level_gae(
                rewards=rewards,
                values=values,
                loss_mask=loss_mask,
                seq_no_eos_mask=seq_no_eos_mask,
                discount=self.discount,
                gae_lambda=gae_lambda,
            )
        data["returns"] = returns

        # Optionally perform advantage normalization.
        if self.adv_norm is not None:
            # Use the same actual trajectory group sizes as reward normalization;
            # ignored when adv_norm is batch-level.
            advantages = self.adv_norm(advantages, loss_mask, group_sizes=group_sizes)

        # Store data in the dict.
        data["advantages"] = advantages
        data["kl_rewards"] = kl_rewards
        data["tot_rewards"] = gae_kl_rewards + gae_outcome_rewards
        data["loss_mask"] = loss_mask
        # because we have rolled old_logp by -1
        data["logprobs"] = old_logp

        return data
# end verbatim


def reward_data():
    """Prompt token, then the response, padded: width 8 for responses of at most 5 tokens."""
    batch = kl_harness.REWARD_BATCH
    width = 8
    rows = len(batch["rewards"])
    logprobs, ref_logp = torch.zeros(rows, width), torch.zeros(rows, width)
    loss_mask, attention_mask = torch.zeros(rows, width), torch.zeros(rows, width, dtype=torch.long)
    for i, (old, ref, mask) in enumerate(zip(batch["log_old"], batch["log_ref"], batch["mask"])):
        n = sum(mask)
        logprobs[i, 1:1 + n] = torch.tensor(old[:n])
        ref_logp[i, :n] = torch.tensor(ref[:n])                 # ref_logp[i] belongs to token i + 1
        loss_mask[i, 1:1 + n] = 1
        attention_mask[i, :1 + n] = 1
    return {"input_ids": torch.zeros(rows, width, dtype=torch.long), "attention_mask": attention_mask,
            "loss_mask": loss_mask, "logprobs": logprobs, "ref_logp": ref_logp,
            "rewards": torch.tensor(batch["rewards"], dtype=torch.float32)}


def reward_numbers(numbers):
    beta = 0.5
    batch = kl_harness.REWARD_BATCH
    width = len(batch["mask"][0])
    advantages = {coef: Actor(coef, "k1")._compute_advantages(reward_data())["advantages"] for coef in (0.0, beta)}
    kl = Actor(1.0, "k1")._compute_advantages(reward_data())["kl_rewards"]          # −k per position
    values = [kl_harness.as_list(-kl[i, :width]) for i in range(len(batch["rewards"]))]
    penalty = [kl_harness.as_list((advantages[0.0] - advantages[beta])[i, :width]) for i in range(len(values))]
    numbers.reward("areal:kl_in_reward", f"actor.kl_ctl {beta}, kl_estimator k1, discount = gae_lambda = 1, no critic",
                   beta, values, penalty, float32=True,
                   probe=kl_harness.probe_values(KLEstimator("k1"), "k1", 10.0))


def main():
    numbers = kl_harness.KLNumbers("areal", REPOSITORY, COMMIT, "tests/catalogue/reference/areal/kl_generate.py")
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
