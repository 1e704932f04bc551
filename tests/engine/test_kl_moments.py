"""Every KL penalty's estimate of ∇KL(π‖π_ref), exact in the (T, V) tables, against the dense oracle's sums over all
sequences; the identities of the estimators on policy and under the engine's μ; the reference and its KLs."""

import itertools

import numpy as np
import pytest
from dense import DenseToy, dense_kl_moments, dense_reference_gradients
from tiers import fast_then_slow

from toylab import make_toy
from toylab.catalogue.kl import KL_ESTIMATORS, KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.engine.kl_moments import CORRECTIONS, Tables, kl_moments
from toylab.engine.reference import INITIAL, Reference, kl_from_reference, kl_gradients, kl_to_reference

TOYS = {
    "plain": dict(T=4, V=3, mismatch=0.6, seed=3),
    "top_p_tempered": dict(T=3, V=4, mismatch=0.7, seed=2, top_p=0.8, temperature=0.7),
    "raw_keep_mask": dict(T=3, V=4, mismatch=0.7, seed=2, top_k=3, precision="bf16", logged="raw", scored="keep_mask"),
    "temperature_scored": dict(T=3, V=4, mismatch=0.9, seed=7, temperature=1.3, scored="temperature",
                               logged="temperature"),
    "long": dict(T=6, V=2, mismatch=1.2, seed=11),
}
CLAMPS = {"none": (None, None, False), "tight": (0.6, 0.4, True), "loose": (1.0, 2.0, False)}


def settings():
    """(estimator, placement, reward_sum, ratio, clamps, correction) over every meaningful combination."""
    for estimator, placement in itertools.product(KL_ESTIMATORS, ("loss", "reward")):
        if placement == "reward" and estimator == "full":
            continue
        plain = placement == "reward" or estimator.endswith("+") or estimator == "full"
        for ratio in ("none",) if plain else ("none", "current", "anchor", "engine"):
            for clamps in CLAMPS:
                sums = ("sequence", "to_go", "token") if placement == "reward" else ("sequence",)
                for reward_sum, correction in itertools.product(sums, CORRECTIONS if placement == "reward"
                                                                else ("naive",)):
                    yield estimator, placement, reward_sum, ratio, clamps, correction


ALL = [(toy, *setting) for toy in TOYS for setting in settings()]
FAST = [case for case in ALL if case[5] == "tight" and case[6] in ("naive", "seq_is") and case[3] != "anchor"
        or case[0] == "plain" and case[5] == "none" and case[6] == "naive"]       # every estimator, ratio and sum


def reference_of(toy, distance):
    return Reference(distance).log_probabilities(toy.theta, toy.seed, toy.sampler)


@pytest.fixture(scope="module")
def toys():
    return {name: make_toy(**arguments) for name, arguments in TOYS.items()}


def assert_moments_equal(moments, dense_moments):
    mean, second, forward, reverse = dense_moments
    scale = max(np.abs(mean).max(), np.abs(forward).max())
    np.testing.assert_allclose(moments.mean, mean, rtol=0, atol=1e-12 * scale)
    assert moments.second_moment == pytest.approx(second, rel=1e-12, abs=1e-12 * scale**2)
    np.testing.assert_allclose(moments.forward, forward, rtol=0, atol=1e-12 * np.abs(forward).max())
    return forward, reverse


@pytest.mark.parametrize("toy_name, estimator, placement, reward_sum, ratio, clamps, correction",
                         fast_then_slow(ALL, FAST))
def test_closed_forms_equal_the_dense_sums(toys, toy_name, estimator, placement, reward_sum, ratio, clamps,
                                           correction):
    toy = toys[toy_name]
    penalty = KLPenalty(1.0, estimator, placement, reward_sum, ratio, *CLAMPS[clamps])
    dense = DenseToy(toy)
    on_policy = DenseToy.of_tables(toy.log_pi, toy.log_pi, toy.log_pi, toy.score_scale)
    for distance in (0.7, 3.0):
        log_ref = reference_of(toy, distance)
        forward, reverse = assert_moments_equal(kl_moments(penalty, Tables.of(toy, log_ref), correction),
                                                dense_kl_moments(dense, penalty, log_ref, correction))
        assert_moments_equal(kl_moments(penalty, Tables.of(toy, log_ref, on_policy=True), correction),
                             dense_kl_moments(on_policy, penalty, log_ref, correction))
        if toy.sampler.scored != "keep_mask":
            np.testing.assert_allclose(kl_gradients(toy.log_pi, log_ref, toy.score_scale)[1], reverse, rtol=0,
                                       atol=1e-12 * np.abs(reverse).max())


