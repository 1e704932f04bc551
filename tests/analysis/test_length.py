"""The count recursion equals enumeration where both exist; stratified Monte Carlo agrees within its errors."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import baseline_value, exact_moments, make_toy
from toylab.analysis.diagnostics import diagnostics, sequence_chi2
from toylab.analysis.length import (
    EXACT,
    LENGTHS,
    MONTE_CARLO,
    RECURSION,
    SAMPLES,
    TOKEN_BUDGET,
    _estimators_beyond_enumeration,
    _population_by_enumeration,
    _population_by_sampling,
    enumerable,
    length_point,
    length_points,
    length_toy,
    lengths_for,
    samples_at,
)
from toylab.analysis.stratified import (
    count_distribution,
    draw_given_counts,
    stratified_moments,
    stratified_moments_many,
)
from toylab.engine.grid import outer_sum
from toylab.engine.recursion import (
    RECURSIVE_IDS,
    exact_by_recursion,
    exact_many_by_recursion,
    objective_by_recursion,
)
from toylab.engine.toy import Toy
from toylab.state.settings import Settings

TOYS = [(6, 4, 0.3, 0), (5, 3, 1.0, 7), (8, 3, 0.6, 2), (3, 4, 2.0, 21), (1, 3, 0.5, 2), (7, 2, 1.5, 4)]
BASELINES = ["none", "logged", "true"]
BITING = {"tok_tis": {"C": 1.1}, "tok_mis": {"lo": 0.9, "hi": 1.2}, "trm": {"eps": 0.6}}
Z = 5.0   # Monte Carlo tolerance in standard errors, fixed seeds


@pytest.fixture(scope="module", params=TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def toy(request):
    return make_toy(*request.param)


def test_objective_equals_dense_enumeration(toy):
    dense = DenseToy(toy)
    J, logged_reward, grad = objective_by_recursion(toy)
    assert J == pytest.approx(dense.p_train @ dense.R, rel=1e-12)
    assert logged_reward == pytest.approx(dense.p_sampler @ dense.R, rel=1e-12)
    np.testing.assert_allclose(grad, dense.true_grad, rtol=0, atol=1e-13 * np.abs(dense.true_grad).max())


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("estimator", RECURSIVE_IDS)
def test_recursion_equals_enumeration(toy, estimator, baseline):
    for params in ({}, BITING.get(estimator, {})):
        found = exact_by_recursion(toy, estimator, params, baseline)
        expected = exact_moments(toy, estimator, params, baseline)
        scale = expected.grad_norm
        np.testing.assert_allclose(found.mean, expected.mean, rtol=0,
                                   atol=1e-10 * max(np.abs(expected.mean).max(), scale))
        assert found.bias == pytest.approx(expected.bias, rel=1e-10, abs=1e-12 * scale)
        assert found.var == pytest.approx(expected.var, rel=1e-10, abs=1e-14)
        assert found.grad_norm == pytest.approx(scale, rel=1e-12)
        assert found.tokens_affected == pytest.approx(expected.tokens_affected, abs=1e-12)
        assert found.sequences_affected == pytest.approx(expected.sequences_affected, abs=1e-12)


def test_recursion_equals_enumeration_at_the_largest_enumerable_length():
    toy = make_toy(10, 4, 0.8, 3)
    for estimator in ("tok_tis", "seq_is", "prefix_is"):
        found, expected = exact_by_recursion(toy, estimator, {}, "logged"), exact_moments(toy, estimator, {}, "logged")
        assert found.bias == pytest.approx(expected.bias, rel=1e-10)
        assert found.var == pytest.approx(expected.var, rel=1e-10)


def test_long_sequences_objective_against_a_direct_convolution():
    """J and E_μ[r] at T = 256 from the count distribution built by np.convolve, an independent path."""
    toy = make_toy(256, 4, 0.5, 1, max_sequences=None)
    J, logged_reward, grad = objective_by_recursion(toy)
    for probability, expected in ((toy.pi, J), (toy.mu, logged_reward)):
        counts = np.ones(1)
        for p in probability:
            counts = np.convolve(counts, [1 - p[0], p[0]])
        assert expected == pytest.approx(counts[128:].sum(), rel=1e-10)
    np.testing.assert_allclose(count_distribution(toy.mu), counts, rtol=1e-9, atol=1e-300)
    assert exact_by_recursion(toy, "seq_is", {}, "logged").rel_bias < 1e-9
    np.testing.assert_allclose(exact_by_recursion(toy, "on_policy").mean, grad, rtol=1e-12)


def test_weighted_counts_carry_products_of_any_size():
    """Σ_k of the count distribution under the weights μ·ρ² is E_μ[W²] = ∏_t (1 + χ²_t) = 1 + χ²_seq."""
    toy = make_toy(128, 3, 0.4, 5, max_sequences=None)
    weighted = count_distribution(toy.mu * toy.rho**2)
    assert weighted.sum() == pytest.approx(1 + sequence_chi2(toy), rel=1e-10)


def test_conditional_draws_have_the_count_and_the_conditional_law():
    toy = make_toy(5, 3, 1.0, 0)
    tokens = draw_given_counts(np.random.default_rng(0), toy.mu, np.full(100_000, 2))
    assert np.all((tokens == 0).sum(axis=1) == 2)
    zero_count = outer_sum(np.eye(toy.V, dtype=int)[[0] * toy.T])
    conditional = toy.p_sampler * (zero_count == 2)
    conditional /= conditional.sum()
    frequency = np.bincount(tokens @ toy.V ** np.arange(toy.T - 1, -1, -1), minlength=toy.M) / len(tokens)
    assert np.all(np.abs(frequency - conditional) < Z * np.sqrt(conditional / len(tokens)) + 1e-12)


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("estimator, params", [("seq_tis", {}), ("seq_mis", {"C": 1.5}), ("geo_rs", {"lo": 0.8}),
                                               ("geo_rs_tok_tis", {}), ("k3_rs", {"delta": 0.3}), ("tok_tis", {})])
def test_stratified_monte_carlo_agrees_with_exact(estimator, params, baseline):
    toy = make_toy(6, 4, 1.0, 0)
    expected = exact_moments(toy, estimator, params, baseline)
    found = stratified_moments(toy, estimator, params, baseline_value(toy, baseline), toy.true_grad, 20_000,
                               np.random.default_rng(3))
    assert np.linalg.norm(found.mean - expected.mean) < Z * found.bias_se
    assert abs(found.bias - expected.bias) < Z * found.bias_se
    assert abs(found.var - expected.var) < Z * found.var_se


def _prefix_toy(T, V, mismatch, seed):
    """The first T positions of the 256-position toy, built here from make_toy and Toy."""
    long = make_toy(256, V, mismatch, seed, max_sequences=None)
    return Toy(long.theta[:T], long.b[:T], long.mismatch, long.seed)


def test_length_toys_share_one_long_toy():
    toy6, toy64 = length_toy(6, 4, 0.3, 0), length_toy(64, 4, 0.3, 0)
    np.testing.assert_array_equal(toy64.theta[:6], toy6.theta)
    np.testing.assert_array_equal(toy64.b[:6], toy6.b)
    np.testing.assert_array_equal(toy6.theta, make_toy(6, 4, 0.3, 0).theta)   # θ comes first in the stream
    assert not np.allclose(toy6.b, make_toy(6, 4, 0.3, 0).b)                   # b does not
    assert (toy64.T, toy64.mismatch, toy64.seed) == (64, 0.3, 0)


@pytest.mark.parametrize("T", [1, 6, 8])
def test_length_points_by_enumeration_equal_exact_moments_on_the_prefix_toy(T):
    settings = Settings(V=4, estimators=("naive", "tok_tis", "seq_is", "seq_tis", "trm"), baseline="logged")
    population, estimators = length_point(settings, T)
    toy = _prefix_toy(T, 4, settings.mismatch, settings.seed)
    on_policy = exact_moments(toy, "on_policy", {}, "logged")
    assert {row["method"] for row in population + estimators} == {EXACT}
    assert [row["estimator"] for row in estimators] == list(settings.estimators)
    for row in estimators:
        expected = exact_moments(toy, row["estimator"], settings.params(row["estimator"]), "logged")
        assert row["rel_bias"] == pytest.approx(expected.rel_bias, rel=1e-12, abs=1e-15)
        assert row["std_ratio"] == pytest.approx(np.sqrt(expected.var / on_policy.var), rel=1e-12)
        assert row["rel_bias_se"] == row["std_ratio_se"] == 0.0
    values = {row["quantity"]: row["value"] for row in population}
    assert values["χ²_seq"] == pytest.approx(diagnostics(toy).chi2_seq, rel=1e-12)
    assert values["ESS fraction"] == pytest.approx(1 / (1 + values["χ²_seq"]), rel=1e-12)
    assert values["P(W > C)"] == pytest.approx(toy.p_sampler @ (toy.log_W > np.log(2)), abs=1e-15)


@pytest.mark.parametrize("baseline", BASELINES)
def test_std_ratio_against_dense_sums(baseline):
    """seq_is: ratio² = (E_μ[W²(r − b)²‖s‖²] − ‖∇J‖²)/(E_π[(r − b)²‖s‖²] − ‖∇J‖²), both unbiased; the others
    against the dense oracle's variances."""
    settings = Settings(V=3, mismatch=1.0, seed=4, estimators=("naive", "tok_is", "prefix_is", "seq_is", "geo_rs"),
                        baseline=baseline)
    T = 7
    rows = {row["estimator"]: row for row in length_point(settings, T)[1]}
    dense = DenseToy(_prefix_toy(T, 3, 1.0, 4))
    advantage2_score2 = (dense.R - dense.baseline(baseline)) ** 2 * (dense.score**2).sum(axis=(1, 2))
    grad2 = np.sum(dense.true_grad**2)
    on_policy_var = dense.p_train @ advantage2_score2 - grad2
    seq_is_var = dense.p_sampler @ (dense.W**2 * advantage2_score2) - grad2
    assert rows["seq_is"]["std_ratio"] ** 2 == pytest.approx(seq_is_var / on_policy_var, rel=1e-9)
    for estimator, row in rows.items():
        var = dense.moments(estimator, settings.params(estimator), baseline)[2]
        assert row["std_ratio"] ** 2 == pytest.approx(var / on_policy_var, rel=1e-9)


