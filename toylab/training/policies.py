"""Three policies in one update: the engine's stale μ, the anchor π_old, and U updates of π_θ on one batch.

At step k the engine samples from μ_k = engine(θ_{k−s}): the sampler model (mismatch, top-p/top-k, τ, rounding, what
is logged and what is scored) applied to the policy s steps old (θ_j = θ_0 for j < 0: before the run the engine holds
θ_0). s is fixed, or drawn uniformly from 0 … η for each batch from default_rng([seed, LAG_STREAM]) — the same draws
for every estimator and run. The anchor π_old (``updates.ANCHORS``) is π_{θ_k} (recompute), π_{θ_{k−s}} scored over
the engine's kept tokens (rollout), or the logged μ_k (bypass); w = π_old/μ_k. The batch feeds U = minibatches ×
epochs sequential updates θ_k = θ⁰ → θ¹ → … → θᵁ = θ_{k+1}, with π_old and the correction's weight g(w) frozen. Each
estimator of the selection is a correction g; on_policy is the reference: it samples π_{θ_k} itself (no engine, no
lag), so π_old = μ = π_{θ_k} under every anchor.

Expected mode. The update u steps along the exact gradient of the expected surrogate at θᵘ,

    Gᵘ = E_{μ_k}[Σ_t g_t·∂L/∂log π_θ(y_t)·∇_θ log π_θᵘ(y_t)] = Σ_ρ (m_ρ·D_ρ − π_θᵘ·Σ_v m_ρ·D_ρ)·score_scale

with m_ρ[t, v] = E_μ[1[r = ρ]·g_t·1[y_t = v]] (``exact.reward_marginals``, one pass over the sequences per batch)
and D_ρ[t, v] = ∂L/∂log π_θ at (log π_θᵘ, log π_old, log μ)[t, v] and A = ρ − b: L reads y only through (t, y_t, A),
and the toy's reward is 0 or 1. When π_θ⁰ = π_old exactly (recompute, or rollout at lag 0) and U = 1, r ≡ 1 and
every loss's ∂L/∂log π_θ is A: the one update is the correction's exact mean (``exact.exact_means``), today's
Training. What the frameworks log, per update and averaged over the U updates (their metrics' mean over mini-batches):

    clipped share   (1/T)·Σ_t Σ_ρ Σ_v q_ρ[t, v]·1[the clip or mask holds (t, v) at A = ρ − b],   q_ρ[t, v] =
                    P_μ(y_t = v, r = ρ): the share of tokens (verl pg_clipfrac + pg_clipfrac_lower; prime-rl is_masked)
    PPO KL          (1/T)·Σ_t Σ_v μ_t[v]·(log π_old − log π_θᵘ)[t, v]: the token mean of −log r (verl ppo_kl)
    w's spread      sqrt((1/T)·Σ_t Σ_v μ_t[v]·(w[t, v] − w̄)²), w̄ = (1/T)·Σ_t Σ_v μ_t[v]·w[t, v]: the standard
                    deviation of w over the tokens (frozen for the batch); T is taken as Σ_t Σ_v μ_t[v] as summed,
                    so a w of 1 everywhere (bypass) has a spread of exactly 0, not rounding's

Sampled mode. The batch of N sequences drawn from μ_k is split into ``minibatches`` contiguous minibatches (sizes as
numpy.array_split gives them), taken in order in each of ``epochs`` passes; update u steps along the minibatch's mean
(1/n)·Σ_i Σ_t g_{i,t}·∂L/∂log π_θ·∇_θ log π_θᵘ(y_{i,t}) (seq-mean-token-sum). g is computed once on the whole batch
(a batch-coupled correction's normalisation over the N sequences; grpo and rloo centre the rewards over the batch);
the records are the same quantities over the minibatch's tokens (w's over the batch's).
"""

from collections import deque
from functools import cached_property
from types import SimpleNamespace

import numpy as np

from toylab.analysis.montecarlo import Batches, batch_estimates, trainer_side
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.coefficients import apply
from toylab.engine.counts import factorised_marginals, reward_by_count
from toylab.engine.sequences import GivenSequences
from toylab.engine.surrogate import correction_has_additive_term
from toylab.training.exact import exact_means, reward_marginals
from toylab.training.reference_term import centred_penalised
from toylab.training.reward_penalty import RewardPenaltyBatch

LAG_STREAM = 2**32 - 2          # the second seed word of the drawn lags: no run number reaches it
CENTRED = ("grpo", "rloo")      # corrections whose advantage is the batch-centred reward (rloo's × N/(N − 1))


