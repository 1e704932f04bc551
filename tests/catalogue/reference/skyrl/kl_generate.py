"""SkyRL a956457: the KL to the reference as its code computes it: use_kl_loss (on by default, kl_estimator_type k3
with its log ratio clamped to ±20 and value to ±10, kl_loss_coef 0.001) and use_kl_in_reward (the token rewards less
β·k, summed by GRPO's outcome advantage); writes kl_numbers.json beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): compute_approx_kl and compute_grpo_outcome_advantage
(skyrl/backends/skyrl_train/utils/ppo_utils.py), the worker's KL loss block (skyrl/backends/skyrl_train/workers/
worker.py) and RayPPOTrainer.apply_reward_kl_penalty (skyrl/train/trainer.py), as methods of stand-ins holding what
they read (cfg.algorithm and cfg.trainer.algorithm, no KL controller, masked_mean summing the tokens in the loss;
a dict with metadata for the batch). GRPO's advantage runs with each sequence its own group (mean 0) and
grpo_norm_by_std false.

    python tests/catalogue/reference/skyrl/kl_generate.py
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

REPOSITORY, COMMIT = "NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265"
TrainingInputBatch = dict
Float = None                             # a jaxtyping annotation of a local variable: never evaluated


def masked_mean(values, mask, dim=None):
    """Stand-in: in the loss, the sum over the tokens (each token's gradient is its own term's); elsewhere a mean."""
    return (values * mask).sum(dim=dim) if dim == -1 and values.shape[0] == 1 else \
        (values * mask).sum(dim=dim) / mask.sum(dim=dim)


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 88-126
def compute_approx_kl(
    log_probs: torch.Tensor,
    log_probs_base: torch.Tensor,
    loss_mask: Optional[torch.Tensor] = None,
    kl_estimator_type: str = "k3",
) -> torch.Tensor:
    """
    Compute the approximate KL divergence between two distributions.
    Schulman blog: http://joschu.net/blog/kl-approx.html

    Args:
        log_probs: Log probabilities of the new distribution.
        log_probs_base: Log probabilities of the base distribution.
        loss_mask: Optional mask over trainable response tokens.
        kl_estimator_type: One of ``k1``, ``abs``, ``k2``, or ``k3``.
    """
    if kl_estimator_type == "k1":
        kld = log_probs - log_probs_base
    elif kl_estimator_type == "abs":
        kld = (log_probs - log_probs_base).abs()
    elif kl_estimator_type == "k2":
        kld = 0.5 * (log_probs - log_probs_base).square()
    # J. Schulman. Approximating kl divergence, 2020.
    # URL http://joschu.net/blog/kl-approx.html.
    elif kl_estimator_type == "k3":
        kl = log_probs_base - log_probs
        # For numerical stability
        kl = torch.clamp(kl, min=-20, max=20)
        ratio = torch.exp(kl)
        kld = (ratio - kl - 1).contiguous()
        kld = torch.clamp(kld, min=-10, max=10)
    else:
        raise ValueError(f"Invalid KL estimator type: {kl_estimator_type}")

    if loss_mask is not None:
        # Multiplying by `loss_mask` can leak `nan` from masked positions,
        # so route masked positions to 0.0 directly while keeping mask scaling elsewhere
        kld = torch.where(loss_mask.bool(), kld * loss_mask, 0.0)
    return kld
# end verbatim


# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/utils/ppo_utils.py 1344-1394
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    grpo_norm_by_std: bool = True,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantage for GRPO, operating only on Outcome reward (with only one scalar reward for each response).

    Expects:
        - token_level_rewards: Float[torch.Tensor, "batch_size response_len"]
        - response_mask: Float[torch.Tensor, "batch_size response_len"]
        - index: np.ndarray (batch_size)
        - epsilon: float
        - grpo_norm_by_std: bool

    Returns:
        - advantages: Float[torch.Tensor, "batch_size response_len"]
        - returns: Float[torch.Tensor, "batch_size response_len"]
    """
    # this assumes response-level rewards
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
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if grpo_norm_by_std:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores

# end verbatim


class Worker:
    def __init__(self):
        self.cfg = SimpleNamespace(algorithm=SimpleNamespace(use_kl_loss=True, kl_estimator_type="k3",
                                                             kl_loss_coef=1.0))

    def kl_loss(self, action_log_probs, base_action_log_probs, loss_mask):
        if True:
# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/backends/skyrl_train/workers/worker.py 1069-1080
            # kl loss
            if self.cfg.algorithm.use_kl_loss:
                kl_loss = compute_approx_kl(
                    action_log_probs,
                    base_action_log_probs,
                    loss_mask=loss_mask,
                    kl_estimator_type=self.cfg.algorithm.kl_estimator_type,
                )
                kl_loss = masked_mean(kl_loss, loss_mask, dim=-1).mean()
            else:
                kl_loss = torch.tensor(0.0)
            kl_loss_term = kl_loss * self.cfg.algorithm.kl_loss_coef
