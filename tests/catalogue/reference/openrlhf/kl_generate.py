"""OpenRLHF 3c3be62: the KL to the reference as its code computes it: by default in the reward (--algo.kl.init_coef
0.01, --algo.kl.estimator k1), per token, as a cumulative return in the REINFORCE family; and with
--algo.kl.use_loss in the actor's loss (k1, k2, k3), every estimator's value clamped to ±10; writes kl_numbers.json
beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): compute_approx_kl and compute_reward (openrlhf/models/utils.py), get_cumulative_returns
(openrlhf/trainer/ppo_utils/experience_maker.py, as a method of a stand-in) and the KL block of the actor's training
step (openrlhf/trainer/ray/ppo_actor.py) inside a stand-in holding what it reads (args, experience's action_mask,
aggregate_loss summing the tokens, masked_mean, an actor loss of 0, kl_ctl 1). compute_approx_kl casts the
log-probabilities to float32: its numbers are float32's. The reward's penalty is the cumulative returns (γ = 1) of
compute_reward's rewards without the KL minus with it.

    python tests/catalogue/reference/openrlhf/kl_generate.py
"""

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Tuple, Union

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7"


# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/models/utils.py 64-126
def compute_approx_kl(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    kl_estimator: str = "k1",
) -> torch.Tensor:
    """
    Compute the approximate KL divergence between two distributions.
    Schulman blog: http://joschu.net/blog/kl-approx.html

    Args:
        log_probs: Log probabilities of the new distribution.
        log_probs_base: Log probabilities of the base distribution.
    """

    log_ratio = log_probs.float() - log_probs_base.float()

    if kl_estimator == "k1":
        pass  # log_ratio is already p - q
    elif kl_estimator == "k2":
        # Non-negative KL approximation: (p - q)^2 / 2
        # http://joschu.net/blog/kl-approx.html
        # Approximately equivalent to one-step KL penalty with k1
        # used in https://arxiv.org/pdf/2310.10505.
        log_ratio = log_ratio**2 / 2.0
    elif kl_estimator == "k3":
        # Non-negative KL approximation: exp(q - p) - 1 - (q - p)
        # http://joschu.net/blog/kl-approx.html
        log_ratio = (-log_ratio).exp() - 1 + log_ratio
    else:
        raise ValueError(f"Unknown kl_estimator: {kl_estimator}")

    return log_ratio.clamp(min=-10, max=10)


def compute_reward(
    r: Union[torch.Tensor, float],
    kl_coef: float,
    kl: Union[torch.Tensor, list[torch.Tensor]],
    action_mask: Optional[torch.Tensor] = None,
    reward_clip_range: Tuple[float, float] = None,
) -> Union[torch.Tensor, list[torch.Tensor]]:
    if kl_coef <= 0.0:
        kl_coef = 0.0

    if reward_clip_range:
        r = r.clamp(min=reward_clip_range[0], max=reward_clip_range[1])

    kl_reward = -kl_coef * kl
    # The following code is equivalent to:
    #
    # last_reward = torch.zeros_like(kl)
    # for i in range(last_reward.size(0)):
    #     for t in reversed(range(last_reward.size(1))):
    #         if action_mask[i][t] > 0.5:
    #             last_reward[i][t] = r[i]
    #             break
    #
    eos_indices = action_mask.size(1) - 1 - action_mask.long().fliplr().argmax(dim=1, keepdim=True)
    last_reward = torch.zeros_like(kl).scatter_(dim=1, index=eos_indices, src=r.unsqueeze(1).to(kl.dtype))

    reward = last_reward + kl_reward

    return reward
# end verbatim