def test_length_points_beyond_enumeration_use_recursion_and_monte_carlo():
    settings = Settings(V=4, estimators=("on_policy", "naive", "seq_is", "seq_tis", "trm"), baseline="logged")
    assert lengths_for(4) == LENGTHS and lengths_for(3) == tuple(sorted(LENGTHS + (10,)))   # 3**10 ≤ 2**16 < 3**11
    assert max(T for T in lengths_for(4) if enumerable(T, 4)) == 8
    population, estimators = length_point(settings, 64)
    methods = {row["estimator"]: row["method"] for row in estimators}
    assert methods == {"on_policy": RECURSION, "naive": RECURSION, "seq_is": RECURSION, "seq_tis": MONTE_CARLO,
                       "trm": RECURSION}
    assert {row["quantity"]: row["method"] for row in population}["P(W > C)"] == MONTE_CARLO
    toy = _prefix_toy(64, 4, settings.mismatch, settings.seed)
    on_policy = exact_by_recursion(toy, "on_policy", {}, "logged")
    for row in estimators:
        if row["method"] == RECURSION:
            expected = exact_by_recursion(toy, row["estimator"], settings.params(row["estimator"]), "logged")
            assert row["std_ratio"] == pytest.approx(np.sqrt(expected.var / on_policy.var), rel=1e-12)
    assert {row["estimator"]: row["std_ratio"] for row in estimators}["on_policy"] == 1.0


