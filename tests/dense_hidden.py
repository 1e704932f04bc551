"""The brute-force oracle for hidden variables: routing draws of a mixture of experts, and version switches.

It shares with toylab only the toy's numbers (θ, b, mismatch, the pipeline's parameters), the mixture's parameter
tables (router S, experts Ψ, the engine's error draws ε: the MoE's θ) and the flat order of the parameters (router
(layer, t, e), then experts (layer, e, t, v), C order). Everything else is written out here from its definition: the top-k
routing (the largest scores, a tie to the lower expert), the gates (softmax over the picked), the logits (loops over
layers and experts), the Jacobian ∂z_t/∂θ as a (V, P) matrix per position (loops over every parameter), the
pipeline's three distributions (``dense``'s ``dense_sampler_log_mu``, ``dense_logged_log_mu``, ``dense_scored_log_pi``),
and every hidden outcome — a draw per sequence, or a draw per token enumerated as one of D**T patterns; a version
pattern per sequence — with every sequence of tokens, each estimator's coefficients from ``DenseToy.coefficients``
(its definitions), and each sample's gradient materialised as a P-vector and summed.
"""

import itertools
import math

import numpy as np
from dense import (
    DenseToy,
    dense_logged_log_mu,
    dense_sampler_log_mu,
    dense_scored_log_pi,
    dense_token_derivative,
)

from toylab import resolve_params


def dense_top_k(scores, k):
    """The k experts with the largest scores, a tie to the lower index: a set."""
    order = sorted(range(len(scores)), key=lambda e: (-scores[e], e))
    return frozenset(order[:k])


def dense_gates(scores, picked):
    """{e: softmax of the scores over the picked experts}."""
    top = max(scores[e] for e in picked)
    total = sum(math.exp(scores[e] - top) for e in picked)
    return {e: math.exp(scores[e] - top) / total for e in picked}


class DenseMoE:
    """The mixture's tables (router (L, T, E), experts (L, E, T, V)) and what follows from them by loops."""

    def __init__(self, router, experts, top_k):
        self.router, self.experts, self.k = router, experts, top_k
        self.L, self.T, self.E = router.shape
        self.V = experts.shape[-1]
        self.P = self.L * self.T * self.E + self.L * self.E * self.T * self.V

    def router_index(self, layer, t, e):
        return (layer * self.T + t) * self.E + e

    def expert_index(self, layer, e, t, v):
        return self.L * self.T * self.E + ((layer * self.E + e) * self.T + t) * self.V + v

    def own_routing(self):
        """{(layer, t): picked} of the trainer's router."""
        return {(layer, t): dense_top_k(list(self.router[layer, t]), self.k) for layer in range(self.L) for t in range(self.T)}

    def engine_routing(self, scores):
        """{(layer, t): picked} for given scores (L, T, E) (the engine's, error added)."""
        return {(layer, t): dense_top_k(list(scores[layer, t]), self.k) for layer in range(self.L) for t in range(self.T)}

    def logits(self, routing, scores=None):
        """z (T, V): Σ over layers and picked experts of gate·Ψ, gates from ``scores`` (default: the router)."""
        scores = self.router if scores is None else scores
        z = np.zeros((self.T, self.V))
        for (layer, t), picked in routing.items():
            for e, gate in dense_gates(list(scores[layer, t]), picked).items():
                for v in range(self.V):
                    z[t, v] += gate * self.experts[layer, e, t, v]
        return z

    def jacobian(self, routing, scores=None):
        """J (T, V, P): ∂z_t[v]/∂θ, by definition: Ψ enters through its gate, the router through every picked gate
        (∂g_e'/∂s_e = g_e'·(δ_ee' − g_e)); a scores table other than the router's (the engine's) differs from it by a
        constant, so its gradient is the router's."""
        scores = self.router if scores is None else scores
        J = np.zeros((self.T, self.V, self.P))
        for (layer, t), picked in routing.items():
            gate = dense_gates(list(scores[layer, t]), picked)
            for e in picked:
                for v in range(self.V):
                    J[t, v, self.expert_index(layer, e, t, v)] += gate[e]
                    for other in picked:
                        dg = gate[other] * ((1.0 if other == e else 0.0) - gate[e])
                        J[t, v, self.router_index(layer, t, e)] += dg * self.experts[layer, other, t, v]
        return J


