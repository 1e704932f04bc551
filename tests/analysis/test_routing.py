"""Routing mismatch against the brute force: every routing outcome and every sequence summed (tests/dense_hidden.py)."""

import itertools

import numpy as np
import pytest
from dense_hidden import (
    DenseMoE,
    dense_objective_gradient,
    dense_on_policy_samples,
    dense_routing_samples,
    dense_served_gradient,
    dense_top_k,
    moments,
)
from tiers import fast_then_slow

from toylab import exact_moments, make_toy, resolve_params
from toylab.analysis.routing import (
    engine_draws,
    flip_curve,
    objective_gradient,
    on_policy_routed,
    plain_moments,
    routed,
    routing_problem,
    routing_view,
    sequence_flips,
    served_gradient,
    trainer_routing,
)
from toylab.engine.experts import (
    Experts,
    flip_rates,
    logits,
    moe_of,
    pullback,
    score_norms,
    top_k_chosen,
)

TOYS = {                        # (T, V, mismatch, seed, sampler keywords, experts keywords)
    "plain": (3, 3, 0.4, 1, {}, {"layers": 2, "experts": 3, "top_k": 2, "router_error": 0.6, "draws": 3}),
    "top_p": (3, 3, 0.5, 2, {"top_p": 0.8, "scored": "temperature", "temperature": 0.8},
              {"layers": 1, "experts": 4, "top_k": 1, "router_error": 0.8, "draws": 2}),
    "raw_bf16": (4, 2, 0.3, 3, {"logged": "raw", "temperature": 1.3, "precision": "bf16"},
                 {"layers": 2, "experts": 3, "top_k": 1, "router_error": 0.5, "draws": 2, "spread": 2.0}),
}
ESTIMATORS = ("naive", "tok_tis", "seq_is", "seq_tis", "geo_rs", "trm", "verl:decoupled_geo_rs")
BASELINES = {"none": lambda J, served: 0.0, "logged": lambda J, served: served, "true": lambda J, served: J}


def setting(name, draw):
    T, V, mismatch, seed, sampler, experts = TOYS[name]
    return make_toy(T, V, mismatch, seed, **sampler), Experts(**experts, draw=draw)


def dense_moe(moe):
    router, experts = moe.layout.split(moe.params)
    return DenseMoE(router, experts, moe.experts.top_k)


def test_the_trainer_s_own_routing_reproduces_the_toy_s_logits():
    for T, V, seed in ((6, 4, 0), (3, 5, 7)):
        toy = make_toy(T, V, 0.3, seed)
        for experts in (Experts(), Experts(layers=3, experts=5, top_k=3, spread=2.5)):
            moe = moe_of(toy, experts)
            router, tables = moe.layout.split(moe.params)
            np.testing.assert_allclose(logits(router, tables, top_k_chosen(router, experts.top_k)), toy.theta,
                                       rtol=0, atol=1e-13)


def test_the_oracle_s_jacobian_is_the_derivative_of_its_logits():
    """The oracle checked first: its (V, P) Jacobian against central differences of its own logits."""
    toy, experts = setting("plain", "sequence")
    moe = moe_of(toy, experts)
    dense = dense_moe(moe)
    routing = dense.own_routing()
    J = dense.jacobian(routing)
    flat = moe.params.copy()
    step = 1e-6
    for index in range(0, dense.P, 7):
        moved = []
        for sign in (1, -1):
            shifted = flat.copy()
            shifted[index] += sign * step
            router, tables = moe.layout.split(shifted)
            moved.append(DenseMoE(router, tables, experts.top_k).logits(routing))
        np.testing.assert_allclose(J[:, :, index], (moved[0] - moved[1]) / (2 * step), atol=1e-8)


