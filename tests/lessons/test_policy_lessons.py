"""The three-policy lessons' numbers, each recomputed independently: by the dense oracle's brute-force training
(tests/dense.py ``dense_three_policies``), by enumerating the V**T sequences, or by Monte Carlo with a fixed seed
and 5 standard errors."""

import itertools

import numpy as np
import pytest
from dense import dense_three_policies

from toylab.catalogue.updates import Update
from toylab.lessons import training as lessons
from toylab.lessons.lesson import settings, toy_of
from toylab.training.staleness import LAGS, OBJECTIVES

BY_ID = {lesson.id: lesson for lesson in lessons.LESSONS}
Z = 5.0


def evidence(lesson_id):
    lesson = BY_ID[lesson_id]
    return settings(lesson), lesson.check(settings(lesson))


@pytest.mark.slow
def test_the_recomputed_anchor_numbers_against_the_dense_oracle():
    chosen, found = evidence("recomputed_anchor_never_clips")
    toy, config = toy_of(chosen), lessons.LAGGED
    for anchor in ("recompute", "rollout"):
        dense = dense_three_policies(toy, "tok_is", {}, chosen.baseline, Update(anchor), config.steps, config.lr,
                                     lag=config.lag)
        numbers = {f"{anchor}: largest clipped share": dense["clip_share"].max(),
                   f"{anchor}: largest |PPO KL|": np.abs(dense["ppo_kl"]).max(),
                   f"{anchor}: largest spread of w": dense["w_std"].max()}
        for name, value in numbers.items():
            assert found.numbers[name] == pytest.approx(value, abs=1e-10), name
    assert found.numbers["step of that spread"] == int(np.argmax(dense_three_policies(
        toy, "tok_is", {}, chosen.baseline, Update(), config.steps, config.lr, lag=config.lag)["w_std"]))


def test_the_recomputed_anchor_never_clips_by_construction():
    """r ≡ 1 exactly: the zeros are identities, not rounding (the full numbers against the oracle: slow tier)."""
    _, found = evidence("recomputed_anchor_never_clips")
    assert found.numbers["recompute: largest clipped share"] == 0 == found.numbers["recompute: largest |PPO KL|"]


def test_the_bypass_numbers_against_the_dense_oracle():
    chosen, found = evidence("bypass_spends_the_clip")
    toy = toy_of(chosen)
    for lr, name in ((0.01, "lr 0.01"), (1.0, "lr 1")):
        dense = dense_three_policies(toy, "naive", {}, chosen.baseline, Update("bypass"), 1, lr)
        assert found.numbers[f"bypass: clipped share at step 0, {name}"] == pytest.approx(dense["clip_share"][0],
                                                                                         abs=1e-12)
    assert found.numbers["bypass: PPO KL at step 0"] == pytest.approx(dense["ppo_kl"][0], abs=1e-12)
    dense = dense_three_policies(toy, "naive", {}, chosen.baseline, Update(), 1, 0.01)
    assert dense["clip_share"][0] == found.numbers["recompute: clipped share at step 0"] == 0


@pytest.mark.slow
def test_the_staleness_numbers_against_the_dense_oracle():
    chosen, found = evidence("stale_objectives_part")
    toy, config = toy_of(chosen), lessons.STALE
    for objective, (anchor, correction) in OBJECTIVES.items():
        for lag in (0, 16):
            dense = dense_three_policies(toy, correction, {}, chosen.baseline, Update(anchor), config.steps,
                                         config.lr, lag=lag)
            assert found.numbers[f"{objective}: J at lag {lag}"] == pytest.approx(dense["J"][-1], abs=1e-10)
    dense = dense_three_policies(toy, "on_policy", {}, chosen.baseline, Update(), config.steps, config.lr)
    assert found.numbers["on_policy: J"] == pytest.approx(dense["J"][-1], abs=1e-10)
    assert LAGS == (0, 1, 2, 4, 8, 16)


def brute_force_capped_means(log_rho, mu, T, cap):
    """E_μ[min(W, cap)] and E_μ[min(ρ_geo, cap)] for T copies of one position, summed over the V**T sequences."""
    totals = [0.0, 0.0]
    for sequence in itertools.product(range(len(mu)), repeat=T):
        probability = np.prod([mu[v] for v in sequence])
        if probability == 0:
            continue
        log_W = sum(log_rho[v] for v in sequence)
        totals[0] += probability * min(np.exp(log_W), cap)
        totals[1] += probability * min(np.exp(log_W / T), cap)
    return totals


def test_the_sequence_ratio_numbers_by_enumeration_and_monte_carlo():
    chosen, found = evidence("sequence_ratio_falls_with_length")
    toy = toy_of(chosen)
    log_rho, mu = toy.log_rho[0], toy.mu[0]
    for T in (1, 4):
        W, geo = brute_force_capped_means(log_rho, mu, T, lessons.TRL_CAP)
        assert found.numbers[f"E[min(W, 3)] at T = {T}"] == pytest.approx(W, rel=1e-12)
        assert found.numbers[f"E[min(ρ_geo, 3)] at T = {T}"] == pytest.approx(geo, rel=1e-12)
    rng = np.random.default_rng(37)
    for T in (16, 64, 128):
        tokens = rng.choice(len(mu), p=mu, size=(40_000, T))
        log_W = log_rho[tokens].sum(axis=1)
        for values, name in ((np.minimum(np.exp(log_W), 3.0), "W"), (np.minimum(np.exp(log_W / T), 3.0), "ρ_geo")):
            assert abs(found.numbers[f"E[min({name}, 3)] at T = {T}"] - values.mean()) \
                < Z * values.std() / np.sqrt(len(values)) + 1e-12, (T, name)
    assert found.numbers["E[log W] at T = 128"] == pytest.approx(128 * float(mu @ log_rho), rel=1e-12)
