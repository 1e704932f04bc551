"""prime-rl 559b447: default_loss_fn (DPPO binary-TV mask + kl_tau·(log ρ)²) and ipo_loss_fn, per sample, with the
DefaultLossConfig / IPOLossConfig defaults, run on the batches of harness.py; writes numbers.json beside this file.

Copied verbatim (blocks below): LossInputs, LossOutputs, _safe_mean, compute_importance_ratio_and_mismatch_kl,
default_loss_fn and ipo_loss_fn (src/prime_rl/trainer/rl/loss.py, which imports the configs package). Stubbed:
jaxtyping's Float and Bool (annotations only) and the loss configs (their fields, with
packages/prime-rl-configs/src/prime_rl/configs/trainer.py's defaults: dppo_mask_low/high 0.2, ipo_threshold 0.1,
adv_tau 1, kl_tau 1e-3).

Each sequence's loss is a sum over its tokens (the loss mask is all its response tokens); the batch's is their sum.
"gradient" is −∂loss/∂log π with the setting's kl_tau (the KL term's part does not read A), "coefficients" the
same at kl_tau = 0, divided by A_b. Nothing leaves the loss mask.

Three policies (the "updates"): the same functions on one-token rows with π_θ, the rows' π_old (which they never
read: prime-rl's ratio is π_θ/μ) and μ, at probability gaps π_θ − μ on each side of each mask threshold: each
token's loss and its gradient ∂loss/∂log π_θ.

    python tests/catalogue/reference/prime_rl/generate.py
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402


class _Annotation:
    def __getitem__(self, item):
        return Tensor


Float = Bool = _Annotation()
DefaultLossConfig = IPOLossConfig = SimpleNamespace

# verbatim: PrimeIntellect-ai/prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 src/prime_rl/trainer/rl/loss.py 13-46
@dataclass
class LossInputs:
    """Inputs for computing loss on a single sample.

    ``loss_mask`` already selects the tokens that belong to the receiving
    component — the component loss functions never re-derive eligibility.
    ``loss_weights`` is the component's per-token weight stream (None means
    1.0 everywhere).
    """

    trainer_logprobs: Float[Tensor, " seq"]
    inference_logprobs: Float[Tensor, " seq"]
    ref_logprobs: Float[Tensor, " seq"] | None
    advantages: Float[Tensor, " seq"]
    loss_mask: Bool[Tensor, " seq"]
    loss_weights: Float[Tensor, " seq"] | None = field(default=None)


@dataclass
class LossOutputs:
    """Outputs from computing loss on a single sample."""

    loss: Float[Tensor, ""]
    metrics: dict[str, Tensor]


LossFn = Callable[..., LossOutputs]
"""Type for a per-sample loss function.

Expected signature:
    def my_loss(inputs: LossInputs, **kwargs) -> LossOutputs:
        ...
"""

# end verbatim


# verbatim: PrimeIntellect-ai/prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 src/prime_rl/trainer/rl/loss.py 94-196
def _safe_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of values over a boolean mask; returns 0 when mask is empty."""
    denom = torch.clamp_min(mask.sum(), 1)
    return values[mask].sum() / denom


