"""What each estimator would do to a rollout log's sequences, through the one batch interface.

For every selected exact estimator (catalogue id or framework preset), ``coefficients.marks`` gives, batch by
batch, its per-token coefficients c_{b,t} and which response tokens it masks or clips (a token's own mark or
its sequence's), from the same weight functions the exact engine uses. Summed over the log:

    tokens_affected     = (masked or clipped response tokens) / (response tokens)
    sequences_affected  = (sequences with any masked or clipped token) / B
    weight mean, sd, min, max   of c_{b,t} over the response tokens
    weight_change       = mean over response tokens of |c_{b,t} − 1|: how much the estimator moves each token's
                          term of the gradient from the uncorrected one, with its standard error clustered by sequence
    ess_fraction        = (Σ c)² / (n·Σ c²) over the n response tokens: the share of the tokens the weights
                          effectively keep (1 when every weight is equal; 0 when every weight is 0)

These are counts on this sample, not probabilities under μ. The sums are kept scaled by a power of two, so
weights up to float64's largest stay summable; an estimator whose weights themselves overflow float64 (W = e^800
on a long sequence) keeps its shares and gets a note instead of a weight summary. Estimators that read the advantage (PPO-clip
against the sampler, the off-policy sequence mask, verl's bypass_ppo_clip presets) get A_b = r_b − mean(r),
the log's own centred reward, when the log has rewards, or else the log's own advantages (a dump of prime-rl, SkyRL
or TRL holds advantages, not rewards), and are left out (with the reason) when it has neither.
Batch-coupled estimators have no weight of their own on a sequence: they are left out with the reason.

With rewards, the log also estimates the trainer's expected reward J = E_π[r] by importance sampling,
W_b = exp(Σ_t log ρ_{b,t}):

    seq_is:  mean_b W_b·r_b,            se = sd_b(W_b·r_b)/√B
    SNIS:    Σ_b W_b·r_b / Σ_b W_b,     se² = Σ_b W_b²·(r_b − SNIS)² / (Σ_b W_b)²   (delta method)

next to the logged mean reward E_μ[r] = mean_b r_b (se = sd_b(r_b)/√B), and their difference on the same sequences,
mean_b (W_b − 1)·r_b (se = sd_b/√B): whether correcting for the mismatch changes the reward estimate at all. Both are computed with W_b scaled by
exp(−max_b log W_b); seq_is is None (with the reason) when its mean or standard error is beyond float64.
"""

import math
from dataclasses import dataclass

import numpy as np

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.coefficients import marks
from toylab.engine.sequences import GivenSequences
from toylab.your_run.statistics import Estimate, power_of_two_above, sequence_log_ratios, sequence_mean

LARGEST = float(np.finfo(float).max)
LARGEST_LOG = math.log(LARGEST)      # 709.78: exp of more is not a float64
COUNTING_CELLS = 1 << 17            # counts only: batches a core's cache holds (1.9× faster than log.batches' 1M)
FEW_WEIGHTS = 0.1                    # a sample ESS fraction below this: IS standard errors are not to be trusted
UNRELIABLE = ("the sequence weights' sample ESS fraction is {:.1%}: a few sequences carry almost all the weight, "
              "so the IS estimates of J and their standard errors understate the uncertainty (both can be far off)")


@dataclass(frozen=True)
class EstimatorOnLog:
    """One estimator on a log: its shares and weight summary, or (values None) the reason it is left out."""
    name: str
    tokens_affected: float | None = None
    sequences_affected: float | None = None
    weight_mean: float | None = None
    weight_sd: float | None = None
    weight_min: float | None = None
    weight_max: float | None = None
    ess_fraction: float | None = None
    weight_change: Estimate | None = None     # mean_t |c_t − 1| over the response tokens, se clustered by sequence
    note: str = ""

    def as_dict(self):
        return {key: value.as_dict() if isinstance(value, Estimate) else value
                for key, value in ((key, getattr(self, key)) for key in self.__dataclass_fields__)}


def on_log(log, selection, weights=True):
    """[EstimatorOnLog] for ``selection`` ({id: parameter overrides}), in its order; one streaming pass, each batch's
    estimators summed together (``_Totals``). ``weights`` False: the shares of tokens and sequences affected only
    (and whether the weights overflow), as a run's steps list them."""
    exact = {id: resolve_params(id, params) for id, params in selection.items()
             if ESTIMATORS[id].exact and not ESTIMATORS[id].on_policy}
    totals = _Totals(len(exact), weights)
    left_out = {}
    advantage_of = advantages_of(log)
    for batch in log.batches() if weights else log.batches(COUNTING_CELLS):
        advantages = None if advantage_of is None else advantage_of[batch.start:batch.start + len(batch.mask)]
        sequences = GivenSequences(batch.trainer_logprobs, batch.sampler_logprobs, batch.mask, advantages)
        indices, coefficients, affected = [], [], []
        with np.errstate(over="ignore", invalid="ignore"):             # weights past float64: see _Totals
            for index, (id, params) in enumerate(exact.items()):
                if id in left_out:
                    continue
                try:
                    if not weights:
                        found = ESTIMATORS[id].weights(sequences, **params)
                        totals.count(index, batch.mask, sequences.affected(found), _overflows(sequences, found))
                        continue
                    coefficient, _, marked = marks(id, sequences, params)
                except ValueError as error:        # the advantage is needed and the log has neither
                    left_out[id] = f"needs rewards or advantages: {error}"
                    continue
                indices.append(index)
                coefficients.append(coefficient)
                affected.append(marked)
        if indices:
            totals.add(indices, np.stack(coefficients), batch.mask, np.stack(affected))
    index_of = {id: index for index, id in enumerate(exact)}
    return [_row(id, totals, index_of.get(id), left_out.get(id) or _why_not(id)) for id in selection]


