"""TRL f2cd577: the KL to the reference as its code computes it: GRPOTrainer's k3 in the loss (beta > 0), with and
without use_bias_correction_kl (PR #4638: the term times coef_1 = π_θ/π_old), at importance_sampling_level token;
and RLOOTrainer's k1 of the old log-probs summed into the reward; writes kl_numbers.json beside this file (see
../kl_harness.py).

Copied verbatim (blocks below): the ratio and KL lines of GRPOTrainer._compute_loss and the line adding β·KL to the
per-token loss (trl/trainer/grpo_trainer.py), inside a stand-in holding what they read (beta 1, args with
use_bias_correction_kl, importance_sampling_level "token", a per-token loss of 0 before the KL); and RLOOTrainer's
KL penalty of the rewards (trl/trainer/rloo_trainer.py), gather the identity (one process). The loss's derivative is
autograd's of the per-token loss summed over the tokens; the reward's penalty is the rewards without the KL minus
with it, per sequence, on each of its tokens.

    python tests/catalogue/reference/trl/kl_generate.py
"""

import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8"


class GRPO:
    def __init__(self, use_bias_correction_kl):
        self.beta = 1.0
        self.importance_sampling_level = "token"
        self.args = SimpleNamespace(use_bias_correction_kl=use_bias_correction_kl)

    def kl_loss(self, per_token_logps, old_per_token_logps, mask, inputs):
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py 3054-3076
        log_ratio = per_token_logps - old_per_token_logps
        if self.importance_sampling_level == "token":
            log_importance_weights = log_ratio
        elif self.importance_sampling_level == "sequence":
            log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            log_importance_weights = log_importance_weights.unsqueeze(-1)
        else:
            raise ValueError(
                f"Unknown importance sampling level: {self.importance_sampling_level}. Possible values are 'token' "
                "and 'sequence'."
            )

        coef_1 = torch.exp(log_importance_weights)

        # Compute the KL divergence between the model and the reference model
        if self.beta != 0.0:
            ref_per_token_logps = inputs["ref_per_token_logps"]
            per_token_kl = (
                torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
            )
            # Importance sampling correction for the KL divergence
            if self.args.use_bias_correction_kl:
                per_token_kl = per_token_kl * coef_1
# end verbatim
        per_token_loss = torch.zeros_like(per_token_logps)
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py 3120-3121
        if self.beta != 0.0:
            per_token_loss = per_token_loss + self.beta * per_token_kl
# end verbatim
        return per_token_loss


def gather(tensor):
    return tensor


class RLOO:
    def __init__(self, beta):
        self.beta = beta

    def penalised(self, rewards, old_per_token_logps, ref_per_token_logps, completion_mask):
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/rloo_trainer.py 1525-1535
        # Include the KL penalty in the reward
        if self.beta != 0.0:
            # RLOO uses the first-order log ratio for the per-token KL estimate, following the original RLOO paper
            # (Ahmadian et al., 2024, https://huggingface.co/papers/2405.14782). Unlike GRPOTrainer's Schulman
            # approximation (always >= 0), this can be negative per token. The divergence is intentional: RLOO applies
            # KL as a reward penalty (summed across tokens per sequence), while GRPO adds it to the per-token loss.
            per_token_kl = old_per_token_logps - ref_per_token_logps
            # Apply sequence-level KL penalty to rewards (sum KL across tokens first, then apply to each sequence)
            kl = (per_token_kl * completion_mask).sum(-1)
            kl = gather(kl)  # rewards are gathered, so kl must be too
            rewards = rewards - self.beta * kl
# end verbatim
        return rewards


def loss_numbers(numbers):
    for preset, correction in (("trl:grpo", False), ("trl:grpo_bias_correction", True)):
        tokens = kl_harness.loss_tokens("k3", ratios=correction)
        trainer = GRPO(correction)

        def term_of(log_pi, log_old, log_mu, log_ref, trainer=trainer):
            return trainer.kl_loss(log_pi, log_old, torch.ones_like(log_pi), {"ref_per_token_logps": log_ref})

        term, derivative = kl_harness.per_token(term_of, tokens)
        numbers.loss(preset, f"beta=1, use_bias_correction_kl={correction}", tokens, term, derivative)


def reward_numbers(numbers):
    beta = 0.05
    batch = kl_harness.REWARD_BATCH
    mask = torch.tensor(batch["mask"], dtype=torch.float64)
    old, ref = (torch.tensor(batch[name], dtype=torch.float64) for name in ("log_old", "log_ref"))
    rewards = torch.tensor(batch["rewards"], dtype=torch.float64)
    with_kl = RLOO(beta).penalised(rewards.clone(), old, ref, mask)
    without = RLOO(0.0).penalised(rewards.clone(), old, ref, mask)
    penalty = (without - with_kl)[:, None] * mask
    numbers.reward("trl:rloo", "RLOOConfig(beta=0.05)", beta, [kl_harness.as_list(v) for v in (old - ref) * mask],
                   [kl_harness.as_list(v) for v in penalty])


def main():
    numbers = kl_harness.KLNumbers("trl", REPOSITORY, COMMIT, "tests/catalogue/reference/trl/kl_generate.py",
                                   notes="RLOO's per-token values are old − ref, as its penalty line computes them")
    loss_numbers(numbers)
    reward_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
