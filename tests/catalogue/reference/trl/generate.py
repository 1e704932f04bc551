"""TRL f2cd577: GRPOTrainer's vLLM importance-sampling correction (vllm_importance_sampling_mode token_truncate,
token_mask, sequence_truncate, sequence_mask with clip_min/clip_max), its off-policy sequence mask and the loss
aggregation of _compute_loss (loss_type dapo, grpo, bnpo, dr_grpo), run on the batches of harness.py (verl's four
rows as "ragged"); writes numbers.json beside this file.

Copied verbatim (blocks below): the importance-sampling block of _generate_and_score_completions, get_off_policy_mask
and the loss block of _compute_loss (trl/trainer/grpo_trainer.py), and GRPOConfig.__post_init__'s check of
clip_min against clip_max (trl/trainer/grpo_config.py), as functions and methods of a stand-in trainer holding the
settings they read (use_vllm, epsilon 0.2, loss_type dapo, beta 0, top_entropy_quantile 1,
max_completion_length = the batch's width, one process, no gradient accumulation).

old_per_token_logps are the trainer's (detached: the PPO ratio is 1), sampling_per_token_logps the sampler's. Every
case runs loss_type dapo, whose normalizer is num_items_in_batch (the response tokens): c = −∂loss/∂log π / A_b ×
num_items_in_batch. The findings keep −∂loss/∂log π / A_b unscaled for each loss_type ("losses/…", token_mask
with clip 0.5 and 1.5) and for the off-policy mask ("off_policy_mask/δ", over TRL's default sequence_mask).
Nothing leaves the mask.

Three policies (the "updates"): the same loss block with old_per_token_logps (π_old), sampling_per_token_logps
(μ) and the current log-probs (π_θ) apart (loss_type dapo and cispo, epsilon_high, delta; use_vllm off and on), and
AsyncGRPOTrainer.compute_loss (trl/experimental/async_grpo/async_grpo_trainer.py, copied verbatim to the loss, as a
method of a stand-in holding epsilon, one process, no accumulation; the model stubbed to return the given
log-probs), whose old_log_probs are the engine's: each on one-token rows (num_items_in_batch and global_n_tokens 1).

    python tests/catalogue/reference/trl/generate.py
"""

import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402
import torch  # noqa: E402


def importance_sampling(self, completion_mask, tool_mask, old_per_token_logps, sampling_per_token_logps):
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py 2579-2623
            if self.use_vllm and self.vllm_importance_sampling_correction:
                mask = completion_mask if tool_mask is None else completion_mask * tool_mask
                per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask

                sequence_level_is = self.vllm_importance_sampling_mode in ["sequence_mask", "sequence_truncate"]
                if sequence_level_is:
                    per_sequence_logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
                    logps_diff = per_sequence_logps_diff
                else:
                    logps_diff = per_token_logps_diff

                vllm_importance_sampling_ratio = torch.exp(logps_diff)

                # vllm_importance_sampling_ratio.shape:
                #   token_* modes:     (B, T)  (per-token ratio)
                #   sequence_* modes:  (B, 1)  (per-sequence ratio)

                if self.vllm_importance_sampling_mode in ["sequence_truncate", "token_truncate"]:
                    vllm_importance_sampling_ratio = torch.clamp(
                        vllm_importance_sampling_ratio,
                        min=self.vllm_importance_sampling_clip_min,
                        max=self.vllm_importance_sampling_clip_max,
                    )
                elif self.vllm_importance_sampling_mode in ["sequence_mask", "token_mask"]:
                    min_val = (
                        self.vllm_importance_sampling_clip_min
                        if self.vllm_importance_sampling_clip_min is not None
                        else -math.inf
                    )
                    max_val = (
                        self.vllm_importance_sampling_clip_max
                        if self.vllm_importance_sampling_clip_max is not None
                        else math.inf
                    )

                    invalid_mis_mask = (vllm_importance_sampling_ratio < min_val) | (
                        vllm_importance_sampling_ratio > max_val
                    )
                    vllm_importance_sampling_ratio = vllm_importance_sampling_ratio.masked_fill(
                        invalid_mis_mask, value=0.0
                    )
                else:
                    raise ValueError(
                        f"Unknown vLLM importance sampling level: {self.vllm_importance_sampling_mode}. Possible values are 'token_truncate', 'token_mask', 'sequence_truncate', and 'sequence_mask'."
                    )
# end verbatim
            return vllm_importance_sampling_ratio