class Maker:
# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/trainer/ppo_utils/experience_maker.py 379-412
    @torch.no_grad()
    def get_cumulative_returns(
        self,
        rewards: torch.Tensor,
        action_mask: torch.Tensor,
        gamma: float,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        Function that computes advantages and returns from rewards using REINFORCE.
        REINFORCE uses cumulative returns without the GAE (Generalized Advantage Estimation).

        Input:
        - rewards: Tensor of shape (batch_size, response_size)
        - action_mask: Tensor of shape (batch_size, response_size), binary mask
        - gamma: discount factor

        Output:
        - returns: Tensor of shape (batch_size, response_size)
        """
        response_length = rewards.size(1)
        returns = torch.zeros_like(rewards)
        cumulative_return = torch.zeros(rewards.size(0), device=rewards.device)

        # Mask invalid responses if action_mask is provided
        if action_mask is not None:
            rewards = action_mask * rewards

        # Calculate returns by accumulating discounted rewards
        for t in reversed(range(response_length)):
            cumulative_return = rewards[:, t] + gamma * cumulative_return
            returns[:, t] = cumulative_return

        return returns
# end verbatim


def aggregate_loss(loss, mask, **_):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return (loss * mask).sum()


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


class Actor:
    def __init__(self, estimator):
        self.args = SimpleNamespace(algo=SimpleNamespace(kl=SimpleNamespace(use_loss=True, init_coef=1.0,
                                                                             estimator=estimator)))

    def kl_loss(self, action_log_probs, base_action_log_probs, experience, actor_loss=0.0, kl_ctl=1.0,
                loss_batch_info=None):
        loss_batch_info = loss_batch_info or {}
# verbatim: OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/trainer/ray/ppo_actor.py 319-337
        if self.args.algo.kl.use_loss:
            if self.args.algo.kl.init_coef > 0:
                kl = compute_approx_kl(
                    action_log_probs,
                    base_action_log_probs,
                    kl_estimator=self.args.algo.kl.estimator,
                )
                logprobs_diff = action_log_probs.float() - base_action_log_probs.float()
            else:
                kl = torch.zeros_like(action_log_probs)
                logprobs_diff = torch.zeros_like(action_log_probs)
            kl_loss = aggregate_loss(kl, experience.action_mask, **loss_batch_info)
            logprobs_diff = masked_mean(logprobs_diff, experience.action_mask)
            experience.info["kl"] = kl_loss.detach()
            experience.info["logprobs_diff"] = logprobs_diff.detach()
        else:
            kl_loss = 0

        loss = actor_loss + kl_loss * kl_ctl
# end verbatim
        return loss


LOSS_PRESETS = {"openrlhf:kl_loss": "k3"}


def loss_numbers(numbers):
    for preset, estimator in LOSS_PRESETS.items():
        tokens = kl_harness.loss_tokens(estimator, 10.0)
        actor = Actor(estimator)

        def term_of(log_pi, log_old, log_mu, log_ref, actor=actor):
            return compute_approx_kl(log_pi, log_ref, kl_estimator=actor.args.algo.kl.estimator)

        def loss_of(log_pi, log_old, log_mu, log_ref, actor=actor):
            return actor.kl_loss(log_pi, log_ref, SimpleNamespace(action_mask=torch.ones_like(log_pi), info={}))

        term = kl_harness.per_token(term_of, tokens)[0]
        derivative = kl_harness.per_token(loss_of, tokens)[1]
        numbers.loss(preset, f"--algo.kl.use_loss --algo.kl.estimator {estimator}", tokens, term, derivative,
                     float32=True)


def reward_numbers(numbers):
    beta = 0.5
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    old, ref = (torch.tensor(batch[name], dtype=torch.float64) for name in ("log_old", "log_ref"))
    kl = compute_approx_kl(old, ref, kl_estimator="k1") * mask
    rewards = torch.tensor(batch["rewards"], dtype=torch.float64)

    def returns(coef):
        reward = compute_reward(rewards, coef, kl.double(), action_mask=mask)
        return Maker().get_cumulative_returns(reward, mask, 1.0)

    numbers.reward("openrlhf:kl_in_reward", f"--algo.kl.init_coef {beta} --algo.kl.estimator k1, REINFORCE returns",
                   beta, [kl_harness.as_list(v) for v in kl], [kl_harness.as_list(v) for v in returns(0.0) - returns(beta)],
                   float32=True, probe=kl_harness.probe_values(lambda old, ref: compute_approx_kl(old, ref, "k1"), "k1", 10.0))


def main():
    numbers = kl_harness.KLNumbers("openrlhf", REPOSITORY, COMMIT, "tests/catalogue/reference/openrlhf/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
