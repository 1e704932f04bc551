"""J, ∇J and the Hessian from the count of token 0 agree with enumeration, the dense oracle and finite differences."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.engine.counts import curvature, expected_reward, objective_and_gradient, zero_count_distribution
from toylab.engine.split_grid import split_grid
from toylab.engine.toy import Toy

TOYS = [(6, 4, 0.3, 0), (5, 3, 1.0, 7), (1, 3, 0.5, 2), (2, 2, 2.0, 3), (7, 2, 0.6, 5)]


@pytest.fixture(scope="module", params=TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def toy(request):
    return make_toy(*request.param)


def test_count_distribution_equals_enumeration(toy):
    dense = DenseToy(toy)
    zeros = (dense.Y == 0).sum(axis=1)
    for probability, p_table in ((dense.p_train, toy.pi), (dense.p_sampler, toy.mu)):
        by_count = np.bincount(zeros, weights=probability, minlength=toy.T + 1)
        np.testing.assert_allclose(zero_count_distribution(p_table[:, 0]), by_count, rtol=0, atol=1e-14)


def test_objective_gradient_and_logged_reward_equal_the_dense_oracle(toy):
    dense = DenseToy(toy)
    J, grad = objective_and_gradient(toy.pi)
    assert J == pytest.approx(dense.p_train @ dense.R, abs=1e-14)
    assert expected_reward(toy.mu) == pytest.approx(dense.p_sampler @ dense.R, abs=1e-14)
    np.testing.assert_allclose(grad, dense.true_grad, rtol=0, atol=1e-14)


def test_many_tables_at_once_equal_one_at_a_time():
    rng = np.random.default_rng(1)
    toys = [Toy(rng.normal(size=(5, 3)), rng.standard_t(3, size=(5, 3)), 0.8, 0) for _ in range(4)]
    J, grad = objective_and_gradient(np.stack([toy.pi for toy in toys]).reshape(2, 2, 5, 3))
    for index, toy in enumerate(toys):
        assert J.ravel()[index] == pytest.approx(toy.J, abs=1e-14)
        np.testing.assert_allclose(grad.reshape(4, 5, 3)[index], toy.true_grad, atol=1e-14)


def exact_J(toy, theta):
    return Toy(theta, toy.b, toy.mismatch, toy.seed).J


def test_hessian_equals_finite_differences_of_exact_J(toy):
    """Central second differences of J by enumeration, step h: error O(h²)."""
    H = curvature(toy.pi).matrix()
    T, V = toy.T, toy.V
    h = 1e-4
    directions = np.eye(T * V).reshape(T * V, T, V) * h
    finite = np.empty((T * V, T * V))
    for i, a in enumerate(directions):
        for j, c in enumerate(directions):
            finite[i, j] = (exact_J(toy, toy.theta + a + c) - exact_J(toy, toy.theta + a - c)
                            - exact_J(toy, toy.theta - a + c) + exact_J(toy, toy.theta - a - c)) / (4 * h * h)
    np.testing.assert_allclose(H, finite, rtol=0, atol=1e-6 * max(1.0, np.abs(H).max()))
    np.testing.assert_allclose(H, H.T, atol=1e-15)
    assert np.abs(H).max() > 1e-3                        # a Hessian that is not trivially zero


def test_quadratic_form_equals_the_matrix(toy):
    c = curvature(toy.pi)
    x = np.random.default_rng(0).normal(size=(7, toy.T, toy.V))
    flat = x.reshape(7, -1)
    np.testing.assert_allclose(c.quadratic(x), np.einsum("ni,ij,nj->n", flat, c.matrix(), flat), rtol=1e-12,
                               atol=1e-15)


def test_split_grid_equals_the_dense_grid(toy):
    dense = DenseToy(toy)
    grid = split_grid(toy.T, toy.V)
    np.testing.assert_array_equal(grid.reward, dense.R)
    np.testing.assert_allclose(np.exp(grid.outer_sum(toy.log_mu)), dense.p_sampler, rtol=1e-13)
    np.testing.assert_allclose(grid.outer_product(toy.log_mu), dense.p_sampler, rtol=1e-13)
    np.testing.assert_allclose(grid.outer_max(np.abs(toy.log_rho)), np.abs(np.log(dense.rho)).max(axis=1), rtol=1e-13)
    x = np.random.default_rng(3).normal(size=(2, toy.M))
    onehot = np.eye(toy.V)[dense.Y]                                              # (M, T, V)
    np.testing.assert_allclose(grid.marginals(x), np.einsum("rm,mtv->rtv", x, onehot), atol=1e-12)


def test_score_quadratic_equals_the_quadratic_form_of_the_estimates(toy):
    rng = np.random.default_rng(5)
    c = curvature(toy.pi)
    tokens = rng.integers(0, toy.V, size=(9, toy.T))
    weight = rng.normal(size=(9, toy.T))
    estimates = weight[..., None] * (np.eye(toy.V)[tokens] - toy.pi)
    np.testing.assert_allclose(c.score_quadratic(weight, tokens, toy.pi), c.quadratic(estimates), rtol=1e-12,
                               atol=1e-15)
