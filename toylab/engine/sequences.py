"""Where a weight function is evaluated: every sequence of the toy, or sequences given as per-token arrays.

Both views answer to the same names, so one weight function serves the exact engine (``AllSequences``: its
per-token values are (T, V) tables holding every token at every position, its per-sequence values M-vectors)
and the batch interface (``GivenSequences``: (B, T) arrays of the tokens that were sampled, (B,) vectors):

    log_rho, rho                      per-token log ratio log π − log μ, and ratio
    log_pi, log_mu                    per-token log-probabilities log π_t(y_t), log μ_t(y_t) (probability-space masks)

μ here is what the correction sees: the logged μ_log of the pipeline (``toy``), which the sequences were not
necessarily drawn from; π is the trainer's scored π.
    advantage                         A = r − b, per sequence
    log_W, W                          Σ_t log ρ_t and its exp, per sequence
    length                            tokens per sequence (T, or each row's count in the mask)
    token_statistic(name)             a per-token statistic by name (``STATISTICS``)
    sequence_statistic(name, scope)   its sum, mean or max over the sequence's own tokens
    reduced(key, table, scope)        the same for any per-token table (``key`` names it, with its parameters)
    mean_k3, max_abs_log_rho          two of those, by name (the catalogue's k3_rs and trm read them)
    clamped(bound, mean_epsilon, clamp_sums), clamped_out    the frameworks' clamps, below

The per-token statistics, by name, are ``catalogue.statistics.STATISTICS``.

Tokens outside μ's support. A sampler that truncates (top-k, top-p; ``sampler``) never draws some tokens: there
μ = 0, log μ = −∞ and the view's log ρ = +∞, ρ = +∞ (``AllSequences`` only: given sequences were sampled, so
their tokens are always inside). Every statistic keeps the sign of that infinity — log W = +∞, W = +∞, k1 sums
−∞, k2, k3 and |log ρ| +∞ — so a threshold compares as it should (such a sequence is "beyond" every upper
bound). A sequence holding such a token has μ(y) = 0: it never appears, and the exact engine reads a weight
function's values only on μ's support (``AllSequences.on_support`` sets every factor outside it to 0 before
any probability multiplies it). So a weight function, a catalogue family reading π(y_t) and μ(y_t) included:

- may return anything at those tokens and sequences (it is never used), but
- must not compute ∞·0, ∞ − ∞ or 0/0 on the way there, which warn (and the tests fail on a warning): write a
  mask as ``np.where(kept, rho, 0.0)``, not ``rho * kept`` (or compute under ``np.errstate`` and select with
  ``np.where``); take a per-token statistic from ``token_statistic`` (each is finite or +∞ there, never NaN);
  and where it needs μ(y_t) itself, use ``exp(log μ)``, which is 0, not a division by it.

verl clamps log ratios to ±20 before exponentiating (``SAFETY_BOUND`` in verl/trainer/ppo/rollout_corr_helper.py,
verl b178a3c): each token's log ratio for token weights and for every rejection statistic, but the *sum*
Σ_t log ρ_t for the sequence weight; and its masked_mean divides by the token count + 10⁻⁸. ``clamped(bound,
mean_epsilon)`` is the view through exactly those conventions; ``clamped_out`` marks the tokens the clamp clipped
(their PPO ratio is a constant there, so their gradient is 0). slime, Miles and SkyRL clamp a sequence's sum or
mean of the raw log ratios instead (slime 624b824 examples/train_infer_mismatch_helper/mis.py lines 192–198 and
222, SkyRL a956457 off_policy_correction_utils.py 223–224, 239–240): ``clamped(bound, mean_epsilon,
clamp_sums=True)``, where the log ratio's sequence sum and mean are the clamp of the raw sum and mean (the other
statistics' stay sums of clamped tokens: no framework reduces them otherwise). A row [25, −4, −4, −4, −4, −4]
has sum 5 that way and 0 the other.
"""

from dataclasses import replace
from functools import cached_property

import numpy as np

from toylab.catalogue.statistics import RATIO_STATISTICS, STATISTICS
from toylab.catalogue.weights import product
from toylab.engine.grid import outer_any, outer_max, outer_sum

SCOPES = ("sum", "mean", "max")


