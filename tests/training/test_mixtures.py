"""Training over hidden variables: the reduction to today's three-policy loop, and every record of version-switch
and routing runs against the brute force (tests/dense_hidden.py ``dense_mixture_training``)."""

import itertools
import math

import numpy as np
import pytest
from dense import dense_three_policies
from dense_hidden import DenseRoutedModel, DenseVersionsModel, dense_mixture_training
from tiers import fast_then_slow

from toylab import make_toy, resolve_params
from toylab.catalogue.updates import Update
from toylab.engine.experts import Experts
from toylab.engine.reference import Reference
from toylab.engine.versions import Versions
from toylab.training.loop import TrainingConfig, train
from toylab.training.mixtures import Dense, Routed, train_mixture


def by_estimator(records, selection):
    """{id: {record: its row}} of train_mixture's {record: (rows, …)}."""
    return {id: {name: values[index] for name, values in records.items()} for index, id in enumerate(selection)}


TODAY = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias",
         "clip_share", "ppo_kl", "w_std", "lag")
SELECTION = {"on_policy": {}, "naive": {}, "tok_tis": {}, "seq_mis": {}, "ppo_clip": {}, "prefix_is": {},
             "verl:decoupled_geo_rs": {"rs_threshold": "0.5_2.0"}}
REDUCTIONS = [
    (Update(), 0, "fixed", "sgd"), (Update("rollout", "cispo", minibatches=2, epochs=2), 2, "uniform", "sgd"),
    (Update("bypass", "ppo", {"dual_clip": 3.0}, epochs=3, weights_at="current"), 3, "uniform", "sgd"),
    (Update("recompute", "dppo_kl", epochs=2, weights_at="current"), 1, "fixed", "sgd"),
    (Update("rollout", "ppo", {"clamp": 20.0}, epochs=2), 2, "fixed", "adam")]


@pytest.mark.parametrize("update, lag, draw, optimizer", REDUCTIONS, ids=[f"{u.anchor}-{u.loss}-{o}" for u, _, _, o
                                                                         in REDUCTIONS])
@pytest.mark.parametrize("sampler", [{}, {"top_p": 0.9, "temperature": 0.7, "precision": "bf16", "logged": "raw"}])
def test_without_switches_the_mixture_loop_is_today_s_three_policy_loop(update, lag, draw, optimizer, sampler):
    toy = make_toy(4, 3, 0.8, 2, **sampler)
    selection = {id: resolve_params(id, params) for id, params in SELECTION.items()}
    config = TrainingConfig(5, 0.5 if optimizer == "sgd" else 0.05, optimizer, "expected", update=update, lag=lag,
                            lag_draw=draw)
    today = train(toy, selection, "logged", config)
    now = by_estimator(train_mixture(toy, selection, "logged", config, Dense(toy, Versions())), selection)
    tolerance = 1e-12 if optimizer == "sgd" else 1e-8           # Adam amplifies rounding by up to lr/ε
    for id in selection:
        for name in TODAY:
            expected = np.asarray(getattr(today[id], name), float)
            np.testing.assert_allclose(now[id][name], expected, rtol=tolerance, atol=tolerance, err_msg=f"{id} {name}")


def test_on_policy_keeps_its_own_batch_when_the_correction_reads_the_current_policy():
    """The reference samples π_θk: with weights_at current its later updates still sum over π_θk's sequences (the
    three-policy oracle's rule; the expected loop once used the current π there)."""
    toy = make_toy(4, 3, 0.8, 2)
    update = Update("recompute", "ppo", epochs=3, weights_at="current")
    runs = train(toy, {"on_policy": {}}, "none", TrainingConfig(3, 1.0, "sgd", "expected", update=update))
    dense = dense_three_policies(toy, "on_policy", {}, "none", update, 3, 1.0)
    np.testing.assert_allclose(runs["on_policy"].theta, dense["theta"], rtol=1e-12, atol=1e-12)


RECORDS = ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "clip_share", "ppo_kl", "w_std", "lag")


def check_against(library, oracle, estimator):
    for name in RECORDS:
        np.testing.assert_allclose(library[name], oracle[name], rtol=1e-12, atol=1e-13, err_msg=f"{estimator} {name}")
    np.testing.assert_allclose(library["params"], oracle["theta"].reshape(library["params"].shape), rtol=1e-12,
                               atol=1e-12, err_msg=f"{estimator} params")
    for k, (first, grad) in enumerate(zip(oracle["first"], oracle["grad"], strict=True)):
        if min(np.linalg.norm(first), np.linalg.norm(grad)) < 1e-10:          # every sequence rejected: undefined
            assert np.isnan(library["cosine"][k]), f"{estimator} cosine {k}"
            continue
        cosine = float(first.ravel() @ grad.ravel()) / (np.linalg.norm(first) * np.linalg.norm(grad))
        assert library["cosine"][k] == pytest.approx(cosine, rel=1e-9, abs=1e-12), f"{estimator} cosine {k}"


