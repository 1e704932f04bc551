"""Three distributions: what the engine samples (μ_s), what it logs (μ_log) and what the trainer scores (π).

Every combination of the two choices (logged: processed, raw, temperature; scored: plain, temperature, keep_mask),
with and without truncation, at several toys, against the dense oracle (``dense.DenseToy``), which builds the three
tables by its own arithmetic: the tables, J and J of softmax(θ), the identity check E_μs[W], KL(μ_s‖π), χ²_seq,
the π-mass out of reach, how far the objective moved, and every exact estimator's moments (the O(M) pass, the count
recursion, the Monte Carlo path's per-sequence terms and training's exact means). The fast tier runs a
representative grid; the full product is ``slow``.
"""

import itertools

import numpy as np
import pytest
from dense import DenseToy, assert_exact_equals_dense, dense_scored_log_pi

from toylab.analysis.diagnostics import diagnostics
from toylab.analysis.montecarlo import Batches, trainer_side
from toylab.analysis.stratified import stratified_moments
from toylab.catalogue.estimators import ESTIMATORS, EXACT_IDS, resolve_params
from toylab.catalogue.pipelines import LOGGED, SCORED
from toylab.engine.counts import curvature, expected_reward
from toylab.engine.moments import baseline_value, exact_moments, exact_moments_many
from toylab.engine.recursion import RECURSIVE_IDS, exact_many_by_recursion
from toylab.engine.sampler import Sampler
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import make_toy, scored_probabilities
from toylab.training.exact import Population, exact_means
from toylab.training.toy_rows import ToyRows

TOYS = {"T3V4": (3, 4, 0.5, 0), "T4V3": (4, 3, 1.0, 7), "T2V5m0": (2, 5, 0.0, 3)}
SAMPLERS = {"plain": {}, "tau 0.6": {"temperature": 0.6}, "tau 0.6 top-p 0.8": {"temperature": 0.6, "top_p": 0.8},
            "top-k 2 bf16 tau 1.4": {"top_k": 2, "precision": "bf16", "temperature": 1.4}}
COMBINATIONS = list(itertools.product(LOGGED, SCORED))
FAST = [("T4V3", "tau 0.6 top-p 0.8", logged, scored) for logged, scored in COMBINATIONS] \
    + [("T3V4", "tau 0.6", logged, scored) for logged, scored in COMBINATIONS] \
    + [("T2V5m0", "top-k 2 bf16 tau 1.4", "raw", "plain"), ("T3V4", "plain", "raw", "keep_mask")]
FLAT = [(toy, sampler, logged, "keep_mask") for toy, sampler in (("T3V4", "tau 0.6 top-p 0.8"),
                                                                 ("T3V4", "top-k 2 bf16 tau 1.4")) for logged in LOGGED]
FULL = [(toy, sampler, logged, scored) for toy in TOYS for sampler in SAMPLERS for logged, scored in COMBINATIONS]
SLOW = [case for case in FULL if case not in FAST + FLAT]


def case_id(case):
    return "-".join(case)


def build(case):
    toy_name, sampler_name, logged, scored = case
    toy = make_toy(*TOYS[toy_name], **SAMPLERS[sampler_name], logged=logged, scored=scored)
    return toy, DenseToy(toy)


@pytest.fixture(scope="module", params=FAST + [pytest.param(case, marks=pytest.mark.slow) for case in SLOW],
                ids=case_id)
def pair(request):
    return build(request.param)


def test_the_three_tables_equal_the_dense_construction(pair):
    toy, dense = pair
    for found, expected in ((toy.log_mu, dense.log_mu), (toy.log_logged, dense.log_logged), (toy.log_pi, dense.log_pi)):
        assert np.array_equal(np.isinf(found), np.isinf(expected))
        np.testing.assert_allclose(found[np.isfinite(found)], expected[np.isfinite(expected)], rtol=0, atol=1e-12)


def test_population_numbers_equal_the_dense_sums(pair):
    toy, dense = pair
    found, expected = diagnostics(toy), dense.population()
    assert found.J == pytest.approx(expected["J"], rel=1e-12, abs=1e-15)
    assert toy.plain_J == pytest.approx(expected["plain_J"], rel=1e-12, abs=1e-15)
    assert found.identity == pytest.approx(expected["identity"], rel=1e-10)
    assert found.kl_mu_pi == pytest.approx(expected["kl_mu_pi"], rel=1e-10, abs=1e-13)
    assert found.chi2_seq == pytest.approx(expected["chi2_seq"], rel=1e-9, abs=1e-12)
    assert found.unreachable_mass == pytest.approx(expected["unreachable_mass"], rel=1e-10, abs=1e-15)
    assert found.objective_shift == pytest.approx(expected["objective_shift"], rel=1e-9, abs=1e-12)
    assert found.logged_reward == pytest.approx(dense.p_sampler @ dense.R, rel=1e-12)
    np.testing.assert_allclose(toy.true_grad, dense.true_grad, rtol=0, atol=1e-12)


