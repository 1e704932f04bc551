"""Exact moments for any T by dynamic programming over K = #{t: y_t = 0}, the only thing r looks at.

Positions are independent and r = r(K), so an estimator whose coefficient factorises over positions,

    c_t(y) = token[t, y_t] · ∏_{s<t} before[s, y_s] · ∏_{s>t} after[s, y_s],

has, with φ(K) = r(K) − b and p the sampling distribution (μ, or π for on_policy),

    m_t[v]  = E_p[c_t·φ(K)·1[y_t = v]] = p_t[v]·token[t, v]·Σ_i Prefix_t[i]·Value_{t+1}(i + 1[v = 0])
    mean_t  = m_t − π_t·Σ_v m_t[v]
    E‖ĝ‖²   = Σ_t Σ_v p_t[v]·token[t, v]²·‖onehot(v) − π_t‖²·(the same sum with before², after², φ²)

where Prefix_t[i] = Σ over y_{<t} with i zeros of ∏_{s<t} p_s·before_s (a forward pass) and
Value_t(j) = Σ over y_{≥t} of ∏_{s≥t} p_s·after_s · φ(j + zeros in y_{≥t}) (a backward pass):
each a two-term recursion, O(T²) in all. Each position's factor is normalised to sum 1 and its log
scale carried separately, so nothing overflows until the answer itself does.

Estimators whose weight does not factorise (seq_tis, seq_mis, geo_rs, ... ) are not covered here.
"""

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.catalogue.ratio_bounds import token_kept_table
from toylab.catalogue.statistics import STATISTICS
from toylab.engine.counts import reward_by_count
from toylab.engine.moments import Moments, bias_split, direction, plain_comparison
from toylab.engine.toy import share


@dataclass(frozen=True)
class PositionFactors:
    """c_t(y) = token[t, y_t]·∏_{s<t} before[s, y_s]·∏_{s>t} after[s, y_s]; affected/kept tables when clipping."""
    token: np.ndarray
    before: np.ndarray
    after: np.ndarray
    token_affected: np.ndarray | None = None    # (T, V) bool: this token is clipped or masked
    sequence_kept: np.ndarray | None = None     # (T, V) bool: the sequence survives only if every token is kept


def _naive(toy):
    ones = np.ones_like(toy.rho)
    return PositionFactors(ones, ones, ones)


def _token(table, affected=None):
    ones = np.ones_like(table)
    return PositionFactors(table, ones, ones, token_affected=affected)


def _whole_sequence(table, kept=None):
    return PositionFactors(table, table, table, sequence_kept=kept)


FACTORS = {
    "on_policy": lambda toy: _naive(toy),
    "naive": lambda toy: _naive(toy),
    "tok_is": lambda toy: _token(toy.rho),
    "tok_tis": lambda toy, C: _token(np.minimum(toy.rho, C), toy.rho > C),
    "tok_mis": lambda toy, lo, hi: _token(np.where((toy.rho >= lo) & (toy.rho <= hi), toy.rho, 0.0),
                                          (toy.rho < lo) | (toy.rho > hi)),
    "prefix_is": lambda toy: PositionFactors(toy.rho, toy.rho, np.ones_like(toy.rho)),
    "seq_is": lambda toy: _whole_sequence(toy.rho),
    "trm": lambda toy, eps: _whole_sequence(*[(np.abs(toy.log_rho) <= eps)] * 2),
    "gspo_geo": lambda toy: _whole_sequence(toy.rho ** (1 / toy.T)),
    "outlier_rs": lambda toy, lo, hi: _whole_sequence(*[token_kept_table(toy.log_rho, lo, hi)] * 2),
    "veto": lambda toy, C_v: _whole_sequence(*[token_kept_table(toy.log_rho, C_v, np.inf)] * 2),
    "kpop": lambda toy, delta: _token((kept := STATISTICS["kpop"](seen(toy)) <= delta).astype(float), ~kept),
}


def seen(toy):
    """What the correction sees of the toy's tables: log π (scored) and log μ (logged), for a statistic of both."""
    return SimpleNamespace(log_pi=toy.log_pi, log_mu=toy.log_logged)
RECURSIVE_IDS = tuple(FACTORS)


def on_support(factors, kept):
    """The factors of an estimator on μ with every table set to 0 at the tokens μ never draws (kept False): no
    sequence through them is sampled, and their ratio is ∞ there."""
    def zeroed(table):
        return np.where(kept, table, 0.0)
    return PositionFactors(zeroed(factors.token), zeroed(factors.before), zeroed(factors.after),
                           factors.token_affected, None if factors.sequence_kept is None else factors.sequence_kept & kept)