def pipeline(toy, trainer_logits, engine_logits):
    """(log μ_s, log μ_log, log π) of the pipeline: the engine samples and logs from its logits, the trainer scores
    its own (``dense``'s pipeline, written out per position)."""
    parameters = toy.sampler.parameters()
    log_mu = dense_sampler_log_mu(engine_logits, toy.b, toy.mismatch, **parameters)
    return (log_mu, dense_logged_log_mu(engine_logits, toy.b, toy.mismatch, log_mu, **parameters),
            dense_scored_log_pi(trainer_logits, log_mu, **parameters))


def score_scale(toy):
    return 1.0 if toy.sampler.scored == "plain" else 1.0 / toy.sampler.temperature


def draw_patterns(D, T, draw):
    """[(probability, (j_0 … j_{T−1}))]: one draw for the whole sequence, or one per token (D**T patterns)."""
    if draw == "sequence":
        return [(1 / D, (j,) * T) for j in range(D)]
    return [(D ** -T, pattern) for pattern in itertools.product(range(D), repeat=T)]


def per_position(tables, pattern):
    """The (T, V) table whose row t is tables[pattern[t]][t]."""
    return np.array([tables[j][t] for t, j in enumerate(pattern)])


def dense_routing_samples(toy, moe, errors, sigma, draw, replay, estimator, params, baseline):
    """[(probability, ĝ (P,))] of every (draw pattern, sequence) the engine can produce, the trainer at the tables'
    θ under its own routing (off, R2) or the engine's (R3), the anchor recomputed, ĝ = Σ_t A·c_t·J_tᵀ(onehot − π_t)·
    scale; b the baseline's value."""
    D = errors.shape[0]
    own = moe.own_routing()
    engine = [moe.engine_routing(moe.router + sigma * errors[j]) for j in range(D)]
    engine_scores = [moe.router + sigma * errors[j] for j in range(D)]
    engine_logits = [moe.logits(engine[j], engine_scores[j]) for j in range(D)]
    trainer_routing = [engine[j] if replay == "R3" else own for j in range(D)]
    trainer_logits = [moe.logits(trainer_routing[j]) for j in range(D)]
    jacobians = [moe.jacobian(trainer_routing[j]) for j in range(D)]
    scale = score_scale(toy)
    samples = []
    for probability, pattern in draw_patterns(D, toy.T, draw):
        tables = [pipeline(toy, trainer_logits[j], engine_logits[j]) for j in range(D)]
        log_mu, log_logged, log_pi = (per_position([table[i] for table in tables], pattern) for i in range(3))
        dense = DenseToy.of_tables(log_mu, log_logged, log_pi, scale).on_support
        dense.baselines = {name: baseline for name in dense.baselines}
        c = dense.coefficients(estimator, resolve_params(estimator, params), "none")
        jacobian = per_position(jacobians, pattern)                                   # (T, V, P)
        for m, y in enumerate(dense.Y):
            A = dense.R[m] - baseline
            g = np.zeros(moe.P)
            for t in range(toy.T):
                score = (np.eye(toy.V)[y[t]] - dense.pi[t]) * scale
                g += A * c[m, t] * jacobian[t].T @ score
            samples.append((probability * dense.p_sampler[m], g))
    return samples


def dense_on_policy_samples(toy, moe, baseline):
    """[(π(y), ĝ)] of the trainer sampling its own policy."""
    own = moe.own_routing()
    log_pi = dense_scored_log_pi(moe.logits(own), np.zeros((toy.T, toy.V)), **toy.sampler.parameters())
    jacobian = moe.jacobian(own)
    dense = DenseToy.of_tables(log_pi, log_pi, log_pi)
    scale = score_scale(toy)
    samples = []
    for m, y in enumerate(dense.Y):
        g = sum((dense.R[m] - baseline) * jacobian[t].T @ ((np.eye(toy.V)[y[t]] - dense.pi[t]) * scale)
                for t in range(toy.T))
        samples.append((dense.p_train[m], g))
    return samples


def dense_objective_gradient(toy, moe):
    """(J, ∇J): Σ_y π(y)·r(y)·Σ_t J_tᵀ(onehot − π_t)·scale, the trainer's own routing."""
    samples = dense_on_policy_samples(toy, moe, 0.0)
    own = moe.own_routing()
    log_pi = dense_scored_log_pi(moe.logits(own), np.zeros((toy.T, toy.V)), **toy.sampler.parameters())
    dense = DenseToy.of_tables(log_pi, log_pi, log_pi)
    return float(dense.p_train @ dense.R), sum(p * g for p, g in samples)


