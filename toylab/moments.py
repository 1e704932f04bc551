"""Exact moments of every exact estimator, in O(M) from the factorised coefficient.

With c_t(y) = a(y)·f[t, y_t]·H_t(y_{<t}), a = (r − b)·sequence weight and H_t = ∏_{s<t} carry[s, y_s],
and p the sampling distribution (μ, or π for on_policy):

    m_t[v]   = E_p[c_t·1[y_t = v]]   = f[t, v]·Σ_prefix H_t(prefix)·S1_t[prefix, v]
    mean_t   = m_t − π_t·Σ_v m_t[v]                              (since s_t = onehot(y_t) − π_t)
    E‖ĝ‖²    = Σ_t Σ_v E_p[c_t²·1[y_t = v]]·‖onehot(v) − π_t‖²   (rows of ĝ are separate positions)

where S1_t, S2_t are the prefix sums of the M-vectors p·a and p·a² (``grid.prefix_sums``); without a
carry (every estimator but prefix IS) they reduce to position marginals (``grid.position_marginals``).

A token factor that depends on the sign of the advantage (PPO-clip against the sampler: ``Weights.negative_token``)
does not factorise this way over all sequences, but it does within each reward class: A = r − b takes one value
on r = 1 and one on r = 0, so the sums above are taken separately over the sequences with A ≥ 0 and with A < 0,
each with its own f, and added (two passes, still O(M)).
"""

from dataclasses import dataclass

import numpy as np

from toylab.estimators import ESTIMATORS, EXACT_IDS, resolve_params
from toylab.grid import outer_sum, position_marginals, prefix_sums
from toylab.sequences import AllSequences
from toylab.toy import share

UNBIASED_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Moments:
    """Exact first and second moments of one estimator's single-sample gradient estimate.

    ``cosine`` is None when E[ĝ] = 0: a zero vector has no direction. ``note`` then says why E[ĝ] = 0
    (every sequence masked, or every kept one with A = 0); it is "" when every field is defined.
    """
    estimator: str
    params: dict
    mean: np.ndarray
    bias: float
    var: float
    grad_norm: float
    cosine: float | None
    tokens_affected: float
    sequences_affected: float
    note: str = ""

    @property
    def rel_bias(self):
        return self.bias / self.grad_norm

    def rel_std(self, N):
        """sqrt(var/N)/‖∇J‖: the spread of a batch mean of N samples."""
        return float(np.sqrt(self.var / N) / self.grad_norm)

    def rel_rmse(self, N):
        """sqrt(bias² + var/N)/‖∇J‖."""
        return float(np.sqrt(self.bias**2 + self.var / N) / self.grad_norm)

    @property
    def unbiased(self):
        return self.rel_bias < UNBIASED_TOLERANCE


def direction(mean, grad, b, masked_entirely):
    """(cosine, note): cos(E[ĝ], ∇J) = ⟨E[ĝ], ∇J⟩/(‖E[ĝ]‖·‖∇J‖), clipped to [−1, 1] against rounding, and "";
    or (None, why) when E[ĝ] = 0 exactly. ``masked_entirely()`` (called only then) is "sequence" or "token"
    if the estimator's coefficient is 0 on every one, else "" (then every kept sequence has A = r − b = 0)."""
    mean_norm = float(np.linalg.norm(mean))
    if mean_norm > 0:
        cosine = float(np.sum(mean * grad) / (mean_norm * np.linalg.norm(grad)))
        return min(max(cosine, -1.0), 1.0), ""
    masked = masked_entirely()
    why = f"every {masked} is masked" if masked else f"every sequence it keeps has advantage A = r − b = 0 (b = {b:.4g})"
    return None, f"{why}, so its mean gradient E[ĝ] is 0 and its direction (the cosine to ∇J) is undefined"


def baseline_value(toy, baseline):
    """b for a baseline name: none → 0, logged → E_μ[r], true → J."""
    values = {"none": lambda: 0.0, "logged": lambda: toy.logged_reward, "true": lambda: toy.J}
    if baseline not in values:
        raise ValueError(f"unknown baseline {baseline!r}; choose none, logged or true")
    return values[baseline]()