# -- the identities ------------------------------------------------------------------------------------------

ON_POLICY_IDENTITIES = [            # (estimator, placement, reward_sum, ratio, correction, the gradient it follows)
    ("k1", "loss", "sequence", "none", "naive", "zero"),
    ("k2", "loss", "sequence", "none", "naive", "forward"),
    ("k3", "loss", "sequence", "none", "naive", "reverse"),
    ("k1", "loss", "sequence", "current", "naive", "forward"),
    ("k3", "loss", "sequence", "current", "naive", "forward"),
    ("k3", "loss", "sequence", "anchor", "naive", "forward"),
    ("k1+", "loss", "sequence", "none", "naive", "forward"),
    ("k3+", "loss", "sequence", "none", "naive", "forward"),
    ("full", "loss", "sequence", "none", "naive", "forward"),
    ("k1", "reward", "sequence", "none", "naive", "forward"),
    ("k1", "reward", "to_go", "none", "naive", "forward"),
    ("k1", "reward", "token", "none", "naive", "forward"),
    ("k1", "reward", "sequence", "none", "seq_is", "forward"),
]
IDENTITY_TOYS = [dict(T=4, V=3, mismatch=0.6, seed=seed) for seed in range(4)] + [
    dict(T=3, V=4, mismatch=1.0, seed=9, top_p=0.85, temperature=0.8), dict(T=5, V=2, mismatch=0.3, seed=1)]


def target(moments, which):
    return {"zero": np.zeros_like(moments.forward), "forward": moments.forward, "reverse": moments.reverse}[which]


@pytest.mark.parametrize("arguments", IDENTITY_TOYS)
@pytest.mark.parametrize("estimator, placement, reward_sum, ratio, correction, follows", ON_POLICY_IDENTITIES)
def test_on_policy_identities(arguments, estimator, placement, reward_sum, ratio, correction, follows):
    """With the sampler equal to the trainer: k1 in the loss has mean 0, k2 in the loss follows ∇KL(π‖π_ref), k3
    ∇KL(π_ref‖π); k1 in the reward (every sum), k3 with a ratio whose gradient flows, the straight-through
    estimators and full follow ∇KL(π‖π_ref)."""
    toy = make_toy(**arguments)
    log_ref = reference_of(toy, 1.3)
    moments = kl_moments(KLPenalty(1.0, estimator, placement, reward_sum, ratio), Tables.of(toy, log_ref, True),
                         correction)
    np.testing.assert_allclose(moments.mean, target(moments, follows), rtol=0, atol=1e-12 * moments.scale)