@pytest.mark.parametrize("name", TOYS)
def test_pullback_and_score_norms_equal_the_oracle_s_jacobian(name):
    toy, experts = setting(name, "sequence")
    moe = moe_of(toy, experts)
    router, tables = moe.layout.split(moe.params)
    dense = dense_moe(moe)
    rng = np.random.default_rng(5)
    chosen = top_k_chosen(rng.standard_normal(router.shape), experts.top_k)      # any routing, not the router's
    routing = {(layer, t): frozenset(np.flatnonzero(chosen[layer, t])) for layer in range(experts.layers) for t in range(toy.T)}
    J = dense.jacobian(routing)
    u = rng.standard_normal((toy.T, toy.V))
    np.testing.assert_allclose(moe.layout.join(*pullback(router, tables, chosen, u)),
                               np.einsum("tvp,tv->p", J, u), rtol=0, atol=1e-12)
    pi = rng.dirichlet(np.ones(toy.V), size=toy.T)
    expected = np.array([[np.sum((J[t].T @ (np.eye(toy.V)[v] - pi[t]))**2) for v in range(toy.V)]
                         for t in range(toy.T)])
    np.testing.assert_allclose(score_norms(router, tables, chosen, pi), expected, rtol=1e-12)


def library_moments(toy, moe, replay, estimators, b):
    chosen, _, engine_logits = engine_draws(moe, moe.params)
    view = routed(toy, moe, moe.params, trainer_routing(moe, moe.params, replay, chosen), engine_logits)
    found = plain_moments(toy, moe, moe.params, view, [(id, resolve_params(id, {})) for id in estimators], b)
    return found.mean, found.second - np.sum(found.mean**2, axis=1)


CASES = [(name, draw, replay, baseline) for name in TOYS for draw in ("sequence", "token")
         for replay in ("off", "R3") for baseline in BASELINES]


@pytest.mark.parametrize("name, draw, replay, baseline", fast_then_slow(
    CASES, [("plain", "sequence", "off", "none"), ("plain", "token", "R3", "logged"), ("top_p", "token", "off", "true"),
            ("raw_bf16", "sequence", "R3", "none")]))
def test_each_estimator_s_moments_equal_the_brute_force_over_every_draw(name, draw, replay, baseline):
    toy, experts = setting(name, draw)
    moe = moe_of(toy, experts)
    dense = dense_moe(moe)
    J, _ = dense_objective_gradient(toy, dense)
    served, _ = dense_served_gradient(toy, dense, moe.errors, experts.router_error, draw)
    b = BASELINES[baseline](J, served)
    mean, var = library_moments(toy, moe, replay, ESTIMATORS, b)
    for index, estimator in enumerate(ESTIMATORS):
        samples = dense_routing_samples(toy, dense, moe.errors, experts.router_error, draw, replay, estimator, {}, b)
        expected_mean, expected_var = moments(samples)
        scale = max(np.abs(expected_mean).max(), 1e-3)
        np.testing.assert_allclose(mean[index], expected_mean, rtol=0, atol=1e-12 * scale, err_msg=estimator)
        assert var[index] == pytest.approx(expected_var, rel=1e-12, abs=1e-14), estimator


@pytest.mark.parametrize("name", TOYS)
def test_on_policy_and_the_objectives_equal_the_brute_force(name):
    for draw in ("sequence", "token"):
        toy, experts = setting(name, draw)
        moe = moe_of(toy, experts)
        dense = dense_moe(moe)
        J, grad = objective_gradient(toy, moe, moe.params)
        expected_J, expected_grad = dense_objective_gradient(toy, dense)
        assert J == pytest.approx(expected_J, rel=1e-12)
        np.testing.assert_allclose(grad, expected_grad, rtol=0, atol=1e-12 * np.abs(expected_grad).max())
        served_J, served = served_gradient(toy, moe, moe.params)
        expected_J, expected_served = dense_served_gradient(toy, dense, moe.errors, experts.router_error, draw)
        assert served_J == pytest.approx(expected_J, rel=1e-12)
        np.testing.assert_allclose(served, expected_served, rtol=0, atol=1e-12 * np.abs(expected_served).max())
        found = plain_moments(toy, moe, moe.params, on_policy_routed(toy, moe, moe.params), [("on_policy", {})], 0.3)
        mean, var = moments(dense_on_policy_samples(toy, dense, 0.3))
        np.testing.assert_allclose(found.mean[0], mean, rtol=0, atol=1e-12 * np.abs(mean).max())
        assert found.second[0] - found.mean[0] @ found.mean[0] == pytest.approx(var, rel=1e-12)


