"""Exact moments of every exact estimator, in O(M) from the factorised coefficient.

With c_t(y) = a(y)·f[t, y_t]·H_t(y_{<t}), a = (r − b)·sequence weight and H_t = ∏_{s<t} carry[s, y_s],
and p the sampling distribution (μ, or π for on_policy):

    m_t[v]   = E_p[c_t·1[y_t = v]]   = f[t, v]·Σ_prefix H_t(prefix)·S1_t[prefix, v]
    mean_t   = m_t − π_t·Σ_v m_t[v]                              (since s_t = onehot(y_t) − π_t)
    E‖ĝ‖²    = Σ_t Σ_v E_p[c_t²·1[y_t = v]]·‖onehot(v) − π_t‖²   (rows of ĝ are separate positions)

where S1_t, S2_t are the prefix sums of the M-vectors p·a and p·a² (``grid.prefix_sums``); without a
carry (every estimator but prefix IS) they reduce to position marginals (``grid.position_marginals``).

A token factor that depends on a per-sequence class (``Weights.classes``: PPO-clip against the sampler treats
A < 0 and A ≥ 0 differently; a sequence-level mask may switch a token mask on) does not factorise this way over
all sequences, but it does within each class: the sums above are taken separately over the sequences of each
class, each with its own f, and added (one O(M) pass per class).

An additive term d[t, y_t] (``Weights.additive``, independent of A) adds d_t·s_t to each row of ĝ, so with
p_t the position marginal of p and m_t as above,

    mean_t  += p_t·d_t − π_t·Σ_v p_t[v]·d_t[v]
    E‖ĝ‖²   += Σ_t Σ_v (2·d_t[v]·m_t[v] + p_t[v]·d_t[v]²)·‖onehot(v) − π_t‖²

closed-form, from the first moment the pass computes anyway.

A sampler that truncates draws only the sequences of S = ∏_t S_t (``toy``): the sums above run over μ's support,
each weight function's factors set to 0 outside it (``AllSequences.on_support``). Sequence IS then has mean
∇J_S = E_π[(r − b)·s·1[y ∈ S]] (``toy.reachable_gradient``) instead of ∇J, and every estimator's bias vector
splits as E ĝ − ∇J = (E ĝ − ∇J_S) − (∇J − ∇J_S): ``within_reach`` is the length of the first part (what the
correction itself gets wrong on the sequences the sampler draws; 0 for sequence IS), ``out_of_reach`` of the second
(∇J's part from sequences the sampler never draws, the same for every estimator on μ at a baseline: no weight on S
removes it). The lengths bound the bias: |out_of_reach − within_reach| ≤ bias ≤ out_of_reach + within_reach. So
out_of_reach is sequence IS's whole bias, not a floor under the others': an estimator's error within reach can point
against it (a biased correction can have less bias than sequence IS). on_policy samples π: nothing is out of reach.
"""

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.estimators import ESTIMATORS, EXACT_IDS, resolve_params
from toylab.engine.grid import outer_any, position_marginals, prefix_sums
from toylab.engine.sequences import AllSequences
from toylab.engine.toy import Toy, share

UNBIASED_TOLERANCE = 1e-9
CHUNK = 2**17                 # sequences per chunk of the exact pass: their M-vectors stay small