def compute_importance_ratio_and_mismatch_kl(
    trainer_logprobs: Tensor, inference_logprobs: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    log_importance_ratio = trainer_logprobs - inference_logprobs
    importance_ratio = torch.exp(log_importance_ratio)
    mismatch_kl = importance_ratio - log_importance_ratio - 1
    return log_importance_ratio, importance_ratio, mismatch_kl


def default_loss_fn(inputs: LossInputs, loss_config: DefaultLossConfig) -> LossOutputs:
    """
    DPPO+KL loss for RL training, combining:
    - DPPO-Binary TV Loss (https://arxiv.org/pdf/2602.04879)
    - Kimi-K2.5 KL Loss (https://arxiv.org/pdf/2602.02276)

    The mask is conditioned on the advantage sign: for positive advantages,
    we mask tokens whose probability increased too much (trust region violation
    in the upweight direction); for negative advantages, we mask tokens whose
    probability decreased too much (trust region violation in the downweight
    direction).
    """
    trainer_logprobs = inputs.trainer_logprobs
    inference_logprobs = inputs.inference_logprobs
    advantages = inputs.advantages
    loss_mask = inputs.loss_mask

    log_importance_ratio, importance_ratio, mismatch_kl = compute_importance_ratio_and_mismatch_kl(
        trainer_logprobs, inference_logprobs
    )

    probs_diff = torch.exp(trainer_logprobs) - torch.exp(inference_logprobs)
    dppo_invalid_mask_high = probs_diff > loss_config.dppo_mask_high
    dppo_invalid_mask_low = probs_diff < -loss_config.dppo_mask_low
    positive_advantages = advantages > 0
    negative_advantages = advantages < 0
    dppo_invalid_mask = torch.where(positive_advantages, dppo_invalid_mask_high, dppo_invalid_mask_low)

    is_masked = dppo_invalid_mask
    is_masked_high = positive_advantages & dppo_invalid_mask_high
    is_masked_low = negative_advantages & dppo_invalid_mask_low
    drop_mask = loss_mask & is_masked
    keep_mask = loss_mask & ~is_masked

    advantages = loss_config.adv_tau * advantages
    pg_loss = keep_mask * advantages * importance_ratio
    kl_loss = loss_mask * log_importance_ratio**2
    per_token_loss = -pg_loss + loss_config.kl_tau * kl_loss
    if inputs.loss_weights is not None:
        per_token_loss = per_token_loss * inputs.loss_weights
    loss = per_token_loss.sum()

    metrics = {
        "masked_mismatch_kl": _safe_mean(mismatch_kl, loss_mask & is_masked),  # all trainable, masked tokens
        "unmasked_mismatch_kl": _safe_mean(mismatch_kl, keep_mask),  # all trainable, unmasked tokens
        "is_masked": _safe_mean(is_masked, loss_mask),
        "is_masked_low": _safe_mean(is_masked_low, loss_mask),
        "is_masked_high": _safe_mean(is_masked_high, loss_mask),
        "masked_advantage_positive": _safe_mean(positive_advantages, drop_mask),
        "masked_advantage_negative": _safe_mean(negative_advantages, drop_mask),
    }

    return LossOutputs(loss=loss, metrics=metrics)


def ipo_loss_fn(inputs: LossInputs, loss_config: IPOLossConfig) -> LossOutputs:
    """IPO loss type: a symmetric trust region (mask tokens whose probability
    moved more than ``ipo_threshold`` in absolute terms), policy gradient via
    the importance ratio, and a squared-log-ratio KL regularizer."""
    trainer_logprobs = inputs.trainer_logprobs
    inference_logprobs = inputs.inference_logprobs
    advantages = inputs.advantages
    loss_mask = inputs.loss_mask

    log_importance_ratio, importance_ratio, mismatch_kl = compute_importance_ratio_and_mismatch_kl(
        trainer_logprobs, inference_logprobs
    )

    abs_probs_diff = torch.abs(torch.exp(trainer_logprobs) - torch.exp(inference_logprobs))

    is_masked = abs_probs_diff > loss_config.ipo_threshold
    keep_mask = loss_mask & ~is_masked

    advantages = loss_config.adv_tau * advantages
    pg_loss = keep_mask * advantages * importance_ratio
    kl_loss = loss_mask * log_importance_ratio**2
    per_token_loss = -pg_loss + loss_config.kl_tau * kl_loss
    if inputs.loss_weights is not None:
        per_token_loss = per_token_loss * inputs.loss_weights
    loss = per_token_loss.sum()

    metrics = {
        "masked_mismatch_kl": _safe_mean(mismatch_kl, loss_mask & is_masked),  # all trainable, masked tokens
        "unmasked_mismatch_kl": _safe_mean(mismatch_kl, keep_mask),  # all trainable, unmasked tokens
        "is_masked": _safe_mean(is_masked, loss_mask),
    }

    return LossOutputs(loss=loss, metrics=metrics)
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "prime_rl", "PrimeIntellect-ai/prime-rl", "559b44772e471d1538537b8805cc77f3824a5e64"
DEFAULTS = {"default": {"dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "adv_tau": 1.0, "kl_tau": 1e-3},
            "ipo": {"ipo_threshold": 0.1, "adv_tau": 1.0, "kl_tau": 1e-3}}
SETTINGS = {"default": {"defaults": {}, "alternative": {"dppo_mask_low": 0.1, "dppo_mask_high": 0.3, "kl_tau": 0.01}},
            "ipo": {"defaults": {}, "alternative": {"ipo_threshold": 0.3, "kl_tau": 0.01}}}
LOSSES = {"default": default_loss_fn, "ipo": ipo_loss_fn}


def probes(option, config):
    """The probability differences at each bound ·e^∓10⁻⁴, π above μ and below it."""
    bounds = {config.dppo_mask_low, config.dppo_mask_high} if option == "default" else {config.ipo_threshold}
    rows = [r for bound in bounds for r in harness.probability_statistic_rows(lambda p, q: abs(p - q), bound,
                                                                                 sums=False)]
    return harness.probe_batch(extra=rows)


def gradient(option, config, batch):
    """−∂(Σ_b loss_b)/∂log π, each sample's loss from the option's loss function."""
    trainer, sampler, mask, advantages = harness.tensors(batch)
    total = 0.0
    for b in range(trainer.shape[0]):
        n = int(mask[b].sum())
        inputs = LossInputs(trainer[b, :n], sampler[b, :n], None, advantages[b].expand(n), torch.ones(n, dtype=torch.bool))
        total = total + LOSSES[option](inputs, config).loss
    return harness.coefficients(total, trainer, torch.ones_like(advantages)), advantages


# -- three policies: the loss functions on one-token rows -----------------------------------------------------------

# (update preset, setting, the loss config as run, the loss parameters in toylab's terms, the correction and its
# parameters). LossInputs has no π_old: the ratio is π_θ/μ (the rows' own π_old must not matter).
UPDATE_SETTINGS = [
    ("prime_rl:default", "defaults", ("default", {}), {}, None, {}),
    ("prime_rl:default", "alternative", ("default", {"dppo_mask_low": 0.1, "dppo_mask_high": 0.3, "kl_tau": 0.01}),
     {"delta_low": 0.1, "delta_high": 0.3, "tau": 0.01}, None, {}),
    ("prime_rl:ipo", "defaults", ("ipo", {}), {}, None, {}),
]


def run_update(numbers, preset, setting, option_params, params, correction, correction_params):
    option, overrides = option_params
    config = SimpleNamespace(**{**DEFAULTS[option], **overrides})
    gaps = [config.dppo_mask_low, config.dppo_mask_high] if option == "default" else [config.ipo_threshold]
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(gaps=sorted(set(gaps))))

    def token_loss(b, trainer, old, sampler, mask, advantages):
        inputs = LossInputs(trainer[0], sampler[0], None, advantages, mask[0].bool())
        return LOSSES[option](inputs, config).loss

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, {"type": option, **vars(config)}, params, correction, correction_params, name,
                   loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/prime_rl/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            config = SimpleNamespace(**{**DEFAULTS[option], **params})
            without_kl = SimpleNamespace(**{**vars(config), "kl_tau": 0.0})
            probe = numbers.batch(f"probes/{option}/{setting}", probes(option, config))
            for batch in (ragged, probe):
                g, _ = gradient(option, config, numbers.batches[batch])
                c, advantages = gradient(option, without_kl, numbers.batches[batch])
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, c / advantages[:, None], setting=setting,
                            gradient=g)
    for preset, setting, option_params, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, option_params, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
