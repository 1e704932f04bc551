"""Where a weight function is evaluated: every sequence of the toy, or sequences given as per-token arrays.

Both views answer to the same names, so one weight function serves the exact engine (``AllSequences``: its
per-token values are (T, V) tables holding every token at every position, its per-sequence values M-vectors)
and the batch interface (``GivenSequences``: (B, T) arrays of the tokens that were sampled, (B,) vectors):

    log_rho, rho                      per-token log ratio log π − log μ, and ratio
    advantage                         A = r − b, per sequence
    log_W                             Σ_t log ρ_t, per sequence
    length                            tokens per sequence (T, or each row's count in the mask)
    token_statistic(name)             log_ratio = log ρ, k1 = −log ρ, k2 = ½(log ρ)², k3 = ρ − 1 − log ρ, abs_log_ratio
    sequence_statistic(name, scope)   its sum, mean or max over the sequence's own tokens
    mean_k3, max_abs_log_rho          two of those, by name (the catalogue's k3_rs and trm read them)
    clamped(bound, mean_epsilon), clamped_out    verl's conventions, below

verl clamps log ratios to ±20 before exponentiating (``SAFETY_BOUND`` in verl/trainer/ppo/rollout_corr_helper.py,
verl b178a3c): each token's log ratio for token weights and for every rejection statistic, but the *sum*
Σ_t log ρ_t for the sequence weight; and its masked_mean divides by the token count + 10⁻⁸. ``clamped(bound,
mean_epsilon)`` is the view through exactly those conventions; ``clamped_out`` marks the tokens the clamp clipped
(their PPO ratio is a constant there, so their gradient is 0).
"""

from functools import cached_property

import numpy as np

from toylab.grid import outer_max, outer_sum

STATISTICS = {
    "log_ratio": lambda log_rho: log_rho,
    "k1": lambda log_rho: -log_rho,
    "k2": lambda log_rho: 0.5 * log_rho**2,
    "k3": lambda log_rho: np.exp(log_rho) - 1 - log_rho,
    "abs_log_ratio": np.abs,
}
SCOPES = ("sum", "mean", "max")


class _Statistics:
    """What both views derive the same way from their per-token log ratios and ``sequence_statistic``."""

    @property
    def mean_k3(self):
        return self.sequence_statistic("k3", "mean")

    @property
    def max_abs_log_rho(self):
        return self.sequence_statistic("abs_log_ratio", "max")

    def token_statistic(self, name):
        return STATISTICS[name](self.log_rho)


class AllSequences(_Statistics):
    """Every sequence of a toy, with advantage A = r − b; statistics are M-vectors, kept for
    this view's lifetime only (one exact pass), so a cached toy holds none of them."""

    def __init__(self, toy, baseline_value=0.0, clamp=None, mean_epsilon=0.0):
        self.toy, self.b, self.clamp, self.mean_epsilon = toy, float(baseline_value), clamp, mean_epsilon
        self.memo = {}
        self.T = self.length = toy.T
        self.clamped_out = np.zeros(toy.log_rho.shape, bool) if clamp is None else np.abs(toy.log_rho) > clamp
        self.clips_tokens = bool(self.clamped_out.any())
        self.clips_sums = clamp is not None and np.abs(toy.log_rho).max(axis=1).sum() > clamp
        self.log_rho = np.clip(toy.log_rho, -clamp, clamp) if self.clips_tokens else toy.log_rho
        self.rho = np.exp(self.log_rho) if self.clips_tokens else toy.rho

    def clamped(self, bound, mean_epsilon=0.0):
        return AllSequences(self.toy, self.b, bound, mean_epsilon)

    @cached_property
    def advantage(self):
        return self.toy.R - self.b

    @property
    def log_W(self):
        return np.clip(self.toy.log_W, -self.clamp, self.clamp) if self.clips_sums else self.toy.log_W

    def sequence_statistic(self, name, scope):
        if not self.clips_tokens and not (scope == "mean" and self.mean_epsilon):
            shared = {("log_ratio", "sum"): "log_W", ("k3", "mean"): "mean_k3",
                      ("abs_log_ratio", "max"): "max_abs_log_rho"}.get((name, scope))
            if shared:
                return getattr(self.toy, shared)
            if (name, scope) == ("log_ratio", "mean"):
                return self.toy.log_W / self.T
        key = ("sequence statistic", name, scope, self.clamp if self.clips_tokens else None,
               self.mean_epsilon if scope == "mean" else 0.0)
        if key not in self.memo:
            table = self.token_statistic(name)
            if scope == "max":
                self.memo[key] = outer_max(table)
            else:
                total = outer_sum(table)
                self.memo[key] = total / (self.T + self.mean_epsilon) if scope == "mean" else total
        return self.memo[key]


