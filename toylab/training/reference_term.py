"""The reference's part of an update: a KL penalty (``catalogue.kl``) to π_ref, with β, in the loss or in the reward.

In the loss, each update's gradient gains −β times the expected gradient of the term ℓ at π_θᵘ, π_old and μ:

    expected:  −β·scale·(p·D − π_θᵘ·Σ_v p·D),   D = ∂ℓ/∂log π_θ per (t, v) (``KLPenalty.loss_terms``), p = μ (π for
               on_policy); full: −β·∇KL(π_θᵘ‖π_ref)
    sampled:   −β·D at each drawn token, summed into the minibatch's mean like the policy loss's terms

In the reward, the advantage of token t loses β·K_t(y), k read at the anchor (``KLPenalty.values`` of log π_old −
log π_ref, detached): in expected mode by ``reward_penalty``, in sampled mode per drawn token here. grpo and rloo,
which centre the rewards over the batch, centre the penalised reward r − β·K when the penalty is the sequence's sum
(as verl's and SkyRL's GRPO do), the task reward alone otherwise (each token then loses its own β·K_t).
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toylab.catalogue.kl import KLPenalty
from toylab.engine.kl_moments import expected_loss_gradient, summed_positions
from toylab.engine.reference import kl_gradients


@dataclass(frozen=True)
class ReferenceTerm:
    """A run's penalty and its π_ref (log π_ref, (T, V))."""
    penalty: KLPenalty
    log_ref: NDArray[np.float64]

    @property
    def in_loss(self) -> bool:
        return self.penalty.active and self.penalty.placement == "loss"

    @property
    def in_reward(self) -> bool:
        return self.penalty.active and self.penalty.placement == "reward"

    def expected_loss_gradient(self, probability, kept, log_pi, pi, log_old, log_mu, scale):
        """−β·E_p[Σ_t ∂ℓ/∂log π_θ·s_t] per row (rows, T, V)."""
        if self.penalty.exact:
            return -self.penalty.beta * kl_gradients(log_pi, self.log_ref, scale)[0]
        derivative = self.token_derivative(log_pi, log_old, log_mu, np.broadcast_to(self.log_ref, log_pi.shape), kept)
        return -self.penalty.beta * expected_loss_gradient(probability, pi, derivative, scale)

    def token_derivative(self, log_pi, log_old, log_mu, log_ref, kept=None):
        """∂ℓ/∂log π_θ per token (any shape), 0 where ``kept`` is False (tokens never drawn)."""
        if kept is None:
            return self.penalty.loss_terms(log_pi, log_old, log_mu, log_ref)[1]
        on_kept = [np.where(kept, table, 0.0) for table in (log_pi, log_old, log_mu, log_ref)]
        return np.where(kept, self.penalty.loss_terms(*on_kept)[1], 0.0)

    def exact_gradient(self, log_pi, scale):
        """−β·∇KL(π_θ‖π_ref) (full, the whole position's KL, sampled or not)."""
        return -self.penalty.beta * kl_gradients(log_pi, self.log_ref, scale)[0]

    def token_penalties(self, old_tokens, ref_tokens):
        """β·K_t per drawn token (…, N, T) from the anchor's log-probabilities at the tokens."""
        values = self.penalty.values(old_tokens, ref_tokens)
        summed = summed_positions(values.shape[-1], self.penalty.reward_sum) | np.eye(values.shape[-1], dtype=bool)
        return self.penalty.beta * np.einsum("...s,ts->...t", values, summed.astype(float))


def centred_penalised(reward, penalties, estimator_id, reward_sum):
    """A (R, N, T) of grpo and rloo under a reward penalty (β·K_t per token, (R, N, T)): the batch-centred r − β·K
    when K is the sequence's sum (the same at every token), else the batch-centred r less each token's own β·K_t;
    rloo's centring scaled by N/(N − 1), its leave-one-out baseline."""
    N = reward.shape[1]
    scale = N / (N - 1.0) if estimator_id == "rloo" else 1.0
    if reward_sum == "sequence":
        penalised = reward - penalties[..., 0]
        return scale * (penalised - penalised.mean(axis=1, keepdims=True))[..., None] * np.ones(penalties.shape)
    return scale * (reward - reward.mean(axis=1, keepdims=True))[..., None] - penalties
