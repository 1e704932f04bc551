"""Every exact result the default pipeline (logged = sampled, scored = plain softmax) gives, as the numbers of each item.

``results()`` computes, on toys with and without sampler truncation: every exact estimator's moments (mean, bias,
variance, ‖∇J‖, cosine, affected shares, out of reach and within reach) at the three baselines, the count recursion's, the
diagnostics (J, E_μ[r], ‖∇J‖, per-token KL both ways and χ², TV, the π-mass out of reach), the exact log W
distribution, Monte Carlo errors, stratified Monte Carlo moments, training in both modes, the SGA pieces, a sampler
sweep and two length points. Each item is the list of its numbers as float64 arrays (None as NaN).

tests/engine/default_pipeline_numbers.json.gz holds the numbers computed at main 7b17a9e, before the three
distributions existed, by running this file there (``python tests/engine/default_pipeline_results.py OUT`` from the
root of an export of 7b17a9e, with this file copied in); tests/engine/test_default_pipeline.py compares them with the
numbers the code gives now, to a stated tolerance.
"""

import gzip
import json
import sys

import numpy as np

from toylab.analysis.diagnostics import diagnostics, sequence_log_ratio
from toylab.analysis.length import length_point
from toylab.analysis.montecarlo import monte_carlo
from toylab.analysis.stratified import stratified_moments_many
from toylab.analysis.sweeps import sampler_sweep
from toylab.catalogue.estimators import EXACT_IDS
from toylab.engine.moments import baseline_value, exact_moments_many
from toylab.engine.recursion import RECURSIVE_IDS, exact_many_by_recursion
from toylab.engine.toy import make_toy
from toylab.state.settings import Settings
from toylab.training.loop import TrainingConfig, train
from toylab.training.sga import monte_carlo_improvement, second_order

TOYS = {
    "plain": dict(T=4, V=3, mismatch=0.5, seed=0),
    "default": dict(T=6, V=4, mismatch=0.3, seed=0),
    "tempered": dict(T=4, V=4, mismatch=0.8, seed=3, temperature=1.3, precision="bf16"),
    "top_p": dict(T=5, V=4, mismatch=1.0, seed=7, top_p=0.9),
    "top_k": dict(T=4, V=4, mismatch=0.3, seed=3, temperature=0.7, top_k=3),
}
BASELINES = ("none", "logged", "true")
SOME = {"on_policy": {}, "naive": {}, "tok_tis": {}, "seq_is": {}, "seq_tis": {}, "geo_rs": {}}


def numbers(*values):
    """Every value as a flat float64 array, None as NaN."""
    return [np.asarray(np.nan if value is None else value, dtype=np.float64).ravel() for value in values]


def moments_numbers(moments):
    return numbers(moments.mean, moments.bias, moments.var, moments.grad_norm, moments.cosine, moments.tokens_affected,
                  moments.sequences_affected, moments.out_of_reach, moments.within_reach)


def toy_results(name, arguments):
    toy = make_toy(**arguments)
    out = {}
    for baseline in BASELINES:
        for id, moments in exact_moments_many(toy, {id: {} for id in EXACT_IDS}, baseline).items():
            out[f"{name}/exact/{baseline}/{id}"] = moments_numbers(moments)
        for id, moments in exact_many_by_recursion(toy, {id: {} for id in RECURSIVE_IDS}, baseline).items():
            out[f"{name}/recursion/{baseline}/{id}"] = moments_numbers(moments)
    d = diagnostics(toy)
    out[f"{name}/diagnostics"] = numbers(d.J, d.logged_reward, d.grad_norm, d.kl_mu_pi_tokens, d.kl_pi_mu_tokens,
                                        d.chi2_tokens, d.max_tv, d.unreachable_mass, d.chi2_seq, d.ess)
    out[f"{name}/log_W"] = numbers(*sequence_log_ratio(toy, "W"))
    errors = monte_carlo(toy, SOME, "logged", batch_sizes=(1, 4, 16), replicates=20, seed=1)
    out[f"{name}/monte_carlo"] = numbers(*(errors[id] for id in SOME))
    stratified = stratified_moments_many(toy, {"seq_tis": {}, "geo_rs": {}}, baseline_value(toy, "logged"),
                                         toy.true_grad, 200, np.random.default_rng(2))
    out[f"{name}/stratified"] = numbers(*(x for m in stratified.values() for x in (m.mean, m.bias_se, m.var, m.var_se)))
    return out