def dense_served_gradient(toy, moe, errors, sigma, draw):
    """(J_μ, ∇J_μ): Σ over patterns and sequences of P·μ(y | pattern)·r(y)·Σ_t J^e_tᵀ(onehot − μ_t)/τ on the kept
    tokens (the engine's logits, gated by its own scores; its rounding as the identity)."""
    D = errors.shape[0]
    scores = [moe.router + sigma * errors[j] for j in range(D)]
    routing = [moe.engine_routing(scores[j]) for j in range(D)]
    logits = [moe.logits(routing[j], scores[j]) for j in range(D)]
    jacobians = [moe.jacobian(routing[j], scores[j]) for j in range(D)]
    parameters = toy.sampler.parameters()
    log_mus = [dense_sampler_log_mu(logits[j], toy.b, toy.mismatch, **parameters) for j in range(D)]
    J, grad = 0.0, np.zeros(moe.P)
    for probability, pattern in draw_patterns(D, toy.T, draw):
        log_mu = per_position(log_mus, pattern)
        jacobian = per_position(jacobians, pattern)
        for y in itertools.product(range(toy.V), repeat=toy.T):
            log_p = sum(log_mu[t, y[t]] for t in range(toy.T))
            if log_p == -math.inf:
                continue
            reward = float(2 * sum(v == 0 for v in y) >= toy.T)
            weight = probability * math.exp(log_p) * reward
            J += weight
            for t in range(toy.T):
                mu = np.exp(log_mu[t])
                grad += weight * jacobian[t].T @ ((np.eye(toy.V)[y[t]] - mu) / toy.sampler.temperature)
    return J, grad


def moments(samples):
    """(mean, var) of [(probability, ĝ)]: Σ p·ĝ and Σ p·‖ĝ − mean‖²."""
    mean = sum(p * g for p, g in samples)
    return mean, sum(p * float((g - mean) @ (g - mean)) for p, g in samples)


# -- version switches -------------------------------------------------------------------------------------------

def dense_version_patterns(switch, at, lag, T):
    """[(probability, head, switch position)]: off or lag 0 one pattern with no switch; fixed one; drawn every head
    1 … η and position 1 … T − 1, as likely."""
    if switch == "off" or lag == 0:
        return [(1.0, lag, T)]
    if switch == "fixed":
        return [(1.0, lag, at)]
    pairs = [(head, c) for head in range(1, lag + 1) for c in range(1, T)]
    return [(1.0 / len(pairs), head, c) for head, c in pairs]