def check(self):                     # GRPOConfig.__post_init__'s check of the clip bounds
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_config.py 1131-1139
        if (
            self.vllm_importance_sampling_clip_min is not None
            and self.vllm_importance_sampling_clip_max is not None
            and self.vllm_importance_sampling_clip_min >= self.vllm_importance_sampling_clip_max
        ):
            raise ValueError(
                f"vllm_importance_sampling_clip_min ({self.vllm_importance_sampling_clip_min}) must be less than "
                f"vllm_importance_sampling_clip_max ({self.vllm_importance_sampling_clip_max})."
            )
# end verbatim


class Trainer:
    """The settings _compute_loss reads, and its two methods."""

    def __init__(self, mode, clip_min, clip_max, loss_type="dapo", off_policy_mask_threshold=None, width=5):
        self.use_vllm = self.vllm_importance_sampling_correction = True
        self.vllm_importance_sampling_mode = mode
        self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max = clip_min, clip_max
        self.loss_type, self.off_policy_mask_threshold = loss_type, off_policy_mask_threshold
        self.epsilon_low = self.epsilon_high = 0.2
        self.importance_sampling_level, self.beta, self.top_entropy_quantile = "token", 0.0, 1.0
        self.args = SimpleNamespace(delta=None)
        self.model = SimpleNamespace(training=True)
        self.current_gradient_accumulation_steps = 1
        self.accelerator = SimpleNamespace(num_processes=1)
        self.max_completion_length = width

# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py 2920-2939
    def get_off_policy_mask(
        advantages: torch.Tensor,
        per_token_logps: torch.Tensor,
        sampling_per_token_logps: torch.Tensor,
        mask: torch.Tensor,
        off_policy_threshold: float,
    ) -> torch.Tensor:
        """
        Computes the Off-Policy Sequence Mask from DeepSeek-V3.2 paper. Returns a (B, 1) tensor where 1.0 indicates
        "Keep" and 0.0 indicates "Drop".
        """
        # forward KL div: log(pi_old) - log(pi_theta)
        kl_div = sampling_per_token_logps - per_token_logps.detach()
        # Sequence-level Mean KL (ignoring prompt+padding)
        seq_kl_sum = (kl_div * mask).sum(dim=1, keepdim=True)
        avg_seq_kl = seq_kl_sum / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        # Keep if (Advantage >= 0) OR (KL <= delta)
        is_pos_adv = advantages >= 0
        is_low_kl = avg_seq_kl <= off_policy_threshold
        return (is_pos_adv | is_low_kl).to(dtype=mask.dtype)  # (B, 1)
# end verbatim

    get_off_policy_mask = staticmethod(get_off_policy_mask)

    def loss(self, per_token_logps, entropies, mask, inputs):
# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py 3020-3150
        if self.top_entropy_quantile < 1.0:
            entropy_mask = self.get_high_entropy_mask(entropies, mask, 1 - self.top_entropy_quantile)
        else:
            entropy_mask = None

        # Compute the loss
        advantages = inputs["advantages"]
        # In the base GRPO implementation, advantages are expected to have shape (B,). To support subclasses that
        # provide advantages with shape (B, T) (e.g., MiniLLM), we *conditionally* unsqueeze the tensor.
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        # When num_iterations == 1 and steps_per_generation <= gradient_accumulation_steps,
        # old_per_token_logps == per_token_logps. In this case we can skip its computation
        # (see _generate_and_score_completions) and instead use per_token_logps.detach().
        # The exception is when using vLLM, where we always compute old_per_token_logps
        # for importance sampling
        old_per_token_logps = inputs.get("old_per_token_logps")
        old_per_token_logps = per_token_logps.detach() if old_per_token_logps is None else old_per_token_logps

        if self.off_policy_mask_threshold is not None:
            # OPSM should use inference-time logprobs to detect both sources of off-policyness:
            # 1. Drift from gradient updates (always present)
            # 2. Drift from training-inference mismatch (when using vLLM)
            # When using vLLM, prioritize sampling_per_token_logps, otherwise use old_per_token_logps
            sampling_per_token_logps = inputs.get("sampling_per_token_logps", old_per_token_logps)

            off_policy_mask = self.get_off_policy_mask(
                advantages=advantages,
                per_token_logps=per_token_logps,
                sampling_per_token_logps=sampling_per_token_logps,
                mask=mask,
                off_policy_threshold=self.off_policy_mask_threshold,
            )

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

        # From here, log_importance_weights (and all subsequent tensors, coef_1, coef_2, etc.) shape depends on
        # importance_sampling_level: "token" level: (B, T); "sequence" level: (B, 1)
        if self.loss_type == "cispo":
            clamped_ratios = torch.clamp(coef_1, max=self.epsilon_high).detach()
            per_token_loss = -clamped_ratios * advantages * per_token_logps
        elif self.loss_type in ["grpo", "bnpo", "dr_grpo", "dapo", "luspo"]:
            coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
            # Two-sided clipping
            if self.args.delta is not None:
                coef_1 = torch.clamp(coef_1, max=self.args.delta)

            per_token_loss1 = coef_1 * advantages
            per_token_loss2 = coef_2 * advantages
            per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
        elif self.loss_type == "sapo":
            temperatures = torch.where(advantages > 0, self.args.sapo_temperature_pos, self.args.sapo_temperature_neg)
            soft_coef_1 = torch.sigmoid(temperatures * (coef_1 - 1)) * 4 / temperatures
            per_token_loss = -soft_coef_1 * advantages
        elif self.loss_type == "vespo":
            phi_seq = self.get_gamma_weights(
                advantages=advantages,
                log_ratio_per_token=log_ratio,
                mask=mask,
                importance_sampling_ratio=inputs.get("importance_sampling_ratio"),
                k_pos=self.args.vespo_k_pos,
                lambda_pos=self.args.vespo_lambda_pos,
                k_neg=self.args.vespo_k_neg,
                lambda_neg=self.args.vespo_lambda_neg,
            )
            per_token_loss = -phi_seq * advantages * per_token_logps
        else:
            raise ValueError(f"Unknown loss type: {self.loss_type}")

        if self.off_policy_mask_threshold is not None:
            per_token_loss = per_token_loss * off_policy_mask

        if entropy_mask is not None:
            per_token_loss = per_token_loss * entropy_mask

        if self.use_vllm and self.vllm_importance_sampling_correction and self.loss_type != "vespo":
            per_token_loss = per_token_loss * inputs["importance_sampling_ratio"]

        if self.beta != 0.0:
            per_token_loss = per_token_loss + self.beta * per_token_kl

        mode = "train" if self.model.training else "eval"
        if self.loss_type in ["grpo", "sapo"]:
            loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0  # no accum in eval
            policy_loss = loss.detach()
            loss = loss / normalizer
        elif self.loss_type == "bnpo":
            loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0  # no accum in eval
            policy_loss = loss.detach()
            loss = loss / normalizer
        elif self.loss_type == "dr_grpo":
            loss = (per_token_loss * mask).sum() / (per_token_loss.size(0) * self.max_completion_length)
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0  # no accum in eval
            policy_loss = loss.detach()
            loss = loss / normalizer
        elif self.loss_type in ["cispo", "dapo", "vespo"]:
            normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
            loss = (per_token_loss * mask).sum() / normalizer
            policy_loss = loss.detach()
        elif self.loss_type == "luspo":
            # Unless importance_sampling_level="token" (not recommended here), per_token_loss is expected to be (B, 1)
            loss = (per_token_loss * mask.sum(1, keepdim=True)).mean()
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
            policy_loss = loss.detach()
            loss = loss / normalizer
        else:
            raise ValueError(f"Unknown loss type: {self.loss_type}")
# end verbatim
        return loss


class AsyncTrainer:
    """The settings AsyncGRPOTrainer.compute_loss reads, and its loss (to the loss: the metrics after it are left)."""

    def __init__(self, epsilon=0.2, epsilon_high=None):
        self.epsilon_low = epsilon
        self.epsilon_high = epsilon_high if epsilon_high is not None else epsilon
        self.accelerator = SimpleNamespace(num_processes=1)
        self.current_gradient_accumulation_steps = 1
        self.aux_loss_enabled = False