def _normalised(weights):
    """Per position: (weight of token 0, weight of the others) divided by their sum, and log of the sum.
    ``weights`` is (..., T, V): any leading axes are separate tables."""
    total = weights.sum(axis=-1)
    safe = np.where(total > 0, total, 1.0)
    with np.errstate(divide="ignore"):
        return weights[..., 0] / safe, (total - weights[..., 0]) / safe, np.log(total)


def _cumulative_log_scale(log_total, reverse=False):
    """[0, c_0, c_0 + c_1, …] (or the suffix sums followed by 0, reversed) along the last axis."""
    zero = np.zeros((*log_total.shape[:-1], 1))
    if reverse:
        return np.concatenate([np.cumsum(log_total[..., ::-1], axis=-1)[..., ::-1], zero], axis=-1)
    return np.concatenate([zero, np.cumsum(log_total, axis=-1)], axis=-1)


def prefix_counts(weights):
    """(Prefix, log scale): Prefix[t, i] ∝ Σ over y_{<t} with i zeros of ∏_{s<t} weights[s, y_s], t = 0 … T.
    Leading axes of ``weights`` (..., T, V) are separate tables, run together."""
    zero, other, log_total = _normalised(weights)
    T = weights.shape[-2]
    prefix = np.zeros((*weights.shape[:-2], T + 1, T + 1))
    prefix[..., 0, 0] = 1.0
    for t in range(T):
        prefix[..., t + 1, :] = prefix[..., t, :] * other[..., t, None]
        prefix[..., t + 1, 1:] += prefix[..., t, :-1] * zero[..., t, None]
    return prefix, _cumulative_log_scale(log_total)


def suffix_values(weights, phi):
    """(Value, log scale): Value[t, j] ∝ Σ over y_{≥t} of ∏_{s≥t} weights[s, y_s]·φ(j + zeros in y_{≥t}).
    Leading axes of ``weights`` (..., T, V) and of φ (..., T + 1) are separate tables, run together."""
    zero, other, log_total = _normalised(weights)
    T = weights.shape[-2]
    value = np.zeros((*weights.shape[:-2], T + 1, T + 2))
    value[..., T, :-1] = phi                      # j = T + 1 is never reached with nonzero weight
    for t in range(T - 1, -1, -1):
        value[..., t, :-1] = other[..., t, None] * value[..., t + 1, :-1] + zero[..., t, None] * value[..., t + 1, 1:]
    return value, _cumulative_log_scale(log_total, reverse=True)


def leave_one_out(position_probability, before, after, phi):
    """h[t, v] = Σ over y with y_t = v of ∏_{s<t} p_s·before_s · ∏_{s>t} p_s·after_s · φ(K): shape (..., T, V),
    one table per leading index of the arguments (broadcast together)."""
    T, V = before.shape[-2:]
    prefix, prefix_scale = prefix_counts(position_probability * before)
    value, suffix_scale = suffix_values(position_probability * after, phi)
    zero = np.einsum("...ti,...ti->...t", prefix[..., :T, :], value[..., 1:, 1:])
    other = np.einsum("...ti,...ti->...t", prefix[..., :T, :], value[..., 1:, :-1])
    with np.errstate(over="ignore"):
        scale = np.exp(prefix_scale[..., :T] + suffix_scale[..., 1:])
    h = np.repeat(other[..., None], V, axis=-1)
    h[..., 0] = zero
    return h * scale[..., None]


def _means_and_second_moments(toy, position_probability, token, before, after, phi):
    """For K estimators at once — (K, T, V) tables and φ (K, T + 1) — their mean gradients (K, T, V) and second
    moments E‖ĝ‖² (K,): one stacked run of the two recursions for the first and the second moments."""
    stack = np.stack
    h, h2 = leave_one_out(stack([position_probability] * 2), stack([before, before**2]), stack([after, after**2]),
                          stack([phi, phi**2]))
    m = position_probability * token * h
    squared_score = 1 - 2 * toy.pi + (toy.pi**2).sum(axis=1, keepdims=True)      # ‖onehot(v) − π_t‖²
    second_moments = np.sum(position_probability * token**2 * squared_score * h2, axis=(-2, -1))
    return (m - toy.pi * m.sum(axis=-1, keepdims=True)) * toy.score_scale, second_moments * toy.score_scale**2