def _overflows(sequences, weights):
    """Whether a response token's coefficient c = sequence·token (``GivenSequences.assemble``) is beyond float64: not
    when the largest |sequence| times the largest |token| (padding included) is finite, else read off c itself."""
    if weights.carry is None and not weights.classes:
        sequence = np.asarray(weights.sequence, dtype=float)
        top = max(float(sequence.max()), -float(sequence.min()))
        if weights.token is not None:
            top *= max(float(weights.token.max()), -float(weights.token.min()))
        if top < LARGEST:
            return False
    with np.errstate(over="ignore", invalid="ignore"):
        return not np.isfinite(sequences.assemble(weights)[0]).all()


def advantages_of(log):
    """A_b for the estimators that read it: r_b − mean(r) when the log has rewards, else its own advantages
    (prime-rl, SkyRL, TRL dump those), else None."""
    if log.rewards is not None:
        return log.rewards - log.rewards.mean()
    return log.advantages


def _why_not(id):
    estimator = ESTIMATORS[id]
    if estimator.on_policy:
        return "samples from π, not from the sampler: a log of sampler rollouts has nothing to weight"
    if not estimator.exact:
        return "batch-coupled: its weight (or advantage) depends on the whole batch it is averaged in"
    return ""


def _row(id, totals, index, note):
    if note or index is None or totals.tokens[index] == 0:
        return EstimatorOnLog(id, note=note or "no response tokens")
    tokens, sequences = int(totals.tokens[index]), int(totals.sequences[index])
    shares = {"tokens_affected": int(totals.affected_tokens[index]) / tokens,
              "sequences_affected": int(totals.affected_sequences[index]) / sequences}
    if totals.overflow[index]:
        return EstimatorOnLog(id, **shares, note=OVERFLOWING)
    if not totals.weights:
        return EstimatorOnLog(id, **shares)
    weight_sum, weight_square_sum, scale = totals.weight_sum[index], totals.weight_square_sum[index], totals.scale[index]
    mean = weight_sum / tokens
    variance = max(weight_square_sum / tokens - mean**2, 0.0)
    ess = weight_sum**2 / (tokens * weight_square_sum) if weight_square_sum > 0 else 0.0
    return EstimatorOnLog(id, **shares, weight_mean=mean * scale, weight_sd=math.sqrt(variance) * scale,
                          weight_min=totals.low[index], weight_max=totals.high[index], ess_fraction=min(ess, 1.0),
                          weight_change=totals.change(index))


OVERFLOWING = ("its weights overflow float64 on this log (a sequence's W = exp(Σ log ρ) is beyond 1.8e308), so "
               "they have no mean, spread or ESS; its shares of masked or clipped tokens are counted")