@dataclass(frozen=True)
class Moments:
    """Exact first and second moments of one estimator's single-sample gradient estimate.

    ``cosine`` is None when E[ĝ] = 0: a zero vector has no direction. ``note`` then says why E[ĝ] = 0
    (every sequence masked, or every kept one with A = 0); it is "" when every field is defined.
    """
    estimator: str
    params: dict[str, Any]
    mean: NDArray[np.float64]
    bias: float
    var: float
    grad_norm: float
    cosine: float | None
    tokens_affected: float
    sequences_affected: float
    note: str = ""
    out_of_reach: float = 0.0            # ‖∇J − ∇J_S‖: ∇J's part from the sequences the sampler never draws
    within_reach: float | None = None    # ‖E ĝ − ∇J_S‖ (None: nothing is out of reach, and it is the bias)
    plain_bias: float | None = None         # ‖E ĝ − ∇J_plain‖, ∇J of softmax(θ) (None: the trainer scores it)
    plain_grad_norm: float | None = None    # ‖∇J_plain‖

    @property
    def rel_bias(self) -> float:
        return self.bias / self.grad_norm

    @property
    def rel_plain_bias(self) -> float:
        """‖E ĝ − ∇J_plain‖/‖∇J_plain‖: the error against softmax(θ)'s gradient (the bias itself when plain)."""
        if self.plain_bias is None or self.plain_grad_norm is None:
            return self.rel_bias
        return self.plain_bias / self.plain_grad_norm

    @property
    def rel_out_of_reach(self) -> float:
        return self.out_of_reach / self.grad_norm

    @property
    def rel_within_reach(self) -> float:
        return (self.bias if self.within_reach is None else self.within_reach) / self.grad_norm

    def rel_std(self, N: int) -> float:
        """sqrt(var/N)/‖∇J‖: the spread of a batch mean of N samples."""
        return float(np.sqrt(self.var / N) / self.grad_norm)

    def rel_rmse(self, N: int) -> float:
        """sqrt(bias² + var/N)/‖∇J‖."""
        return float(np.sqrt(self.bias**2 + self.var / N) / self.grad_norm)

    @property
    def unbiased(self) -> bool:
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


def bias_split(toy, mean, b, on_policy):
    """{"out_of_reach": ‖∇J − ∇J_S‖, "within_reach": ‖E ĝ − ∇J_S‖} for an estimator with this mean (see the module
    docstring); {} when the estimator samples π or the sampler draws every sequence (nothing out of reach)."""
    if on_policy or not toy.has_out_of_reach:
        return {}
    reachable = toy.reachable_gradient(b)
    return {"out_of_reach": float(np.linalg.norm(toy.true_grad - reachable)),
            "within_reach": float(np.linalg.norm(mean - reachable))}


def plain_comparison(toy, mean):
    """{"plain_bias": ‖E ĝ − ∇J_plain‖, "plain_grad_norm": ‖∇J_plain‖} when the trainer scores something other than
    softmax(θ) (its objective moved: ``toy.plain_grad``); {} when it scores softmax(θ)."""
    if toy.sampler.scored == "plain":
        return {}
    return {"plain_bias": float(np.linalg.norm(mean - toy.plain_grad)),
            "plain_grad_norm": float(np.linalg.norm(toy.plain_grad))}


def baseline_value(toy: Toy, baseline: str) -> float:
    """b for a baseline name: none → 0, logged → E_μ[r], true → J."""
    values = {"none": lambda: 0.0, "logged": lambda: toy.logged_reward, "true": lambda: toy.J}
    if baseline not in values:
        raise ValueError(f"unknown baseline {baseline!r}; choose none, logged or true")
    return values[baseline]()


def exact_moments(toy: Toy, estimator_id: str, params: Mapping[str, object] | None = None, baseline: str = "none") -> Moments:
    """The exact Moments of an exact estimator on the toy, with the given thresholds and baseline."""
    return exact_moments_many(toy, {estimator_id: params}, baseline)[estimator_id]


def exact_moments_many(toy: Toy, selection: Mapping[str, Mapping[str, object] | None], baseline: str = "none") -> dict[str, Moments]:
    """{id: Moments} for ``selection`` ({id: parameter overrides}) in one pass over the sequences.

    The pass goes through the sequences in chunks of at most CHUNK sequences that share a prefix
    (``AllSequences`` with that prefix): every estimator's weights are evaluated on the chunk and its sums
    accumulated, so the M-vectors held at once are chunk-sized, and those every estimator reads (A = r − b,
    p·A, log W) are built once per chunk.
    """
    return dict(zip(selection, exact_moments_of(toy, list(selection.items()), baseline), strict=True))


