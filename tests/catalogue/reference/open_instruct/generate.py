"""open-instruct e6c3044: compute_rho_correction and compute_grpo_loss with use_rho_correction (the default: ρ
clamped to [rho_clamp_lower_bound, rho_clamp_upper_bound] = [0, 2]) and the rho masks — per token,
rho_mask_sequence_level, rho_mask_tv_divergence — run on the batches of harness.py; writes numbers.json beside
this file.

Copied verbatim (blocks below): GRPOLossType, the rho checks of GRPOExperimentConfig.__post_init__ (as a function
of the config), _rho_drop_masks, _sequence_level_mean, RhoCorrection, compute_rho_correction and compute_grpo_loss
(open_instruct/grpo_utils.py, which imports Ray, wandb and datasets). Stubbed: the config (GRPOExperimentConfig's
fields with their defaults: clip_lower 0.2, clip_higher 0.272, loss_fn dapo, the rho fields) and the module names
the copied code only mentions in type hints or the unused KL branch.

old_logprob is the trainer's (use_vllm_logprobs false with one mini-batch: resolve_old_logprob gives the current
log-probs, detached), vllm_logprobs the sampler's; the PPO ratio is 1. c = −∂(Σ pg_loss·mask)/∂log π / A_b;
nothing leaves response_mask.

Three policies (the "updates"): resolve_old_logprob copied verbatim too, and the training step's loss (grpo_fast.py
702–716: ratio, ρ, compute_grpo_loss) with the precomputed old log-probs (π_old, more than one mini-batch),
vllm_logprobs (μ) and the current log-probs (π_θ) apart, on one-token rows; the beta·KL term to the reference model
left out.

    python tests/catalogue/reference/open_instruct/generate.py
"""

import enum
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402

GRPOExperimentConfig = SimpleNamespace
model_utils = SimpleNamespace(estimate_kl=None)        # compute_grpo_loss reaches it only with ref_logprobs (None here)

# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 69-71
class GRPOLossType(enum.StrEnum):
    dapo = "dapo"
    cispo = "cispo"
# end verbatim


def check(self):                     # GRPOExperimentConfig.__post_init__'s checks of the rho fields
# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 325-337
        if self.use_rho_correction:
            if self.rho_mask_lower_bound > 0.0 and not (0.0 < self.rho_mask_lower_bound < 1.0):
                raise ValueError(
                    f"rho_mask_lower_bound must satisfy 0 < lb < 1 when set, got {self.rho_mask_lower_bound}."
                )
            if self.rho_mask_upper_bound > 0.0 and self.rho_mask_upper_bound <= 1.0:
                raise ValueError(f"rho_mask_upper_bound must be > 1 when set, got {self.rho_mask_upper_bound}.")
            if self.rho_clamp_lower_bound > 0.0 and self.rho_clamp_lower_bound >= 1.0:
                raise ValueError(
                    f"rho_clamp_lower_bound must satisfy 0 < lb < 1 when set, got {self.rho_clamp_lower_bound}."
                )
            if self.rho_clamp_upper_bound > 0.0 and self.rho_clamp_upper_bound <= 1.0:
                raise ValueError(f"rho_clamp_upper_bound must be > 1 when set, got {self.rho_clamp_upper_bound}.")
# end verbatim


# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 372-463
def _rho_drop_masks(
    rho: torch.Tensor, response_mask: torch.Tensor, lower: float, upper: float
) -> tuple[torch.Tensor, torch.Tensor]:
    dropped_low = (rho < lower) & response_mask if lower > 0.0 else torch.zeros_like(response_mask)
    dropped_high = (rho > upper) & response_mask if upper > 0.0 else torch.zeros_like(response_mask)
    return dropped_low, dropped_high


