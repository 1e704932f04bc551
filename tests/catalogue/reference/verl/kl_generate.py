"""verl 1dda039: the KL to the reference as its code computes it, in the loss (actor.use_kl_loss, every kl_loss_type:
low_var_kl, k1/kl, k2/mse, abs and the straight-through k1+, k3+, abs+) and in the reward (algorithm.use_kl_in_reward
with GRPO's outcome advantage); writes kl_numbers.json beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): FixedKLController, kl_penalty and kl_penalty_forward and
compute_grpo_outcome_advantage (verl/trainer/ppo/core_algos.py), apply_kl_penalty (verl/trainer/ppo/ray_trainer.py)
and the KL block of ppo_loss (verl/workers/utils/losses.py), the latter inside a stand-in holding what it reads
(config with use_kl_loss, kl_loss_type, kl_loss_coef 1, an agg_loss summing the tokens, a pg_loss of 0).
masked_mean is a stand-in: it only feeds the logged current_kl. The loss's derivative is autograd's of that block's
policy_loss; the reward's penalty is GRPO's advantage (each sequence its own group, whose mean verl takes as 0;
norm_adv_by_std_in_grpo False) without the KL minus with it.

    python tests/catalogue/reference/verl/kl_generate.py
"""

import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9"
AlgoConfig = DataProto = object


# verbatim: verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/trainer/ppo/core_algos.py 177-190
class FixedKLController:
    """Fixed KL controller."""

    def __init__(self, kl_coef):
        self.value = kl_coef

    def update(self, current_kl, n_steps):
        """Update method for fixed KL controller (no-op).

        Args:
            current_kl (float): Current KL divergence value (unused).
            n_steps (int): Number of steps taken (unused).
        """
        pass
# end verbatim


# verbatim: verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/trainer/ppo/core_algos.py 2187-2250
def kl_penalty(logprob: torch.FloatTensor, ref_logprob: torch.FloatTensor, kl_penalty) -> torch.FloatTensor:
    """Compute KL divergence given logprob and ref_logprob. Optionally using straight through to bind k2 on other
    kl penalty compute method for unbiased KL gradient estimation.
    See more description in http://joschu.net/blog/kl-approx.html

    Args:
        logprob:
        ref_logprob:

    Returns:
        kl_estimate
    """
    # Strip the optional '+' suffix so e.g. "k3+" dispatches to "k3".
    base_kl_penalty = kl_penalty[:-1] if kl_penalty.endswith("+") else kl_penalty
    forward_score = kl_penalty_forward(logprob, ref_logprob, base_kl_penalty)
    if not kl_penalty.endswith("+") or kl_penalty in ("mse", "k2"):
        return forward_score

    """
    The expectation of k1 and k3 estimator is the expected value of KL, but the expected gradient of k1 and k3
    estimator is not the expected gradient of KL. On the other hand k2 estimator gives right gradient estimator, 
    so we use a straight through trick here if the kl_penalty method ends with '+', e.g., k3+. 
    """
    backward_score = 0.5 * (logprob - ref_logprob).square()

    return backward_score - backward_score.detach() + forward_score.detach()


def kl_penalty_forward(logprob: torch.FloatTensor, ref_logprob: torch.FloatTensor, kl_penalty) -> torch.FloatTensor:
    """Compute KL divergence given logprob and ref_logprob.
    Copied from https://github.com/huggingface/trl/blob/main/trl/trainer/ppo_trainer.py#L1104
    See more description in http://joschu.net/blog/kl-approx.html

    Args:
        logprob:
        ref_logprob:

    Returns:
        kl_estimate
    """
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob

    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()

    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()

    # J. Schulman. Approximating kl divergence, 2020.
    # # URL http://joschu.net/blog/kl-approx.html.
    if kl_penalty in ("low_var_kl", "k3"):
        kl = ref_logprob - logprob
        # For numerical stability
        kl = torch.clamp(kl, min=-20, max=20)
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        return torch.clamp(kld, min=-10, max=10)

    if kl_penalty == "full":
        # so, here logprob and ref_logprob should contain the logits for every token in vocabulary
        raise NotImplementedError

    raise NotImplementedError