def test_every_exact_estimator_equals_the_dense_sums(pair):
    toy, dense = pair
    for baseline in ("none", "logged"):
        for estimator in EXACT_IDS:
            assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), baseline)


def test_the_count_recursion_equals_the_dense_sums(pair):
    toy, dense = pair
    for estimator, moments in exact_many_by_recursion(toy, {id: {} for id in RECURSIVE_IDS}, "true").items():
        mean, _, var = dense.moments(estimator, resolve_params(estimator), "true")
        np.testing.assert_allclose(moments.mean, mean, rtol=0, atol=1e-10 * np.linalg.norm(dense.true_grad))
        assert moments.var == pytest.approx(var, rel=1e-9, abs=1e-14)
        assert moments.rel_plain_bias == pytest.approx(
            np.linalg.norm(mean - dense.plain_grad) / np.linalg.norm(dense.plain_grad), rel=1e-9, abs=1e-12)


def test_the_monte_carlo_path_sums_to_the_dense_mean_over_every_sequence(pair):
    """Monte Carlo's per-sequence terms (``Batches``: coefficients from the sampled tokens' scored and logged
    log-probabilities, the scored π's score) weighted by each sequence's probability sum to the dense mean."""
    toy, dense = pair
    b = baseline_value(toy, "logged")
    for estimator in ("on_policy", "naive", "tok_tis", "seq_is", "seq_mis", "geo_rs", "prefix_is", "kpop", "dppo",
                      "verl:decoupled_geo_rs", "trl:sequence_mask"):
        on_policy = ESTIMATORS[estimator].on_policy
        rows = dense if on_policy else dense.on_support
        drawn = rows.p_train > 0 if on_policy else np.ones(len(rows.Y), bool)
        batch = Batches(trainer_side(toy) if on_policy else toy, rows.Y[drawn][None], np.array([drawn.sum()]), b)
        probability = (rows.p_train if on_policy else rows.p_sampler)[drawn]
        mean = batch.score_sum(batch.gradient_coefficients(estimator) * probability[None, :, None])[0, 0]
        expected, _, _ = dense.moments(estimator, resolve_params(estimator), "logged")
        np.testing.assert_allclose(mean, expected, rtol=0, atol=1e-10 * np.linalg.norm(dense.true_grad))


def test_training_takes_the_exact_means_and_population_of_the_pipeline(pair):
    toy, _ = pair
    estimators = [("on_policy", {}), ("naive", {}), ("seq_tis", resolve_params("seq_tis")), ("kpop", resolve_params(
        "kpop")), ("seq_mis", resolve_params("seq_mis"))]
    rows = ToyRows(np.repeat(toy.theta[None], len(estimators), axis=0), toy.b, toy.mismatch,
                   split_grid(toy.T, toy.V), toy.sampler)
    population = Population.of(rows)
    found = diagnostics(toy)
    assert population.J[0] == pytest.approx(found.J, rel=1e-12)
    assert population.kl_mu_pi[0] == pytest.approx(found.kl_mu_pi, rel=1e-10, abs=1e-13)
    assert population.chi2_seq[0] == pytest.approx(found.chi2_seq, rel=1e-10, abs=1e-13)
    np.testing.assert_allclose(population.grad[0], toy.true_grad, rtol=0, atol=1e-14)
    b = baseline_value(toy, "logged")
    means = exact_means(rows, estimators, np.full(len(estimators), b))
    exact = exact_moments_many(toy, dict(estimators), "logged")
    for (estimator, _), mean in zip(estimators, means, strict=True):
        np.testing.assert_allclose(mean, exact[estimator].mean, rtol=0, atol=1e-12)


def test_with_the_logged_mu_equal_to_the_sampled_one_sequence_is_is_unbiased_for_the_scored_objective():
    """processed logging: W = π/μ_s on μ_s's support, so sequence IS's bias is ∇J's part out of reach alone — 0 for keep_mask,
    whose π lives on that support; and its error against softmax(θ)'s gradient is then how far the objective moved."""
    for scored in SCORED:
        toy = make_toy(4, 3, 1.0, 7, temperature=0.6, top_p=0.8, scored=scored)
        seq_is = exact_moments(toy, "seq_is", baseline="logged")
        assert seq_is.rel_within_reach < 1e-12 and seq_is.rel_bias == pytest.approx(seq_is.rel_out_of_reach, rel=1e-9, abs=1e-12)
        assert (seq_is.rel_out_of_reach == 0) == (scored == "keep_mask") and toy.truncates
    keep = make_toy(4, 3, 1.0, 7, temperature=0.6, top_p=0.8, scored="keep_mask")
    assert exact_moments(keep, "seq_is").rel_plain_bias == pytest.approx(keep.objective_shift, rel=1e-9)


