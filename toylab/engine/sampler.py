"""The sampler model: how an inference engine turns logits into the distribution μ it samples from.

For each position, from the engine's logits z = θ + mismatch·b (the trainer's π = softmax(θ) is unchanged):

    precision     z ← float64(bf16(float32(z))) or float64(fp16(float32(z))): cast to float32, then rounded to
                  bfloat16 or float16 to nearest, ties to even (what torch's ``.to(torch.bfloat16)`` does)
    temperature   z ← z/τ
    top-k         keep the tokens whose z is at least the k-th largest z (k = 0: every token; ties at the k-th
                  value are all kept)
    top-p         keep a token when the probability (softmax over the tokens top-k kept) of the tokens strictly
                  more likely than it is below p (p = 1: every token); the most likely token is always kept
    μ             softmax of z over the kept tokens, 0 on the others (log μ = −∞ there)

in vLLM's order, read at vllm-project/vllm 3e342658 (vllm/v1/sample/sampler.py, ``Sampler.forward`` and
``Sampler.sample``: logits to float32, then temperature, then top-k/top-p) and 01fa3fe
(vllm/v1/sample/ops/topk_topp_sampler.py, ``apply_top_k_top_p_pytorch``). There the top-k mask removes the
logits strictly below the k-th largest (``logits_sort < top_k_mask``), so ties are kept, as here; the top-p
mask sorts ascending and removes a token when the cumulative probability up to and including it is
≤ 1 − p (``probs_sum <= 1 - p``), keeping the last: the mass after it in the sort is ≥ p. Without ties that is
the rule above. Within a group of tied logits vLLM's result depends on the sort's order among them; the rule
here treats tied tokens alike, so it keeps every token of a tie that vLLM would keep one of. vLLM divides by τ
in float32; the model divides the rounded logits in float64. Note also that vLLM's default ``logprobs_mode``,
"raw_logprobs", returns log-probabilities computed before temperature and top-k/top-p (the docstring of
``Sampler``, steps 1 and 7): a framework that takes those as the sampler's log μ uses a distribution other
than the one sampled from. The model here is the one sampled from.

A token outside the kept set has μ = 0 while π > 0: no sequence through it is ever sampled, so no importance
weight can give back the π-mass there (``toy.Toy.unreachable_mass``).

Three distributions. What the engine samples from (μ_s, above) need not be what it logs as μ, nor need the trainer
score softmax(θ): the correction divides by the logged μ_log and multiplies by the scored π, on tokens drawn from μ_s.
``Sampler.logged`` and ``Sampler.scored`` choose them (``catalogue.pipelines`` names each with the source it models):

    logged μ_log   processed     μ_s itself (vLLM's logprobs_mode "processed_logprobs"; the default)
                   raw           softmax(z), z the rounded logits: no temperature, no truncation (vLLM's default
                                 "raw_logprobs")
                   temperature   softmax(z/τ): the temperature, no truncation
    scored π       plain         softmax(θ) (the default)
                   temperature   softmax(θ/τ): the trainer divides its logits by the sampler's temperature
                   keep_mask     softmax(θ/τ) restricted to the tokens the sampler kept at the position, renormalised
                                 (DeepSeek-V3.2's "Keep Sampling Mask")

Each is a product over positions, like μ_s. The score function is the scored π's: ∇_θ log π(v) = (onehot(v) − π)/τ
with τ = 1 for plain (``score_scale``); under keep_mask π is 0 outside the kept set and so is the score's π there.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

from toylab.catalogue.pipelines import LOGGED, SCORED
from toylab.text import quoted

PRECISIONS = ("none", "bf16", "fp16")
TEMPERATURE_RANGE = (0.25, 4.0)
FLOAT16_LARGEST = 65504.0


def log_softmax(logits):
    """log softmax along the last axis: z − max z − log Σ exp(z − max z)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def bfloat16(values):
    """The float64 values of float32(values) rounded to bfloat16, to nearest with ties to even: the top 16 bits of
    the float32 after adding 0x7FFF plus the lowest kept bit (finite values; every float32 is in bfloat16's range)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def float16(values):
    """The float64 values of float32(values) rounded to float16, to nearest with ties to even (numpy's conversion);
    ValueError beyond float16's largest finite value, where the engine's logit would be ±inf."""
    single = np.asarray(values, dtype=np.float32)
    if np.abs(single).max(initial=0.0) > FLOAT16_LARGEST:
        raise ValueError(f"a sampler logit is beyond float16's largest value ({FLOAT16_LARGEST:,.0f}): use bf16 or a "
                         "smaller mismatch")
    return single.astype(np.float16).astype(np.float64)


ROUNDING = {"bf16": bfloat16, "fp16": float16}


def top_k_kept(logits, k):
    """(…, V) bool: z at least the k-th largest z of its row (all of them when k is 0 or ≥ V)."""
    V = logits.shape[-1]
    if k == 0 or k >= V:
        return np.ones(logits.shape, bool)
    kth_largest = np.sort(logits, axis=-1)[..., V - k, None]
    return logits >= kth_largest


def masked_log_softmax(logits, kept):
    """log softmax over the kept entries of each row, −∞ at the others (each row keeps at least one)."""
    return log_softmax(np.where(kept, logits, -np.inf))


def top_p_kept(logits, kept, p):
    """(…, V) bool: kept by top-k and the probability of the tokens strictly more likely is below p."""
    probability = np.exp(masked_log_softmax(logits, kept))
    more_likely = logits[..., None, :] > logits[..., :, None]              # [v, u]: token u strictly more likely
    above = (probability[..., None, :] * more_likely).sum(axis=-1)
    return kept & (above < p)


@dataclass(frozen=True)
class Sampler:
    """How the pipeline turns θ into its three distributions: the engine samples with top_p in (0, 1], top_k ≥ 0
    (0: off), temperature τ in TEMPERATURE_RANGE and precision one of PRECISIONS; it logs ``logged`` (one of LOGGED)
    and the trainer scores ``scored`` (one of SCORED). The default, Sampler(), is plain softmax of z, logged as
    sampled and scored as softmax(θ): μ_t = softmax(θ_t + mismatch·b_t), π_t = softmax(θ_t)."""
    top_p: float = 1.0
    top_k: int = 0
    temperature: float = 1.0
    precision: str = "none"
    logged: str = "processed"
    scored: str = "plain"

    def __post_init__(self):
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, numbers.Real) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {quoted(self.top_p)}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, numbers.Integral) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer ≥ 0 (0: off), got {quoted(self.top_k)}")
        low, high = TEMPERATURE_RANGE
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, numbers.Real) \
                or not math.isfinite(self.temperature) or not low <= self.temperature <= high:
            raise ValueError(f"temperature must be between {low:g} and {high:g}, got {quoted(self.temperature)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {quoted(self.precision)}")
        if self.logged not in LOGGED:
            raise ValueError(f"logged must be one of {', '.join(LOGGED)}, got {quoted(self.logged)}")
        if self.scored not in SCORED:
            raise ValueError(f"scored must be one of {', '.join(SCORED)}, got {quoted(self.scored)}")
        object.__setattr__(self, "top_p", float(self.top_p))
        object.__setattr__(self, "top_k", int(self.top_k))
        object.__setattr__(self, "temperature", float(self.temperature))

    @property
    def is_default(self):
        """True for plain softmax, logged as sampled and scored as softmax(θ)."""
        return self == Sampler()

    @property
    def samples_plainly(self):
        """True when μ_s is plain softmax of z: no rounding, τ = 1, no truncation (whatever is logged and scored)."""
        return (self.top_p, self.top_k, self.temperature, self.precision) == (1.0, 0, 1.0, "none")

    @property
    def score_scale(self):
        """1/τ for a trainer that divides its logits by τ (temperature, keep_mask), else 1: ∇_θ log π = scale·(onehot − π)."""
        return 1.0 if self.scored == "plain" else 1.0 / self.temperature

    def check_vocabulary(self, V):
        """ValueError unless top_k is 0 or at most V."""
        if self.top_k > V:
            raise ValueError(f"top_k must be 0 (off) or between 1 and V = {V}, got {self.top_k}")

    def parameters(self):
        """{"top_p", "top_k", "temperature", "precision", "logged", "scored"}: the keyword arguments of
        ``toy.make_toy``."""
        return {"top_p": self.top_p, "top_k": self.top_k, "temperature": self.temperature,
                "precision": self.precision, "logged": self.logged, "scored": self.scored}

    def describe(self):
        """'top-p 0.9, τ = 0.7, bf16, logged raw, scored keep_mask', or 'plain softmax' for the default."""
        parts = ([f"top-p {self.top_p:g}"] if self.top_p < 1 else []) + ([f"top-k {self.top_k}"] if self.top_k else []) \
            + ([f"τ = {self.temperature:g}"] if self.temperature != 1 else []) \
            + ([self.precision] if self.precision != "none" else []) \
            + ([f"logged {self.logged}"] if self.logged != "processed" else []) \
            + ([f"scored {self.scored}"] if self.scored != "plain" else [])
        return ", ".join(parts) or "plain softmax"

    def log_probabilities(self, logits):
        """log μ_s (…, V) from the engine's logits z (…, V): −∞ at the tokens the sampler never draws."""
        if self.samples_plainly:
            return log_softmax(logits)
        z = self.tempered(logits)
        kept = top_k_kept(z, self.top_k)
        if self.top_p < 1:
            kept = top_p_kept(z, kept, self.top_p)
        return masked_log_softmax(z, kept) if not kept.all() else log_softmax(z)

    def rounded(self, logits):
        """The engine's logits z at its precision."""
        return ROUNDING[self.precision](logits) if self.precision != "none" else logits

    def tempered(self, logits):
        """z/τ of the rounded logits."""
        z = self.rounded(logits)
        return z / self.temperature if self.temperature != 1 else z

    def logged_log_probabilities(self, logits, log_sampled):
        """log μ_log (…, V): ``log_sampled`` (log μ_s) itself when processed; log softmax of the rounded logits (raw)
        or of them over τ (temperature), with no truncation."""
        if self.logged == "processed":
            return log_sampled
        return log_softmax(self.rounded(logits) if self.logged == "raw" else self.tempered(logits))

    def scored_log_probabilities(self, theta, kept):
        """log π (…, V) of the trainer's recomputation from θ (…, V): softmax(θ) (plain), softmax(θ/τ)
        (temperature), or softmax(θ/τ) over the sampler's ``kept`` tokens, −∞ elsewhere (keep_mask)."""
        if self.scored == "plain":
            return log_softmax(theta)
        tempered = theta / self.temperature
        return log_softmax(tempered) if self.scored == "temperature" or kept.all() else masked_log_softmax(tempered, kept)


DEFAULT_SAMPLER = Sampler()