def test_flip_rates_count_the_draws_whose_routing_differs():
    toy, experts = setting("plain", "token")
    moe = moe_of(toy, experts)
    router = moe.layout.split(moe.params)[0]
    per_decision, per_token = flip_rates(router, moe.errors, experts.router_error, experts.top_k)
    D, L, T, _ = moe.errors.shape
    own = [[dense_top_k(list(router[layer, t]), experts.top_k) for t in range(T)] for layer in range(L)]
    differs = np.array([[[dense_top_k(list(router[layer, t] + experts.router_error * moe.errors[j, layer, t]),
                                      experts.top_k) != own[layer][t] for t in range(T)] for layer in range(L)]
                        for j in range(D)])
    np.testing.assert_array_equal(per_decision, differs.mean(axis=0))
    np.testing.assert_array_equal(per_token, differs.any(axis=1).mean(axis=0))
    by_pattern = [any(differs[j, :, t].any() for t, j in enumerate(pattern))
                  for pattern in itertools.product(range(D), repeat=T)]
    assert sequence_flips(moe, moe.params) == pytest.approx(np.mean(by_pattern), rel=1e-12)


def test_without_router_error_the_mixture_is_the_toy_and_its_moments_are_today_s():
    """σ = 0: the engine routes as the trainer and its μ is the toy's, so each estimator's mean is Jᵀ of today's exact
    engine's mean in the logits (the reduction to the lab without experts)."""
    toy = make_toy(4, 3, 0.6, 4, top_p=0.9)
    experts = Experts(router_error=0.0, draws=2)
    moe = moe_of(toy, experts)
    router, tables = moe.layout.split(moe.params)
    own = top_k_chosen(router, experts.top_k)
    for draw in ("sequence", "token"):
        moe = moe_of(toy, Experts(router_error=0.0, draws=2, draw=draw))
        mean, _ = library_moments(toy, moe, "off", ESTIMATORS, 0.0)
        for index, estimator in enumerate(ESTIMATORS):
            today = exact_moments(toy, estimator, None, "none").mean
            np.testing.assert_allclose(mean[index], moe.layout.join(*pullback(router, tables, own, today)),
                                       rtol=0, atol=1e-12)


def test_keep_mask_and_bad_experts_are_refused():
    assert "keep_mask" in routing_problem(make_toy(3, 3, scored="keep_mask", top_p=0.9).sampler)
    with pytest.raises(ValueError, match="keep_mask"):
        routing_view(make_toy(3, 3, scored="keep_mask", top_p=0.9), Experts(), {"naive": {}})
    for bad, match in (({"top_k": 4, "experts": 4}, "top_k"), ({"layers": 0}, "layers"), ({"draw": "batch"}, "draw"),
                       ({"router_error": -1}, "router_error"), ({"draws": 1.5}, "draws"), ({"spread": True}, "spread")):
        with pytest.raises(ValueError, match=match):
            Experts(**bad)


def test_flip_curves_grow_with_layers():
    toy = make_toy(4, 3, 0.3, 0)
    rows = flip_curve(toy, Experts(router_error=0.3, draws=8), "layers", range(1, 6))
    assert [row[0] for row in rows] == [1, 2, 3, 4, 5]
    token = [row[2] for row in rows]
    assert all(later >= earlier for earlier, later in zip(token, token[1:], strict=False))   # nested layers