VERSION_CASES = [(switch, stamp, masked, anchor, prox, loss, draw)
                 for switch in ("fixed", "drawn") for stamp, masked in (("token", False), ("head", False),
                                                                        ("tail", False), ("token", True))
                 for anchor, prox in (("recompute", "recompute"), ("rollout", "recompute"), ("bypass", "recompute"),
                                      ("recompute", "loglinear"))
                 for loss in ("ppo", "cispo") for draw in ("fixed", "uniform")]


@pytest.mark.parametrize("switch, stamp, masked, anchor, prox, loss, draw", fast_then_slow(VERSION_CASES, [
    ("drawn", "head", False, "rollout", "recompute", "ppo", "fixed"),
    ("fixed", "tail", False, "recompute", "loglinear", "cispo", "uniform"),
    ("drawn", "token", True, "bypass", "recompute", "ppo", "uniform"),
    ("fixed", "token", False, "recompute", "recompute", "cispo", "fixed")]))
def test_version_switch_training_equals_the_brute_force(switch, stamp, masked, anchor, prox, loss, draw):
    toy = make_toy(3, 2, 0.5, 3, top_p=0.95, temperature=0.9)
    versions = Versions(switch=switch, at=1, stamp=stamp, mask_stale=masked)
    update = Update(anchor, loss, epochs=2)
    config = TrainingConfig(3, 1.0, "sgd", "expected", update=update, lag=2, lag_draw=draw)
    selection = {"on_policy": {}, "tok_tis": {}, "seq_tis": {}}
    runs = by_estimator(train_mixture(toy, {id: resolve_params(id, p) for id, p in selection.items()}, "logged",
                                      config, Dense(toy, versions), prox), selection)
    model = DenseVersionsModel(toy, switch, 1, stamp, masked)
    for estimator in selection:
        oracle = dense_mixture_training(toy, model, estimator, {}, "logged", update, 3, 1.0, lag=2, lag_draw=draw,
                                        prox=prox)
        check_against(runs[estimator], oracle, estimator)


ROUTING_CASES = [(replay, draw, anchor, sampler) for replay in ("off", "R2", "R3") for draw in ("sequence", "token")
                 for anchor in ("recompute", "rollout", "bypass") for sampler in ("plain", "tempered")
                 if not (replay == "R2" and anchor == "bypass")]
SAMPLERS = {"plain": {}, "tempered": {"temperature": 0.8, "scored": "temperature", "top_k": 2}}


@pytest.mark.parametrize("replay, draw, anchor, sampler", fast_then_slow(ROUTING_CASES, [
    ("off", "sequence", "recompute", "plain"), ("R2", "token", "rollout", "tempered"),
    ("R3", "sequence", "bypass", "tempered"), ("R3", "token", "recompute", "plain")]))
def test_routing_training_equals_the_brute_force(replay, draw, anchor, sampler):
    toy = make_toy(3, 2, 0.4, 1, **SAMPLERS[sampler])
    experts = Experts(layers=1, experts=3, top_k=2, router_error=0.7, draws=2, draw=draw)
    update = Update(anchor, "ppo", {"eps_high": 0.3}, epochs=2)
    config = TrainingConfig(3, 2.0, "sgd", "expected", update=update, lag=1)
    selection = {"on_policy": {}, "tok_tis": {}, "seq_tis": {}}
    model = Routed(toy, experts, replay)
    runs = by_estimator(train_mixture(toy, {id: resolve_params(id, p) for id, p in selection.items()}, "true",
                                      config, model), selection)
    oracle_model = DenseRoutedModel(toy, model.moe, replay)
    for estimator in selection:
        oracle = dense_mixture_training(toy, oracle_model, estimator, {}, "true", update, 3, 2.0, lag=1)
        check_against(runs[estimator], oracle, estimator)


def brute_force_kl(log_pi, log_ref):
    """KL(π‖π_ref) = Σ_y π(y)·log(π(y)/π_ref(y)) over every sequence y, π and π_ref products of their (T, V) rows."""
    T, V = log_pi.shape
    total = 0.0
    for y in itertools.product(range(V), repeat=T):
        log_p = sum(log_pi[t, y[t]] for t in range(T))
        total += math.exp(log_p) * (log_p - sum(log_ref[t, y[t]] for t in range(T)))
    return total