def lags(seed, lag, draw, steps):
    """s_0 … s_K: the age of the policy each batch's engine holds — ``lag`` (fixed), or drawn uniformly from 0 … lag
    (uniform) by default_rng([seed, LAG_STREAM]) — and at most k (before the run the engine holds θ_0)."""
    rng = np.random.default_rng([seed, LAG_STREAM]) if draw == "uniform" else None
    for k in range(steps + 1):
        drawn = lag if rng is None else int(rng.integers(0, lag + 1))
        yield min(drawn, k)


class History:
    """The last lag + 1 policies θ_k, θ_{k−1}, …: ``ago(s)`` is θ_{k−s}, or with s per row (an array), each row's."""

    def __init__(self, lag):
        self.kept = deque(maxlen=lag + 1)

    def push(self, theta):
        self.kept.append(theta)

    def ago(self, s):
        if np.ndim(s) == 0:
            return self.kept[-1 - s]
        return np.stack([self.kept[-1 - lag][row] for row, lag in enumerate(s)])


def engine_policy(theta, stale, on_policy):
    """The θ each row's engine holds: the stale θ_{k−s}, but θ_k for on_policy (it samples the trainer)."""
    if stale is theta or not on_policy.any():
        return stale
    return np.where(on_policy.reshape(-1, *[1] * (theta.ndim - 1)), theta, stale)


def anchor_log_probs(anchor, rows, stale, on_policy):
    """log π_old per row (rows, …, T, V): the scored π at θ_k (recompute), at θ_{k−s} over the engine's kept tokens
    (rollout), or the logged μ (bypass); on_policy's is its own π."""
    if anchor == "recompute":
        return rows.log_pi
    old = rows.log_logged if anchor == "bypass" else rows.sampler.scored_log_probabilities(stale, rows.kept)
    return np.where(on_policy.reshape(-1, *[1] * (rows.log_pi.ndim - 1)), rows.log_pi, old) if on_policy.any() else old


def starts_at_anchor(anchor, s):
    """True when π_θ⁰ = π_old exactly at every row: the recomputed anchor, or the rollout one at lag 0 (s: an int, or
    one per row)."""
    return anchor == "recompute" or (anchor == "rollout" and not np.any(s))


def on_kept(table, kept):
    """The table on the kept tokens, 0 elsewhere (tokens never drawn: a log-probability there may be −∞)."""
    return np.where(kept, table, 0.0)


# -- expected mode ----------------------------------------------------------------------------------------

class ExpectedBatch:
    """One batch of every row in expected mode: the tables frozen for its U updates (π_old, μ, w, m_ρ, q_ρ)."""

    def __init__(self, rows, log_old, on_policy, estimators, b, update):
        self.rows, self.update, self.b = rows, update, b
        probability = np.where(on_policy[:, None, None], rows.pi, rows.mu)
        self.kept = np.where(on_policy[:, None, None], rows.pi > 0, rows.kept)
        self.log_old = on_kept(log_old, self.kept)
        self.log_mu = on_kept(np.where(on_policy[:, None, None], rows.log_pi, rows.log_logged), self.kept)
        self.probability = probability
        self.advantages = np.stack([-b, 1 - b], axis=1)[..., None, None]                 # A = ρ − b: (rows, 2, 1, 1)
        self.estimators = estimators
        self.on_policy = on_policy
        self.marginals = None

    @cached_property
    def reward_share(self):
        """q_ρ[t, v] = P_μ(y_t = v, r = ρ): (rows, 2, T, V), by the count recursion."""
        phi = reward_by_count(self.rows.T)
        ones = np.ones_like(self.probability)
        unit = SimpleNamespace(token=ones, before=ones, after=ones)
        return np.stack([factorised_marginals(self.probability, unit, np.broadcast_to(part, (len(self.b), len(phi))))
                         for part in (1 - phi, phi)], axis=1)

    def w_spread(self):
        """The token standard deviation of w = π_old/μ_log under μ (+∞ beyond float64)."""
        with np.errstate(over="ignore"):
            w = np.where(self.kept, np.exp(on_kept(self.log_old - self.log_mu, self.kept)), 0.0)
        return token_spread(self.probability, w)

    def losses(self, log_pi):
        """The update's TokenLoss at each reward class: tables (rows, 2, T, V)."""
        pi = on_kept(log_pi, self.kept)[:, None]
        return self.update.token_loss(pi, self.log_old[:, None], self.log_mu[:, None], self.advantages)

    def records(self, log_pi, losses):
        """(clipped share, PPO KL) at π_θ (``log_pi``) per row."""
        held = (losses.clipped | losses.dual_clipped) & self.kept[:, None]
        T = self.rows.T
        clipped = (self.reward_share * held).sum(axis=(-3, -2, -1)) / T
        kl = (self.probability * on_kept(self.log_old - log_pi, self.kept)).sum(axis=(-2, -1)) / T
        return clipped, kl

    def gradient(self, log_pi, pi, losses, chunk):
        """Gᵘ at π_θ: Σ_ρ (m_ρ·D_ρ − π·Σ_v m_ρ·D_ρ)·score_scale, m_ρ of the correction on w = π_old/μ (once per
        batch) or on sg(π_θ)/μ (``weights_at`` current: at each update)."""
        if self.update.weights_at == "current":
            current = np.where(self.on_policy[:, None, None], self.log_old, log_pi)    # on_policy's batch stays π_θk's
            self.marginals = reward_marginals(self.seen_by_correction(current), self.estimators, self.b, chunk)
        elif self.marginals is None:
            self.marginals = reward_marginals(self.seen_by_correction(self.log_old), self.estimators, self.b, chunk)
        x = (self.marginals * np.where(self.kept[:, None], losses.derivative, 0.0)).sum(axis=1)
        return (x - pi * x.sum(axis=-1, keepdims=True)) * self.rows.score_scale

    def penalty_gradient(self, reference, log_pi, pi):
        """A loss penalty's part of the gradient at π_θ (``reference_term.ReferenceTerm``)."""
        return reference.expected_loss_gradient(self.probability, self.kept, log_pi, pi, self.log_old, self.log_mu,
                                                self.rows.score_scale)

    def seen_by_correction(self, log_ratio_numerator):
        """The rows with π := the policy the correction's ratio divides μ into."""
        return self.rows.anchored(np.where(self.kept, log_ratio_numerator, -np.inf))


