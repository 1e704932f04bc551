"""How the problem scales with the number of tokens T, V held fixed: one point per T.

Only T changes: the toy at length T is the first T positions of one MAX_LENGTH-position toy
``make_toy(MAX_LENGTH, V, mismatch, seed)`` (``length_toy``), so θ and b are drawn once. Its θ equals
``make_toy(T, …)``'s θ (the same normal stream, row-major) but its b does not (b is drawn after θ).
Population numbers: χ²_seq = ∏_t (1 + χ²_t) − 1 and the ESS fraction 1/(1 + χ²_seq) (exact from the (T, V)
tables at any T), P(W > C) and P(ρ_geo outside [lo, hi]). Estimators: relative bias ‖E[ĝ] − ∇J‖/‖∇J‖, and
the std relative to on-policy sqrt(var_e/var_on_policy) at the same T, in which the reward's rarity at
large T (‖∇J‖ → 0) cancels; it holds for any batch size N, both stds scaling as 1/sqrt(N).

Up to the enumeration limit (V**T ≤ EXACT_SIZE_LIMIT) everything is exact by enumeration. Beyond it the
factorising estimators are exact by ``recursion``, the others are stratified Monte Carlo
(``stratified``) and the two probabilities plain Monte Carlo, each with its standard error.
"""

import numpy as np

from toylab.diagnostics import probability_beyond, sequence_chi2, sequence_log_ratio
from toylab.moments import exact_moments
from toylab.montecarlo import draw_tokens
from toylab.recursion import RECURSIVE_IDS, baseline_by_recursion, exact_by_recursion, objective_by_recursion
from toylab.stratified import stratified_moments
from toylab.toy import EXACT_SIZE_LIMIT, Toy, make_toy

LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
MAX_LENGTH = 256
SAMPLES = 20_000
EXACT, RECURSION, MONTE_CARLO = "exact (enumeration)", "exact (recursion)", "Monte Carlo"


def enumerable(T, V):
    """True if the V**T sequences can be enumerated."""
    return V**T <= EXACT_SIZE_LIMIT


def lengths_for(V):
    """The T values of the length view: LENGTHS plus the largest enumerable T, sorted."""
    largest = max(T for T in range(1, MAX_LENGTH + 1) if enumerable(T, V))
    return tuple(sorted(set(LENGTHS) | {largest}))


def length_toy(T, V, mismatch, seed):
    """The first T positions of ``make_toy(MAX_LENGTH, V, mismatch, seed)``: θ[:T], b[:T]."""
    if not 1 <= T <= MAX_LENGTH:
        raise ValueError(f"T must be between 1 and {MAX_LENGTH}, got {T}")
    long = make_toy(MAX_LENGTH, V, mismatch, seed, max_sequences=None)
    return Toy(long.theta[:T], long.b[:T], long.mismatch, long.seed)


def length_point(settings, T, samples=SAMPLES):
    """(population rows, estimator rows) at T for the Settings' V, mismatch, seed, selection and baseline.

    Population rows: (T, quantity, value, se, method). Estimator rows: (T, estimator, rel_bias, rel_bias_se,
    std_ratio, std_ratio_se, method) with std_ratio = sqrt(var/var_on_policy); se = 0 when exact.
    on_policy is exact at every T, so a Monte Carlo ratio's se is se(sqrt(var))/sqrt(var_on_policy).
    Monte Carlo draws come from ``default_rng([seed, T])``.
    """
    toy = length_toy(T, settings.V, settings.mismatch, settings.seed)
    selection = settings.selection(exact_only=True)
    C = settings.params("seq_tis")["C"]
    band = settings.params("geo_rs")
    if enumerable(T, settings.V):
        return _population_by_enumeration(toy, C, band), _estimators_by_enumeration(toy, selection, settings.baseline)
    rng = np.random.default_rng([settings.seed, T])
    return (_population_by_sampling(toy, C, band, samples, rng),
            _estimators_beyond_enumeration(toy, selection, settings.baseline, samples, rng))


def _population_row(T, quantity, value, se, method):
    return {"T": T, "quantity": quantity, "value": value, "se": se, "method": method}


def _population_exact_part(toy):
    chi2 = sequence_chi2(toy)
    return [_population_row(toy.T, "χ²_seq", chi2, 0.0, EXACT),
            _population_row(toy.T, "ESS fraction", 1 / (1 + chi2), 0.0, EXACT)]


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
    on_policy_var = exact_moments(toy, "on_policy", {}, baseline).var
    return [_estimator_row(toy.T, id, exact_moments(toy, id, params, baseline), on_policy_var, EXACT)
            for id, params in selection.items()]


def _estimators_beyond_enumeration(toy, selection, baseline, samples, rng):
    objective = objective_by_recursion(toy)
    b = baseline_by_recursion(toy, baseline, objective)
    on_policy_var = exact_by_recursion(toy, "on_policy", {}, baseline, objective).var
    rows = []
    for estimator_id, params in selection.items():
        if estimator_id in RECURSIVE_IDS:
            moments = exact_by_recursion(toy, estimator_id, params, baseline, objective)
            rows.append(_estimator_row(toy.T, estimator_id, moments, on_policy_var, RECURSION))
        else:
            moments = stratified_moments(toy, estimator_id, params, b, objective[2], samples, rng)
            rows.append(_estimator_row(toy.T, estimator_id, moments, on_policy_var, MONTE_CARLO,
                                       moments.bias_se, moments.var_se))
    return rows