class _Totals:
    """Running sums of E estimators over the log's batches, an entry per estimator: Σ c/s and Σ (c/s)² with s a power
    of two at or above the largest |c| so far (rescaled when it grows), so no sum overflows; ``overflow`` once a weight
    is not finite. For the weight change, per sequence b the sum S_b of |c − 1| over its L_b response tokens: Σ S_b,
    Σ S_b², Σ S_b·L_b, Σ L_b, Σ L_b² (the clustered standard error of a token mean, ``statistics.token_mean``).
    A batch's estimators are added together, a row each: every sum is the one an estimator's own would be. Without
    ``weights``, only the counts and whether a weight overflows."""

    def __init__(self, count, weights=True):
        self.weights = weights
        self.tokens, self.sequences = np.zeros(count, np.int64), np.zeros(count, np.int64)
        self.affected_tokens, self.affected_sequences = np.zeros(count, np.int64), np.zeros(count, np.int64)
        self.weight_sum, self.weight_square_sum = [0.0] * count, [0.0] * count
        self.scale = [1.0] * count
        self.low, self.high = [math.inf] * count, [-math.inf] * count
        self.overflow = np.zeros(count, bool)
        self.change_sums = np.zeros((count, 5))           # Σ S, Σ S², Σ S·L, Σ L, Σ L²

    def change(self, index):
        """Estimate of mean_t |c_t − 1| over the response tokens (None once a weight overflows or the sums do)."""
        total, squares, cross, length, length_squares = self.change_sums[index]
        if self.overflow[index] or not np.isfinite(self.change_sums[index]).all() or length == 0:
            return None
        mean = total / length
        sequences = int(self.sequences[index])
        if sequences < 2:
            return Estimate(float(mean), None)
        residual = max(squares - 2 * mean * cross + mean**2 * length_squares, 0.0)
        return Estimate(float(mean), float(math.sqrt(sequences / (sequences - 1) * residual) / length))

    def count(self, index, mask, affected, overflows):
        """Add one estimator's counts on a batch (``affected`` and ``mask`` (b, L)): its tokens and sequences, those it
        affects, and whether a weight overflows."""
        self.tokens[index] += int(np.count_nonzero(mask))
        self.sequences[index] += len(mask)
        self.affected_tokens[index] += int(np.count_nonzero(affected))
        self.affected_sequences[index] += int(np.count_nonzero(affected.any(axis=1)))
        self.overflow[index] |= overflows

    def add(self, indices, coefficients, mask, affected):
        """Add a batch: ``coefficients`` and ``affected`` (E', b, L) of the estimators at ``indices``, ``mask`` (b, L)."""
        indices = np.asarray(indices)
        response_weights = coefficients[:, mask]                                  # (E', n)
        counting = ~self.overflow[indices]
        with np.errstate(over="ignore", invalid="ignore"):
            sums = np.where(mask, np.abs(coefficients - 1), 0.0).sum(axis=2)
            lengths = mask.sum(axis=1).astype(float)
            self.change_sums[indices[counting]] += np.stack(
                [sums.sum(axis=1), (sums**2).sum(axis=1), (sums * lengths).sum(axis=1),
                 np.full(len(indices), lengths.sum()), np.full(len(indices), (lengths**2).sum())], axis=1)[counting]
        self.tokens[indices] += response_weights.shape[1]
        self.sequences[indices] += affected.shape[1]
        self.affected_tokens[indices] += affected.sum(axis=(1, 2))
        self.affected_sequences[indices] += affected.any(axis=2).sum(axis=1)
        if not response_weights.shape[1]:
            return
        finite = np.isfinite(response_weights).all(axis=1)
        self.overflow[indices[counting & ~finite]] = True
        live = counting & finite
        if not live.any():
            return
        weights = response_weights[live]
        highs, lows = weights.max(axis=1).tolist(), weights.min(axis=1).tolist()
        rows = indices[live].tolist()
        scales = [max(self.scale[row], power_of_two_above(max(high, -low)))
                  for row, high, low in zip(rows, highs, lows, strict=True)]
        scaled = weights / np.array(scales)[:, None]
        for row, scale, total, squares, high, low in zip(rows, scales, scaled.sum(axis=1).tolist(),
                                                           np.square(scaled).sum(axis=1).tolist(), highs, lows,
                                                           strict=True):
            shrink = self.scale[row] / scale
            self.weight_sum[row] = self.weight_sum[row] * shrink + total
            self.weight_square_sum[row] = self.weight_square_sum[row] * shrink**2 + squares
            self.scale[row] = scale
            self.low[row], self.high[row] = min(self.low[row], low), max(self.high[row], high)


@dataclass(frozen=True)
class RewardEstimates:
    """Sample estimates from a log with rewards: the logged E_μ[r], two IS estimates of J = E_π[r], and what sequence
    IS changes, mean_b (W_b − 1)·r_b = seq_is − logged on the same sequences (its se from the paired differences)."""
    logged: Estimate
    seq_is: Estimate | None          # None: a weight W overflows float64
    snis: Estimate
    correction: Estimate | None = None     # None: a weight W overflows float64

    def as_dict(self):
        return {"logged_mean_reward": self.logged.as_dict(),
                "seq_is": None if self.seq_is is None else self.seq_is.as_dict(), "snis": self.snis.as_dict(),
                "correction": None if self.correction is None else self.correction.as_dict()}


def reward_estimates(log):
    """RewardEstimates of a log with rewards (None without). Both IS estimates are computed with W scaled by
    exp(−max log W), so nothing overflows on the way; seq_is is None when its mean or se is beyond float64."""
    if log.rewards is None:
        return None
    rewards = log.rewards
    log_W, _ = sequence_log_ratios(log)
    top = float(log_W.max())
    scaled = np.exp(log_W - top)                          # W / exp(top), in (0, 1]
    snis = float((scaled * rewards).sum() / scaled.sum())
    snis_se = float(np.sqrt(np.sum(scaled**2 * (rewards - snis) ** 2)) / scaled.sum())
    correction = None
    if top < LARGEST_LOG / 2:                             # (W − 1)·r and its square stay finite
        correction = sequence_mean((np.exp(log_W) - 1) * rewards)
    return RewardEstimates(sequence_mean(rewards), _unscaled(sequence_mean(scaled * rewards), top),
                           Estimate(snis, snis_se), correction)


def _unscaled(estimate, log_scale):
    """The estimate times exp(log_scale); None if that is beyond float64 (its value or its se)."""
    parts = [part for part in (estimate.value, estimate.se) if part]
    if log_scale >= LARGEST_LOG or any(math.log(abs(part)) + log_scale >= LARGEST_LOG for part in parts):
        return None
    factor = math.exp(log_scale)
    return Estimate(estimate.value * factor, None if estimate.se is None else estimate.se * factor)