def dense_version_samples(toy, history, switch, at, lag, stamp, masked, anchor, update, estimator, params,
                          baseline):
    """[(probability, ĝ (T·V,))] of every version pattern and sequence: the first update at π_θ = π(history(0)), its
    per-token weight g_t·∂L/∂log π_θ, ĝ = Σ over the positions in the loss of it times (onehot − π_t)·scale.

    Each token's μ is its version's (v = head before the switch, head − 1 after); the stamp gives every token the
    lag the framework logs (its own, the head's or the last token's); the anchor is π at θ_k, the logged μ, π at the
    stamped version, or log μ + α·(log π_θ − log μ) with α = (s − 1)/s (0 at s = 0); a masked prefix leaves the loss
    and the correction's statistics (its coefficients computed on the positions after the switch), not the reward."""
    parameters = toy.sampler.parameters()
    T, V = toy.T, toy.V
    scale = score_scale(toy)
    theta = history(0)
    log_pi = dense_scored_log_pi(theta, np.zeros((T, V)), **parameters)
    loss_params = update.loss_params
    samples = []
    for probability, head, c in dense_version_patterns(switch, at, lag, T):
        lags = [head if t < c else head - 1 for t in range(T)]
        stamped = lags if stamp == "token" else [lags[0] if stamp == "head" else lags[-1]] * T
        log_mu = np.array([dense_sampler_log_mu(history(v), toy.b, toy.mismatch, **parameters)[t]
                           for t, v in enumerate(lags)])
        log_logged = np.array([dense_logged_log_mu(history(v), toy.b, toy.mismatch,
                                                   dense_sampler_log_mu(history(v), toy.b, toy.mismatch,
                                                                        **parameters), **parameters)[t]
                               for t, v in enumerate(lags)])
        if anchor == "recompute":
            log_old = log_pi.copy()
        elif anchor == "bypass":
            log_old = log_logged.copy()
        elif anchor == "rollout":
            log_old = np.array([dense_scored_log_pi(history(s), np.zeros((T, V)), **parameters)[t]
                                for t, s in enumerate(stamped)])
        else:
            alpha = [min(max((s - 1) / s, 0.0), 1.0) if s > 0 else 0.0 for s in stamped]
            log_old = np.array([[log_logged[t, v] + alpha[t] * (log_pi[t, v] - log_logged[t, v])
                                 if log_logged[t, v] > -math.inf else -math.inf for v in range(V)] for t in range(T)])
        kept = [t for t in range(T) if not (masked and c < T and t < c)]
        prefix = [t for t in range(T) if t not in kept]
        tail = DenseToy.of_tables(log_mu[kept], log_logged[kept], log_old[kept], scale).on_support
        for z in itertools.product(range(V), repeat=len(prefix)):
            log_p = sum(log_mu[t, v] for t, v in zip(prefix, z, strict=True))
            if log_p == -math.inf:
                continue
            zeros = sum(v == 0 for v in z) + (tail.Y == 0).sum(axis=1)
            tail.R = (2 * zeros >= T).astype(float)
            tail.baselines = {name: baseline for name in tail.baselines}
            c_tail = tail.coefficients(estimator, resolve_params(estimator, params), "none")
            for m, y in enumerate(tail.Y):
                A = tail.R[m] - baseline
                g = np.zeros((T, V))
                for i, t in enumerate(kept):
                    derivative, _ = dense_token_derivative(update.loss, np.array([[log_pi[t, y[i]]]]),
                                                           np.array([[log_old[t, y[i]]]]), np.array([[A]]),
                                                           loss_params)
                    g[t] += c_tail[m, i] * derivative[0, 0] * (np.eye(V)[y[i]] - np.exp(log_pi[t])) * scale
                samples.append((probability * math.exp(log_p) * tail.p_sampler[m], g.ravel()))
    return samples


# -- training over hidden variables ---------------------------------------------------------------------------

def sequence_terms(toy, pattern, log_pi, log_old, numerator, estimator, params, b, update, jacobian, scale):
    """[(P(y | pattern), r(y), Σ_t g_t·D_t·J_tᵀ(onehot − π_t)·scale (P,), per-token (in loss, held, log π_old − log π))]
    for every sequence of one pattern: the correction g on (μ_s, μ_log, ``numerator``) over the positions in the loss
    (its statistics over those only), D of the update's loss at (log π, log π_old, A = r − b)."""
    T, V = toy.T, toy.V
    log_mu, log_logged, mask = pattern["log_mu"], pattern["log_logged"], pattern["mask"]
    kept = [t for t in range(T) if mask[t]]
    prefix = [t for t in range(T) if not mask[t]]
    tail = DenseToy.of_tables(log_mu[kept], log_logged[kept], numerator[kept], scale).on_support
    rows = []
    for z in itertools.product(range(V), repeat=len(prefix)):
        log_p = sum(log_mu[t, v] for t, v in zip(prefix, z, strict=True))
        if log_p == -math.inf:
            continue
        zeros = sum(v == 0 for v in z) + (tail.Y == 0).sum(axis=1)
        tail.R = (2 * zeros >= T).astype(float)
        tail.baselines = {name: b for name in tail.baselines}
        g = np.ones(tail.rho.shape) if estimator == "on_policy" else \
            tail.coefficients(estimator, resolve_params(estimator, params), "none")
        for m, y in enumerate(tail.Y):
            A = tail.R[m] - b
            gradient = np.zeros(jacobian.shape[-1])
            held, drift = [], []
            for i, t in enumerate(kept):
                derivative, clipped = dense_token_derivative(update.loss, np.array([[log_pi[t, y[i]]]]),
                                                             np.array([[log_old[t, y[i]]]]), np.array([[A]]),
                                                             update.loss_params)
                score = (np.eye(V)[y[i]] - np.exp(log_pi[t])) * scale
                gradient += g[m, i] * derivative[0, 0] * jacobian[t].T @ score
                held.append(bool(clipped[0, 0]))
                drift.append(log_old[t, y[i]] - log_pi[t, y[i]])
            rows.append((math.exp(log_p) * tail.p_sampler[m], tail.R[m], gradient, held, drift))
    return rows