OFF_POLICY_IDENTITIES = [           # unbiased under the engine's μ whatever the mismatch (sampled = logged, no cut)
    ("k1", "loss", "sequence", "engine", "naive"),
    ("k3", "loss", "sequence", "engine", "naive"),
    ("full", "loss", "sequence", "none", "naive"),
    ("k1", "reward", "sequence", "none", "seq_is"),
    ("k1", "reward", "to_go", "none", "seq_is"),
    ("k1", "reward", "sequence", "none", "tok_is"),
    ("k1", "reward", "token", "none", "tok_is"),
]
BROKEN_OFF_POLICY = [               # unbiased on policy, biased under μ ≠ π
    ("k2", "loss", "sequence", "none", "naive"),
    ("k3", "loss", "sequence", "current", "naive"),
    ("k1", "reward", "sequence", "none", "naive"),
    ("k1", "reward", "token", "none", "naive"),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("estimator, placement, reward_sum, ratio, correction", OFF_POLICY_IDENTITIES)
def test_off_policy_identities(seed, estimator, placement, reward_sum, ratio, correction):
    """On the engine's tokens π/μ on the loss term, W or ρ_t on a k1 reward keep ∇KL(π‖π_ref) exact."""
    toy = make_toy(T=4, V=3, mismatch=1.0, seed=seed)
    log_ref = reference_of(toy, 1.3)
    moments = kl_moments(KLPenalty(1.0, estimator, placement, reward_sum, ratio), Tables.of(toy, log_ref), correction)
    np.testing.assert_allclose(moments.mean, moments.forward, rtol=0, atol=1e-12 * moments.scale)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("estimator, placement, reward_sum, ratio, correction", BROKEN_OFF_POLICY)
def test_identities_that_the_engine_breaks(seed, estimator, placement, reward_sum, ratio, correction):
    """The same estimators are exact on policy and biased under μ: by more at mismatch 1 than at 0.3."""
    biases = []
    for mismatch in (0.0, 0.3, 1.0):
        toy = make_toy(T=4, V=3, mismatch=mismatch, seed=seed)
        moments = kl_moments(KLPenalty(1.0, estimator, placement, reward_sum, ratio),
                             Tables.of(toy, reference_of(toy, 1.3)), correction)
        biases.append(moments.rel_bias())
    assert biases[0] < 1e-12 < biases[1] < biases[2]


# -- the reference -------------------------------------------------------------------------------------------

def test_the_default_reference_is_the_initial_policy():
    toy = make_toy(T=4, V=3, seed=5)
    log_ref = INITIAL.log_probabilities(toy.theta, toy.seed, toy.sampler)
    np.testing.assert_allclose(log_ref, toy.log_pi, rtol=0, atol=1e-15)
    assert kl_to_reference(toy.log_pi, log_ref) == pytest.approx(0, abs=1e-15)
    forward, reverse = kl_gradients(toy.log_pi, log_ref)
    assert np.abs(forward).max() < 1e-15 and np.abs(reverse).max() < 1e-15


def test_the_reference_moves_along_one_direction_per_toy():
    toy = make_toy(T=4, V=3, seed=5)
    one, two = Reference(1.0).theta(toy.theta, toy.seed), Reference(2.0).theta(toy.theta, toy.seed)
    np.testing.assert_allclose(two - toy.theta, 2 * (one - toy.theta), rtol=1e-14)
    other = Reference(1.0).theta(toy.theta, toy.seed + 1)
    assert not np.allclose(other - toy.theta, one - toy.theta)


@pytest.mark.parametrize("name", ["plain", "top_p_tempered", "temperature_scored"])
def test_both_kls_are_the_sums_over_sequences(toys, name):
    toy = toys[name]
    dense = DenseToy(toy)
    log_ref = reference_of(toy, 1.7)
    log_ref_sequences = log_ref[np.arange(toy.T), dense.Y].sum(axis=1)
    log_pi_sequences = dense.log_pi_tokens.sum(axis=1)
    forward = dense.p_train @ (log_pi_sequences - log_ref_sequences)
    reverse = np.exp(log_ref_sequences) @ (log_ref_sequences - log_pi_sequences)
    assert kl_to_reference(toy.log_pi, log_ref) == pytest.approx(forward, rel=1e-12)
    assert kl_from_reference(toy.log_pi, log_ref) == pytest.approx(reverse, rel=1e-12)
    np.testing.assert_allclose(kl_gradients(toy.log_pi, log_ref, toy.score_scale)[0],
                               dense_reference_gradients(dense, log_ref)[0], rtol=0, atol=1e-13)


def test_a_kept_set_makes_the_reverse_kl_infinite():
    toy = make_toy(T=3, V=4, mismatch=0.7, seed=2, top_k=2, scored="keep_mask")
    assert kl_from_reference(toy.log_pi, reference_of(toy, 0.5)) == np.inf
    assert np.isfinite(kl_to_reference(toy.log_pi, reference_of(toy, 0.5)))


@pytest.mark.parametrize("distance, message", [(-1, "distance"), (11, "distance"), (float("nan"), "distance"),
                                               ("far", "distance"), (True, "distance")])
def test_a_bad_distance_is_refused(distance, message):
    with pytest.raises(ValueError, match=message):
        Reference(distance)


# -- every framework's preset ----------------------------------------------------------------------------------

PRESET_CASES = [(preset, toy) for preset in KL_PRESETS for toy in ("plain", "top_p_tempered")]


@pytest.mark.parametrize("preset, toy_name", fast_then_slow(PRESET_CASES, [c for c in PRESET_CASES if c[1] == "plain"]))
def test_every_framework_preset_equals_the_dense_sums(toys, preset, toy_name):
    """Each preset's estimator, placement, ratio and clamps, near the reference and far from it (where the clamps
    bind), on the engine's tokens and on policy."""
    toy = toys[toy_name]
    penalty = KL_PRESETS[preset].with_beta(1.0)
    dense = DenseToy(toy)
    on_policy = DenseToy.of_tables(toy.log_pi, toy.log_pi, toy.log_pi, toy.score_scale)
    for distance in (1.0, 4.0):
        log_ref = reference_of(toy, distance)
        for correction in CORRECTIONS if penalty.placement == "reward" else ("naive",):
            assert_moments_equal(kl_moments(penalty, Tables.of(toy, log_ref), correction),
                                 dense_kl_moments(dense, penalty, log_ref, correction))
            assert_moments_equal(kl_moments(penalty, Tables.of(toy, log_ref, on_policy=True), correction),
                                 dense_kl_moments(on_policy, penalty, log_ref, correction))