def test_monte_carlo_std_ratio_agrees_with_enumeration():
    """The beyond-enumeration path run on an enumerable toy: its Monte Carlo ratios and biases sit within Z
    standard errors of the exact ones, its recursion rows on them."""
    toy = make_toy(6, 4, 1.0, 0)
    selection = {"seq_is": {}, "seq_tis": {"C": 1.5}, "geo_rs": {"lo": 0.8}, "k3_rs": {"delta": 0.3}}
    rows = _estimators_beyond_enumeration(toy, selection, "logged", 20_000, np.random.default_rng(1))
    on_policy_var = exact_moments(toy, "on_policy", {}, "logged").var
    for row in rows:
        expected = exact_moments(toy, row["estimator"], selection[row["estimator"]], "logged")
        ratio = np.sqrt(expected.var / on_policy_var)
        if row["method"] == RECURSION:
            assert row["std_ratio"] == pytest.approx(ratio, rel=1e-10)
        else:
            assert 0 < row["std_ratio_se"] < 0.1 * ratio
            assert abs(row["std_ratio"] - ratio) < Z * row["std_ratio_se"]
            assert abs(row["rel_bias"] - expected.rel_bias) < Z * row["rel_bias_se"]
    assert [row["method"] for row in rows] == [RECURSION, MONTE_CARLO, MONTE_CARLO, MONTE_CARLO]