def dense_mixture_training(toy, model, estimator, params, baseline, update, steps, lr, optimizer="sgd", lag=0,
                           lag_draw="fixed", prox="recompute"):
    """Training over hidden variables by brute force, one estimator: {record: list over k}. ``model`` gives, at the
    trainer's parameters θ_k and the history θ_{k−v}, the patterns (each with its probability, per-token tables of the
    engine, the positions in the loss, and what the trainer reads: ``trainer(θ)`` → (log π (T, V), J (T, V, P)), the
    anchor at θ_k), and the trainer's own policy (for J, ∇J and the records)."""
    rng = np.random.default_rng([toy.seed, 2**32 - 2]) if lag_draw == "uniform" else None
    scale = score_scale(toy)
    theta = model.start.copy()
    past = [theta]
    m = v_ = 0.0
    count = 0
    out = {name: [] for name in ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "clip_share", "ppo_kl", "w_std",
                                 "lag", "first", "step", "grad", "theta")}
    on_policy = estimator == "on_policy"
    for k in range(steps + 1):
        drawn = lag if rng is None else int(rng.integers(0, lag + 1))
        s = 0 if on_policy else min(drawn, k)

        def history(v):
            return past[max(len(past) - 1 - v, 0)]
        own_log_pi, own_jacobian = model.own(theta)
        samples = dense_on_policy_policy(toy, own_log_pi)
        J = sum(p * r for p, r, _ in samples)
        grad = sum(p * r * sum(own_jacobian[t].T @ ((np.eye(toy.V)[y[t]] - np.exp(own_log_pi[t])) * scale)
                               for t in range(toy.T)) for p, r, y in samples)
        logged, kl, chi2 = dense_population(toy, model.patterns(theta, history, s, "recompute"), own_log_pi)
        b = {"none": 0.0, "logged": logged, "true": J}[baseline]
        if on_policy:
            batch = [{"probability": 1.0, "log_mu": own_log_pi, "log_logged": own_log_pi, "log_old": own_log_pi,
                      "mask": np.ones(toy.T, bool), "trainer": model.on_policy_trainer(theta),
                      "log_conditional": own_log_pi}]
        else:
            batch = model.patterns(theta, history, s, "loglinear" if prox == "loglinear" else update.anchor)
        current, total, held_total, kl_total = theta, 0.0, 0.0, 0.0
        spread = None
        for u in range(update.U):
            gradient = np.zeros_like(theta)
            held_sum, drift_sum, weight_sum = 0.0, 0.0, 0.0
            tokens = []
            for pattern in batch:
                log_pi, jacobian = pattern["trainer"](current)
                log_old = pattern["log_old"] if pattern.get("alpha") is None else \
                    dense_loglinear(pattern["log_logged"], log_pi, pattern["alpha"])
                numerator = log_pi if (update.weights_at == "current" and not on_policy) else log_old
                for p, _, g, held, drift in sequence_terms(toy, pattern, log_pi, log_old, numerator, estimator,
                                                           params, b, update, jacobian, scale):
                    weight = pattern["probability"] * p
                    gradient += weight * g
                    held_sum += weight * sum(held)
                    drift_sum += weight * sum(drift)
                    weight_sum += weight * len(held)
                if u == 0:
                    tokens.append((pattern, log_old))
            held_total += held_sum / weight_sum / update.U
            kl_total += drift_sum / weight_sum / update.U
            count += 1
            if optimizer == "sgd":
                step = lr * gradient
            else:
                m = 0.9 * m + 0.1 * gradient
                v_ = 0.999 * v_ + 0.001 * gradient * gradient
                step = lr * (m / (1 - 0.9**count)) / (np.sqrt(v_ / (1 - 0.999**count)) + 1e-8)
            if u == 0:
                out["first"].append(gradient)
                spread = 0.0 if on_policy else dense_w_spread(toy, tokens)
            total, current = total + step, current + step
        for name, value in (("J", J), ("logged_reward", logged), ("kl_mu_pi", kl),
                            ("chi2_seq", chi2), ("clip_share", held_total), ("ppo_kl", kl_total),
                            ("w_std", spread), ("lag", s), ("step", total), ("grad", grad), ("theta", theta)):
            out[name].append(value)
        if k < steps:
            theta = theta + total
            past.append(theta)
    return {name: np.array(values) for name, values in out.items()}


