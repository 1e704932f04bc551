"""The V**T sequences as a grid, and the two operations the exact engine needs.

Sequence m is the base-V number y_0 y_1 ... y_{T-1} (position 0 most significant), the order of
``itertools.product(range(V), repeat=T)``. A per-sequence statistic that is a sum (or maximum) of
per-position tables is then an outer sum (or outer maximum), built without any (M, T) array; and
the sums of an M-vector over every sequence that starts with a given prefix are repeated reshapes.
"""

import numpy as np


def outer_sum(table):
    """x[y] = Σ_t table[t, y_t] for every sequence y, as an M-vector."""
    return _outer(np.add, table)


def outer_max(table):
    """x[y] = max_t table[t, y_t] for every sequence y, as an M-vector."""
    return _outer(np.maximum, table)


def outer_any(table):
    """x[y] = True if table[t, y_t] for some position t (a boolean (T, V) table), as an M-vector."""
    return _outer(np.logical_or, np.asarray(table, bool))


def _outer(combine, table):
    """A new array always (a copy of row 0 when T = 1), so callers may work in place on it."""
    table = np.asarray(table)
    accumulated = table[0].copy()
    for row in table[1:]:
        accumulated = combine.outer(accumulated, row).ravel()
    return accumulated


def prefix_sums(x, T, V):
    """[S_0, ..., S_{T-1}] where S_t[p, v] = Σ of x over sequences whose first t+1 tokens are (p, v).

    S_t has shape (V**t, V); its rows are the prefixes p of length t. Total cost O(M).
    """
    sums = [None] * T
    level = np.asarray(x, dtype=float)
    ones = np.ones(V)
    for t in range(T - 1, -1, -1):
        sums[t] = level.reshape(V**t, V)
        level = sums[t] @ ones          # a matrix-vector product: much faster than .sum(axis=1) over V columns
    return sums


def position_marginals(x, T, V):
    """marginals[..., t, v] = Σ_y x[..., y]·1[y_t = v]: the (T, V) marginals of M-vectors x (..., M).

    Seen as a (V**h, V**(T−h)) matrix (rows: the first h tokens, columns: the rest), x's row sums hold every
    marginal of positions < h and its column sums every marginal of positions ≥ h: two matrix-vector
    products read x once each, and the two short vectors are reduced by ``leading_marginals``.
    """
    x = np.asarray(x, dtype=float)
    lead, head = x.shape[:-1], T // 2
    blocks = x.reshape(-1, V**head, V**(T - head))                   # one matrix per leading index
    row_sums = (blocks.reshape(-1, blocks.shape[-1]) @ np.ones(blocks.shape[-1])).reshape(*lead, -1)
    column_sums = (np.ones(blocks.shape[1]) @ blocks).reshape(*lead, -1)
    return np.concatenate([leading_marginals(row_sums, head, V), leading_marginals(column_sums, T - head, V)],
                          axis=-2)


def leading_marginals(x, T, V):
    """``position_marginals`` the slow, obvious way: position t is the leading axis once positions < t are
    summed away, so each step adds V contiguous blocks."""
    lead = np.shape(x)[:-1]
    marginals = np.empty((*lead, T, V))
    rest = np.asarray(x, dtype=float)
    for t in range(T):
        blocks = rest.reshape(*lead, V, -1)
        marginals[..., t, :] = blocks.sum(axis=-1)
        rest = blocks.sum(axis=-2)
    return marginals


def token_grid(T, V):
    """The (M, T) array of every sequence: ``itertools.product`` order, built by broadcasting."""
    digits = np.arange(V**T)[:, None] // V ** np.arange(T - 1, -1, -1)[None, :]
    return digits % V
