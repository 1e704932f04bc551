"""One position of the toy repeated T times: how the sequence ratio W = ∏_t ρ_t and its geometric mean
ρ_geo = W^(1/T) behave as T grows, exact at every T the count of token vectors allows.

With every position alike, W depends on a sequence only through the counts n = (n_1, …, n_V) of each token, and
n ~ multinomial(T, μ): log W = Σ_v n_v·log ρ_v, so an expectation over the V**T sequences is a sum over the
C(T + V − 1, V − 1) count vectors. E_μ[W] is π's mass on μ's support to the T-th power (1 for a sampler that keeps
every token), but W's typical value is
e^{T·E_μ[log ρ]}, which falls with T; ρ_geo's does not. Capping W at C (seq_tis, TRL's sequence_truncate) therefore
cuts ever more of its mean as T grows.
"""

import functools
import math

import numpy as np

from toylab.analysis.length import LENGTHS

COUNT_LIMIT = 2**16            # count vectors a length may sum over (V = 4: T ≤ 64; V = 8: T ≤ 12), as many as the
                               # length view enumerates: a slider step sums over them all again
CAPPED_W, CAPPED_GEO = "E_μ[min(W, C)]", "E_μ[min(ρ_geo, C)]"


def count_vectors(T, tokens):
    """C(T + tokens − 1, tokens − 1): how many count vectors T draws of ``tokens`` tokens have."""
    return math.comb(T + tokens - 1, tokens - 1)


def repeated_lengths(tokens):
    """The T of the length view (``length.LENGTHS``) whose count vectors number at most COUNT_LIMIT."""
    return tuple(T for T in LENGTHS if count_vectors(T, tokens) <= COUNT_LIMIT)


def repeated_position(log_rho, mu, lengths, cap):
    """{T: (E_μ[min(W, cap)], E_μ[min(ρ_geo, cap)], E_μ[log W])} for T copies of one position (its log ratio and
    μ over the V tokens, (V,)), exact: the sum over count vectors n of multinomial(n; T, μ)·f(Σ_v n_v·log ρ_v), the
    tokens μ never draws left out. E_μ[log W] = T·Σ_v μ_v·log ρ_v."""
    drawn = np.asarray(mu) > 0
    log_rho, log_mu = np.asarray(log_rho)[drawn], np.log(np.asarray(mu)[drawn])
    tokens = int(drawn.sum())
    kept = count_tables(tokens)
    out = {}
    for T in lengths:
        counts, log_coefficient = kept[T] if T in kept else count_table(T, tokens)
        pmf = np.exp(log_coefficient + np.einsum("kv,v->k", counts, log_mu))      # einsum: no (K, V) float copy,
        log_W = np.einsum("kv,v->k", counts, log_rho)                             # no BLAS threads (3× faster)
        with np.errstate(over="ignore"):
            out[T] = (float(pmf @ np.minimum(np.exp(log_W), cap)), float(pmf @ np.minimum(np.exp(log_W / T), cap)),
                      float(T * (np.asarray(mu)[drawn] @ log_rho)))
    return out


def count_table(T, tokens):
    """(the count vectors of T draws of ``tokens`` tokens, (K, tokens) uint16; the log of each one's multinomial
    coefficient log T! − Σ_v log n_v!, (K,)): what the expectations over them share whatever μ and ρ are."""
    counts = compositions(T, tokens)
    log_factorial = np.array([math.lgamma(n + 1) for n in range(T + 1)])
    return counts.astype(np.uint16), log_factorial[T] - log_factorial[counts].sum(axis=1)


@functools.lru_cache(maxsize=1)
def count_tables(tokens):
    """{T: count_table(T, tokens)} at every T of ``repeated_lengths(tokens)``, kept for the last ``tokens`` asked (a
    slider step changes μ and ρ, not these): at most 1.5 MB (8 tokens; 4 tokens: 1.1 MB)."""
    return {T: count_table(T, tokens) for T in repeated_lengths(tokens)}


def compositions(T, parts):
    """Every (n_1, …, n_parts) of non-negative integers with sum T, one per row, in lexicographic order: built a part
    at a time, each row of the first k parts (sum s) followed by every n_{k+1} in 0..T − s, the last part what is
    left."""
    rows, sums = np.zeros((1, 0), dtype=np.int64), np.zeros(1, dtype=np.int64)
    for _ in range(parts - 1):
        room = T - sums + 1
        parent = np.repeat(np.arange(len(rows)), room)
        following = np.arange(room.sum()) - np.repeat(np.cumsum(room) - room, room)
        rows, sums = np.hstack([rows[parent], following[:, None]]), sums[parent] + following
    return np.hstack([rows, (T - sums)[:, None]])


def capped_means(toy, cap):
    """Rows (T, quantity, value) of E_μ[min(W, cap)] and E_μ[min(ρ_geo, cap)] with the toy's first position repeated
    T times, at every T of ``repeated_lengths`` for the tokens its sampler draws there."""
    lengths = repeated_lengths(int((toy.mu[0] > 0).sum()))
    found = repeated_position(toy.log_rho[0], toy.mu[0], lengths, cap)
    return [{"T": T, "quantity": quantity, "value": found[T][index]}
            for T in lengths for index, quantity in enumerate((CAPPED_W, CAPPED_GEO))]
