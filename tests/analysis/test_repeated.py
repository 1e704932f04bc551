"""One position repeated: the sum over count vectors equals the sum over the V**T sequences; uncapped, the mean of
W is π's mass on μ's support to the T-th power at every length; the lengths stop where the count vectors pass the
limit."""

import itertools
import math

import numpy as np
import pytest

from toylab import make_toy
from toylab.analysis.length import LENGTHS
from toylab.analysis.repeated import (
    CAPPED_GEO,
    CAPPED_W,
    COUNT_LIMIT,
    capped_means,
    compositions,
    count_vectors,
    repeated_lengths,
    repeated_position,
)
from toylab.engine.sampler import Sampler


def by_sequences(log_rho, mu, T, cap):
    """E_μ[min(W, cap)] and E_μ[min(ρ_geo, cap)] for T copies of one position, summed over every sequence."""
    capped_W = capped_geo = 0.0
    for sequence in itertools.product(range(len(mu)), repeat=T):
        probability = math.prod(mu[v] for v in sequence)
        log_W = sum(log_rho[v] for v in sequence) if probability else 0.0
        capped_W += probability * min(math.exp(log_W), cap)
        capped_geo += probability * min(math.exp(log_W / T), cap)
    return capped_W, capped_geo


@pytest.mark.parametrize("sampler", [Sampler(), Sampler(top_k=2), Sampler(top_p=0.8, temperature=0.7)],
                         ids=["plain", "top_k=2", "top_p=0.8,temperature=0.7"])
@pytest.mark.parametrize("cap", [0.5, 2.0, math.inf])
def test_the_count_vector_sum_equals_the_sum_over_sequences(sampler, cap):
    toy = make_toy(4, 3, 1.5, 3, sampler)
    found = repeated_position(toy.log_rho[0], toy.mu[0], (1, 2, 3, 5, 6), cap)      # 5: not a length kept
    for T in (1, 2, 3, 5, 6):
        expected = by_sequences(toy.log_rho[0], toy.mu[0], T, cap)
        assert found[T][:2] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert found[T][2] == pytest.approx(T * float(toy.mu[0] @ np.where(toy.mu[0] > 0, toy.log_rho[0], 0.0)),
                                            rel=1e-12)


@pytest.mark.parametrize("sampler", [Sampler(), Sampler(top_k=3)], ids=["plain", "top_k=3"])
def test_uncapped_the_mean_of_W_is_the_reachable_mass_to_the_power_T(sampler):
    toy = make_toy(2, 5, 1.0, 11, sampler)
    reachable = float(toy.pi[0][toy.mu[0] > 0].sum())
    found = repeated_position(toy.log_rho[0], toy.mu[0], repeated_lengths(int((toy.mu[0] > 0).sum())), math.inf)
    for T, (mean_W, _, _) in found.items():
        assert mean_W == pytest.approx(reachable**T, rel=1e-10), T


@pytest.mark.parametrize("tokens", range(1, 9))
def test_the_lengths_stop_where_the_count_vectors_pass_the_limit(tokens):
    lengths = repeated_lengths(tokens)
    assert lengths and lengths == LENGTHS[:len(lengths)]
    assert all(count_vectors(T, tokens) <= COUNT_LIMIT for T in lengths)
    beyond = LENGTHS[len(lengths):]
    assert not beyond or count_vectors(beyond[0], tokens) > COUNT_LIMIT


@pytest.mark.parametrize(("T", "tokens"), [(0, 3), (1, 1), (5, 1), (6, 2), (7, 4), (4, 8)])
def test_the_count_vectors_are_every_way_to_split_T(T, tokens):
    counts = compositions(T, tokens)
    expected = {split for split in itertools.product(range(T + 1), repeat=tokens) if sum(split) == T}
    assert {tuple(row) for row in counts} == expected and len(counts) == count_vectors(T, tokens) == len(expected)


def test_the_rows_hold_both_means_at_every_length_for_the_tokens_drawn():
    toy = make_toy(3, 6, 0.8, 2, Sampler(top_k=4))
    rows = capped_means(toy, 3.0)
    lengths = repeated_lengths(4)
    assert [(row["T"], row["quantity"]) for row in rows] == [(T, q) for T in lengths for q in (CAPPED_W, CAPPED_GEO)]
    found = repeated_position(toy.log_rho[0], toy.mu[0], lengths, 3.0)
    assert [row["value"] for row in rows] == [found[T][index] for T in lengths for index in (0, 1)]