def test_the_identity_check_reads_one_while_every_estimator_is_biased():
    """DESIGN.md: raw logging with a plain trainer at mismatch 0 has π = μ_raw, so every weight is 1 and E_μs[W] = 1,
    yet the draws come from the tempered, truncated μ_s: every estimator on them is biased."""
    toy = make_toy(3, 4, 0.0, 0, temperature=0.6, top_p=0.8, logged="raw")
    assert np.all(toy.rho[toy.kept] == 1.0) and toy.identity == pytest.approx(1.0, abs=1e-15)
    table = exact_moments_many(toy, {id: {} for id in ("naive", "tok_is", "seq_is", "seq_tis")}, "logged")
    assert min(moments.rel_bias for moments in table.values()) > 0.1


def test_the_score_of_each_scored_pi_is_its_log_gradient():
    """(onehot(v) − π)/τ against central differences of the dense log π in θ, the kept set held (keep_mask)."""
    toy = make_toy(3, 4, 0.5, 0, temperature=0.6, top_p=0.8)
    log_mu = DenseToy(toy).log_mu
    step = 1e-6
    for scored in SCORED:
        pipeline = {"temperature": 0.6, "scored": scored}
        pi = np.exp(dense_scored_log_pi(toy.theta, log_mu, **pipeline))
        scale = toy.sampler.__class__(temperature=0.6, scored=scored).score_scale
        for t, v, u in itertools.product(range(3), range(4), range(4)):
            if pi[t, v] == 0:
                continue
            shifted = [toy.theta.copy(), toy.theta.copy()]
            shifted[0][t, u] += step
            shifted[1][t, u] -= step
            up, down = (dense_scored_log_pi(theta, log_mu, **pipeline)[t, v] for theta in shifted)
            assert (up - down) / (2 * step) == pytest.approx(((u == v) - pi[t, u]) * scale, abs=1e-7)


@pytest.mark.parametrize("scored", ["temperature", "keep_mask"])
def test_the_hessian_of_the_scored_objective_equals_finite_differences(scored):
    """J(θ) = E_π(θ)[r] of the scored π: ∇J and the Hessian (``counts.curvature`` with the score's scale) against
    central differences of J, computed by the count recursion from the pipeline's π at θ ± h (the kept set is the
    sampler's at each θ; h is small enough not to move it)."""
    toy = make_toy(3, 3, 0.4, 3, temperature=0.7, top_p=0.85, scored=scored)

    def J(theta):
        return expected_reward(scored_probabilities(theta, toy.b, toy.mismatch, toy.sampler))
    step = 1e-4
    hessian = curvature(toy.pi, toy.score_scale).matrix()
    basis = np.eye(toy.T * toy.V).reshape(-1, toy.T, toy.V)
    for i, e in enumerate(basis):
        slope = (J(toy.theta + step * e) - J(toy.theta - step * e)) / (2 * step)
        assert slope == pytest.approx(toy.true_grad.ravel()[i], abs=1e-8)
        for j, f in enumerate(basis):
            second = (J(toy.theta + step * (e + f)) - J(toy.theta + step * (e - f)) - J(toy.theta - step * (e - f))
                      + J(toy.theta - step * (e + f))) / (4 * step**2)
            assert second == pytest.approx(hessian[i, j], abs=1e-5)


def test_stratified_monte_carlo_finds_the_exact_moments_under_a_pipeline():
    """Beyond enumeration the length view uses stratified Monte Carlo: under raw logging with a temperature trainer
    and truncation, its mean is within 4 standard errors of the exact one."""
    toy = make_toy(4, 3, 1.0, 7, temperature=0.6, top_p=0.8, logged="raw", scored="temperature")
    b = baseline_value(toy, "logged")
    for estimator in ("seq_tis", "geo_rs", "k2_penalty"):
        exact = exact_moments(toy, estimator, baseline="logged")
        sampled = stratified_moments(toy, estimator, {}, b, toy.true_grad, 4000, np.random.default_rng(5))
        assert np.linalg.norm(sampled.mean - exact.mean) <= 4 * sampled.bias_se + 1e-12
        assert abs(sampled.var - exact.var) <= 4 * sampled.var_se + 1e-12


@pytest.mark.parametrize("case", FLAT, ids=case_id)
def test_a_flat_scored_objective_is_refused_with_the_reason(case):
    """keep_mask with token 0 cut at two of three positions: J = E_π[r] is 0 whatever θ (the dense gradient too), so
    no relative error is defined and the toy is refused, naming why."""
    toy_name, sampler_name, logged, scored = case
    with pytest.raises(ValueError, match="does not depend on θ"):
        make_toy(*TOYS[toy_name], **SAMPLERS[sampler_name], logged=logged, scored=scored)
    toy = make_toy(*TOYS[toy_name], **SAMPLERS[sampler_name], logged=logged, scored=scored, max_sequences=None)
    dense = DenseToy(toy)
    assert dense.population()["J"] == 0 and not np.any(dense.true_grad)


def test_bad_choices_are_a_value_error_naming_them():
    with pytest.raises(ValueError, match="logged must be one of processed, raw, temperature"):
        Sampler(logged="post")
    with pytest.raises(ValueError, match="scored must be one of plain, temperature, keep_mask"):
        Sampler(scored="masked")