def test_population_sampling_agrees_with_enumeration():
    settings = Settings(mismatch=1.0)
    toy = make_toy(6, 4, 1.0, 0)
    band = settings.params("geo_rs")
    exact = {row["quantity"]: row["value"] for row in _population_by_enumeration(toy, 2.0, band)}
    for row in _population_by_sampling(toy, 2.0, band, 50_000, np.random.default_rng(0)):
        assert abs(row["value"] - exact[row["quantity"]]) <= Z * row["se"] + 1e-12, row


@pytest.mark.parametrize("call, message", [
    (lambda: length_point(Settings(), 0), "between 1 and 256"),
    (lambda: length_point(Settings(), 257), "between 1 and 256"),
    (lambda: length_toy(0, 4, 0.3, 0), "between 1 and 256"),
    (lambda: exact_by_recursion(make_toy(), "seq_tis"), "does not factorise"),
    (lambda: exact_by_recursion(make_toy(), "tok_tis", {"C": 0}), "outside"),
])
def test_bad_input_gets_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_one_stratified_draw_serves_every_estimator():
    """Each estimator's moments from the shared draw equal its own run on the same random stream."""
    toy = make_toy(6, 4, 1.0, 0)
    selection = {"seq_tis": {"C": 1.5}, "geo_rs": {}, "k3_rs": {"delta": 0.3}}
    together = stratified_moments_many(toy, selection, 0.2, toy.true_grad, 5_000, np.random.default_rng(7))
    for estimator, params in selection.items():
        alone = stratified_moments(toy, estimator, params, 0.2, toy.true_grad, 5_000, np.random.default_rng(7))
        np.testing.assert_allclose(together[estimator].mean, alone.mean, rtol=1e-12, atol=1e-15)
        assert (together[estimator].var, together[estimator].var_se) == pytest.approx((alone.var, alone.var_se), rel=1e-12)


def test_monte_carlo_points_draw_a_fixed_token_budget():
    assert samples_at(12) == SAMPLES and samples_at(256) * 256 == TOKEN_BUDGET
    assert all(samples_at(T) * T <= TOKEN_BUDGET or samples_at(T) == SAMPLES for T in range(1, 257))
    settings = Settings(V=4, estimators=("seq_tis",), baseline="logged")
    population, estimators = length_point(settings, 256)
    toy = _prefix_toy(256, 4, settings.mismatch, settings.seed)
    rng = np.random.default_rng([settings.seed, 256])        # the population's draws come first from the stream
    sampled = _population_by_sampling(toy, 2.0, settings.params("geo_rs"), samples_at(256), rng)
    assert [row["value"] for row in sampled] == [row["value"] for row in population]
    expected = stratified_moments(toy, "seq_tis", settings.params("seq_tis"), baseline_value(toy, "logged"),
                                  toy.true_grad, samples_at(256), rng)
    assert estimators[0]["rel_bias"] == pytest.approx(expected.rel_bias, rel=1e-12)


@pytest.mark.parametrize("baseline", BASELINES)
def test_one_stacked_recursion_equals_enumeration_for_every_factorising_estimator(baseline):
    toy = make_toy(5, 3, 1.2, 9)
    selection = {id: {} for id in RECURSIVE_IDS} | {"tok_tis": {"C": 1.3}, "trm": {"eps": 0.4}}
    together = exact_many_by_recursion(toy, selection, baseline)
    assert list(together) == list(selection)
    for id, params in selection.items():
        expected = exact_moments(toy, id, params, baseline)
        np.testing.assert_allclose(together[id].mean, expected.mean, rtol=1e-9, atol=1e-13)
        assert together[id].var == pytest.approx(expected.var, rel=1e-9, abs=1e-13)
        assert (together[id].tokens_affected, together[id].sequences_affected) == \
            pytest.approx((expected.tokens_affected, expected.sequences_affected), rel=1e-9, abs=1e-12)


def test_length_points_are_each_lengths_point_up_to_where_the_relative_error_is_undefined():
    """top-k 2 with the trainer keeping the sampler's mask: ∇J = 0 from T = 6, so the view stops there."""
    settings = Settings(estimators=("naive", "seq_is"), top_k=2, scored="keep_mask")
    population, estimators, stopped = length_points(settings, sampled=False)
    before = [length_point(settings, T, sampled=False) for T in (1, 2, 3, 4)]
    assert population == [row for rows, _ in before for row in rows]
    assert estimators == [row for _, rows in before for row in rows]
    assert stopped[0] == 6 and "does not depend on θ" in stopped[1]
    with pytest.raises(ValueError, match="does not depend on θ"):
        length_point(settings, 6, sampled=False)
    assert length_points(Settings(estimators=("naive",)), sampled=False)[2] is None