def dense_population(toy, patterns, own_log_pi):
    """(E_μ[r], E[Σ_t log μ(y_t | hidden) − log π(y_t)], E[W²]/E[W]² − 1 with W = ∏_t π/μ_log) over the patterns."""
    logged, kl, mean_w, mean_w2 = 0.0, 0.0, 0.0, 0.0
    for pattern in patterns:
        for y in itertools.product(range(toy.V), repeat=toy.T):
            log_p = sum(pattern["log_mu"][t, y[t]] for t in range(toy.T))
            if log_p == -math.inf:
                continue
            p = pattern["probability"] * math.exp(log_p)
            logged += p * float(2 * sum(v == 0 for v in y) >= toy.T)
            kl += p * sum(pattern["log_conditional"][t, y[t]] - own_log_pi[t, y[t]] for t in range(toy.T))
            W = math.exp(sum(own_log_pi[t, y[t]] - pattern["log_logged"][t, y[t]] for t in range(toy.T)))
            mean_w, mean_w2 = mean_w + p * W, mean_w2 + p * W * W
    return logged, kl, mean_w2 / mean_w**2 - 1


def dense_loglinear(log_logged, log_pi, alpha):
    """log μ + α_t·(log π − log μ) entry by entry, −∞ where μ is 0."""
    T, V = log_pi.shape
    return np.array([[log_logged[t, v] + alpha[t] * (log_pi[t, v] - log_logged[t, v])
                      if log_logged[t, v] > -math.inf else -math.inf for v in range(V)] for t in range(T)])


def dense_on_policy_policy(toy, log_pi):
    """[(π(y), r(y), y)] of the trainer's own policy."""
    rows = []
    for y in itertools.product(range(toy.V), repeat=toy.T):
        rows.append((math.exp(sum(log_pi[t, y[t]] for t in range(toy.T))), float(2 * sum(v == 0 for v in y) >= toy.T),
                     y))
    return rows


def dense_w_spread(toy, tokens):
    """The standard deviation of w = π_old/μ_log over the batch's tokens in the loss under μ (each pattern weighted)."""
    entries = []
    for pattern, log_old in tokens:
        for t in range(toy.T):
            if not pattern["mask"][t]:
                continue
            for v in range(toy.V):
                if pattern["log_mu"][t, v] == -math.inf:
                    continue
                entries.append((pattern["probability"] * math.exp(pattern["log_mu"][t, v]),
                                math.exp(log_old[t, v] - pattern["log_logged"][t, v])))
    mass = sum(p for p, _ in entries)
    mean = sum(p * w for p, w in entries) / mass
    return math.sqrt(sum(p * (w - mean) ** 2 for p, w in entries) / mass)


class DenseVersionsModel:
    """The dense toy's θ with version switches, for ``dense_mixture_training``."""

    def __init__(self, toy, switch, at, stamp, masked):
        self.toy, self.switch, self.at, self.stamp, self.masked = toy, switch, at, stamp, masked
        self.start = toy.theta.ravel().copy()
        self.parameters = toy.sampler.parameters()

    def log_pi(self, flat):
        return dense_scored_log_pi(flat.reshape(self.toy.T, self.toy.V), np.zeros((self.toy.T, self.toy.V)),
                                   **self.parameters)

    def trainer(self, flat):
        T, V = self.toy.T, self.toy.V
        return self.log_pi(flat), np.eye(T * V).reshape(T, V, T * V)

    def own(self, flat):
        return self.trainer(flat)

    def on_policy_trainer(self, flat):
        return self.trainer

    def patterns(self, flat, history, s, anchor):
        toy, T = self.toy, self.toy.T
        rows = []
        for probability, head, c in dense_version_patterns(self.switch, self.at, s, T):
            lags = [head if t < c else head - 1 for t in range(T)]
            stamped = lags if self.stamp == "token" else [lags[0] if self.stamp == "head" else lags[-1]] * T
            tables = {v: pipeline(toy, flat.reshape(T, toy.V), history(v).reshape(T, toy.V)) for v in set(lags)}
            log_mu = np.array([tables[v][0][t] for t, v in enumerate(lags)])
            log_logged = np.array([tables[v][1][t] for t, v in enumerate(lags)])
            if anchor == "recompute":
                log_old = self.log_pi(flat)
            elif anchor == "bypass":
                log_old = log_logged
            elif anchor == "rollout":
                log_old = np.array([self.log_pi(history(v))[t] for t, v in enumerate(stamped)])
            else:
                log_old = None
            alpha = [min(max((v - 1) / v, 0.0), 1.0) if v > 0 else 0.0 for v in stamped] if anchor == "loglinear" \
                else None
            mask = np.array([not (self.masked and c < T and t < c) for t in range(T)])
            rows.append({"probability": probability, "log_mu": log_mu, "log_logged": log_logged, "log_old": log_old,
                         "alpha": alpha, "mask": mask, "trainer": self.trainer, "log_conditional": log_mu})
        return rows


