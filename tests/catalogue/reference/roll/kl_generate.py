"""ROLL 8eb27cc: the KL to the reference as its code computes it: use_kl_loss (k3 hard-coded in the actor worker,
its value clamped to ±10 by compute_approx_kl) and add_token_level_kl (kl_penalty "kl" by default, init_kl_coef
0.2) with the reinforce/grpo return, a cumulative sum (gamma 1); writes kl_numbers.json beside this file (see
../kl_harness.py).

Copied verbatim (blocks below): compute_approx_kl, expand_to_token_level, compute_token_reward and
compute_reinforce_return (roll/utils/functionals.py), and the actor worker's kl_loss line
(roll/pipeline/rlvr/actor_pg_worker.py) inside a stand-in (agg_loss summing the tokens). DataProto is a stand-in (a
batch dict with rename), the KL controller a fixed one (value β, update a no-op); masked_mean only feeds a metric.
Each sequence is one prompt token then its response (ROLL's log-probs and masks are of the next token).

    python tests/catalogue/reference/roll/kl_generate.py
"""

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPOSITORY, COMMIT = "alibaba/ROLL", "8eb27cc2dc34c4d1310b169d9b86d339004d811a"
PPOConfig = AdaptiveKLController = DataProto = object
compute_clip_fraction = None             # not reached: reward_clip None


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 181-211
def compute_approx_kl(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    action_mask: Optional[torch.Tensor] = None,
    kl_penalty: str = "kl",
) -> torch.Tensor:
    """
    ref: https://github.com/OpenRLHF/OpenRLHF/blob/494850f50342ed38d5ae76ef45a3207f3523b582/openrlhf/models/utils.py#L7
    Compute the approximate KL divergence between two distributions.
    Schulman blog: http://joschu.net/blog/kl-approx.html
    """
    if kl_penalty == "kl":
        log_ratio = log_probs - log_probs_base
    elif kl_penalty == "abs":
        log_ratio = (log_probs - log_probs_base).abs()
    elif kl_penalty == "mse":
        log_ratio = 0.5 * (log_probs - log_probs_base).square()
    elif kl_penalty == "k3":
        kl = log_probs_base - log_probs
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        log_ratio = torch.clamp(kld, min=-10, max=10)
    elif kl_penalty == "full":
        log_ratio = F.kl_div(log_probs_base, log_probs, log_target=True, reduction="none").sum(-1)
    else:
        raise NotImplementedError

    if action_mask is not None:
        return log_ratio * action_mask

    return log_ratio
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 488-499
def compute_reinforce_return(token_level_rewards: torch.Tensor, gamma: torch.Tensor, lambd: torch.Tensor):
    with torch.no_grad():
        advantages_reversed = []
        gen_len = token_level_rewards.shape[-1]
        cumulative_reward = 0
        for t in reversed(range(gen_len)):
            local_reward = token_level_rewards[:, t] if t < gen_len else 0.0
            cumulative_reward = local_reward + gamma * cumulative_reward
            advantages_reversed.append(cumulative_reward)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        returns = advantages
    return advantages, returns
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 541-561
def expand_to_token_level(data: "DataProto"):
    response_level_rewards = data.batch["response_level_rewards"].clone().detach()
    batch_size = data.batch.batch_size[0]
    # expand as token_level_rewards
    attention_mask = data.batch["attention_mask"]
    position_ids = data.batch["position_ids"]
    if position_ids.dim() == 3:
        # qwen2vl, (bsz, 3, seqlen), 0/1/2 is same for text, while values of
        # position_ids for text cannot stand for index of tokens, thus use the
        # right padding attention_mask to calculate eos index or `argmax` rather
        # than `max` of position_ids to calculate eos index
        position_ids = position_ids[:, 0]
    eos_mask_idx = torch.argmax(position_ids * attention_mask, dim=-1)  # (bsz,)
    token_level_rewards = torch.zeros_like(attention_mask, dtype=response_level_rewards.dtype)  # (bsz, seqlen)

    token_level_rewards[torch.arange(batch_size), eos_mask_idx] = response_level_rewards

    # select the response part
    token_level_rewards = token_level_rewards[:, 1:]

    return token_level_rewards
# end verbatim


# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/utils/functionals.py 614-647
@torch.no_grad()
def compute_token_reward(data: "DataProto", pipeline_config: PPOConfig, kl_ctrl: AdaptiveKLController):
    token_level_rewards = expand_to_token_level(data)
    beta = 0
    kld = compute_approx_kl(
        log_probs=data.batch["old_log_probs"],
        log_probs_base=data.batch["ref_log_probs"],
        action_mask=data.batch["response_mask"][:, 1:],
        kl_penalty=pipeline_config.kl_penalty,
    )
    # 是否添加token level kl
    if pipeline_config.add_token_level_kl and "ref_log_probs" in data.batch.keys():
        beta = kl_ctrl.value
        token_level_rewards = token_level_rewards - beta * kld

    current_kl = masked_mean(kld, mask=data.batch["response_mask"][:, 1:], dim=-1)
    current_kl = torch.mean(current_kl, dim=0).item()

    kl_ctrl.update(current=current_kl, n_steps=data.batch.batch_size[0])
    if "token_level_rewards" in data.batch.keys():
        data.rename(old_keys="token_level_rewards", new_keys="token_level_scores")
    metrics = {"critic/kl": current_kl, "critic/kl_coef": beta}

    if pipeline_config.reward_clip:
        reward_clip_frac = compute_clip_fraction(
            values=token_level_rewards, clip_max=pipeline_config.reward_clip, clip_min=-pipeline_config.reward_clip
        )
        metrics["critic/token_reward_clip_frac"] = reward_clip_frac
        token_level_rewards = torch.clamp(
            token_level_rewards, min=-pipeline_config.reward_clip, max=pipeline_config.reward_clip
        )

    data.batch["token_level_rewards"] = token_level_rewards
    return data, metrics
# end verbatim


def masked_mean(values, mask, dim=None):
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim)


def agg_loss(loss_mat, loss_mask, **_):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return (loss_mat * loss_mask).sum()


def kl_loss_line(log_probs, ref_log_probs, final_response_mask):
    """The actor worker's KL loss (actor_pg_worker.py 118–124), aggregated by the stand-in."""
    if True:
# verbatim: alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a roll/pipeline/rlvr/actor_pg_worker.py 118-120
        kl_loss = compute_approx_kl(
            log_probs=log_probs, log_probs_base=ref_log_probs, action_mask=final_response_mask, kl_penalty="k3"
        )
# end verbatim
        return agg_loss(loss_mat=kl_loss, loss_mask=final_response_mask)


class Batch(dict):
    @property
    def batch_size(self):
        return [len(self["attention_mask"])]


class Data:
    def __init__(self, **batch):
        self.batch = Batch(batch)

    def rename(self, old_keys, new_keys):
        self.batch[new_keys] = self.batch.pop(old_keys)


class FixedController:
    def __init__(self, value):
        self.value = value

    def update(self, current, n_steps):
        pass


def loss_numbers(numbers):
    tokens = kl_harness.loss_tokens("k3", 10.0)

    def term_of(log_pi, log_old, log_mu, log_ref):
        return compute_approx_kl(log_pi, log_ref, kl_penalty="k3")

    def loss_of(log_pi, log_old, log_mu, log_ref):
        return kl_loss_line(log_pi, log_ref, torch.ones_like(log_pi))

    term = kl_harness.per_token(term_of, tokens)[0]
    derivative = kl_harness.per_token(loss_of, tokens)[1]
    numbers.loss("roll:kl_loss", "use_kl_loss (kl_penalty k3 in the worker)", tokens, term, derivative)


def reward_data():
    batch = kl_harness.REWARD_BATCH
    rows, width = len(batch["rewards"]), len(batch["mask"][0]) + 1
    attention_mask = torch.zeros(rows, width, dtype=torch.long)
    response_mask = torch.zeros(rows, width)
    for i, mask in enumerate(batch["mask"]):
        attention_mask[i, :1 + sum(mask)] = 1
        response_mask[i, 1:1 + sum(mask)] = 1
    return Data(response_level_rewards=torch.tensor(batch["rewards"], dtype=torch.float64),
                attention_mask=attention_mask, position_ids=torch.arange(width).repeat(rows, 1),
                response_mask=response_mask, old_log_probs=torch.tensor(batch["log_old"], dtype=torch.float64),
                ref_log_probs=torch.tensor(batch["log_ref"], dtype=torch.float64))


def reward_numbers(numbers):
    beta = 0.5
    config = SimpleNamespace(add_token_level_kl=True, kl_penalty="kl", reward_clip=None)
    returns = {}
    for coef in (0.0, beta):
        data, _ = compute_token_reward(reward_data(), config, FixedController(coef))
        returns[coef] = compute_reinforce_return(data.batch["token_level_rewards"], gamma=1.0, lambd=1.0)[0]
    data = reward_data()
    values = compute_approx_kl(data.batch["old_log_probs"], data.batch["ref_log_probs"],
                               data.batch["response_mask"][:, 1:], "kl")
    numbers.reward("roll:token_level_kl", f"add_token_level_kl, kl_penalty kl, init_kl_coef {beta}, reinforce returns",
                   beta, [kl_harness.as_list(v) for v in values],
                   [kl_harness.as_list(v) for v in (returns[0.0] - returns[beta]) * data.batch["response_mask"][:, 1:]],
                   probe=kl_harness.probe_values(lambda old, ref: compute_approx_kl(old, ref, kl_penalty="kl"), "k1"))


def main():
    numbers = kl_harness.KLNumbers("roll", REPOSITORY, COMMIT, "tests/catalogue/reference/roll/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
