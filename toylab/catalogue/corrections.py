"""The catalogue's corrections: one weight function per estimator of the core catalogue.

A weight function receives a view of the sequences (``engine.sequences.AllSequences`` for the exact engine,
``engine.sequences.GivenSequences`` for the batch interface) and its thresholds, and returns ``weights.Weights``,
the factors of c_t(y) = sequence(y)·token[t, y_t]·∏_{s<t} carry[s, y_s]; the same function serves both views.
Batch-coupled estimators (their weight depends on the whole batch) are Monte Carlo only: their function combines
the batch sums that ``analysis.montecarlo.Batches`` provides.
"""

import numpy as np

from toylab.catalogue.weights import Weights


def rejection_kept(stats, statistic, scope, lo=None, hi=None):
    """1[lo ≤ statistic ≤ hi] per token (scope token) or per sequence; a bound that is None is absent."""
    if scope == "token":
        value = stats.token_statistic(statistic)
    else:
        value = stats.sequence_statistic(statistic, scope.removeprefix("seq_"))
    kept = np.ones(np.shape(value), bool)
    if lo is not None:
        kept &= value >= lo
    if hi is not None:
        kept &= value <= hi
    return kept


# -- weight functions ------------------------------------------------------------------------------------

def no_correction(stats):
    return Weights()


def token_is(stats):
    return Weights(token=stats.rho)


def token_tis(stats, C):
    return Weights(token=np.minimum(stats.rho, C), token_affected=stats.rho > C)


def token_mis(stats, lo, hi):
    kept = (stats.rho >= lo) & (stats.rho <= hi)
    return Weights(token=np.where(kept, stats.rho, 0.0), token_affected=~kept, token_rejected=~kept)


def prefix_is(stats):
    return Weights(token=stats.rho, carry=stats.rho)


def sequence_is(stats):
    return Weights(sequence=stats.W)


def sequence_tis(stats, C):
    W = stats.W
    return Weights(sequence=np.minimum(W, C), sequence_affected=W > C)


def sequence_mis(stats, C):
    W = stats.W
    return Weights(sequence=np.where(W <= C, W, 0.0), sequence_affected=W > C, sequence_rejected=W > C)


def geometric_kept(stats, lo, hi):
    """1[lo ≤ ρ_geo ≤ hi] with ρ_geo = W^(1/T): log lo ≤ mean_t log ρ_t ≤ log hi."""
    return rejection_kept(stats, "log_ratio", "seq_mean", np.log(lo), np.log(hi))


def sequence_kept(kept):
    return Weights(sequence=kept.astype(float), sequence_affected=~kept, sequence_rejected=~kept)


def geometric_rs(stats, lo, hi):
    return sequence_kept(geometric_kept(stats, lo, hi))


def geometric_rs_token_tis(stats, lo, hi, C):
    kept = geometric_kept(stats, lo, hi)
    return Weights(sequence=kept.astype(float), token=np.minimum(stats.rho, C),
                   sequence_affected=~kept, token_affected=stats.rho > C, sequence_rejected=~kept)


def k3_rs(stats, delta):
    return sequence_kept(rejection_kept(stats, "k3", "seq_mean", None, delta))


def trust_region_mask(stats, eps):
    return sequence_kept(rejection_kept(stats, "abs_log_ratio", "seq_max", None, eps))


def gspo_geometric(stats):
    return Weights(sequence=np.exp(stats.sequence_statistic("log_ratio", "mean")))


# -- batch-coupled estimators (Monte Carlo only) ----------------------------------------------------------

def self_normalised_is(batch):
    """Σ_i W_i·A_i·s_i / Σ_i W_i."""
    W = np.exp(batch.log_W)
    return batch.score_sum(W * batch.advantage) / batch.cumulative(W)[..., None, None]


def self_normalised_coefficients(sequences):
    """(c, kept, d = 0) on a given batch of B sequences: c_b = B·W_b / Σ_b' W_b', so that with seq-mean-token-sum's
    1/B the batch's estimate is Σ_b W_b·A_b·S_b / Σ_b W_b (computed from log W, so no weight overflows)."""
    log_W = sequences.log_W
    B = len(log_W)
    if B == 0:
        return np.zeros(sequences.mask.shape), sequences.mask, np.zeros(sequences.mask.shape)
    largest = log_W.max()
    shares = np.exp(log_W - largest) / np.exp(log_W - largest).sum()
    coefficient = np.where(sequences.mask, B * shares[:, None], 0.0)
    return coefficient, sequences.mask, np.zeros(sequences.mask.shape)


def group_mean_baseline(batch, weight):
    """(1/N)·Σ_i (c_i·(r_i − r̄) + d_i)·s_i with r̄ the batch's mean reward, c the named estimator's weight and d its
    additive term (0 but for penalties).

    1/N and c_i are those of the batch's loss aggregation (``aggregation``): 1/N by default.
    """
    return _centred(batch, weight, 1.0)


def leave_one_out_baseline(batch, weight):
    """(1/N)·Σ_i (c_i·(r_i − mean of the others' r) + d_i)·s_i: the centred part is N/(N − 1) × the group-mean
    version's; undefined at N = 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(batch.N > 1, batch.N / (batch.N - 1.0), np.nan)
    return _centred(batch, weight, factor[:, None, None])


def _centred(batch, weight, factor):
    raw, kept, additive = batch.terms(weight)
    coefficient, denominator = batch.aggregated(raw, kept)
    mean_reward = batch.cumulative(batch.reward) / batch.N
    centred = batch.score_sum(coefficient * batch.reward[..., None]) \
        - mean_reward[..., None, None] * batch.score_sum(coefficient)
    estimate = batch.divided(centred, denominator) * factor
    if additive.any():
        estimate = estimate + batch.divided(batch.score_sum(batch.aggregated(additive, kept)[0]), denominator)
    return estimate