def _sequence_level_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence masked mean, broadcast back to every token.

    Sequences are identified with rows of ``values`` (shape [B, T]); padding tokens
    are excluded from the count. Empty rows return 0.
    """
    valid = response_mask.float()
    seq_sum = (values * valid).sum(dim=-1, keepdim=True)
    seq_count = valid.sum(dim=-1, keepdim=True).clamp_min(1.0)
    seq_mean = seq_sum / seq_count
    return seq_mean.expand_as(values)


@dataclass
class RhoCorrection:
    """Per-token stop-gradient correction for the train/infer engine mismatch.

    ``weights`` is multiplied into the policy loss (all-ones disables the correction).
    ``metrics`` maps wandb keys to per-token tensors that get reduced by
    ``masked_mean(., response_mask)`` at logging time.
    ``histogram_metrics`` maps wandb keys to flat 1D tensors of values
    (response tokens only); these bypass the scalar reduction and are
    concatenated across micro-batches and logged as wandb histograms.
    """

    weights: torch.Tensor
    metrics: dict[str, torch.Tensor]
    histogram_metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def compute_rho_correction(
    old_logprob: torch.Tensor,
    vllm_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    advantages: torch.Tensor,
    config: GRPOExperimentConfig,
) -> RhoCorrection:
    """Compute the unified ρ = π^train_old / π^infer_old correction (clamp + mask)."""
    logprob_diff = torch.where(
        response_mask, (old_logprob - vllm_logprobs).clamp(-10.0, 10.0), torch.zeros_like(old_logprob)
    )
    rho = torch.exp(logprob_diff)
    rho_hist = {"val/rho_hist": rho[response_mask].detach().float()}
    if not config.use_rho_correction:
        return RhoCorrection(weights=torch.ones_like(rho), metrics={}, histogram_metrics=rho_hist)

    rho_effective = (
        torch.exp(_sequence_level_mean(logprob_diff, response_mask)) if config.rho_mask_sequence_level else rho
    )

    if config.rho_mask_tv_divergence:
        # don't change rho_effective as it is our truncated importance sampling
        # calculate sequence-level TV divergence with abs(rho - 1)
        # filter if TV divergence > delta and advantage * logprob_diff > 0
        tv_divergence = torch.abs(rho - 1.0)
        tv_sequence_level = _sequence_level_mean(tv_divergence, response_mask)
        tv_dropped_low, tv_dropped_high = _rho_drop_masks(
            tv_sequence_level, response_mask, config.rho_mask_lower_bound, config.rho_mask_upper_bound
        )
        tokens_increase_tv = torch.sign(logprob_diff) * advantages > 0
        dropped_low = tv_dropped_low & tokens_increase_tv
        dropped_high = tv_dropped_high & tokens_increase_tv
    else:
        dropped_low, dropped_high = _rho_drop_masks(
            rho_effective, response_mask, config.rho_mask_lower_bound, config.rho_mask_upper_bound
        )

    in_range = response_mask & ~dropped_low & ~dropped_high

    rho_clamped = rho_effective
    if config.rho_clamp_lower_bound > 0.0:
        rho_clamped = torch.clamp(rho_clamped, min=config.rho_clamp_lower_bound)
    if config.rho_clamp_upper_bound > 0.0:
        rho_clamped = torch.clamp(rho_clamped, max=config.rho_clamp_upper_bound)

    weights = torch.where(in_range, rho_clamped, torch.zeros_like(rho_clamped))
    metrics = {
        "val/rho_drop_frac": (dropped_low | dropped_high).float(),
        "val/rho_drop_low_frac": dropped_low.float(),
        "val/rho_drop_high_frac": dropped_high.float(),
        "val/rho_weight": weights.float(),
        "val/rho_clipfrac": (rho_clamped != rho_effective).float(),
    }
    return RhoCorrection(weights=weights, metrics=metrics, histogram_metrics=rho_hist)
# end verbatim


# verbatim: allenai/open-instruct e6c3044aa6201c8bfa4573c1b03142af599e730d open_instruct/grpo_utils.py 475-501
def resolve_old_logprob(
    old_logprobs_cache: list[torch.Tensor | None],
    sample_idx: int,
    epoch_idx: int,
    num_mini_batches: int,
    use_vllm_logprobs: bool,
    vllm_logprobs: torch.Tensor,
    new_logprobs: torch.Tensor,
) -> torch.Tensor:
    """Return the old (baseline) logprobs for a sample.

    With multiple mini-batches, old logprobs are pre-computed and cached.
    With a single mini-batch, they are lazily set on the first epoch from
    either vllm logprobs or the current policy's detached logprobs.
    """
    if num_mini_batches > 1:
        result = old_logprobs_cache[sample_idx]
    else:
        with torch.no_grad():
            if epoch_idx == 0:
                if use_vllm_logprobs:
                    old_logprobs_cache[sample_idx] = vllm_logprobs
                else:
                    old_logprobs_cache[sample_idx] = new_logprobs.detach()
            result = old_logprobs_cache[sample_idx]
    assert result is not None
    return result
# end verbatim


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


FRAMEWORK, REPOSITORY, COMMIT = "open_instruct", "allenai/open-instruct", "e6c3044aa6201c8bfa4573c1b03142af599e730d"
DEFAULTS = {"use_rho_correction": True, "rho_clamp_lower_bound": 0.0, "rho_clamp_upper_bound": 2.0,
            "rho_mask_lower_bound": 0.0, "rho_mask_upper_bound": 0.0, "rho_mask_sequence_level": False,
            "rho_mask_tv_divergence": False, "clip_lower": 0.2, "clip_higher": 0.272,
            "loss_fn": GRPOLossType.dapo}
# the presets' mask bounds: open-instruct's test_rho_mask values (the config's defaults, 0, turn the masks off)
PRESETS = {"use_rho_correction": {},
           "rho_mask": {"rho_mask_lower_bound": 0.5, "rho_mask_upper_bound": 2.0},
           "rho_mask_sequence_level": {"rho_mask_sequence_level": True, "rho_mask_lower_bound": 0.5,
                                       "rho_mask_upper_bound": 2.0},
           "rho_mask_tv_divergence": {"rho_mask_tv_divergence": True, "rho_mask_upper_bound": 2.0}}
SETTINGS = {
    "use_rho_correction": {"defaults": {}, "alternative": {"rho_clamp_lower_bound": 0.5, "rho_clamp_upper_bound": 1.5}},
    "rho_mask": {"defaults": {}, "alternative": {"rho_mask_lower_bound": 0.8, "rho_mask_upper_bound": 1.5}},
    "rho_mask_sequence_level": {"defaults": {}, "alternative": {"rho_mask_lower_bound": 0.9,
                                                                "rho_mask_upper_bound": 1.5,
                                                                "rho_clamp_upper_bound": 1.05}},
    "rho_mask_tv_divergence": {"defaults": {}, "alternative": {"rho_mask_lower_bound": 0.1,
                                                               "rho_mask_upper_bound": 1.2}},
}


def tv_rows(bound):
    """Rows whose mean |ρ_t − 1| is the bound·e^∓10⁻⁴ (on each side of 1), every token alike."""
    return harness.statistic_rows(lambda x: abs(math.exp(x) - 1), bound, sums=False)


def probes(config):
    ratios = [config.rho_clamp_lower_bound, config.rho_clamp_upper_bound]
    masks = [config.rho_mask_lower_bound, config.rho_mask_upper_bound]
    if config.rho_mask_tv_divergence:
        return harness.probe_batch(ratios, [r for bound in masks if bound > 0 for r in tv_rows(bound)])
    return harness.probe_batch(ratios + masks)


def run(config, batch):
    trainer, sampler, mask, advantages = harness.tensors(batch)
    response_mask = mask.bool()
    token_advantages = advantages[:, None].expand_as(trainer)
    correction = compute_rho_correction(trainer.detach(), sampler, response_mask, token_advantages, config)
    ratio = torch.exp(trainer - trainer.detach())
    pg_loss, _, _ = compute_grpo_loss(trainer, ratio, token_advantages, None, config, correction.weights)
    return harness.coefficients((pg_loss * mask).sum(), trainer, advantages)


# -- three policies: the loss of grpo_fast.py's training step with π_θ, π_old and μ apart --------------------------

# (update preset, setting, GRPOExperimentConfig's fields as run, the loss parameters in toylab's terms, the correction
# and its parameters). grpo_fast.py 702–716: ratio = exp(new − old), ρ from (old, vLLM), compute_grpo_loss; the
# beta·KL term against the reference model (its own loss term) is left out (ref_logprobs None).
UPDATE_SETTINGS = [
    ("open_instruct:default", "defaults", {}, {}, "open_instruct:use_rho_correction", {}),
    ("open_instruct:default", "no_rho", {"use_rho_correction": False}, {}, None, {}),
    ("open_instruct:default", "alternative", {"clip_lower": 0.1, "clip_higher": 0.3, "rho_clamp_upper_bound": 1.5},
     {"eps_low": 0.1, "eps_high": 0.3}, "open_instruct:use_rho_correction", {"rho_clamp_upper_bound": 1.5}),
    ("open_instruct:cispo", "defaults", {"loss_fn": GRPOLossType.cispo}, {}, "open_instruct:use_rho_correction", {}),
    ("open_instruct:use_vllm_logprobs", "defaults", {"use_vllm_logprobs": True, "use_rho_correction": False}, {},
     None, {}),
]


def run_update(numbers, preset, setting, fields, params, correction, correction_params):
    config = SimpleNamespace(**{**DEFAULTS, "use_vllm_logprobs": False, **fields})
    check(config)
    high = 1 + config.clip_higher
    ratios = [high] if config.loss_fn == GRPOLossType.cispo else [1 - config.clip_lower, high]
    weights = [config.rho_clamp_upper_bound] if config.use_rho_correction else []
    combined = ratios if config.use_vllm_logprobs else ()
    name = numbers.batch(f"updates/{preset}/{setting}", harness.update_probes(ratios, weights, combined))

    def token_loss(b, new, old, vllm, mask, advantages):
        # more than one mini-batch: the old log-probs precomputed (the recomputation, or vLLM's), grpo_fast.py 620–636
        old = resolve_old_logprob([vllm if config.use_vllm_logprobs else old], 0, 0, 2, config.use_vllm_logprobs,
                                  vllm, new)
        token_advantages = advantages[:, None]
        ratio = torch.exp(new - old)
        rho = compute_rho_correction(old, vllm, mask.bool(), token_advantages, config)
        pg_loss, _, _ = compute_grpo_loss(new, ratio, token_advantages, None, config, rho.weights)
        return (pg_loss * mask).sum()

    loss, gradient = harness.per_token(token_loss, numbers.batches[name])
    numbers.update(preset, setting, {k: str(v) if k == "loss_fn" else v for k, v in fields.items()}, params,
                   correction, correction_params, name, loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/open_instruct/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for option, settings in SETTINGS.items():
        for setting, params in settings.items():
            config = SimpleNamespace(**{**DEFAULTS, **PRESETS[option], **params})
            check(config)
            probe = numbers.batch(f"probes/{option}/{setting}", probes(config))
            for batch in (ragged, probe):
                numbers.add(f"{FRAMEWORK}:{option}", params, batch, run(config, numbers.batches[batch]),
                            setting=setting)
    for preset, setting, fields, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