def training_results():
    toy = make_toy(T=4, V=3, mismatch=0.6, seed=1, top_p=0.95, temperature=0.9)
    plain = make_toy(T=4, V=3, mismatch=0.6, seed=1)
    out = {}
    for name, subject in (("plain", plain), ("truncated", toy)):
        for mode, config in (("expected", TrainingConfig(steps=4, lr=2.0)),
                             ("sampled", TrainingConfig(steps=3, lr=1.0, mode="sampled", N=8, runs=2)),
                             ("adam", TrainingConfig(steps=3, lr=0.1, optimizer="adam", noise="redrawn"))):
            runs = train(subject, SOME, "logged", config)
            for id, run in runs.items():
                out[f"training/{name}/{mode}/{id}"] = numbers(
                    run.theta, run.J, run.logged_reward, run.grad_norm, run.kl_mu_pi, run.chi2_seq, run.cosine,
                    run.step_cosine, run.rel_bias)
        for id in ("naive", "seq_tis"):
            piece = second_order(subject, id, {}, "logged", 16)
            out[f"sga/{name}/{id}"] = numbers(piece.slope, piece.mean_curvature, piece.noise_curvature,
                                             piece.slope_variance)
        improvement = monte_carlo_improvement(subject, {"naive": {}, "seq_is": {}}, "logged", 8, (0.5, 2.0), 30, 3)
        out[f"sga/{name}/monte_carlo"] = numbers(*(x for m in improvement.values() for x in (m.mean, m.se)))
    return out


def sweep_results():
    out = {}
    for parameter in ("mismatch", "top_p", "temperature"):
        estimators, divergences, left_out = sampler_sweep(3, 3, 2, 0.7, make_toy(3, 3, 0.7, 2).sampler, parameter,
                                                          {"naive": {}, "seq_is": {}, "tok_tis": {"C": 2.0}}, "none",
                                                          64)
        out[f"sweep/{parameter}"] = numbers([list(row.values())[2:] for row in estimators],
                                           [list(row.values())[1:] for row in divergences], left_out)
    settings = Settings(T=4, V=3, mismatch=0.5, seed=1, top_p=0.9, estimators=("naive", "seq_is", "seq_tis"))
    for T in (3, 12):
        population, estimators = length_point(settings, T, samples=300)
        out[f"length/{T}"] = numbers([row["value"] for row in population], [row["se"] for row in population],
                                    [[row[key] for key in ("rel_bias", "rel_bias_se", "std_ratio", "std_ratio_se")]
                                     for row in estimators])
    return out


def results():
    out = {}
    for name, arguments in TOYS.items():
        out |= toy_results(name, arguments)
    return out | training_results() | sweep_results()


def write(path):
    """The results as gzipped JSON: {item: [[number, …] per value]}, NaN as null, floats as Python writes them (they
    read back bit for bit); gzip's time stamp left out, so the same numbers give the same bytes."""
    items = {key: [[None if np.isnan(x) else float(x) for x in value] for value in values]
             for key, values in results().items()}
    with open(path, "wb") as file:
        file.write(gzip.compress(json.dumps(items, separators=(",", ":")).encode(), mtime=0))


def read(path):
    """The items ``write`` wrote, each value a float64 array (null as NaN)."""
    with gzip.open(path, "rt") as file:
        items = json.load(file)
    return {key: [np.array([np.nan if x is None else x for x in value], dtype=np.float64) for value in values]
            for key, values in items.items()}


if __name__ == "__main__":
    write(sys.argv[1])