def objective_by_recursion(toy):
    """(J = E_π[r], E_μ[r], ∇J) for any T: the counts' distributions under π and μ, and the on-policy mean.

    ValueError if ‖∇J‖ underflows (the reward too rare for float64), since every relative error divides by it.
    """
    phi = reward_by_count(toy.T)
    ones = np.ones_like(toy.pi)
    J = float(suffix_values(toy.pi, phi)[0][0, 0])
    logged_reward = float(suffix_values(toy.mu, phi)[0][0, 0])
    grad = _means_and_second_moments(toy, toy.pi[None], ones[None], ones[None], ones[None], phi[None])[0][0]
    if not np.linalg.norm(grad) > 0:
        raise ValueError(f"‖∇J‖ underflows to 0 at T={toy.T}, V={toy.V}: the reward is too rare for float64")
    return J, logged_reward, grad


def baseline_by_recursion(toy, baseline, objective=None):
    """b for a baseline name (none → 0, logged → E_μ[r], true → J), from the recursion."""
    if baseline not in ("none", "logged", "true"):
        raise ValueError(f"unknown baseline {baseline!r}; choose none, logged or true")
    J, logged_reward, _ = objective or objective_by_recursion(toy)
    return {"none": 0.0, "logged": logged_reward, "true": J}[baseline]


def exact_by_recursion(toy, estimator_id, params=None, baseline="none", objective=None):
    """The exact Moments of a factorising estimator for any T (the toy may be beyond the enumeration limit).

    ``objective`` is ``objective_by_recursion(toy)``, passed in to reuse it across estimators.
    """
    return exact_many_by_recursion(toy, {estimator_id: params}, baseline, objective)[estimator_id]


def exact_many_by_recursion(toy, selection, baseline="none", objective=None):
    """{id: Moments} for ``selection`` ({id: parameter overrides}) of factorising estimators, all in one stacked
    run of the recursions."""
    for estimator_id in selection:
        if estimator_id not in FACTORS:
            raise ValueError(f"{estimator_id} does not factorise over positions; "
                             f"the recursion covers {', '.join(RECURSIVE_IDS)}")
    chosen = {id: resolve_params(id, params) for id, params in selection.items()}
    if not chosen:
        return {}
    objective = objective or objective_by_recursion(toy)
    grad = objective[2]
    grad_norm = float(np.linalg.norm(grad))
    b = baseline_by_recursion(toy, baseline, objective)
    factors = {id: FACTORS[id](toy, **params) for id, params in chosen.items()}
    if toy.truncates:
        factors = {id: f if ESTIMATORS[id].on_policy else on_support(f, toy.kept) for id, f in factors.items()}
    probability = {id: toy.pi if ESTIMATORS[id].on_policy else toy.mu for id in chosen}
    phi = reward_by_count(toy.T) - b
    means, second_moments = _means_and_second_moments(
        toy, np.stack(list(probability.values())), *(np.stack([getattr(f, name) for f in factors.values()])
                                                      for name in ("token", "before", "after")),
        np.stack([phi] * len(chosen)))
    moments = {}
    for (id, params), mean, second_moment in zip(chosen.items(), means, second_moments, strict=True):
        cosine, note = direction(mean, grad, b, lambda f=factors[id]: _masked_entirely(f))
        tokens, sequences = _affected(probability[id], factors[id])
        moments[id] = Moments(
            estimator=id, params=params, mean=mean, bias=float(np.linalg.norm(mean - grad)),
            var=max(float(second_moment) - float(np.linalg.norm(mean))**2, 0.0), grad_norm=grad_norm,
            cosine=cosine, tokens_affected=share(tokens), sequences_affected=share(sequences), note=note,
            **bias_split(toy, mean, b, ESTIMATORS[id].on_policy), **plain_comparison(toy, mean))
    return moments


def _masked_entirely(factors):
    """"sequence" if some position keeps no token (so no sequence survives), "token" if every token weight is 0,
    else ""."""
    if factors.sequence_kept is not None and not factors.sequence_kept.any(axis=1).all():
        return "sequence"
    return "token" if not np.any(factors.token) else ""


def _affected(position_probability, factors):
    """(mean over t of P(token t clipped or masked), P(any token of the sequence clipped or masked))."""
    if factors.token_affected is not None:
        per_position = (position_probability * factors.token_affected).sum(axis=1)
        return float(per_position.mean()), float(1 - np.prod(1 - per_position))
    if factors.sequence_kept is not None:
        dropped_at = (position_probability * ~factors.sequence_kept).sum(axis=1)   # exactly 0 when none is
        dropped = float(1 - np.prod(1 - dropped_at))                              # dropped
        return dropped, dropped
    return 0.0, 0.0