def exact_moments_of(toy: Toy, entries: list[tuple[str, Mapping[str, object] | None]], baseline: str = "none") -> list[Moments]:
    """[Moments] for ``entries``, a list of (id, parameter overrides) in which an id may repeat with other
    parameters (a threshold sweep), all in the one pass of ``exact_moments_many``."""
    b = baseline_value(toy, baseline)
    chosen = []
    for estimator_id, overrides in entries:
        if not ESTIMATORS[estimator_id].exact:
            raise ValueError(f"{estimator_id} is batch-coupled: it has no exact single-sample moments")
        chosen.append((estimator_id, resolve_params(estimator_id, overrides)))
    sums = [_Sums(toy, ESTIMATORS[estimator_id].on_policy) for estimator_id, _ in chosen]
    for view in chunks(toy, b):
        for (estimator_id, params), estimator_sums in zip(chosen, sums, strict=True):
            weights = ESTIMATORS[estimator_id].weights(view, **params)
            estimator_sums.add(view, weights if estimator_sums.on_policy else view.on_support(weights))
    return [estimator_sums.moments(estimator_id, params, b)
            for (estimator_id, params), estimator_sums in zip(chosen, sums, strict=True)]


def chunks(toy, b):
    """``AllSequences`` views of the toy's sequences, one per prefix: each holds V**c ≤ CHUNK sequences (c ≥ 1
    free positions), in grid order; together they are every sequence once."""
    free = max(1, min(toy.T, int(np.log(CHUNK) / np.log(toy.V) + 1e-9)))
    suffixes = {}
    for prefix in itertools.product(range(toy.V), repeat=toy.T - free):
        yield AllSequences(toy, b, prefix=prefix, suffixes=suffixes)


