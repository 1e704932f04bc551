"""The bottom line of a rollout log: is its mismatch negligible, and does any selected estimator change the gradient?

Three tests on the sample, each with the number it rests on:

- the sequence weights: their sample ESS fraction (``statistics.ess_fraction``) is NEGLIGIBLE_ESS or more, i.e.
  sequence-level IS keeps nearly the whole batch;
- the reward (when the log has rewards): correcting for the mismatch, mean_b (W_b − 1)·r_b = seq_is − logged
  (``applied.RewardEstimates.correction``), is within SE_AWAY standard errors of 0;
- each selected estimator (``applied.on_log``): it masks or clips under NEGLIGIBLE_SHARE of the tokens and its
  weights move a token's term of the gradient by under NEGLIGIBLE_CHANGE on average, mean_t |c_t − 1|, the
  estimate's upper end (value + SE_AWAY se) included.

The mismatch is negligible when every test passes: then no correction changes what training does with this batch,
by more than these margins. Otherwise the bottom line names what does not pass.
"""

from dataclasses import dataclass

NEGLIGIBLE_ESS = 0.9
NEGLIGIBLE_SHARE = 0.01
NEGLIGIBLE_CHANGE = 0.01
SE_AWAY = 2.0


@dataclass(frozen=True)
class EstimatorEffect:
    """One selected estimator on the log: its share of tokens masked or clipped and mean |c − 1| (an Estimate)."""
    name: str
    tokens_affected: float
    weight_change: object | None          # Estimate, or None (its weights overflow float64)
    negligible: bool


@dataclass(frozen=True)
class BottomLine:
    negligible: bool
    ess_fraction: float
    weights_negligible: bool
    correction: object | None             # Estimate of seq_is − logged, or None (no rewards, or W overflows)
    reward_negligible: bool | None        # None: no rewards (or W overflows, or one sequence: no se)
    effects: tuple                        # EstimatorEffect per applied estimator, most affecting first


def _small(estimate, limit):
    return estimate is not None and estimate.value + SE_AWAY * (estimate.se or 0.0) < limit


def bottom_line(statistics, rewards, rows):
    """The BottomLine of a log from its LogStatistics, RewardEstimates (or None) and [EstimatorOnLog]."""
    weights = statistics.ess_fraction >= NEGLIGIBLE_ESS
    correction = None if rewards is None else rewards.correction
    reward = None if correction is None or correction.se is None else abs(correction.value) <= SE_AWAY * correction.se
    effects = sorted((EstimatorEffect(row.name, row.tokens_affected, row.weight_change,
                                      row.tokens_affected < NEGLIGIBLE_SHARE and _small(row.weight_change,
                                                                                        NEGLIGIBLE_CHANGE))
                      for row in rows if row.tokens_affected is not None),
                     key=lambda effect: (effect.negligible, -effect.tokens_affected,
                                         -(effect.weight_change.value if effect.weight_change else float("inf"))))
    negligible = weights and reward is not False and all(effect.negligible for effect in effects)
    return BottomLine(negligible, statistics.ess_fraction, weights, correction, reward, tuple(effects))