# end verbatim


# verbatim: verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/trainer/ppo/core_algos.py 268-331
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Optional[AlgoConfig] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantage for GRPO, operating only on Outcome reward
    (with only one scalar reward for each response).

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length)
        index: `(np.ndarray)`
            index array for grouping
        epsilon: `(float)`
            small value to avoid division by zero
        norm_adv_by_std_in_grpo: `(bool)`
            whether to scale the GRPO advantage
        config: `(Optional[AlgoConfig])`
            algorithm configuration object

    Note:
        If norm_adv_by_std_in_grpo is True, the advantage is scaled by the std, as in the original GRPO.
        If False, the advantage is not scaled, as in Dr.GRPO (https://arxiv.org/abs/2503.20783).

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        Returns: `(torch.Tensor)`
            shape is (bs, response_length)
    """
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores
# end verbatim


core_algos = SimpleNamespace(kl_penalty=kl_penalty, AdaptiveKLController=FixedKLController)


def masked_mean(values, mask, axis=None):
    """Stand-in for verl.utils.torch_functional.masked_mean: feeds the logged current_kl only."""
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


# verbatim: verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/trainer/ppo/ray_trainer.py 78-117
def apply_kl_penalty(data: DataProto, kl_ctrl: core_algos.AdaptiveKLController, kl_penalty="kl"):
    """Apply KL penalty to the token-level rewards.

    This function computes the KL divergence between the reference policy and current policy,
    then applies a penalty to the token-level rewards based on this divergence.

    Args:
        data (DataProto): The data containing batched model outputs and inputs.
        kl_ctrl (core_algos.AdaptiveKLController): Controller for adaptive KL penalty.
        kl_penalty (str, optional): Type of KL penalty to apply. Defaults to "kl".

    Returns:
        tuple: A tuple containing:
            - The updated data with token-level rewards adjusted by KL penalty
            - A dictionary of metrics related to the KL penalty
    """
    response_mask = data.batch["response_mask"]
    token_level_scores = data.batch["token_level_scores"]
    batch_size = data.batch.batch_size[0]

    # compute kl between ref_policy and current policy
    # When apply_kl_penalty, algorithm.use_kl_in_reward=True, so the reference model has been enabled.
    kld = core_algos.kl_penalty(
        data.batch["old_log_probs"], data.batch["ref_log_prob"], kl_penalty=kl_penalty
    )  # (batch_size, response_length)
    kld = kld * response_mask
    beta = kl_ctrl.value

    token_level_rewards = token_level_scores - beta * kld

    current_kl = masked_mean(kld, mask=response_mask, axis=-1)  # average over sequence
    current_kl = torch.mean(current_kl, dim=0).item()

    # according to https://github.com/huggingface/trl/blob/951ca1841f29114b969b57b26c7d3e80a39f75a0/trl/trainer/ppo_trainer.py#L837
    kl_ctrl.update(current_kl=current_kl, n_steps=batch_size)
    data.batch["token_level_rewards"] = token_level_rewards

    metrics = {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}

    return data, metrics
# end verbatim


def agg_loss(loss_mat, loss_mask, loss_agg_mode, **_):
    """Stand-in: the sum over the tokens, so that each token's gradient is its own term's."""
    return (loss_mat * loss_mask).sum()


class Metric:
    def __init__(self, value, aggregation):
        self.value = value


def kl_loss_block(config, log_prob, data, response_mask, metric_aggregation=None):
    """ppo_loss's KL block (losses.py 131–142) on a pg_loss of 0."""
    policy_loss = torch.zeros((), dtype=torch.float64)
    metrics = {}
# verbatim: verl-project/verl 1dda039b9c6311889a9c9a26040677e1254814f9 verl/workers/utils/losses.py 131-142
    # add kl loss
    if config.use_kl_loss:
        ref_log_prob = data["ref_log_prob"]
        # compute kl loss
        kld = kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=config.kl_loss_type)
        kl_loss = agg_loss(
            loss_mat=kld, loss_mask=response_mask, loss_agg_mode=config.loss_agg_mode, **config.global_batch_info
        )

        policy_loss += kl_loss * config.kl_loss_coef
        metrics["kl_loss"] = Metric(value=kl_loss, aggregation=metric_aggregation)
        metrics["kl_coef"] = config.kl_loss_coef