class _Sums:
    """One estimator's sums over the chunks: the factorised first and second moments and the kept mass."""

    def __init__(self, toy, on_policy):
        self.toy, self.on_policy = toy, on_policy
        self.first = np.zeros((toy.T, toy.V))           # m_t[v] = E_p[c_t·1[y_t = v]], summed over the chunks
        self.second = np.zeros((toy.T, toy.V))          # E_p[c_t²·1[y_t = v]]
        self.hit_tokens = np.zeros(toy.T)               # Σ over sequences of p·1[token t masked or clipped]
        self.hit_sequences = 0.0                        # Σ p·1[some token of the sequence masked or clipped]
        self.hits = "nothing"                           # or "tokens" (only token marks: closed form) or "any"
        self.token_hits = None
        self.any_sequence_weight = self.any_token_weight = False
        self.additive = None

    def add(self, view, weights):
        self.any_sequence_weight = self.any_sequence_weight or bool(np.any(weights.sequence))
        if weights.additive is not None:
            self.additive = weights.additive                # a (T, V) table, the same in every chunk
        classes = weights.token_classes()
        for members, token, _ in classes:
            first, second = _position_moments(view, self.on_policy, weights, members)
            token = 1.0 if token is None else token
            self.first += drawn_times(first, token)
            self.second += drawn_times(second, token**2)
            self.any_token_weight = self.any_token_weight or bool(np.any(token))
        if weights.sequence_affected is None and not weights.classes:
            if weights.token_affected is not None:      # the same table in every chunk: closed form in _affected
                self.hits, self.token_hits = "tokens", weights.token_affected
            return
        self.hits = "any"
        probability = view.probability(self.on_policy)
        kept = probability
        if weights.sequence_affected is not None:       # a sequence hit whole: every token of it hit
            hit = float(np.sum(probability, where=weights.sequence_affected))
            self.hit_tokens += hit
            self.hit_sequences += hit
            kept = np.where(weights.sequence_affected, 0.0, probability)
        for members, _, token_hit in classes:
            if token_hit is None:
                continue
            in_class = kept if members is None else np.where(members, kept, 0.0)
            self.hit_tokens += (chunk_marginals(view, in_class) * token_hit).sum(axis=1)
            if token_hit[np.arange(view.head), view.prefix].any():
                self.hit_sequences += float(in_class.sum())
            else:
                self.hit_sequences += float(np.sum(in_class, where=outer_any(token_hit[view.head:])))

    def moments(self, estimator_id, params, b):
        toy = self.toy
        squared_score = 1 - 2 * toy.pi + (toy.pi**2).sum(axis=1, keepdims=True)
        first, second = self.first, self.second
        if self.additive is not None:
            first, second = with_additive(first, second, toy.pi if self.on_policy else toy.mu, self.additive)
        mean = (first - toy.pi * first.sum(axis=1, keepdims=True)) * toy.score_scale
        second_moment = float(np.sum(second * squared_score)) * toy.score_scale**2
        grad = toy.true_grad
        masked = "sequence" if not self.any_sequence_weight else "token" if not self.any_token_weight else ""
        cosine, note = direction(mean, grad, b, lambda: masked)
        tokens, sequences = self._affected(toy.pi if self.on_policy else toy.mu)
        return Moments(
            estimator=estimator_id, params=params, mean=mean, bias=float(np.linalg.norm(mean - grad)),
            var=max(second_moment - float(np.linalg.norm(mean))**2, 0.0), grad_norm=float(np.linalg.norm(grad)),
            cosine=cosine, tokens_affected=share(tokens), sequences_affected=share(sequences), note=note,
            **bias_split(toy, mean, b, self.on_policy), **plain_comparison(toy, mean))

    def _affected(self, position_probability):
        """(mean over t of P(token t masked or clipped), P(any token of the sequence masked or clipped))."""
        if self.hits == "nothing":
            return 0.0, 0.0
        if self.hits == "tokens":
            per_position = (position_probability * self.token_hits).sum(axis=1)
            return float(per_position.mean()), float(1 - np.prod(1 - per_position))
        return float(self.hit_tokens.mean()), self.hit_sequences


def drawn_times(moment, table):
    """moment·table, 0 where the moment is 0: a token no sequence of the class draws (μ_t(v) = 0) may have an
    infinite weight (ρ = +∞) without making the sum NaN."""
    with np.errstate(invalid="ignore"):
        return np.where(moment != 0, moment * table, 0.0)


def with_additive(first, second, position_probability, additive):
    """(m + p·d, m2 + 2·d·m + p·d²): the position moments E_p[(c_t·A + d_t)·1[y_t = v]] and E_p[(c_t·A + d_t)²·1[y_t = v]]
    from those of c_t·A (m, m2), for an additive term d[t, v]; a token the sampler never draws (p = 0) adds 0."""
    drawn = position_probability > 0
    d = np.where(drawn, additive, 0.0)
    return first + position_probability * d, second + 2 * d * first + position_probability * d**2


def chunk_marginals(view, x):
    """m[..., t, v] = Σ over the view's sequences of x·1[y_t = v] for vectors x (..., n): the prefix's tokens
    carry all of x's sum."""
    toy = view.toy
    free = position_marginals(x, toy.T - view.head, toy.V)
    marginals = np.zeros((*free.shape[:-2], toy.T, toy.V))
    marginals[..., view.head:, :] = free
    marginals[..., np.arange(view.head), view.prefix] = free[..., :1, :].sum(axis=-1)
    return marginals


