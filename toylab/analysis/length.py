"""How the problem scales with the number of tokens T, V held fixed: one point per T.

Only T changes: the toy at length T is the first T positions of one MAX_LENGTH-position toy
``make_toy(MAX_LENGTH, V, mismatch, seed, sampler)`` (``length_toy``), so θ and b are drawn once. Its θ equals
``make_toy(T, …)``'s θ (the same normal stream, row-major) but its b does not (b is drawn after θ).
Population numbers: χ²_seq = ∏_t (1 + χ²_t) − 1 and the ESS fraction 1/(1 + χ²_seq) (exact from the (T, V)
tables at any T), P(W > C) and P(ρ_geo outside [lo, hi]). Estimators: relative bias ‖E[ĝ] − ∇J‖/‖∇J‖, and
the std relative to on-policy sqrt(var_e/var_on_policy) at the same T, in which the reward's rarity at
large T (‖∇J‖ → 0) cancels; it holds for any batch size N, both stds scaling as 1/sqrt(N).

A sampler that truncates adds a row, the π-mass out of reach 1 − ∏_t π_t(S_t) (exact at any T): it grows with T,
and so does ∇J's part out of reach, seq_is's whole bias.

While V**T ≤ ENUMERATION_LIMIT (and W stays within float64 there: ``toy.range_problem``) everything is exact by
enumeration (one pass for every estimator). Beyond it the factorising estimators are exact by ``recursion``, the others are stratified Monte Carlo
(``stratified``, one draw shared by all of them) and the two probabilities plain Monte Carlo, each with its
standard error. A Monte Carlo point draws ``samples_at(T)`` sequences: SAMPLES, fewer once they would hold
more than TOKEN_BUDGET tokens, so a point costs about the same at every T (its error bars widen instead).
"""

import numpy as np

from toylab.analysis.diagnostics import probability_beyond, sequence_chi2, sequence_log_ratio
from toylab.analysis.montecarlo import draw_tokens
from toylab.analysis.stratified import stratified_moments_many
from toylab.engine.moments import exact_moments_many
from toylab.engine.recursion import (
    RECURSIVE_IDS,
    baseline_by_recursion,
    exact_many_by_recursion,
    objective_by_recursion,
)
from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.engine.toy import Toy, flat_problem, make_toy, range_problem

LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
MAX_LENGTH = 256
SAMPLES = 10_000
TOKEN_BUDGET = 2**17          # tokens a Monte Carlo point draws at most (beyond SAMPLES·T ≤ this: fewer sequences)
ENUMERATION_LIMIT = 2**16     # sequences the view enumerates; beyond, recursion and Monte Carlo
EXACT, RECURSION, MONTE_CARLO = "exact (enumeration)", "exact (recursion)", "Monte Carlo"
OUT_OF_REACH = "π-mass out of reach"


def enumerable(T, V):
    """True if the view enumerates the V**T sequences (V**T ≤ ENUMERATION_LIMIT)."""
    return V**T <= ENUMERATION_LIMIT