def exact_moments(toy, estimator_id, params=None, baseline="none"):
    """The exact Moments of an exact estimator on the toy, with the given thresholds and baseline."""
    estimator = ESTIMATORS[estimator_id]
    if not estimator.exact:
        raise ValueError(f"{estimator_id} is batch-coupled: it has no exact single-sample moments")
    params = resolve_params(estimator_id, params)
    b = baseline_value(toy, baseline)
    weights = estimator.weights(AllSequences(toy, b), **params)
    probability = toy.p_train if estimator.on_policy else toy.p_sampler
    position_probability = toy.pi if estimator.on_policy else toy.mu
    mean, second_moment = np.zeros((toy.T, toy.V)), 0.0
    for sign_class, token in _sign_classes(toy, b, weights):
        marginal, marginal_sq = _position_moments(toy, estimator.on_policy, b, weights, sign_class)
        class_mean, class_second_moment = _mean_and_second_moment(toy, marginal, marginal_sq, token)
        mean, second_moment = mean + class_mean, second_moment + class_second_moment
    grad = toy.true_grad
    cosine, note = direction(mean, grad, b, lambda: _masked_entirely(weights))
    tokens, sequences = _affected(toy, probability, position_probability, weights, b)
    return Moments(
        estimator=estimator_id, params=params, mean=mean,
        bias=float(np.linalg.norm(mean - grad)),
        var=max(second_moment - float(np.linalg.norm(mean))**2, 0.0),
        grad_norm=float(np.linalg.norm(grad)), cosine=cosine,
        tokens_affected=share(tokens), sequences_affected=share(sequences), note=note)


def _masked_entirely(weights):
    """"sequence" if the sequence weight is 0 everywhere, "token" if the token weight is, else ""."""
    if not np.any(weights.sequence):
        return "sequence"
    token_factors = [weights.for_sign(negative)[0] for negative in ((False, True) if weights.splits_by_sign else (False,))]
    return "token" if all(token is not None and not np.any(token) for token in token_factors) else ""


def _sign_classes(toy, b, weights):
    """[(sequences of the class or None for all, token factor)]: one class, or A ≥ 0 and A < 0 (see above)."""
    if not weights.splits_by_sign:
        return [(None, weights.token)]
    negative = np.subtract(toy.rewarded, b, dtype=float) < 0
    return [(~negative, weights.for_sign(False)[0]), (negative, weights.for_sign(True)[0])]


def _position_moments(toy, on_policy, b, weights, sign_class=None):
    """E_p[a·H_t·1[y_t = v]] and E_p[a²·H_t²·1[y_t = v]], each (T, V), with a = (r − b)·sequence weight.

    Without a carry (H_t = 1) these are position marginals of p·a and p·a²; with one, prefix sums
    weighted by H_t over the V**t prefixes. ``sign_class`` restricts the sums to those sequences.
    Estimators with neither a sequence weight nor a carry (naive, token-level) share the result
    through ``toy.memo``.
    """
    shared = weights.carry is None and np.ndim(weights.sequence) == 0 and weights.sequence == 1 \
        and sign_class is None
    key = ("unweighted position moments", on_policy, b)
    if shared and key in toy.memo:
        return toy.memo[key]
    advantage = np.subtract(toy.rewarded, b, dtype=float)
    advantage *= weights.sequence
    if sign_class is not None:
        advantage *= sign_class
    first = (toy.p_train if on_policy else toy.p_sampler) * advantage          # p·a
    second = np.multiply(first, advantage, out=advantage)                     # p·a², in a's memory
    if weights.carry is None:
        moments = position_marginals(first, toy.T, toy.V), position_marginals(second, toy.T, toy.V)
    else:
        moments = _carried_marginals(first, toy, weights.carry, 1), _carried_marginals(second, toy, weights.carry, 2)
    if shared:
        toy.memo[key] = moments
    return moments