def expected_updates(rows, log_old, on_policy, estimators, b, update, optimizer, exact_start, chunk, reference=None):
    """The U updates of one batch at every row: (G⁰, θᵁ − θ⁰, clipped share, PPO KL, w's spread), the two records
    averaged over the U updates. ``exact_start``: π_θ⁰ = π_old, so a single update is the correction's exact mean,
    with r ≡ 1: nothing clipped (no loss clips or masks at r = 1) and −log r = 0. ``reference``: a KL penalty
    (``reference_term.ReferenceTerm``): in the loss, its gradient joins each update's; in the reward, every update
    enumerates (``reward_penalty``)."""
    in_loss = reference is not None and reference.in_loss
    in_reward = reference is not None and reference.in_reward
    if exact_start and update.U == 1 and not in_reward:
        first = exact_means(rows, estimators, b, chunk)
        if in_loss:
            first = first + ExpectedBatch(rows, log_old, on_policy, estimators, b, update).penalty_gradient(
                reference, rows.log_pi, rows.pi)
        return first, optimizer.step(first), np.zeros(len(b)), np.zeros(len(b)), exact_w_spread(rows, on_policy)
    batch = ExpectedBatch(rows, log_old, on_policy, estimators, b, update)
    rewarded = RewardPenaltyBatch(batch, reference.log_ref, on_policy, reference.penalty) if in_reward else None
    theta, log_pi, pi = rows.theta, rows.log_pi, rows.pi
    first, total = None, 0.0
    clipped, kl = np.zeros(len(b)), np.zeros(len(b))
    for u in range(update.U):
        losses = batch.losses(log_pi)
        held, drift = batch.records(log_pi, losses)
        if rewarded is not None:
            gradient, held = rewarded.gradient(log_pi, pi)
        else:
            gradient = batch.gradient(log_pi, pi, losses, chunk)
        if in_loss:
            gradient = gradient + batch.penalty_gradient(reference, log_pi, pi)
        clipped, kl = clipped + held / update.U, kl + drift / update.U
        first = gradient if u == 0 else first
        step = optimizer.step(gradient)
        total = step if u == 0 else total + step
        if u + 1 < update.U:
            theta = theta + step
            log_pi = rows.sampler.scored_log_probabilities(theta, rows.kept)      # over the batch's kept tokens
            pi = np.exp(log_pi)
    return first, total, clipped, kl, batch.w_spread()


def exact_w_spread(rows, on_policy):
    """w's spread under μ when π_old is the rows' π (w = ρ), 0 for on_policy (``ExpectedBatch.w_spread``)."""
    return np.where(on_policy, 0.0, token_spread(rows.mu, np.where(rows.kept, rows.rho, 0.0)))


