"""Monte Carlo, stratified draws, the ratio views and the length view under a truncating sampler: tokens μ never
draws never appear, and every estimate agrees with the exact numbers over μ's support (fixed seeds, Z standard
errors)."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import exact_moments, make_toy, resolve_params
from toylab.analysis.diagnostics import sequence_log_ratio
from toylab.analysis.length import OUT_OF_REACH, length_point, length_toy
from toylab.analysis.montecarlo import draw_tokens, monte_carlo, tokens_from_uniforms
from toylab.analysis.stratified import count_distribution, draw_given_counts, stratified_moments
from toylab.engine.counts import reward_by_count
from toylab.engine.moments import baseline_value
from toylab.presentation import frames
from toylab.state.settings import Settings

Z = 5.0
SAMPLER = {"top_p": 0.85, "precision": "bf16"}


def test_a_token_of_probability_zero_is_never_drawn_even_at_the_top_of_the_unit_interval():
    probability = np.array([[0.3, 0.7 - 2**-53, 0.0, 0.0]])          # its cumulative sum is a hair below 1
    uniforms = np.array([[[0.0], [0.3], [1 - 2**-53], [np.nextafter(1.0, 0)]]])
    assert tokens_from_uniforms(uniforms, probability).ravel().tolist() == [0, 1, 1, 1]
    middle = np.array([[0.5, 0.0, 0.5]])
    assert tokens_from_uniforms(np.array([[[0.5], [0.49]]]), middle).ravel().tolist() == [2, 0]


def test_drawn_tokens_stay_inside_the_support_and_follow_mu():
    toy = make_toy(5, 4, 0.7, 2, **SAMPLER)
    assert toy.truncates
    tokens = draw_tokens(np.random.default_rng(0), toy.mu, (200_000,))
    assert toy.kept[np.arange(toy.T), tokens].all()
    for t in range(toy.T):
        frequency = np.bincount(tokens[:, t], minlength=toy.V) / len(tokens)
        assert np.all(np.abs(frequency - toy.mu[t]) < Z * np.sqrt(toy.mu[t] * (1 - toy.mu[t]) / len(tokens)) + 1e-12)


@pytest.mark.parametrize("estimator", ["on_policy", "naive", "tok_tis", "prefix_is", "seq_is", "seq_mis", "grpo"])
def test_monte_carlo_error_matches_the_exact_moments_over_the_support(estimator):
    toy = make_toy(4, 3, 0.5, 1, **SAMPLER)
    sizes = (8, 64)
    errors = monte_carlo(toy, {estimator: {}}, "logged", batch_sizes=sizes, replicates=3000, seed=11)[estimator]
    assert np.isfinite(errors).all()
    if estimator == "grpo":                                    # batch-coupled: no exact moments, only finiteness
        return
    moments = exact_moments(toy, estimator, baseline="logged")
    for n, error in zip(sizes, errors, strict=True):
        squared = error**2
        assert abs(squared.mean() - moments.rel_rmse(n) ** 2) < Z * squared.std(ddof=1) / np.sqrt(len(squared))


def test_stratified_draws_where_a_position_keeps_only_token_zero():
    """top-k 1 keeps one token per position; where that is token 0 the conditional law of the others is empty."""
    toy = make_toy(6, 4, 1.0, 0, top_k=1, temperature=2.0)
    tokens = draw_given_counts(np.random.default_rng(0), toy.mu, np.full(20, int(toy.kept[:, 0].sum())))
    assert toy.kept[np.arange(toy.T), tokens].all()


@pytest.mark.parametrize("estimator", ["seq_tis", "geo_rs", "tok_tis"])
def test_stratified_monte_carlo_agrees_with_exact_over_the_support(estimator):
    toy = make_toy(6, 4, 1.0, 0, **SAMPLER)
    expected = exact_moments(toy, estimator, {}, "logged")
    found = stratified_moments(toy, estimator, {}, baseline_value(toy, "logged"), toy.true_grad, 20_000,
                               np.random.default_rng(3))
    assert np.linalg.norm(found.mean - expected.mean) < Z * found.bias_se
    assert abs(found.var - expected.var) < Z * found.var_se


@pytest.mark.parametrize("estimator", ["k2_penalty", "seq_tis"])
def test_stratified_moments_where_mu_never_reaches_a_reward_are_the_additive_terms_exactly(estimator):
    """top-k 2 keeps token 0 at 2 of the 6 positions: μ never draws the 3 zeros a reward needs, so with b = 0 every
    φ_K μ reaches is 0 and ĝ = D (k2_penalty's additive term; 0 for seq_tis): its moments are exact, nothing drawn."""
    toy = make_toy(6, 4, 0.5, 3, top_k=2)
    assert toy.kept[:, 0].sum() == 2 and count_distribution(toy.mu) @ reward_by_count(toy.T) == 0
    params = resolve_params(estimator, {})
    mean, _, var = DenseToy(toy).moments(estimator, params, "none")
    found = stratified_moments(toy, estimator, {}, 0.0, toy.true_grad, 1_000, np.random.default_rng(0))
    assert found.samples == 0 and found.bias_se == found.var_se == 0.0
    assert np.allclose(found.mean, mean, rtol=0, atol=1e-15) and found.var == pytest.approx(var, rel=1e-9, abs=1e-18)
    assert found.rel_bias == pytest.approx(exact_moments(toy, estimator, params, "none").rel_bias, rel=1e-12)


def test_the_ratio_views_show_only_what_mu_draws():
    toy = make_toy(5, 3, 0.6, 4, **SAMPLER)
    dense = DenseToy(toy).on_support
    frame = frames.token_ratio_frame(toy)
    assert len(frame) == toy.kept.sum() and np.isfinite(frame["log_rho"]).all()
    log_W, probability = sequence_log_ratio(toy)
    assert len(log_W) == len(dense.W) and np.isfinite(log_W).all()
    facts = frames.sequence_facts(toy)
    assert facts["mean_W"] == pytest.approx(dense.p_sampler @ dense.W, rel=1e-10)
    assert facts["mean_W"] == pytest.approx(1 - toy.unreachable_mass, rel=1e-10)
    histogram = frames.sequence_histogram_frame(toy, "W", 20)
    assert histogram["probability"].sum() == pytest.approx(1, abs=1e-12)


def test_the_length_view_carries_the_sampler_and_the_mass_out_of_reach():
    settings = Settings(estimators=("naive", "seq_is", "seq_tis"), top_p=0.9, temperature=0.8)
    for T in (4, 12):                                      # by enumeration, then by recursion and Monte Carlo
        population, estimators = length_point(settings, T, samples=2000)
        toy = length_toy(T, settings.V, settings.mismatch, settings.seed, settings.sampler)
        reach = next(row for row in population if row["quantity"] == OUT_OF_REACH)
        assert reach["value"] == toy.unreachable_mass > 0
        seq_is = next(row for row in estimators if row["estimator"] == "seq_is")
        out_of_reach = np.linalg.norm(toy.true_grad - toy.reachable_gradient(0.0)) / np.linalg.norm(toy.true_grad)
        assert seq_is["rel_bias"] == pytest.approx(out_of_reach, rel=1e-8)           # seq_is: all of it out of reach
    assert reach["value"] > next(row for row in length_point(settings, 4, samples=10)[0]
                                 if row["quantity"] == OUT_OF_REACH)["value"]          # it grows with T