def samples_at(T):
    """Sequences a Monte Carlo point at length T draws: SAMPLES, or TOKEN_BUDGET // T once that is fewer."""
    return min(SAMPLES, TOKEN_BUDGET // T)


def lengths_for(V):
    """The T values of the length view: LENGTHS plus the largest T it enumerates, sorted."""
    largest = max(T for T in range(1, MAX_LENGTH + 1) if enumerable(T, V))
    return tuple(sorted(set(LENGTHS) | {largest}))


def length_toy(T, V, mismatch, seed, sampler=DEFAULT_SAMPLER):
    """The first T positions of ``make_toy(MAX_LENGTH, V, mismatch, seed, sampler)``: θ[:T], b[:T]."""
    if not 1 <= T <= MAX_LENGTH:
        raise ValueError(f"T must be between 1 and {MAX_LENGTH}, got {T}")
    long = make_toy(MAX_LENGTH, V, mismatch, seed, sampler, max_sequences=None)
    return Toy(long.theta[:T], long.b[:T], long.mismatch, long.seed, sampler)


def length_point(settings, T, samples=None, sampled=True):
    """(population rows, estimator rows) at T for the Settings' V, mismatch, seed, selection and baseline.

    Population rows: (T, quantity, value, se, method). Estimator rows: (T, estimator, rel_bias, rel_bias_se,
    std_ratio, std_ratio_se, method) with std_ratio = sqrt(var/var_on_policy); se = 0 when exact.
    on_policy is exact at every T, so a Monte Carlo ratio's se is se(sqrt(var))/sqrt(var_on_policy).
    Monte Carlo draws come from ``default_rng([seed, T])``, ``samples`` sequences (default ``samples_at(T)``);
    ``sampled`` False leaves them out: beyond enumeration only the exact rows. ValueError where a trainer keeping the
    sampler's mask has a flat J (``toy.flat_problem``): no relative error.
    """
    toy = length_toy(T, settings.V, settings.mismatch, settings.seed, settings.sampler)
    flat = flat_problem(toy)
    if flat:
        raise ValueError(flat)
    selection = settings.selection(exact_only=True)
    C = settings.params("seq_tis")["C"]
    band = settings.params("geo_rs")
    if enumerable(T, settings.V) and not range_problem(toy.largest_log_W):
        return _population_by_enumeration(toy, C, band), _estimators_by_enumeration(toy, selection, settings.baseline)
    if not sampled:
        return (_population_exact_part(toy),
                _estimators_beyond_enumeration(toy, selection, settings.baseline, 0, None))
    rng = np.random.default_rng([settings.seed, T])
    samples = samples_at(T) if samples is None else samples
    return (_population_by_sampling(toy, C, band, samples, rng),
            _estimators_beyond_enumeration(toy, selection, settings.baseline, samples, rng))


def length_points(settings, sampled=True):
    """(population rows, estimator rows, (T, why) or None) over ``lengths_for(V)``: each T's ``length_point``, up to
    the first T at which it raises ValueError (that T and its message)."""
    population, estimators = [], []
    for T in lengths_for(settings.V):
        try:
            point_population, point_estimators = length_point(settings, T, sampled=sampled)
        except ValueError as error:
            return population, estimators, (T, str(error))
        population += point_population
        estimators += point_estimators
    return population, estimators, None


def largest_work(V, sampled):
    """The most a point of the view enumerates or draws: V**T sequences at the largest enumerable T, or samples_at(T)
    sequences of T tokens beyond it if ``sampled``."""
    return max(V**T if enumerable(T, V) else samples_at(T) * T if sampled else T * T for T in lengths_for(V))


def _population_row(T, quantity, value, se, method):
    return {"T": T, "quantity": quantity, "value": value, "se": se, "method": method}


def _population_exact_part(toy):
    chi2 = sequence_chi2(toy)
    out_of_reach = [_population_row(toy.T, OUT_OF_REACH, toy.unreachable_mass, 0.0, EXACT)] if toy.truncates else []
    return [_population_row(toy.T, "χ²_seq", chi2, 0.0, EXACT),
            _population_row(toy.T, "ESS fraction", 1 / (1 + chi2), 0.0, EXACT)] + out_of_reach


def _population_by_enumeration(toy, C, band):
    log_W, probability = sequence_log_ratio(toy, "W")
    log_geo = log_W / toy.T
    outside = probability_beyond(log_geo, probability, np.log(band["lo"]), "below") \
        + probability_beyond(log_geo, probability, np.log(band["hi"]), "above")
    return _population_exact_part(toy) + [
        _population_row(toy.T, "P(W > C)", probability_beyond(log_W, probability, np.log(C)), 0.0, EXACT),
        _population_row(toy.T, "P(ρ_geo outside band)", outside, 0.0, EXACT)]


def _population_by_sampling(toy, C, band, samples, rng):
    """P(W > C) and P(ρ_geo ∉ [lo, hi]) from ``samples`` sequences drawn from μ; se = sqrt(p(1 − p)/n)."""
    tokens = draw_tokens(rng, toy.mu, (samples,))
    log_W = toy.log_rho[np.arange(toy.T), tokens].sum(axis=1)
    log_geo = log_W / toy.T
    rows = _population_exact_part(toy)
    for quantity, hit in (("P(W > C)", log_W > np.log(C)),
                          ("P(ρ_geo outside band)", (log_geo < np.log(band["lo"])) | (log_geo > np.log(band["hi"])))):
        p = float(hit.mean())
        rows.append(_population_row(toy.T, quantity, p, float(np.sqrt(p * (1 - p) / samples)), MONTE_CARLO))
    return rows


def _estimator_row(T, estimator_id, moments, on_policy_var, method, bias_se=0.0, var_se=0.0):
    """rel_bias = bias/‖∇J‖ and std_ratio = sqrt(var/var_on), with se(sqrt(var)) = se(var)/(2·sqrt(var))."""
    spread, on_policy_spread = np.sqrt(moments.var), np.sqrt(on_policy_var)
    return {"T": T, "estimator": estimator_id, "rel_bias": moments.rel_bias,
            "rel_bias_se": bias_se / moments.grad_norm, "std_ratio": spread / on_policy_spread,
            "std_ratio_se": var_se / (2 * max(spread, 1e-300)) / on_policy_spread, "method": method}


def _estimators_by_enumeration(toy, selection, baseline):
    moments = exact_moments_many(toy, {"on_policy": {}} | selection, baseline)
    return [_estimator_row(toy.T, id, moments[id], moments["on_policy"].var, EXACT) for id in selection]


def _estimators_beyond_enumeration(toy, selection, baseline, samples, rng):
    """Rows of the factorising estimators (exact by recursion) and, if ``samples``, of the others (stratified)."""
    if not samples:
        selection = {id: params for id, params in selection.items() if id in RECURSIVE_IDS}
    objective = objective_by_recursion(toy)
    b = baseline_by_recursion(toy, baseline, objective)
    factorising = exact_many_by_recursion(
        toy, {"on_policy": {}} | {id: params for id, params in selection.items() if id in RECURSIVE_IDS}, baseline,
        objective)
    on_policy_var = factorising["on_policy"].var
    others = {id: params for id, params in selection.items() if id not in RECURSIVE_IDS}
    sampled = stratified_moments_many(toy, others, b, objective[2], samples, rng) if others else {}
    rows = []
    for estimator_id in selection:
        if estimator_id in RECURSIVE_IDS:
            rows.append(_estimator_row(toy.T, estimator_id, factorising[estimator_id], on_policy_var, RECURSION))
        else:
            moments = sampled[estimator_id]
            rows.append(_estimator_row(toy.T, estimator_id, moments, on_policy_var, MONTE_CARLO,
                                       moments.bias_se, moments.var_se))
    return rows
