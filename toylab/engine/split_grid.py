"""The V**T grid as (first half) × (second half): outer sums and position marginals of many tables at once.

Sequence m = (i, j), i indexing the first a = T // 2 tokens and j the other T − a, m = i·V**(T−a) + j: the
order of ``grid``. With the one-hot matrix of each half (rows t·V + v, one column per half-sequence),

    outer sum   x[..., i, j] = (table_first · onehot_first)[..., i] + (table_second · onehot_second)[..., j]
    marginals   m[..., first]  = (Σ_j x[..., i, j]) · onehot_firstᵀ,  m[..., second] = (Σ_i x[..., i, j]) · onehot_secondᵀ

two small matrix products and one pass over the M sequences, for any leading axes (one table per θ):
3–4× faster than ``grid``'s T passes at M = 4096 and at M = 4**10.
"""

from functools import cache

import numpy as np

from toylab.engine.grid import outer_max, token_grid

FAR_BELOW = -1e300           # stands for log 0: a sum of a few of these stays finite, and its exp is 0


class SplitGrid:
    def __init__(self, T, V):
        self.T, self.V, self.M = T, V, V**T
        self.first = T // 2
        self.onehot_first, self.onehot_second = (_onehot(length, V) for length in (self.first, T - self.first))
        zero_count = self.outer_sum(np.tile(np.eye(V)[0], (T, 1)))
        self.reward = (2 * zero_count >= T).astype(float)          # r(y) = 1[#zeros ≥ T/2]

    def outer_sum(self, table):
        """x[..., y] = Σ_t table[..., t, y_t]: tables (..., T, V) → (..., M)."""
        lead = table.shape[:-2]
        first = table[..., :self.first, :].reshape(*lead, -1) @ self.onehot_first
        second = table[..., self.first:, :].reshape(*lead, -1) @ self.onehot_second
        return (first[..., :, None] + second[..., None, :]).reshape(*lead, self.M)

    def outer_product(self, log_table):
        """x[..., y] = ∏_t exp(log_table[..., t, y_t]) = exp(outer_sum): the exponentials taken on the halves only.
        A −∞ entry (a token a truncating sampler never draws) counts as FAR_BELOW, so the one-hot product never
        computes −∞·0; its sequences come out exactly 0."""
        lead = log_table.shape[:-2]
        if np.isneginf(log_table).any():
            log_table = np.where(np.isneginf(log_table), FAR_BELOW, log_table)
        first = np.exp(log_table[..., :self.first, :].reshape(*lead, -1) @ self.onehot_first)
        second = np.exp(log_table[..., self.first:, :].reshape(*lead, -1) @ self.onehot_second)
        return (first[..., :, None] * second[..., None, :]).reshape(*lead, self.M)

    def outer_max(self, table):
        """x[..., y] = max_t table[..., t, y_t]: tables (..., T, V) → (..., M) (one table at a time)."""
        flat = table.reshape(-1, self.T, self.V)
        return np.stack([self._outer_max(one) for one in flat]).reshape(*table.shape[:-2], self.M)

    def _outer_max(self, table):
        halves = [outer_max(part) for part in (table[:self.first], table[self.first:]) if len(part)]
        return np.maximum.outer(*halves).ravel() if len(halves) == 2 else halves[0]

    def marginals(self, x):
        """m[..., t, v] = Σ_y x[..., y]·1[y_t = v]: M-vectors (..., M) → (..., T, V)."""
        lead = x.shape[:-1]
        blocks = x.reshape(*lead, self.V**self.first, -1)
        first = blocks.sum(axis=-1) @ self.onehot_first.T
        second = blocks.sum(axis=-2) @ self.onehot_second.T
        return np.concatenate([first, second], axis=-1).reshape(*lead, self.T, self.V)


def _onehot(length, V):
    """(length·V, V**length): entry [t·V + v, i] = 1 if half-sequence i has token v at position t."""
    tokens = token_grid(length, V) if length else np.zeros((1, 0), dtype=int)
    onehot = np.zeros((length * V, V**length))
    onehot[np.arange(length) * V + tokens, np.arange(V**length)[:, None]] = 1.0
    return onehot


@cache
def split_grid(T, V):
    """The SplitGrid for (T, V), built once per process."""
    return SplitGrid(T, V)

