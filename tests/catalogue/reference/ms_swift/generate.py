"""ms-swift 3602360: GRPOTrainer's rollout importance sampling (rollout_importance_sampling_mode token_truncate /
token_mask / sequence_truncate / sequence_mask), run on the batches of harness.py; writes numbers.json beside
this file.

Copied verbatim (blocks below): GRPOTrainer._get_rollout_is_correction, _compute_sequence_level_ratios and
_apply_rollout_importance_sampling (swift/rlhf_trainers/grpo_trainer.py, which imports the trainer stack), methods
of a stand-in trainer holding the mode and threshold (rollout_importance_sampling_threshold, default 2.0).

old_per_token_logps are the trainer's, rollout_per_token_logps the sampler's; the weights multiply the per-token
loss (per_token_loss * rollout_is_weights, grpo_trainer.py 1080–1081), whose PPO ratio against the trainer's old
log-probs is 1: c = the weights on the response tokens. Nothing leaves completion_mask.

    python tests/catalogue/reference/ms_swift/generate.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402


class Trainer:
    """The three GRPOTrainer methods, on a trainer that holds only their settings."""

    def __init__(self, mode, threshold):
        self.rollout_importance_sampling_mode = mode
        self.rollout_importance_sampling_threshold = threshold
        self.disable_rollout_importance_sampling = False

# verbatim: modelscope/ms-swift 3602360a562313afbf2ef6065fdf61f271a2c5b9 swift/rlhf_trainers/grpo_trainer.py 1751-1763
    def _get_rollout_is_correction(self, old_per_token_logps, rollout_per_token_logps, completion_mask):
        """Compute rollout importance sampling log-ratio and IS weights.

        Returns:
            (rollout_log_ratio, rollout_is_weights) if rollout IS correction is applicable,
            (None, None) otherwise.
        """
        if self.rollout_importance_sampling_mode is None or self.disable_rollout_importance_sampling:
            return None, None

        rollout_log_ratio = old_per_token_logps - rollout_per_token_logps
        rollout_is_weights = self._apply_rollout_importance_sampling(rollout_log_ratio, completion_mask)
        return rollout_log_ratio, rollout_is_weights
# end verbatim

# verbatim: modelscope/ms-swift 3602360a562313afbf2ef6065fdf61f271a2c5b9 swift/rlhf_trainers/grpo_trainer.py 2311-2376
    def _compute_sequence_level_ratios(self, is_ratio: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
        """
        Helper function to compute sequence-level importance sampling ratios.

        Args:
            is_ratio: Token-level IS ratios, shape [B, T]
            completion_mask: Boolean mask for completion tokens, shape [B, T]

        Returns:
            Sequence-level ratios as geometric mean of token-level ratios
        """
        log_ratio = torch.log(is_ratio.clamp(min=1e-10))
        seq_log_ratios = (log_ratio * completion_mask).sum(-1) / completion_mask.sum(-1).clamp(min=1.0)
        seq_ratios = torch.exp(seq_log_ratios)

        return seq_ratios

    def _apply_rollout_importance_sampling(self, rollout_log_ratio: torch.Tensor,
                                           completion_mask: torch.Tensor) -> torch.Tensor:
        """
        Apply vLLM importance sampling correction using one of four modes.

        Args:
            rollout_log_ratio: log(π_θ / π_rollout) per token, shape [B, T]
            completion_mask: Boolean mask for completion tokens, shape [B, T]

        Returns:
            IS weights to multiply with loss, same shape as rollout_log_ratio
        """
        mode = self.rollout_importance_sampling_mode
        threshold = self.rollout_importance_sampling_threshold

        # Clamp log_ratio to prevent numerical overflow from padding values (-1e10)
        # A log_ratio of 20 corresponds to exp(20) ≈ 485 million, which is already extreme
        SAFETY_BOUND = 20.0
        rollout_log_ratio_safe = torch.clamp(rollout_log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)

        # Compute importance sampling ratios: exp(log_ratio)
        is_ratio = torch.exp(rollout_log_ratio_safe)

        if mode == 'token_truncate':
            # Token-level truncated IS: clip ratios from above at threshold
            is_weights = torch.clamp(is_ratio, max=threshold)

        elif mode == 'token_mask':
            # Token-level masked IS: mask out tokens with ratio > threshold
            is_weights = torch.where(is_ratio <= threshold, is_ratio, torch.zeros_like(is_ratio))

        elif mode == 'sequence_truncate':
            # Sequence-level truncated IS: compute sequence-level ratio and clip
            seq_ratios = self._compute_sequence_level_ratios(is_ratio, completion_mask)
            clipped_seq_ratios = torch.clamp(seq_ratios, max=threshold)

            is_weights = clipped_seq_ratios.unsqueeze(-1).expand_as(is_ratio)

        elif mode == 'sequence_mask':
            # Sequence-level masked IS: mask entire sequences with ratio > threshold
            seq_ratios = self._compute_sequence_level_ratios(is_ratio, completion_mask)
            seq_mask = (seq_ratios <= threshold).float()

            # Apply mask to original token-level ratios
            is_weights = is_ratio * seq_mask.unsqueeze(-1)
        else:
            return is_ratio

        return is_weights
# end verbatim


FRAMEWORK, REPOSITORY, COMMIT = "ms_swift", "modelscope/ms-swift", "3602360a562313afbf2ef6065fdf61f271a2c5b9"
MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def run(mode, threshold, batch):
    trainer, sampler, mask, _ = harness.tensors(batch)
    _, weights = Trainer(mode, threshold)._get_rollout_is_correction(trainer.detach(), sampler, mask.bool())
    return weights * mask


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/ms_swift/generate.py")
    ragged = numbers.batch("ragged", harness.RAGGED)
    for mode in MODES:
        for setting, params in {"defaults": {}, "alternative": {"threshold": 1.2}}.items():
            threshold = params.get("threshold", 2.0)
            probes = numbers.batch(f"probes/{mode}/{setting}", harness.probe_batch([threshold]))
            for batch in (ragged, probes):
                numbers.add(f"{FRAMEWORK}:{mode}", params, batch, run(mode, threshold, numbers.batches[batch]),
                            setting=setting)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