class GivenSequences(_Statistics):
    """B sequences as per-token arrays (B, T); ``mask`` (1 = response token) makes them ragged.

    Per-sequence statistics use only each sequence's own tokens: its sum, its mean over its own length
    L_b (so ρ_geo = W^(1/L_b)) and its maximum. An empty sequence has statistics 0, as in verl.
    """

    def __init__(self, trainer_logprobs, sampler_logprobs, mask=None, advantages=None):
        trainer = np.asarray(trainer_logprobs, dtype=float)
        sampler = np.asarray(sampler_logprobs, dtype=float)
        if trainer.ndim != 2 or trainer.shape != sampler.shape:
            raise ValueError(f"trainer and sampler log-probabilities must be (B, T) arrays of one shape, got "
                             f"{trainer.shape} and {sampler.shape}")
        self.mask = np.ones(trainer.shape, bool) if mask is None else _mask(mask, trainer.shape)
        self.ragged = not self.mask.all()
        self.raw_log_rho = np.subtract(trainer, sampler, out=np.zeros(trainer.shape), where=self.mask) \
            if self.ragged else trainer - sampler
        if not np.all(np.isfinite(self.raw_log_rho)):
            raise ValueError("log-probabilities must be finite on the response tokens")
        self.advantages = None if advantages is None else _advantages(advantages, trainer.shape[0])
        self.clamp, self.mean_epsilon = None, 0.0
        self.T = trainer.shape[1]
        self.length = self.mask.sum(axis=1)
        self.log_rho = self.raw_log_rho
        self.rho = np.exp(self.log_rho)
        self.clamped_out = np.zeros(self.mask.shape, bool)

    def clamped(self, bound, mean_epsilon=0.0):
        view = GivenSequences.__new__(GivenSequences)
        view.__dict__.update(self.__dict__)
        view.clamp, view.mean_epsilon = bound, mean_epsilon
        view.log_rho = np.clip(self.raw_log_rho, -bound, bound)
        view.rho = np.exp(view.log_rho)
        view.clamped_out = np.abs(self.raw_log_rho) > bound
        return view

    @property
    def advantage(self):
        if self.advantages is None:
            raise ValueError("this estimator depends on the advantage of each sequence: pass advantages")
        return self.advantages

    @property
    def log_W(self):
        total = self.raw_log_rho.sum(axis=1)
        return total if self.clamp is None else np.clip(total, -self.clamp, self.clamp)

    def sequence_statistic(self, name, scope):
        table = self.token_statistic(name)
        if scope == "max":
            if not self.ragged:
                return table.max(axis=1)
            largest = np.where(self.mask, table, -np.inf).max(axis=1)
            return np.where(self.length > 0, largest, 0.0)
        total = np.where(self.mask, table, 0.0).sum(axis=1) if self.ragged else table.sum(axis=1)
        if scope != "mean":
            return total
        return total / (self.length + self.mean_epsilon) if self.mean_epsilon else total / np.maximum(self.length, 1)

    def assemble(self, weights):
        """(c, kept): the (B, T) coefficients of these Weights, 0 at padding, and the tokens left in the loss mask."""
        B, T = self.mask.shape
        sequence = np.asarray(weights.sequence, dtype=float)
        coefficient = sequence.reshape(-1, 1) if sequence.ndim else sequence
        token = weights.token
        if weights.splits_by_sign:
            negative = (self.advantage < 0)[:, None]
            token = np.where(negative, _per_token(weights.negative_token), _per_token(token))
        if token is not None:
            coefficient = coefficient * token
        if weights.carry is not None:                                   # c_t ∝ ∏_{s<t} carry_s
            carried = np.where(self.mask, weights.carry, 1.0)
            coefficient = coefficient * np.cumprod(np.concatenate([np.ones((B, 1)), carried[:, :-1]], axis=1), axis=1)
        kept = self.mask
        if weights.sequence_rejected is not None:
            kept = kept & ~np.asarray(weights.sequence_rejected, bool).reshape(-1, 1)
        if weights.token_rejected is not None:
            kept = kept & ~np.asarray(weights.token_rejected, bool)
        coefficient = np.broadcast_to(coefficient, (B, T))
        return (np.where(self.mask, coefficient, 0.0) if self.ragged else coefficient), kept


    def affected(self, weights):
        """(B, T) bool: the response tokens whose weight these Weights mask or clip — the token's own mark
        (for A < 0 the negative-advantage one) or its sequence's. The exact engine's ``tokens_affected`` and
        ``sequences_affected`` are the μ-means of these marks' token share and of "any token"."""
        B, T = self.mask.shape
        affected = np.zeros((B, T), bool)
        token_hit = weights.token_affected
        if weights.splits_by_sign:
            negative = (self.advantage < 0)[:, None]
            token_hit = np.where(negative, _marks(weights.negative_token_affected, (B, T)), _marks(token_hit, (B, T)))
        if token_hit is not None:
            affected |= np.broadcast_to(token_hit, (B, T))
        if weights.sequence_affected is not None:
            affected |= np.asarray(weights.sequence_affected, bool).reshape(-1, 1)
        return affected & self.mask


def _marks(value, shape):
    return np.zeros(shape, bool) if value is None else value


def _per_token(value):
    return 1.0 if value is None else value


def _mask(mask, shape):
    mask = np.asarray(mask)
    if mask.shape != shape:
        raise ValueError(f"mask must have the log-probabilities' shape {shape}, got {mask.shape}")
    if not np.all((mask == 0) | (mask == 1)):
        raise ValueError("mask must hold 0 (padding) and 1 (response token) only")
    return mask.astype(bool)


def _advantages(advantages, B):
    advantages = np.asarray(advantages, dtype=float)
    if advantages.shape != (B,) or not np.all(np.isfinite(advantages)):
        raise ValueError(f"advantages must be {B} finite numbers, one per sequence, got shape {advantages.shape}")
    return advantages