def reference_log_probabilities(toy, distance, scale):
    """log π_ref written out: softmax((θ_0 + distance·d)·scale), d from default_rng([seed, 2**32 − 3])."""
    direction = np.random.default_rng([toy.seed, 2**32 - 3]).standard_normal(toy.theta.shape)
    z = (toy.theta + distance * direction) * scale
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


KL_REF_CASES = {
    "routed, plain": ({}, {"experts": Experts(layers=2, experts=3, top_k=1, router_error=0.6, draws=2),
                           "replay": "R3"}),
    "routed, tempered": ({"temperature": 0.8, "scored": "temperature", "top_k": 2},
                         {"experts": Experts(layers=1, experts=3, top_k=2, router_error=0.7, draws=2, draw="token"),
                          "replay": "off"}),
    "versions": ({"top_p": 0.95, "temperature": 0.9}, {"versions": Versions(switch="drawn", stamp="head"),
                                                       "lag": 2}),
}


@pytest.mark.parametrize("case", KL_REF_CASES)
def test_a_hidden_run_records_the_trainer_s_kl_to_the_reference_as_the_brute_force(case):
    """``train``'s kl_ref of a routed or version-switch run: KL(π_k‖π_ref) of the trainer's own policy at θ_k (its
    own routing), summed over every sequence, π_k from the oracle's parameters (``DenseRoutedModel.own``)."""
    sampler, hidden = KL_REF_CASES[case]
    toy = make_toy(3, 2, 0.5, 4, **sampler)
    config = TrainingConfig(3, 2.0, "sgd", "expected", update=Update("recompute", "ppo", epochs=2),
                            reference=Reference(0.7), **hidden)
    runs = train(toy, {"naive": {}, "tok_tis": {}}, "true", config)
    scale = 1 / sampler["temperature"] if sampler.get("scored") == "temperature" else 1.0
    log_ref = reference_log_probabilities(toy, 0.7, scale)
    if "experts" in hidden:
        model = DenseRoutedModel(toy, Routed(toy, hidden["experts"], hidden["replay"]).moe, hidden["replay"])
    else:
        model = DenseVersionsModel(toy, "drawn", 1, "head", False)
    for estimator in ("naive", "tok_tis"):
        oracle = dense_mixture_training(toy, model, estimator, {}, "true", config.update, 3, 2.0,
                                        lag=config.lag)
        expected = [brute_force_kl(model.own(np.ravel(theta))[0], log_ref) for theta in oracle["theta"]]
        np.testing.assert_allclose(runs[estimator].kl_ref, expected, rtol=1e-10, atol=1e-13, err_msg=estimator)
        assert runs[estimator].kl_ref[0] > 0.01            # π_ref a distance away: a KL to track


ROUTER_SHAPES = {      # (toy, sampler keywords, experts): a second toy, router sizes and a logging pipeline
    "T4 V2, 2 layers, top-1 of 4, raw bf16": ((4, 2, 0.3, 5), {"logged": "raw", "temperature": 1.3, "precision": "bf16"},
                                             Experts(layers=2, experts=4, top_k=1, router_error=0.5, draws=2,
                                                     spread=2.0)),
    "T2 V3, 3 layers, top-2 of 3, per token": ((2, 3, 0.6, 7), {"top_p": 0.9},
                                               Experts(layers=3, experts=3, top_k=2, router_error=0.8, draws=2,
                                                       draw="token")),
}
ROUTER_CASES = [(shape, replay, anchor, lag) for shape in ROUTER_SHAPES for replay, anchor, lag in
                (("R2", "rollout", 2), ("R3", "bypass", 1), ("off", "recompute", 2))]


@pytest.mark.parametrize("shape, replay, anchor, lag", fast_then_slow(ROUTER_CASES, [ROUTER_CASES[0]]))
def test_routing_training_equals_the_brute_force_on_other_toys_and_router_sizes(shape, replay, anchor, lag):
    toy_arguments, sampler, experts = ROUTER_SHAPES[shape]
    toy = make_toy(*toy_arguments, **sampler)
    update = Update(anchor, "cispo", minibatches=2)
    config = TrainingConfig(3, 1.5, "sgd", "expected", update=update, lag=lag)
    selection = {"on_policy": {}, "seq_mis": {}, "verl:decoupled_geo_rs": {"rs_threshold": "0.5_2.0"}}
    model = Routed(toy, experts, replay)
    runs = by_estimator(train_mixture(toy, {id: resolve_params(id, p) for id, p in selection.items()}, "logged",
                                      config, model), selection)
    oracle_model = DenseRoutedModel(toy, model.moe, replay)
    for estimator, params in selection.items():
        oracle = dense_mixture_training(toy, oracle_model, estimator, resolve_params(estimator, params), "logged",
                                        update, 3, 1.5, lag=lag)
        check_against(runs[estimator], oracle, estimator)