# verbatim: huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/experimental/async_grpo/async_grpo_trainer.py 911-954
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Padding-free: the collator already packed this rank's samples into a single row (real tokens concatenated,
        # `position_ids` resetting per sequence, advantages expanded per-token), then padded the row to the longest
        # rank's length so DataLoaderDispatcher could scatter rectangular rows. Strip that trailing inter-rank padding
        # here.
        mask_bool = inputs["attention_mask"].bool()
        input_ids = inputs["input_ids"][mask_bool].unsqueeze(0)
        completion_mask = inputs["completion_mask"][mask_bool].unsqueeze(0)
        old_log_probs = inputs["old_log_probs"][mask_bool].unsqueeze(0)
        position_ids = inputs["position_ids"][mask_bool].unsqueeze(0)
        advantages = inputs["advantages"][mask_bool].unsqueeze(0)

        forward_start = time.time()
        outputs = model(
            input_ids=input_ids,
            position_ids=position_ids,
            labels=input_ids,
            completion_mask=completion_mask,
            use_cache=False,
        )
        log_probs, entropy = outputs["log_probs"], outputs["entropy"]
        self._last_forward_time_s = time.time() - forward_start

        completion_mask = completion_mask[:, 1:]
        old_log_probs = old_log_probs[:, 1:]
        advantages = advantages[:, 1:]
        log_ratio = log_probs - old_log_probs
        coef_1 = torch.exp(log_ratio)
        coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
        per_token_loss1 = coef_1 * advantages
        per_token_loss2 = coef_2 * advantages
        per_token_loss = -torch.min(per_token_loss1, per_token_loss2)

        # DDP/FSDP averages gradients across ranks (world_size).
        # To get correct per-token normalization we scale by 1/tokens_per_rank
        # = world_size / global_n_tokens, so after DDP averaging the effective
        loss = (per_token_loss * completion_mask).sum()
        global_n_tokens = inputs["global_n_tokens"][0]
        world_size = self.accelerator.num_processes
        tokens_per_rank = (global_n_tokens / world_size).clamp(min=1.0)
        loss = loss / tokens_per_rank.to(torch.float32)
        # For DAPO, we would scale like this instead:
        # loss = loss / max(per_token_loss.size(0), 1)
        loss = loss / self.current_gradient_accumulation_steps
# end verbatim
        return loss


FRAMEWORK, REPOSITORY, COMMIT = "trl", "huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8"
MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def run(trainer, batch):
    """−∂loss/∂log π / A_b of _compute_loss, the importance-sampling ratio from the generation step."""
    log_pi, sampler, mask, advantages = harness.tensors(batch)
    ratio = importance_sampling(trainer, mask, None, log_pi.detach(), sampler)
    inputs = {"advantages": advantages, "importance_sampling_ratio": ratio, "sampling_per_token_logps": sampler,
              "num_items_in_batch": mask.sum()}
    loss = trainer.loss(log_pi, None, mask, inputs)
    return harness.coefficients(loss, log_pi, advantages), mask


# -- three policies: _compute_loss and AsyncGRPOTrainer.compute_loss with π_θ, π_old and μ apart ------------------

# (update preset, setting, GRPOConfig's fields as run, the loss parameters in toylab's terms, the correction and its
# parameters)
UPDATE_SETTINGS = [
    ("trl:grpo", "defaults", {"use_vllm": False, "loss_type": "dapo", "epsilon": 0.2}, {}, None, {}),
    ("trl:grpo", "two_sided", {"use_vllm": False, "loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28,
                               "delta": 3.0}, {"eps_high": 0.28, "dual_clip": 3.0}, None, {}),
    ("trl:grpo_vllm", "defaults", {"use_vllm": True, "vllm_importance_sampling_mode": "sequence_mask",
                                   "vllm_importance_sampling_clip_max": 3.0}, {}, "trl:sequence_mask", {}),
    ("trl:grpo_vllm", "token_truncate", {"use_vllm": True, "vllm_importance_sampling_mode": "token_truncate",
                                         "vllm_importance_sampling_clip_max": 3.0}, {}, "trl:token_truncate", {}),
    ("trl:cispo", "defaults", {"use_vllm": False, "loss_type": "cispo", "epsilon_high": 5.0}, {}, None, {}),
    ("trl:async_grpo", "defaults", {"epsilon": 0.2}, {}, None, {}),
    ("trl:async_grpo", "alternative", {"epsilon": 0.2, "epsilon_high": 0.28}, {"eps_high": 0.28}, None, {}),
]