def _position_moments(view, on_policy, weights, members=None):
    """E_p[a·H_t·1[y_t = v]] and E_p[a²·H_t²·1[y_t = v]] over the view's sequences, each (T, V), with
    a = (r − b)·sequence weight.

    Without a carry (H_t = 1) these are position marginals of p·a and p·a²; with one, prefix sums
    weighted by H_t over the V**t prefixes. ``members`` (a token class) restricts the sums to those sequences.
    p·A comes from the view (shared); p·a = p·A·w and p·a² = p·a·A·w are written into one (2, n) array,
    whose marginals are taken together. Estimators with neither a sequence weight nor a carry (naive,
    token-level) share the result through the view's memo.
    """
    sequence = weights.sequence
    unit = np.ndim(sequence) == 0 and sequence == 1
    shared = weights.carry is None and unit and members is None
    key = ("unweighted position moments", on_policy)
    if shared and key in view.memo:
        return view.memo[key]
    weighted = view.weighted_probability(on_policy)                             # p·A: the view's, never written
    powers = np.empty((2, weighted.size))
    first, second = powers
    if unit:
        first[:] = weighted
    else:
        np.multiply(weighted, sequence, out=first)                               # p·a
    if members is not None:
        first *= members
    np.multiply(first, view.advantage, out=second)                               # p·a·A
    if not unit:
        second *= sequence                                                       # p·a²
    if weights.carry is None:
        moments = tuple(chunk_marginals(view, powers))
    else:
        moments = _carried_chunk_marginals(view, first, weights.carry, 1), \
            _carried_chunk_marginals(view, second, weights.carry, 2)
    if shared:
        view.memo[key] = moments
    return moments


def _carried_chunk_marginals(view, x, carry, power):
    """``chunk_marginals`` with H_t = ∏_{s<t} carry[s, y_s]: over the prefix H_t is one number per t."""
    toy, head = view.toy, view.head
    carried = np.concatenate([[1.0], np.cumprod(carry[np.arange(head), view.prefix])])    # H_t, t = 0 … head
    marginals = np.zeros((toy.T, toy.V))
    marginals[head:] = carried[head]**power * _carried_marginals(x, toy.T - head, toy.V, carry[head:], power)
    total = x.sum()
    marginals[np.arange(head), view.prefix] = carried[:head]**power * total
    return marginals


def _carried_marginals(x, T, V, carry, power):
    """m[t, v] = Σ_y x[y]·H_t(y_{<t})**power·1[y_t = v], H_t = ∏_{s<t} carry[s, y_s], over the V**T sequences."""
    marginals = np.empty((T, V))
    prefix_weight = np.ones(1)
    for t, sums in enumerate(prefix_sums(x, T, V)):
        marginals[t] = prefix_weight**power @ sums
        prefix_weight = np.multiply.outer(prefix_weight, carry[t]).ravel()
    return marginals


def exact_table(toy: Toy, selection: Mapping[str, Mapping[str, object] | None] | None = None, baseline: str = "none",
                N: int = 64) -> list[dict[str, Any]]:
    """One row per exact estimator: its Moments summarised at batch size N (cosine None with a ``note`` when
    it is undefined; "rel_plain_bias", its error against softmax(θ)'s ∇J, when the trainer scores another π).

    ``selection`` maps estimator id → parameter overrides (default: every exact estimator, defaults).
    """
    selection = {id: {} for id in EXACT_IDS} if selection is None else selection
    rows = []
    for estimator_id, moments in exact_moments_many(toy, selection, baseline).items():
        rows.append({
            "estimator": estimator_id, "label": ESTIMATORS[estimator_id].label, "params": moments.params,
            "bias": moments.bias, "var": moments.var, "rel_bias": moments.rel_bias,
            "rel_std": moments.rel_std(N), "rel_rmse": moments.rel_rmse(N), "cosine": moments.cosine,
            "rel_out_of_reach": moments.rel_out_of_reach, "rel_within_reach": moments.rel_within_reach,
            "tokens_affected": moments.tokens_affected, "sequences_affected": moments.sequences_affected,
            "unbiased": moments.unbiased, "note": moments.note}
            | ({} if moments.plain_bias is None else {"rel_plain_bias": moments.rel_plain_bias}))
    return rows
