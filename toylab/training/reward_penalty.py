"""A KL penalty in the reward, in expected mode: each token's advantage is its own, so an update enumerates.

With the penalty (``catalogue.kl``, placement reward) the advantage of token t of sequence y is

    A_t(y) = r(y) − b − β·K_t(y),   K_t = Σ_{s ∈ S(t)} k_s(y_s),   k = the estimator at the anchor (log π_old − log π_ref)

and S(t) every position, those from t on, or t alone. The toy's two reward classes no longer group the sequences,
so update u's gradient sums over them, position by position on the grid:

    Gᵘ[t] = scale·(m_t − π_t·Σ_v m_t),   m_t[v] = Σ_y p(y)·g_t(y)·∂L/∂log π_θ(t, v; A_t(y))·1[y_t = v]

p = μ (π for on_policy), g_t(y) = sequence(y)·token[t, y_t]·∏_{s<t} carry[s, y_s] the correction's coefficient on w
(``catalogue.weights``; frozen, or at sg(π_θ)/μ each update), read with the task's advantage r − b. O(M·T) per update
and row. The clipped share counts the tokens a clip holds at their own A_t(y).
"""

import numpy as np

from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.sequences import AllSequences
from toylab.training.exact import chunk_rows


def summed_before(table, t):
    """Σ_{s<t} table[s, y_s] for every prefix of length t: (V**t,)."""
    total = np.zeros(1)
    for s in range(t):
        total = np.add.outer(total, table[s]).ravel()
    return total


def carried_before(carry, t):
    """∏_{s<t} carry[s, y_s] for every prefix of length t: (V**t,)."""
    total = np.ones(1)
    for s in range(t):
        total = np.multiply.outer(total, carry[s]).ravel()
    return total


def coefficient_at(weights, t, T, V):
    """g_t(y) on the grid shaped (V**t, V, V**(T−t−1)): sequence · token class table · carry before t."""
    shape = (V**t, V, V**(T - t - 1))
    sequence = weights.sequence
    coefficient = np.broadcast_to(np.reshape(sequence, shape) if np.ndim(sequence) else float(sequence), shape)
    token = np.zeros(shape)
    for members, table, _ in weights.token_classes():
        part = np.ones(V) if table is None else table[t]
        token = token + (part[None, :, None] if members is None else np.reshape(members, shape) * part[None, :, None])
    coefficient = coefficient * token
    if weights.carry is not None:
        coefficient = coefficient * carried_before(weights.carry, t)[:, None, None]
    return coefficient


def penalty_at(values, t, reward_sum, totals, V):
    """K_t(y) of each row at position t, (rows, V**t, V, V**(T−t−1)): the whole sum, the sum from t on, or k_t."""
    rows, T = values.shape[:2]
    shape = (rows, V**t, V, V**(T - t - 1))
    if reward_sum == "token":
        return np.broadcast_to(values[:, t, None, :, None], shape)
    if reward_sum == "sequence":
        return np.reshape(totals, shape)
    before = np.stack([summed_before(table, t) for table in values])
    return np.reshape(totals, shape) - before[:, :, None, None]


class RewardPenaltyBatch:
    """One batch of every row with a reward penalty: the per-token values k (frozen at the anchor) and the
    correction's weights (frozen, or recomputed at each update); the rows' M-vectors (their sequences' probability
    and summed k) are built when a chunk of rows is summed."""

    def __init__(self, batch, log_ref, on_policy, penalty):
        self.batch, self.penalty, self.on_policy = batch, penalty, on_policy
        inside = batch.kept
        self.values = np.where(inside, penalty.values(np.where(inside, batch.log_old, 0.0), log_ref), 0.0)
        rows = batch.rows
        self.log_probability = np.where(inside, np.where(on_policy[:, None, None], rows.log_pi, rows.log_mu), -np.inf)
        self.weights = None

    def correction_weights(self, log_ratio_numerator):
        """Each row's Weights on the view whose π is the correction's numerator (π_old, or π_θᵘ)."""
        seen = self.batch.seen_by_correction(log_ratio_numerator)
        weights = []
        for index, (estimator_id, params) in enumerate(self.batch.estimators):
            view = AllSequences(seen[index], self.batch.b[index])
            found = ESTIMATORS[estimator_id].weights(view, **params)
            weights.append(found if self.on_policy[index] else view.on_support(found))
        return weights

    def gradient(self, log_pi, pi):
        """(Gᵘ (rows, T, V), clipped share (rows,)) at π_θ (``log_pi``, ``pi``), rows in chunks of at most
        ``exact.chunk_rows(M)`` (M-vectors of about 2¹⁶ numbers per array)."""
        batch = self.batch
        if batch.update.weights_at == "current" or self.weights is None:
            self.weights = self.correction_weights(log_pi if batch.update.weights_at == "current" else batch.log_old)
        rows = batch.rows
        gradient, clipped = np.zeros(pi.shape), np.zeros(len(pi))
        chunk = chunk_rows(rows.M)
        for start in range(0, len(pi), chunk):
            chosen = np.arange(start, min(start + chunk, len(pi)))
            m, clipped[chosen] = self._marginals(chosen, log_pi[chosen], rows.T, rows.V)
            gradient[chosen] = (m - pi[chosen] * m.sum(axis=-1, keepdims=True)) * rows.score_scale
        return gradient, clipped

    def _marginals(self, chosen, log_pi, T, V):
        batch = self.batch
        grid = batch.rows.grid
        kept = batch.kept[chosen]
        probability = grid.outer_product(self.log_probability[chosen])
        totals = grid.outer_sum(self.values[chosen]) if self.penalty.reward_sum != "token" else None
        on_kept = [np.where(kept, table, 0.0) for table in (log_pi, batch.log_old[chosen], batch.log_mu[chosen])]
        m, held_share = np.zeros((len(chosen), T, V)), np.zeros(len(chosen))
        for t in range(T):
            shape = (len(chosen), V**t, V, V**(T - t - 1))
            inside = kept[:, t, None, :, None]
            advantage = np.reshape(grid.reward, shape[1:]) - batch.b[chosen][:, None, None, None] \
                - self.penalty.beta * penalty_at(self.values[chosen], t, self.penalty.reward_sum, totals, V)
            loss = batch.update.token_loss(*(table[:, t, None, :, None] for table in on_kept), advantage)
            weighted = np.reshape(probability, shape) * np.stack(
                [coefficient_at(self.weights[index], t, T, V) for index in chosen])
            m[:, t] = (weighted * np.where(inside, loss.derivative, 0.0)).sum(axis=(1, 3))
            held = (loss.clipped | loss.dual_clipped) & inside
            held_share += (np.reshape(probability, shape) * held).sum(axis=(1, 2, 3)) / T
        return m, held_share
