"""Population diagnostics against the dense enumeration and the known identities."""

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.analysis.diagnostics import (
    diagnostics,
    probability_beyond,
    sequence_log_ratio,
    weighted_histogram,
    weighted_quantile,
)


@pytest.fixture(scope="module", params=[(6, 4, 0.3, 0), (5, 3, 1.0, 7), (7, 2, 0.6, 4)])
def toy_pair(request):
    toy = make_toy(*request.param)
    return toy, DenseToy(toy)


def test_population_numbers_equal_dense_sums(toy_pair):
    toy, dense = toy_pair
    found = diagnostics(toy)
    mu, pi, W = dense.p_sampler, dense.p_train, dense.W
    assert found.M == len(mu)
    assert found.J == pytest.approx(pi @ dense.R, rel=1e-12)
    assert found.logged_reward == pytest.approx(mu @ dense.R, rel=1e-12)
    assert found.grad_norm == pytest.approx(np.linalg.norm(dense.true_grad), rel=1e-12)
    assert found.kl_mu_pi == pytest.approx(-(mu @ np.log(W)), rel=1e-10)
    assert found.kl_pi_mu == pytest.approx(pi @ np.log(W), rel=1e-10)
    assert found.chi2_seq == pytest.approx(mu @ W**2 - 1, rel=1e-10)       # χ²_seq = ∏(1 + χ²_t) − 1
    assert found.ess == pytest.approx(1 / (mu @ W**2), rel=1e-10)
    tv = 0.5 * np.abs(toy.pi - toy.mu).sum(axis=1)
    assert found.max_tv == pytest.approx(tv.max())
    assert found.chi2_tokens == pytest.approx([(toy.pi[t] ** 2 / toy.mu[t]).sum() - 1 for t in range(toy.T)])


def test_sequence_ratio_facts(toy_pair):
    toy, dense = toy_pair
    log_w, probability = sequence_log_ratio(toy, "W")
    assert probability @ np.exp(log_w) == pytest.approx(1, abs=1e-12)              # E_μ[W] = 1
    assert probability @ log_w == pytest.approx(-diagnostics(toy).kl_mu_pi, rel=1e-10)   # E_μ[log W] = −KL
    assert weighted_quantile(log_w, probability, 0.5) < 0                        # the median W is below 1
    assert probability_beyond(log_w, probability, np.log(2)) == pytest.approx(dense.p_sampler @ (dense.W > 2))
    log_geo, _ = sequence_log_ratio(toy, "geo")
    below = probability_beyond(log_geo, probability, np.log(0.5), side="below")
    assert below == pytest.approx(dense.p_sampler @ (dense.W ** (1 / toy.T) < 0.5))
    edges, mass = weighted_histogram(log_w, probability, bins=30)
    assert mass.sum() == pytest.approx(1) and len(edges) == 31


def test_weighted_quantile_on_a_small_distribution():
    values, probability = np.array([3.0, 1.0, 2.0]), np.array([0.2, 0.5, 0.3])
    assert weighted_quantile(values, probability, 0.5) == 1.0
    assert weighted_quantile(values, probability, 0.51) == 2.0
    assert weighted_quantile(values, probability, 0.9) == 3.0


def test_unknown_sequence_ratio_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        sequence_log_ratio(make_toy(T=2), "rho")