class _Statistics:
    """What both views derive the same way from their per-token log ratios and ``sequence_statistic``."""

    @property
    def W(self):
        """W = exp(Σ_t log ρ_t), the sequence ratio, per sequence (a weight function must not write into it)."""
        return np.exp(self.log_W)

    @property
    def mean_k3(self):
        return self.sequence_statistic("k3", "mean")

    @property
    def max_abs_log_rho(self):
        return self.sequence_statistic("abs_log_ratio", "max")

    def token_statistic(self, name):
        return STATISTICS[name](self)

    def sequence_statistic(self, name, scope):
        """The statistic's sum, mean or max over each sequence's own tokens (the log ratio's sum and mean clamped
        after the sum under ``clamp_sums``)."""
        if name == "log_ratio" and scope != "max" and (self.clamp is None or self.clamp_sums):
            value = self.reduced("log ρ", self.raw_log_rho, scope)
            return value if self.clamp is None else np.clip(value, -self.clamp, self.clamp)
        return self.reduced(self.statistic_key(name), self.token_statistic(name), scope)

    def statistic_key(self, name):
        return name


class AllSequences(_Statistics):
    """The toy's sequences that start with ``prefix`` (by default all of them), with advantage A = r − b.

    Its per-sequence values are vectors over those V**c sequences (c = T − len(prefix), grid order): a sum
    (or maximum) of per-position tables is the prefix's fixed part plus (or max'd with) an outer sum over the
    c free positions. The outer parts depend only on the tables, so the views of one pass over the prefixes
    share them through ``suffixes`` (a dict); everything else lives for the view's lifetime (one chunk).
    """

    def __init__(self, toy, baseline_value=0.0, clamp=None, mean_epsilon=0.0, prefix=(), suffixes=None,
                 clamp_sums=False):
        self.toy, self.b, self.clamp, self.mean_epsilon = toy, float(baseline_value), clamp, mean_epsilon
        self.clamp_sums = clamp_sums
        self.prefix = np.asarray(prefix, dtype=np.intp)
        self.head = len(self.prefix)                           # positions fixed by the prefix
        self.suffixes = {} if suffixes is None else suffixes
        self.memo = {}
        self.T = self.length = toy.T
        self.clamped_out = np.zeros(toy.log_rho.shape, bool) if clamp is None else np.abs(toy.log_rho) > clamp
        self.clips_tokens = bool(self.clamped_out.any())
        self.clips_sums = clamp is not None and np.abs(toy.log_rho).max(axis=1).sum() > clamp
        self.log_rho = np.clip(toy.log_rho, -clamp, clamp) if self.clips_tokens else toy.log_rho
        self.rho = np.exp(self.log_rho) if self.clips_tokens else toy.rho
        self.log_pi, self.log_mu = toy.log_pi, toy.log_logged            # what the correction sees: scored π, logged μ
        self.raw_log_rho = toy.log_rho

    def clamped(self, bound, mean_epsilon=0.0, clamp_sums=False):
        return AllSequences(self.toy, self.b, bound, mean_epsilon, self.prefix, self.suffixes, clamp_sums)

    def statistic_key(self, name):
        """The statistic's name, and the clamp where it clips this statistic (it clips log ratios, not
        probabilities): views with and without a clamp that clips nothing share one outer sum."""
        return name, self.clamp if self.clips_tokens and name in RATIO_STATISTICS else None

    def over_positions(self, key, table, kind="sum"):
        """x[y] = Σ_t table[t, y_t] (kind "sum") or max_t (kind "max") for each of the view's sequences;
        ``key`` names the table, so that its outer part over the free positions is built once per pass."""
        if (key, kind) not in self.suffixes:
            free = table[self.head:]
            self.suffixes[(key, kind)] = outer_sum(free) if kind == "sum" else outer_max(free)
        outer = self.suffixes[(key, kind)]
        fixed = table[np.arange(self.head), self.prefix]
        if not self.head:
            return outer
        return outer + fixed.sum() if kind == "sum" else np.maximum(outer, fixed.max())

    @property
    def rewarded(self):
        """r(y) = 1 as a boolean: at least half of the tokens are token 0."""
        is_zero = np.zeros((self.T, self.toy.V), dtype=np.int8)       # int8 counts: T < 128 for any M in memory
        is_zero[:, 0] = 1
        return self.over_positions("zeros", is_zero) >= self.T / 2

    @cached_property
    def advantage(self):
        """A = r − b for every sequence."""
        return np.where(self.rewarded, 1.0 - self.b, -self.b)

    @cached_property
    def log_W(self):
        raw = self.over_positions("log ρ", self.toy.log_rho)
        return np.clip(raw, -self.clamp, self.clamp) if self.clips_sums else raw

    @cached_property
    def W(self):
        """exp(log W), once per chunk for every sequence-level weight (read-only for them)."""
        return np.exp(self.log_W)

    def probability(self, on_policy):
        """π(y) (on_policy) or μ(y) for every sequence: exp of the prefix's part times the free positions'."""
        key = "π(y)" if on_policy else "μ(y)"
        if key not in self.memo:
            table = self.toy.log_pi if on_policy else self.toy.log_mu
            if (key, "exp") not in self.suffixes:
                self.suffixes[(key, "exp")] = np.exp(outer_sum(table[self.head:]))
            fixed = table[np.arange(self.head), self.prefix].sum()
            self.memo[key] = self.suffixes[(key, "exp")] * np.exp(fixed) if self.head else self.suffixes[(key, "exp")]
        return self.memo[key]

    @cached_property
    def supported(self):
        """μ(y) > 0 for each of the view's sequences: every token inside the sampler's support (``toy.kept``)."""
        outside = ~self.toy.kept
        if outside[np.arange(self.head), self.prefix].any():
            return np.zeros(self.toy.V ** (self.T - self.head), bool)
        return ~outer_any(outside[self.head:])

    def on_support(self, weights):
        """The Weights with every factor outside μ's support set to 0: a sequence weight where μ(y) = 0, a token
        table (and carry) at the tokens μ never draws. Exact, since no probability falls there; and what it
        removes may be ∞ (W = ∞ there), which must never meet the probability 0. As given when nothing is
        truncated."""
        if not self.toy.truncates:
            return weights
        kept = self.toy.kept

        def on_kept(table):
            return None if table is None else np.where(kept, table, 0.0)
        sequence = weights.sequence if np.ndim(weights.sequence) == 0 else \
            np.where(self.supported, weights.sequence, 0.0)
        classes = tuple(replace(token_class, token=on_kept(token_class.token)) for token_class in weights.classes)
        return replace(weights, sequence=sequence, token=on_kept(weights.token), carry=on_kept(weights.carry),
                       additive=on_kept(weights.additive), classes=classes)

    def weighted_probability(self, on_policy):
        """p(y)·A(y), p = π (on_policy) or μ: what every estimator's first moment starts from."""
        key = ("p·A", on_policy)
        if key not in self.memo:
            self.memo[key] = self.probability(on_policy) * self.advantage
        return self.memo[key]

    def reduced(self, key, table, scope):
        """Σ_t, mean_t (over T + mean_epsilon) or max_t of the (T, V) ``table`` for each of the view's sequences;
        ``key`` names the table (its parameters included), so that the pass builds its outer part once."""
        memo_key = ("reduced", key, scope, self.mean_epsilon if scope == "mean" else 0.0)
        if memo_key not in self.memo:
            kind = "max" if scope == "max" else "sum"
            total = self.over_positions(key, table, kind)
            self.memo[memo_key] = total / (self.T + self.mean_epsilon) if scope == "mean" else total
        return self.memo[memo_key]


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
        self.log_pi = np.where(self.mask, trainer, 0.0) if self.ragged else trainer
        self.log_mu = np.where(self.mask, sampler, 0.0) if self.ragged else sampler
        self.advantages = None if advantages is None else _advantages(advantages, trainer.shape[0])
        self.clamp, self.mean_epsilon, self.clamp_sums = None, 0.0, False
        self.T = trainer.shape[1]
        self.length = self.mask.sum(axis=1)
        self.log_rho = self.raw_log_rho
        with np.errstate(over="ignore"):
            self.rho = np.exp(self.log_rho)
        self.clamped_out = np.zeros(self.mask.shape, bool)

    def clamped(self, bound, mean_epsilon=0.0, clamp_sums=False):
        view = GivenSequences.__new__(GivenSequences)
        view.__dict__.update(self.__dict__)
        view.clamp, view.mean_epsilon, view.clamp_sums = bound, mean_epsilon, clamp_sums
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

    def reduced(self, key, table, scope):
        """Σ_t, mean_t or max_t of the (B, T) ``table`` over each sequence's own tokens (``key`` is not needed
        here: it names the table for the exact view's cache)."""
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
        for members, class_token, _ in weights.token_classes()[1:]:
            token = np.where(np.asarray(members, bool)[:, None], _per_token(class_token), _per_token(token))
        if token is not None:
            coefficient = product(coefficient, token)
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

    def additive(self, weights):
        """(B, T): the additive term of these Weights at each response token (0 at padding and where there is none)."""
        if weights.additive is None:
            return np.zeros(self.mask.shape)
        return np.where(self.mask, np.broadcast_to(weights.additive, self.mask.shape), 0.0)

    def affected(self, weights):
        """(B, T) bool: the response tokens whose weight these Weights mask or clip — the token's own mark
        (its token class's) or its sequence's. The exact engine's ``tokens_affected`` and
        ``sequences_affected`` are the μ-means of these marks' token share and of "any token"."""
        B, T = self.mask.shape
        affected = np.zeros((B, T), bool)
        token_hit = weights.token_affected
        for members, _, class_hit in weights.token_classes()[1:]:
            token_hit = np.where(np.asarray(members, bool)[:, None], _marks(class_hit, (B, T)), _marks(token_hit, (B, T)))
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