# end verbatim
    return policy_loss


class Batch(dict):
    @property
    def batch_size(self):
        return [len(self["response_mask"])]


LOSS_TYPES = {"verl:kl_loss": ("low_var_kl", "k3", 10.0), "verl:kl_loss_k1": ("k1", "k1", None),
              "verl:kl_loss_k2": ("k2", "k2", None), "verl:kl_loss_abs": ("abs", "abs", None),
              "verl:kl_loss_k3+": ("k3+", "k3", 10.0), "verl:kl_loss_k1+": ("k1+", "k1", None),
              "verl:kl_loss_abs+": ("abs+", "abs", None)}
ALIASES = {"verl:kl_loss": ("k3",), "verl:kl_loss_k1": ("kl",), "verl:kl_loss_k2": ("mse", "k2+", "mse+"),
           "verl:kl_loss_k3+": ("low_var_kl+",), "verl:kl_loss_k1+": ("kl+",)}


def loss_numbers(numbers):
    for preset, (kl_loss_type, estimator, value_clamp) in LOSS_TYPES.items():
        tokens = kl_harness.loss_tokens(estimator, value_clamp)
        for setting in (kl_loss_type, *ALIASES.get(preset, ())):
            config = SimpleNamespace(use_kl_loss=True, kl_loss_type=setting, kl_loss_coef=1.0,
                                     loss_agg_mode="token-mean", global_batch_info={})

            def term_of(log_pi, log_old, log_mu, log_ref, config=config):
                return kl_penalty(log_pi, log_ref, config.kl_loss_type)

            def loss_of(log_pi, log_old, log_mu, log_ref, config=config):
                data = {"ref_log_prob": log_ref}
                return kl_loss_block(config, log_pi, data, torch.ones_like(log_pi))

            term = kl_harness.per_token(term_of, tokens)[0]
            derivative = kl_harness.per_token(loss_of, tokens)[1]
            numbers.loss(preset, f"kl_loss_type={setting}", tokens, term, derivative)


def grpo_returns(beta, kl_type):
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    scores = torch.zeros_like(mask)
    last = mask.sum(dim=-1).long() - 1
    scores[torch.arange(len(last)), last] = torch.tensor(batch["rewards"], dtype=torch.float64)
    data = SimpleNamespace(batch=Batch(response_mask=mask, token_level_scores=scores,
                                       old_log_probs=torch.tensor(batch["log_old"], dtype=torch.float64),
                                       ref_log_prob=torch.tensor(batch["log_ref"], dtype=torch.float64)))
    data, _ = apply_kl_penalty(data, FixedKLController(beta), kl_penalty=kl_type)
    advantages, _ = compute_grpo_outcome_advantage(data.batch["token_level_rewards"], mask,
                                                   index=np.arange(len(last)), norm_adv_by_std_in_grpo=False)
    values = kl_penalty(data.batch["old_log_probs"], data.batch["ref_log_prob"], kl_type) * mask
    return advantages, values


def reward_numbers(numbers):
    beta = 0.5
    for kl_type in ("kl", "k1"):
        with_kl, values = grpo_returns(beta, kl_type)
        without, _ = grpo_returns(0.0, kl_type)
        numbers.reward("verl:kl_in_reward", f"kl_penalty={kl_type}, adv_estimator grpo", beta,
                       [kl_harness.as_list(v) for v in values], [kl_harness.as_list(v) for v in without - with_kl],
                       probe=kl_harness.probe_values(lambda old, ref: kl_penalty(old, ref, kl_type), "k1"))


def main():
    numbers = kl_harness.KLNumbers("verl", REPOSITORY, COMMIT, "tests/catalogue/reference/verl/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