def token_spread(probability, w):
    """Each row's standard deviation of w over its tokens, weighted by ``probability`` (rows, T, V):
    sqrt(Σ p·(w − w̄)² / Σ p) with w̄ = Σ p·w / Σ p (Σ p is T up to rounding; w ≡ 1 gives w̄ = 1 exactly); +∞ where w
    leaves float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        mass = probability.sum(axis=(-2, -1))
        mean = (probability * w).sum(axis=(-2, -1)) / mass
        spread = np.sqrt((probability * (w - mean[:, None, None])**2).sum(axis=(-2, -1)) / mass)
    return np.where(np.isnan(spread), np.inf, spread)


# -- sampled mode -----------------------------------------------------------------------------------------

def batch_terms(estimator_id, params, side, tokens, b, advantage=None):
    """(g, A) of a correction on the batch (R, N, T) drawn for one estimator: g (R, N, T) on the side's anchor (its
    log π is π_old), A (R, N) = r − b, or the batch-centred reward for grpo and rloo. ``advantage``: the batch's A at
    these tokens when they are a minibatch of it (grpo and rloo centre over the whole batch, not the minibatch)."""
    R, N, T = tokens.shape
    batches = Batches(side, tokens, np.array([N]), b)
    advantage = _batch_advantage(estimator_id, batches, N) if advantage is None else advantage
    if ESTIMATORS[estimator_id].exact:
        return batches.terms(estimator_id, params)[0], advantage
    weights = np.empty(tokens.shape)
    sequences = batches.sequences
    for run in range(R):
        one = GivenSequences(sequences.log_pi[run * N:(run + 1) * N], sequences.log_mu[run * N:(run + 1) * N],
                             advantages=advantage[run])
        weights[run] = np.broadcast_to(apply(estimator_id, one, params)[0], (N, T))
    return weights, advantage


def _batch_advantage(estimator_id, batches, N):
    """A (R, N) of a batch: r − b, or the batch-centred reward for grpo and rloo (rloo's × N/(N − 1): it trains at
    N ≥ 2)."""
    if estimator_id not in CENTRED:
        return batches.advantage
    advantage = batches.reward - batches.reward.mean(axis=1, keepdims=True)
    return advantage * N / (N - 1.0) if estimator_id == "rloo" else advantage


def refuses_as_weight(estimator_id, params):
    """Why the correction cannot be a weight g(w) of an update (an additive term), or None."""
    if not correction_has_additive_term(estimator_id, params):
        return None
    if ESTIMATORS[estimator_id].exact:
        return "adds a penalty term to the gradient: it is a loss, not a correction weight g(w)"
    return f"its weight {params['weight']} adds a penalty term: a loss, not a correction weight g(w)"


def minibatch_gradient(tokens, log_pi, pi, weights, advantage, log_old, log_mu, update, scale, reference=None,
                       ref_tokens=None):
    """(ĝ (R, T, V), clipped share (R,), PPO KL (R,)) on a minibatch: tokens (R, n, T), tables log π_θ, π_θ (R, T, V),
    the frozen g, A (R, n) or per token (R, n, T), log π_old and log μ at the tokens; a loss penalty's −β·∂ℓ/∂log π_θ
    at each token (``reference``, log π_ref at the tokens ``ref_tokens``), or full's −β·∇KL."""
    R, n, T = tokens.shape
    V = pi.shape[-1]
    cell = tokens + V * np.arange(T)
    own = cell + T * V * np.arange(R)[:, None, None]
    log_pi_tokens = np.take(log_pi, own)
    losses = update.token_loss(log_pi_tokens, log_old, log_mu, advantage if advantage.ndim == 3 else advantage[..., None])
    x = weights * losses.derivative
    in_loss = reference is not None and reference.in_loss
    if in_loss and not reference.penalty.exact:
        x = x - reference.penalty.beta * reference.token_derivative(log_pi_tokens, log_old, log_mu, ref_tokens)
    sums = np.bincount(own.ravel(), weights=x.ravel(), minlength=R * T * V).reshape(R, T, V)
    gradient = (sums - pi * sums.sum(axis=-1, keepdims=True)) * scale / n
    if in_loss and reference.penalty.exact:
        gradient = gradient + reference.exact_gradient(log_pi, scale)
    clipped = (losses.clipped | losses.dual_clipped).mean(axis=(1, 2))
    return gradient, clipped, (log_old - log_pi_tokens).mean(axis=(1, 2))