# end verbatim
            return kl_loss_term


class Batch(dict):
    metadata: dict


class Trainer:
    def __init__(self, beta):
        self.cfg = SimpleNamespace(trainer=SimpleNamespace(algorithm=SimpleNamespace(kl_estimator_type="k3",
                                                                                     kl_loss_coef=beta)))
        self.reward_kl_controller = None
        self.all_metrics = {}

# verbatim: NovaSky-AI/SkyRL a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/train/trainer.py 1409-1464
    def apply_reward_kl_penalty(
        self,
        data: TrainingInputBatch,
    ) -> TrainingInputBatch:
        """Applies a penalty for KL divergence between the policy log probs and the base model log probs to the rewards."""
        loss_masks_all: torch.Tensor = data["loss_mask"]
        rewards: torch.Tensor = data["rewards"]
        base_action_log_probs: torch.Tensor = data["base_action_log_probs"]
        action_log_probs: torch.Tensor = data["action_log_probs"]

        # single batched computation
        with torch.no_grad():
            kl: Float[torch.Tensor, "batch_size response_len"] = compute_approx_kl(  # type: ignore
                action_log_probs,
                base_action_log_probs,
                loss_mask=loss_masks_all,
                kl_estimator_type=self.cfg.trainer.algorithm.kl_estimator_type,
            )
        kl_max: Float[torch.Tensor, "batch_size"] = torch.max(kl.abs(), dim=-1)[0]  # noqa: F821
        kl_mean: Float[torch.Tensor, "batch_size"] = masked_mean(kl, loss_masks_all, dim=-1)  # noqa: F821

        # NOTE (erictang000): only supporting custom rewards currently
        kl_loss_coef = (
            self.reward_kl_controller.value
            if self.reward_kl_controller is not None
            else self.cfg.trainer.algorithm.kl_loss_coef
        )
        rewards = rewards - kl * max(0, kl_loss_coef)
        data["rewards"] = rewards

        avg_kl: float = kl_mean.mean().item()
        avg_kl_max: float = kl_max.mean().item()

        # update the kl controller
        if self.reward_kl_controller is not None:
            self.reward_kl_controller.update(current=avg_kl, n_steps=kl.shape[0])  # n_steps is just the batch size
        if "metrics" not in data.metadata:
            data.metadata["metrics"] = {}

        data.metadata["metrics"].update(
            {
                "avg_kl": avg_kl,
                "avg_kl_max": avg_kl_max,
                "kl_loss_coef": kl_loss_coef,
            }
        )

        self.all_metrics.update(
            {
                "loss/avg_kl": avg_kl,
                "loss/avg_kl_max": avg_kl_max,
                "loss/kl_loss_coef": kl_loss_coef,
            }
        )

        return data
# end verbatim


def loss_numbers(numbers):
    tokens = kl_harness.loss_tokens("k3", 10.0)

    def term_of(log_pi, log_old, log_mu, log_ref):
        return compute_approx_kl(log_pi, log_ref, kl_estimator_type="k3")

    def loss_of(log_pi, log_old, log_mu, log_ref):
        return Worker().kl_loss(log_pi, log_ref, torch.ones_like(log_pi))

    term = kl_harness.per_token(term_of, tokens)[0]
    derivative = kl_harness.per_token(loss_of, tokens)[1]
    numbers.loss("skyrl:kl_loss", "use_kl_loss, kl_estimator_type k3", tokens, term, derivative)


def reward_numbers(numbers):
    beta = 0.5
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    old, ref = (torch.tensor(batch[name], dtype=torch.float64) for name in ("log_old", "log_ref"))
    advantages = {}
    for coef in (0.0, beta):
        rewards = torch.zeros_like(mask)
        last = mask.sum(dim=-1).long() - 1
        rewards[torch.arange(len(last)), last] = torch.tensor(batch["rewards"], dtype=torch.float64)
        data = Batch(loss_mask=mask, rewards=rewards, base_action_log_probs=ref, action_log_probs=old)
        data.metadata = {}
        data = Trainer(coef).apply_reward_kl_penalty(data)
        advantages[coef] = compute_grpo_outcome_advantage(data["rewards"], mask, np.arange(len(last)),
                                                          grpo_norm_by_std=False)[0]
    numbers.reward("skyrl:kl_in_reward", f"use_kl_in_reward, kl_estimator_type k3, kl_loss_coef {beta}, grpo", beta,
                   [kl_harness.as_list(v) for v in compute_approx_kl(old, ref, loss_mask=mask)],
                   [kl_harness.as_list(v) for v in advantages[0.0] - advantages[beta]],
                   probe=kl_harness.probe_values(lambda old, ref: compute_approx_kl(old, ref), "k3", 10.0))


def main():
    numbers = kl_harness.KLNumbers("skyrl", REPOSITORY, COMMIT, "tests/catalogue/reference/skyrl/kl_generate.py")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