class DenseRoutedModel:
    """The toy's mixture of experts with a replay mode, for ``dense_mixture_training``: the tables of ``moe`` (the
    library's MoEToy: its layout splits a flat vector, its errors are the engine's draws)."""

    def __init__(self, toy, moe, replay):
        self.toy, self.moe, self.replay = toy, moe, replay
        self.start = moe.params.copy()
        self.sigma, self.draw = moe.experts.router_error, moe.experts.draw
        self.D = moe.errors.shape[0]

    def dense(self, flat):
        router, experts = self.moe.layout.split(flat)
        return DenseMoE(router, experts, self.moe.experts.top_k)

    def under(self, flat, routing):
        """(log π (T, V), J (T, V, P)) of the trainer at ``flat`` under a routing {(layer, t): picked}."""
        dense = self.dense(flat)
        log_pi = dense_scored_log_pi(dense.logits(routing), np.zeros((self.toy.T, self.toy.V)),
                                     **self.toy.sampler.parameters())
        return log_pi, dense.jacobian(routing)

    def own(self, flat):
        return self.under(flat, self.dense(flat).own_routing())

    def on_policy_trainer(self, flat):
        recorded = self.dense(flat).own_routing()
        if self.replay == "off":
            return lambda params: self.under(params, self.dense(params).own_routing())
        return lambda params: self.under(params, recorded)

    def patterns(self, flat, history, s, anchor):
        toy = self.toy
        engine = self.dense(history(s))
        scores = [engine.router + self.sigma * self.moe.errors[j] for j in range(self.D)]
        routing = [engine.engine_routing(scores[j]) for j in range(self.D)]
        engine_logits = [engine.logits(routing[j], scores[j]) for j in range(self.D)]
        anchor_flat = history(s) if anchor == "rollout" else flat
        recorded_own = self.dense(anchor_flat).own_routing()
        rows = []
        parameters = toy.sampler.parameters()
        for probability, pattern in draw_patterns(self.D, toy.T, self.draw):
            log_mu = per_position([dense_sampler_log_mu(engine_logits[j], toy.b, toy.mismatch, **parameters)
                                   for j in range(self.D)], pattern)
            log_logged = per_position([dense_logged_log_mu(engine_logits[j], toy.b, toy.mismatch,
                                                           dense_sampler_log_mu(engine_logits[j], toy.b, toy.mismatch,
                                                                                **parameters), **parameters)
                                       for j in range(self.D)], pattern)

            def routing_of(params, pattern=pattern, replay_own=None):
                """{(layer, t): picked}: position t under draw pattern[t]'s engine routing (R3), the anchor's own
                (R2) or the router's own at ``params`` (off)."""
                if self.replay == "R3":
                    return {(layer, t): routing[pattern[t]][(layer, t)] for (layer, t) in recorded_own}
                if self.replay == "R2":
                    return recorded_own
                return self.dense(params).own_routing()

            def trainer(params, routing_of=routing_of):
                return self.under(params, routing_of(params))
            if anchor == "bypass":
                log_old = log_logged
            else:
                log_old = self.under(anchor_flat, routing_of(anchor_flat))[0]
            rows.append({"probability": probability, "log_mu": log_mu, "log_logged": log_logged, "log_old": log_old,
                         "alpha": None, "mask": np.ones(toy.T, bool), "trainer": trainer, "log_conditional": log_mu})
        return rows
