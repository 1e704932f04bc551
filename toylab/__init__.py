"""toylab: exact policy-gradient estimates when an LLM's sampler and trainer disagree.

A map of the package, each module one idea (the page, ``views/``, imports from here, never the reverse):

The toy and its exact engine
    toy            T positions over V tokens, trainer π and sampler μ; J, E_μ[r] and ∇J
    grid, split_grid   the V**T sequences as a grid: outer sums, position marginals, prefix sums
    sequences      where a weight function is evaluated: every sequence (in prefix chunks) or given ones
    weights, estimators, families, frameworks   the catalogue: one weight function per estimator or preset
    coefficients, aggregation   the batch interface: per-token coefficients on given sequences, loss aggregation
    moments        exact mean and variance of every estimator in one O(M) pass
    counts, recursion   through the count of token 0: J, ∇J and the Hessian; factorising estimators at any T
Analysis built on the engine
    diagnostics    KL(μ‖π), χ²_seq, ESS and the exact ratio distributions
    montecarlo, stratified   sampled batches; Monte Carlo moments stratified by the count of token 0
    sweeps, length   a threshold or the mismatch swept; the length T from 1 to 256
    training, toy_rows, optimizers, sga   gradient ascent with each estimator; the one-step SGA view
    lessons        statements for a reading group, each with the numbers that prove it
    rollout_log, log_files, log_columns, log_statistics, log_estimators, matching   a user's own rollout log
Presentation data (no computation: arranging library numbers)
    frames, sweep_frames, training_frames, log_frames   the DataFrames behind every chart and table
    charts, sweep_charts, training_charts, log_charts   Altair charts, pure functions of those frames
    settings, query, text   what the user chose, the page's address, how numbers are written
Command line
    cli, train_cli, inspect_cli   ``python -m toylab [train | inspect]``
"""

from toylab.aggregation import AGGREGATIONS, gradient_weights
from toylab.coefficients import affected_tokens, coefficients, kept_tokens
from toylab.estimators import BASELINES, ESTIMATORS, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.moments import Moments, baseline_value, exact_moments, exact_table
from toylab.toy import EXACT_SIZE_LIMIT, Toy, estimator_moments, make_toy, sample_from_sampler

__all__ = ["AGGREGATIONS", "BASELINES", "ESTIMATORS", "EXACT_IDS", "EXACT_SIZE_LIMIT", "Moments", "PRESET_IDS", "Toy",
           "baseline_value", "coefficients", "estimator_moments", "exact_moments", "exact_table", "gradient_weights",
           "kept_tokens", "affected_tokens", "make_toy", "resolve_params", "sample_from_sampler"]