def _carried_marginals(x, toy, carry, power):
    """m[t, v] = Σ_y x[y]·H_t(y_{<t})**power·1[y_t = v], H_t = ∏_{s<t} carry[s, y_s]."""
    marginals = np.empty((toy.T, toy.V))
    prefix_weight = np.ones(1)
    for t, sums in enumerate(prefix_sums(x, toy.T, toy.V)):
        marginals[t] = prefix_weight**power @ sums
        prefix_weight = np.multiply.outer(prefix_weight, carry[t]).ravel()
    return marginals


def _mean_and_second_moment(toy, marginal, marginal_sq, token):
    """mean_t = m_t − π_t·Σ_v m_t[v] with m = marginal·f;  E‖ĝ‖² = Σ_{t,v} marginal_sq·f²·‖onehot(v) − π_t‖²."""
    token = np.ones_like(marginal) if token is None else token
    squared_score = 1 - 2 * toy.pi + (toy.pi**2).sum(axis=1, keepdims=True)
    m = marginal * token
    return m - toy.pi * m.sum(axis=1, keepdims=True), float(np.sum(marginal_sq * token**2 * squared_score))


def _affected(toy, probability, position_probability, weights, b):
    """(mean over t of P(token t masked or clipped), P(any token of the sequence masked or clipped))."""
    if weights.splits_by_sign:
        return _affected_by_sign(toy, probability, weights, b)
    sequence_hit, token_hit = weights.sequence_affected, weights.token_affected
    if sequence_hit is None and token_hit is None:
        return 0.0, 0.0
    if sequence_hit is None:
        per_position = (position_probability * token_hit).sum(axis=1)
        return float(per_position.mean()), float(1 - np.prod(1 - per_position))
    kept = probability * ~sequence_hit
    if token_hit is None:
        dropped = 1 - float(kept.sum())
        return dropped, dropped
    kept_tokens = (position_marginals(kept, toy.T, toy.V) * ~token_hit).sum(axis=1)
    all_tokens_kept = outer_sum(token_hit.astype(np.int8)) == 0             # int8: at most T < 128 hits
    return float(1 - kept_tokens.mean()), float(1 - kept[all_tokens_kept].sum())


def _affected_by_sign(toy, probability, weights, b):
    """``_affected`` when the token marks depend on the sign of A: summed over the two classes of sequences."""
    kept = probability if weights.sequence_affected is None else probability * ~weights.sequence_affected
    kept_tokens, kept_sequences = np.zeros(toy.T), 0.0
    negative_class = np.subtract(toy.rewarded, b, dtype=float) < 0
    for sign_class, negative in ((~negative_class, False), (negative_class, True)):
        token_hit = weights.for_sign(negative)[1]
        token_hit = np.zeros((toy.T, toy.V), bool) if token_hit is None else token_hit
        kept_in_class = kept * sign_class
        kept_tokens += (position_marginals(kept_in_class, toy.T, toy.V) * ~token_hit).sum(axis=1)
        kept_sequences += float(kept_in_class[outer_sum(token_hit.astype(np.int32)) == 0].sum())
    return float(1 - kept_tokens.mean()), 1 - kept_sequences


def exact_table(toy, selection=None, baseline="none", N=64):
    """One row per exact estimator: its Moments summarised at batch size N (cosine None with a ``note`` when
    it is undefined).

    ``selection`` maps estimator id → parameter overrides (default: every exact estimator, defaults).
    """
    selection = {id: {} for id in EXACT_IDS} if selection is None else selection
    rows = []
    for estimator_id, overrides in selection.items():
        moments = exact_moments(toy, estimator_id, overrides, baseline)
        rows.append({
            "estimator": estimator_id, "label": ESTIMATORS[estimator_id].label, "params": moments.params,
            "bias": moments.bias, "var": moments.var, "rel_bias": moments.rel_bias,
            "rel_std": moments.rel_std(N), "rel_rmse": moments.rel_rmse(N), "cosine": moments.cosine,
            "tokens_affected": moments.tokens_affected, "sequences_affected": moments.sequences_affected,
            "unbiased": moments.unbiased, "note": moments.note})
    return rows
