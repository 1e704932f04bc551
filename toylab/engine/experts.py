"""A mixture of experts: each position's logits mixed from E experts by a router's top-k, in L layers.

The toy's θ is split into a router table S (L, T, E) and expert tables Ψ (L, E, T, V). At layer l and position t a
routing picks the set R_{l,t} of k experts, and the logits are the gated sum over layers and picked experts,

    z_t(R) = Σ_l Σ_{e ∈ R_{l,t}} g_{l,t,e}·Ψ_{l,e,t},      g_{l,t,·} = softmax of the scores over R_{l,t}

(Megatron's TopKRouter without pre-softmax: top-k of the router's logits, then a softmax over the k picked; a
replayed routing keeps the scores of the current router at the replayed experts: verl's RouterReplay.get_replay_topk
and slime's replay stages gather ``scores.gather(1, top_indices)``). The trainer routes with its own scores S: R* =
top-k(S), ties to the lower expert. The engine computes the router with its own error: its scores are S + σ·ε_j, ε_j
one of D standard-normal tables (L, T, E) drawn once with the toy (the states of a batch-variant kernel), each as
likely, its routing top-k(S + σ·ε_j) and its gates the softmax of its own scores over what it picked. The draw j is
made per sequence or per token (``Experts.draw``): a hidden variable of each token the frameworks never log except as
its routing.

Built from a toy (``moe_of``): S and a table ξ (L, E, T, V) standard normal from default_rng([seed, EXPERTS_STREAM,
l]) for layer l (so adding layers keeps the others), the errors after them, and

    Ψ_{l,e,t} = θ_t/L + κ·(ξ_{l,e,t} − Σ_{e' ∈ R*_{l,t}} g*_{l,t,e'}·ξ_{l,e',t})

so that the trainer's logits under its own routing are the toy's θ exactly (the gates sum to 1), and a flipped
routing moves them by κ times a difference of experts (``spread`` κ). At σ = 0 the engine routes as the trainer and
its μ is the toy's.

Gradients. A routing is a discrete choice: no gradient flows through it. For a logit-space vector u (T, V) (the
score onehot(v) − π_t, or any weighted sum of them) the parameter gradient of ⟨z_t(R), u_t⟩ is (``pullback``)

    ∂/∂Ψ_{l,e,t} = g_{l,t,e}·u_t   (e ∈ R_{l,t}, else 0)
    ∂/∂S_{l,t,e} = g_{l,t,e}·⟨Ψ_{l,e,t} − y_{l,t}, u_t⟩,   y_{l,t} = Σ_{e' ∈ R} g_{l,t,e'}·Ψ_{l,e',t}   (e ∈ R, else 0)

and the blocks of different positions are disjoint, so ‖Σ_t J_tᵀu_t‖² = Σ_t ‖J_tᵀu_t‖², with (``score_norms``)

    ‖J_tᵀu‖² = Σ_l Σ_{e ∈ R} g²_{l,t,e}·(‖u‖² + ⟨Ψ_{l,e,t} − y_{l,t}, u⟩²)

Parameters travel as one flat vector (rows, P), P = L·T·E + L·E·T·V (``Layout``), for the optimizers.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from toylab.text import quoted

EXPERTS_STREAM = 2**32 - 3        # the second seed word of the router and expert tables
DRAWS = ("sequence", "token")     # the engine's router error drawn once per sequence or per token
LIMITS = {"layers": (1, 8), "experts": (2, 16), "draws": (1, 16)}
ROUTER_ERROR_RANGE = (0.0, 2.0)
SPREAD_RANGE = (0.0, 4.0)


@dataclass(frozen=True)
class Experts:
    """The mixture's shape and the engine's router: ``layers`` L, ``experts`` E, ``top_k`` k (1 ≤ k < E), the engine's
    router error σ (``router_error``, in units of the router scores' standard deviation), the number D of values its
    error takes (``draws``), drawn per ``draw`` ("sequence" or "token"), and the experts' ``spread`` κ."""
    layers: int = 2
    experts: int = 4
    top_k: int = 2
    router_error: float = 0.15         # about 11 % of decisions flip at the defaults (Megatron-LM #4168: ~10 %)
    draws: int = 4
    draw: str = "sequence"
    spread: float = 1.0

    def __post_init__(self):
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
                raise ValueError(f"{name} must be an integer between {low} and {high}, got {quoted(value)}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int | np.integer) \
                or not 1 <= self.top_k < self.experts:
            raise ValueError(f"top_k must be an integer from 1 to experts − 1 = {self.experts - 1}, got "
                             f"{quoted(self.top_k)}")
        for name, (low, high) in (("router_error", ROUTER_ERROR_RANGE), ("spread", SPREAD_RANGE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating) \
                    or not np.isfinite(value) or not low <= value <= high:
                raise ValueError(f"{name} must be a number between {low:g} and {high:g}, got {quoted(value)}")
            object.__setattr__(self, name, float(value))
        if self.draw not in DRAWS:
            raise ValueError(f"draw must be one of {', '.join(DRAWS)}, got {quoted(self.draw)}")
        for name in ("layers", "experts", "top_k", "draws"):
            object.__setattr__(self, name, int(getattr(self, name)))

    def describe(self):
        """'2 layers, top-2 of 4 experts, router error 0.15 (4 draws per sequence), spread 1'."""
        return (f"{self.layers} layer{'s' * (self.layers > 1)}, top-{self.top_k} of {self.experts} experts, router "
                f"error {self.router_error:g} ({self.draws} draw{'s' * (self.draws > 1)} per {self.draw}), spread "
                f"{self.spread:g}")


DEFAULT_EXPERTS = Experts()


@dataclass(frozen=True)
class Layout:
    """Where the router S (L, T, E) and the experts Ψ (L, E, T, V) sit in a flat parameter vector (…, P)."""
    L: int
    T: int
    E: int
    V: int

    @property
    def router_size(self):
        return self.L * self.T * self.E

    @property
    def size(self):
        return self.router_size + self.L * self.E * self.T * self.V

    def split(self, flat):
        """(router (…, L, T, E), experts (…, L, E, T, V)) views of a flat vector (…, P)."""
        lead = flat.shape[:-1]
        return (flat[..., :self.router_size].reshape(*lead, self.L, self.T, self.E),
                flat[..., self.router_size:].reshape(*lead, self.L, self.E, self.T, self.V))

    def join(self, router, experts):
        """The flat vector (…, P) of a router and experts with the same leading axes."""
        lead = router.shape[:-3]
        return np.concatenate([router.reshape(*lead, -1), experts.reshape(*lead, -1)], axis=-1)


def top_k_chosen(scores: NDArray[np.float64], k: int) -> NDArray[np.bool_]:
    """(…, E) bool: the k largest scores of each row, a tie broken towards the lower expert (a stable sort)."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    chosen = np.zeros(scores.shape, bool)
    np.put_along_axis(chosen, order[..., :k], True, axis=-1)
    return chosen


def gates(scores: NDArray[np.float64], chosen: NDArray[np.bool_]) -> NDArray[np.float64]:
    """(…, E): softmax of the scores over the chosen experts, 0 at the others."""
    shifted = np.where(chosen, scores, -np.inf)
    shifted = shifted - shifted.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def mixed_logits(experts: NDArray[np.float64], gate: NDArray[np.float64]) -> NDArray[np.float64]:
    """z (…, T, V) = Σ_l Σ_e gate[l, t, e]·Ψ[l, e, t]: gate (…, L, T, E), experts (…, L, E, T, V)."""
    return np.einsum("...lte,...letv->...tv", gate, experts)


def logits(router, experts, chosen, scores=None):
    """The logits (…, T, V) under a routing ``chosen`` (…, L, T, E), gated by ``scores`` (the router's own by
    default: a trainer replaying a routing keeps its current scores at the replayed experts)."""
    return mixed_logits(experts, gates(router if scores is None else scores, chosen))


def pullback(router, experts, chosen, u):
    """(∂ router, ∂ experts): the parameter gradient of Σ_t ⟨z_t, u_t⟩ under the routing ``chosen`` (see the module
    docstring), for u (…, T, V) with the parameters' leading axes."""
    gate = gates(router, chosen)
    d_experts = np.einsum("...lte,...tv->...letv", gate, u)
    layer = np.einsum("...lte,...letv->...ltv", gate, experts)                    # y_{l,t}
    projected = np.einsum("...letv,...tv->...lte", experts, u) - np.einsum("...ltv,...tv->...lt", layer, u)[..., None]
    return gate * projected, d_experts


def score_norms(router, experts, chosen, pi, scale=1.0):
    """(…, T, V): ‖J_tᵀ·scale·(onehot(v) − π_t)‖² under the routing ``chosen``, the squared length of a token's score
    in the parameters (see the module docstring)."""
    gate = gates(router, chosen)
    layer = np.einsum("...lte,...letv->...ltv", gate, experts)
    spread = experts - np.moveaxis(layer[..., None], -1, -3)                      # Ψ_{l,e,t} − y_{l,t}: (…, L, E, T, V)
    along = spread - np.sum(spread * pi[..., None, None, :, :], axis=-1, keepdims=True)      # ⟨Ψ − y, onehot(v) − π⟩
    squared_gate = np.moveaxis(gate**2, -1, -2)[..., None]                        # (…, L, E, T, 1)
    own = 1 - 2 * pi + np.sum(pi**2, axis=-1, keepdims=True)                      # ‖onehot(v) − π_t‖²
    return (squared_gate.sum(axis=(-4, -3)) * own + np.sum(squared_gate * along**2, axis=(-4, -3))) * scale**2


@dataclass(frozen=True)
class MoEToy:
    """A toy's mixture of experts: its ``layout``, θ₀ = ``params`` (P,), the engine's error tables ``errors`` (D, L, T, E)
    and the ``experts`` settings; the toy's b, mismatch and sampler stay the engine's."""
    experts: Experts
    layout: Layout
    params: NDArray[np.float64]
    errors: NDArray[np.float64]

    @cached_property
    def trainer_chosen(self):
        """R* at θ₀: (L, T, E)."""
        return top_k_chosen(self.layout.split(self.params)[0], self.experts.top_k)


def moe_of(toy, experts: Experts = DEFAULT_EXPERTS) -> MoEToy:
    """The toy's mixture of experts (see the module docstring): its trainer logits under its own routing are θ."""
    T, V = toy.theta.shape
    L, E, k = experts.layers, experts.experts, experts.top_k
    router, xi, errors = np.empty((L, T, E)), np.empty((L, E, T, V)), np.empty((experts.draws, L, T, E))
    for layer in range(L):
        rng = np.random.default_rng([toy.seed, EXPERTS_STREAM, layer])
        router[layer] = rng.standard_normal((T, E))
        xi[layer] = rng.standard_normal((E, T, V))
        errors[:, layer] = rng.standard_normal((experts.draws, T, E))
    gate = gates(router, top_k_chosen(router, k))                               # (L, T, E)
    centred = xi - np.moveaxis(np.einsum("lte,letv->ltv", gate, xi)[..., None], -1, -3)
    tables = toy.theta[None, None] / L + experts.spread * centred
    layout = Layout(L, T, E, V)
    return MoEToy(experts, layout, layout.join(router, tables), errors)


def engine_routing(router, errors, router_error, k):
    """(chosen (…, D, L, T, E), scores (…, D, L, T, E)): the engine's routing and gate scores for each of its D error
    draws, from its router (…, L, T, E) (a stale one under a lag)."""
    scores = router[..., None, :, :, :] + router_error * errors
    return top_k_chosen(scores, k), scores


def flip_rates(router, errors, router_error, k):
    """(per decision (L, T), per token (T,)): P over the D draws that the engine's routing at (l, t) differs from the
    trainer's, and that it differs at some layer of position t."""
    own = top_k_chosen(router, k)
    engine = engine_routing(router, errors, router_error, k)[0]
    differs = np.any(engine != own, axis=-1)                                        # (D, L, T)
    return differs.mean(axis=0), differs.any(axis=1).mean(axis=0)
