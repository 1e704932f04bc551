"""open-instruct e6c3044: the KL to the reference as its code computes it: beta 0.05 and kl_estimator 2 (k3 as
expm1(−x) + x) by default, or 3 (the ratio π_θ/π_old times k1), the log ratio x clamped to ±40 first, in the loss;
writes kl_numbers.json beside this file (see ../kl_harness.py).

Copied verbatim (blocks below): estimate_kl (open_instruct/model_utils.py), compute_grpo_loss
(open_instruct/grpo_utils.py) and the two lines of the training step that take the ratio and add β·kl to the policy
loss (open_instruct/grpo_fast.py), in a stand-in (config with loss_fn dapo and the clips, advantages 0 so that the
policy loss adds nothing, ρ weights 1, beta 1).

    python tests/catalogue/reference/open_instruct/kl_generate.py
"""

import enum
import sys
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import kl_harness  # noqa: E402
import torch  # noqa: E402

REPOSITORY, COMMIT = "allenai/open-instruct", "e6c3044aa6201c8bfa4573c1b03142af599e730d"
GRPOExperimentConfig = object


# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 69-71
class GRPOLossType(enum.StrEnum):
    dapo = "dapo"
    cispo = "cispo"
# end verbatim


# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/model_utils.py 793-818
def estimate_kl(ref_logprobs_diff: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """Compute 4 different KL divergence estimators between current and reference policies.

    Args:
        ref_logprobs_diff: Log probability difference (new_logprobs - ref_logprobs), clamped
            to [-40, 40] for numerical stability. Shape: [B, T] or similar.
        ratio: Importance sampling ratio exp(new_logprobs - old_logprobs) between current
            policy and the policy at the start of the training step. Shape: [B, T] or similar.

    Returns:
        Tensor of shape [4, B, T] containing 4 KL estimators stacked along dim 0:
            [0]: linear approximation (ref_logprobs_diff)
            [1]: quadratic approximation (ref_logprobs_diff^2 / 2)
            [2]: numerically stable form (expm1(-ref_logprobs_diff) + ref_logprobs_diff)
            [3]: importance-weighted (ratio * ref_logprobs_diff)

        We tend to prefer [2] as a reasonable default.
    """
    return torch.stack(
        [
            ref_logprobs_diff,
            (ref_logprobs_diff) ** 2 / 2,
            torch.expm1(-ref_logprobs_diff) + ref_logprobs_diff,
            ratio * ref_logprobs_diff,
        ]
    )
# end verbatim


model_utils = SimpleNamespace(estimate_kl=estimate_kl)


# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 504-538
def compute_grpo_loss(
    new_logprobs: torch.Tensor,
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    config: GRPOExperimentConfig,
    rho_weights: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if config.loss_fn == GRPOLossType.dapo:
        pg_losses = -advantages * ratio
        pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - config.clip_lower, 1.0 + config.clip_higher)
        clipfrac = (pg_losses2 > pg_losses).float()
        pg_loss = torch.max(pg_losses, pg_losses2)
    elif config.loss_fn == GRPOLossType.cispo:
        # cispo: directly clip ratio, no lower bound.
        # reinforce loss, so multiply by new logprobs
        clipfrac = (ratio > 1.0 + config.clip_higher).float()
        pg_loss = -advantages * torch.clamp(ratio.detach(), max=1.0 + config.clip_higher) * new_logprobs
    else:
        raise ValueError(f"Invalid loss function: {config.loss_fn}")

    pg_loss *= rho_weights
    clipfrac *= (rho_weights != 0).float()

    if ref_logprobs is not None:
        # We want the KL loss to backpropagate through the model.
        # We also clamp the KL loss to avoid numerical instability.
        # https://chatgpt.com/share/679d0ed9-8f48-8011-926e-e274b15ae8ae
        ref_logprobs_diff = (new_logprobs - ref_logprobs).clamp(-40.0, 40.0)
        kl_all = model_utils.estimate_kl(ref_logprobs_diff, ratio)
        kl = kl_all[config.kl_estimator]
    else:
        kl = torch.zeros_like(pg_loss)

    return pg_loss, clipfrac, kl
# end verbatim


def per_token_loss(new_logprobs_BT, old_logprob_BT, ref_logprobs, kl_estimator):
    """The training step's ratio and per-token loss (grpo_fast.py 701–703, 718; nested as there) around
    compute_grpo_loss with advantages 0 and ρ weights 1."""
    args = SimpleNamespace(loss_fn=GRPOLossType.dapo, clip_lower=0.2, clip_higher=0.272, kl_estimator=kl_estimator,
                           beta=1.0, load_ref_policy=True)
    self = SimpleNamespace(args=args)
    if True:
        if True:
            if True:
                if True:
# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_fast.py 701-703
                    # Calculate the policy's loss
                    logprobs_diff_BT = new_logprobs_BT - old_logprob_BT
                    ratio_BT = torch.exp(logprobs_diff_BT)
# end verbatim
                    pg_loss_BT, clipfrac_BT, kl_BT = compute_grpo_loss(new_logprobs_BT, ratio_BT,
                                                                       torch.zeros_like(ratio_BT), ref_logprobs,
                                                                       args, torch.ones_like(ratio_BT))
# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_fast.py 718-718
                    per_token_loss_BT = pg_loss_BT + self.args.beta * kl_BT
# end verbatim
                    return kl_BT, per_token_loss_BT


def loss_numbers(numbers):
    for preset, estimator, ratios in (("open_instruct:kl_loss", 2, False), ("open_instruct:kl_estimator_3", 3, True)):
        tokens = kl_harness.loss_tokens("k3" if estimator == 2 else "k1", ratios=ratios)

        def term_of(log_pi, log_old, log_mu, log_ref, estimator=estimator):
            return per_token_loss(log_pi, log_old, log_ref, estimator)[0]

        def loss_of(log_pi, log_old, log_mu, log_ref, estimator=estimator):
            return per_token_loss(log_pi, log_old, log_ref, estimator)[1]

        term = kl_harness.per_token(term_of, tokens)[0]
        derivative = kl_harness.per_token(loss_of, tokens)[1]
        numbers.loss(preset, f"kl_estimator {estimator}, beta 1", tokens, term, derivative)


def main():
    numbers = kl_harness.KLNumbers("open_instruct", REPOSITORY, COMMIT,
                                   "tests/catalogue/reference/open_instruct/kl_generate.py")
    loss_numbers(numbers)
    numbers.write(HERE)


if __name__ == "__main__":
    main()