def grpo_loss(fields):
    """loss_fn(b, trainer, old, sampler, mask, advantages) -> _compute_loss's loss of one token, the importance
    sampling ratio (with use_vllm) computed at generation from the old and the sampler's log-probs."""
    trainer = Trainer(fields.get("vllm_importance_sampling_mode", "sequence_mask"), None,
                      fields.get("vllm_importance_sampling_clip_max", 3.0), fields.get("loss_type", "dapo"), width=1)
    trainer.use_vllm = fields["use_vllm"]
    trainer.epsilon_high = fields.get("epsilon_high", trainer.epsilon_low)
    trainer.args.delta = fields.get("delta")

    def loss_fn(b, log_pi, old, sampler, mask, advantages):
        inputs = {"advantages": advantages, "old_per_token_logps": old, "num_items_in_batch": mask.sum()}
        if trainer.use_vllm:
            inputs["importance_sampling_ratio"] = importance_sampling(trainer, mask, None, old, sampler)
            inputs["sampling_per_token_logps"] = sampler
        return trainer.loss(log_pi, None, mask, inputs)

    return loss_fn


def async_loss(fields):
    """loss_fn -> AsyncGRPOTrainer.compute_loss's loss of one token: a sequence of two (the prompt token and the
    completion token, whose log-prob the stub model returns), old_log_probs the engine's."""
    trainer = AsyncTrainer(fields["epsilon"], fields.get("epsilon_high"))

    def loss_fn(b, log_pi, old, sampler, mask, advantages):
        def model(**kwargs):
            return {"log_probs": log_pi, "entropy": torch.zeros_like(log_pi)}
        two = torch.ones(1, 2, dtype=torch.long)
        inputs = {"attention_mask": two, "input_ids": two, "position_ids": torch.arange(2)[None],
                  "completion_mask": torch.tensor([[0.0, 1.0]], dtype=torch.float64),
                  "old_log_probs": torch.cat([torch.zeros(1, 1, dtype=torch.float64), sampler], dim=1),
                  "advantages": advantages.expand(1, 2), "global_n_tokens": torch.ones(1, dtype=torch.float64)}
        return trainer.compute_loss(model, inputs)

    return loss_fn


def run_update(numbers, preset, setting, fields, params, correction, correction_params):
    epsilon = fields.get("epsilon", 0.2)
    high = fields.get("epsilon_high", epsilon)
    if fields.get("loss_type") == "cispo":
        ratios = [high]
    else:
        ratios = [1 - epsilon, 1 + high] + ([fields["delta"]] if fields.get("delta") else [])
    weights = [fields["vllm_importance_sampling_clip_max"]] if fields.get("use_vllm") else []
    is_async = preset == "trl:async_grpo"
    name = numbers.batch(f"updates/{preset}/{setting}",
                         harness.update_probes(ratios, weights, ratios if is_async else ()))
    loss, gradient = harness.per_token(async_loss(fields) if is_async else grpo_loss(fields), numbers.batches[name])
    numbers.update(preset, setting, fields, params, correction, correction_params, name, loss, gradient)


def main():
    numbers = harness.Numbers(FRAMEWORK, REPOSITORY, COMMIT, "tests/catalogue/reference/trl/generate.py")
    ragged = numbers.batch("ragged", harness.VERL_BATCH)
    for mode in MODES:
        for setting, params in {"defaults": {}, "alternative": {"clip_min": 0.5, "clip_max": 1.5}}.items():
            clip_min, clip_max = params.get("clip_min"), params.get("clip_max", 3.0)
            probes = numbers.batch(f"probes/{mode}/{setting}", harness.probe_batch([clip_max, clip_min or 0]))
            trainer = Trainer(mode, clip_min, clip_max)
            check(trainer)
            for batch in (ragged, probes):
                gradient, mask = run(trainer, numbers.batches[batch])
                numbers.add(f"{FRAMEWORK}:{mode}", params, batch, gradient * mask.sum(), setting=setting)
    for loss_type in ("dapo", "grpo", "bnpo", "dr_grpo"):
        trainer = Trainer("token_mask", 0.5, 1.5, loss_type)
        numbers.finding(f"losses/{loss_type}", ragged, run(trainer, numbers.batches[ragged])[0],
                        f"loss_type {loss_type}, token_mask with clip 0.5 and 1.5: −∂loss/∂log π / A_b")
    for delta in ("0.05", "0.5"):
        trainer = Trainer("sequence_mask", None, 3.0, off_policy_mask_threshold=float(delta))
        numbers.finding(f"off_policy_mask/{delta}", ragged, run(trainer, numbers.batches[ragged])[0],
                        f"off_policy_mask_threshold {delta} over the default sequence_mask: −∂loss/∂log π / A_b")
    for preset, setting, fields, params, correction, correction_params in UPDATE_SETTINGS:
        run_update(numbers, preset, setting, fields, params, correction, correction_params)
    numbers.write(HERE / "numbers.json")


if __name__ == "__main__":
    main()