def sampled_updates(estimator_id, params, mine, tokens, log_old, b, update, optimizer, exact_start, reference=None):
    """One estimator's U updates of its batch in every run: (θᵁ − θ⁰ (R, T, V), clipped share and PPO KL (R,)),
    the records averaged over the U updates. ``mine``: the estimator's rows (its μ_k, or π_k for on_policy);
    ``reference``: a KL penalty (``reference_term.ReferenceTerm``)."""
    on_policy = ESTIMATORS[estimator_id].on_policy
    side = trainer_side(mine) if on_policy else mine
    R, N, T = tokens.shape
    penalised = reference is not None and reference.penalty.active
    if exact_start and update.U == 1 and not penalised:    # r ≡ 1: no clip binds, −log r = 0
        estimate = batch_estimates(Batches(side, tokens, np.array([N]), b), estimator_id, params)[:, 0]
        return optimizer.step(estimate), np.zeros(R), np.zeros(R)
    V = mine.V
    own = tokens + V * np.arange(T) + T * V * np.arange(R)[:, None, None]
    old_tokens = np.take(side.log_pi if on_policy else log_old, own)
    mu_tokens = np.take(side.log_logged, own)
    anchored = side if on_policy else _anchored_side(side, log_old)
    weights, advantage = batch_terms(estimator_id, params, anchored, tokens, b)
    ref_tokens = np.take(reference.log_ref, tokens + V * np.arange(T)) if penalised else None
    if penalised and reference.in_reward:
        penalties = reference.token_penalties(old_tokens, ref_tokens)
        if estimator_id in CENTRED:
            reward = (2 * (tokens == 0).sum(axis=2) >= T).astype(float)
            advantage = centred_penalised(reward, penalties, estimator_id, reference.penalty.reward_sum)
        else:
            advantage = advantage[..., None] - penalties
    parts = np.array_split(np.arange(N), update.minibatches)
    theta, total = mine.theta, 0.0
    log_pi, pi = side.log_pi, side.pi
    clipped, kl = np.zeros(R), np.zeros(R)
    current = update.weights_at == "current" and not on_policy
    weights = np.array(weights) if current else weights          # rewritten at each update
    for u in range(update.U):
        part = parts[u % update.minibatches]
        if current:                                        # g(sg(π_θ)/μ) on this minibatch, at this update
            weights[:, part] = batch_terms(estimator_id, params, _anchored_side(side, log_pi), tokens[:, part],
                                           b, advantage[:, part])[0]
        gradient, held, drift = minibatch_gradient(tokens[:, part], log_pi, pi, weights[:, part], advantage[:, part],
                                                   old_tokens[:, part], mu_tokens[:, part], update, mine.score_scale,
                                                   reference, None if ref_tokens is None else ref_tokens[:, part])
        clipped, kl = clipped + held / update.U, kl + drift / update.U
        step = optimizer.step(gradient)
        total = step if u == 0 else total + step
        if u + 1 < update.U:
            theta = theta + step
            log_pi = mine.sampler.scored_log_probabilities(theta, mine.kept)     # over the batch's kept tokens
            pi = np.exp(log_pi)
    return total, clipped, kl


def sampled_w_spread(rows, log_old, on_policy, tokens):
    """w's spread over each batch's N·T tokens, every estimator and run at once: tokens (E, R, N, T) drawn from each
    row's μ (π for on_policy, whose w is 1), w = π_old/μ_log at them: sqrt(Σ (w − w̄)²/n), w̄ = Σ w/n, from the count of
    each (position, token) in the batch (about the mean, so a w of 1 everywhere has a spread of 0, not rounding's);
    +∞ where w² leaves float64."""
    E, R, N, T = tokens.shape
    V = rows.V
    log_w = np.subtract(log_old, rows.log_logged, out=np.zeros(log_old.shape), where=rows.kept)
    if on_policy.any():
        log_w = np.where(on_policy[:, None, None, None], 0.0, log_w)
    cells = tokens + V * np.arange(T) + T * V * np.arange(E * R).reshape(E, R, 1, 1)
    counts = np.bincount(cells.ravel(), minlength=E * R * T * V).reshape(E, R, T * V)
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.exp(log_w).reshape(E, R, T * V)
        mean = (counts * w).sum(axis=-1) / (N * T)
        spread = np.sqrt((counts * (w - mean[..., None])**2).sum(axis=-1) / (N * T))
    return np.where(np.isnan(spread), np.inf, spread)


def _anchored_side(side, log_old):
    """The batch's tables as the correction sees them: log π := log π_old, ratio w = π_old/μ_log."""
    log_rho = np.subtract(log_old, side.log_logged, out=np.full(log_old.shape, np.inf), where=side.kept)
    return SimpleNamespace(V=side.V, pi=np.exp(log_old), log_pi=log_old, log_logged=side.log_logged, log_rho=log_rho,
                           score_scale=side.score_scale)
