"""toylab: exact policy-gradient estimates when an LLM's sampler and trainer disagree.

The package in layers, each importing only from the layers above it in this list (the page, ``toylab_app/``,
imports from here, never the reverse; a test checks that no module imports in a circle):

    text           how numbers and user input are written, everywhere
    catalogue/     every estimator and framework preset as formulas and data
    engine/        the toy and the exact engine: every estimator's exact moments
    analysis/      diagnostics, Monte Carlo, sweeps, lengths
    training/      gradient ascent with each estimator, and the one-step SGA view
    state/         what the user chose (Settings) and how a link writes it
    your_run/      a user's own rollout log and the toy that matches it
    lessons/       statements for a reading group, each with the numbers that prove it
    presentation/  the DataFrames and Altair charts behind every view
    cli/           ``python -m toylab [train | inspect]``

Each folder's ``__init__`` maps its modules. The public surface is below.
"""

from toylab.catalogue.aggregation import AGGREGATIONS, gradient_weights
from toylab.catalogue.estimators import BASELINES, ESTIMATORS, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.catalogue.updates import ANCHORS, LOSSES, Update, token_loss
from toylab.engine.coefficients import additive_terms, affected_tokens, coefficients, kept_tokens
from toylab.engine.moments import Moments, baseline_value, exact_moments, exact_table
from toylab.engine.surrogate import batch_surrogate
from toylab.engine.toy import EXACT_SIZE_LIMIT, Toy, estimator_moments, make_toy, sample_from_sampler

__all__ = ["AGGREGATIONS", "ANCHORS", "BASELINES", "ESTIMATORS", "EXACT_IDS", "EXACT_SIZE_LIMIT", "LOSSES", "Moments",
           "PRESET_IDS", "Toy", "Update", "baseline_value", "batch_surrogate", "coefficients", "estimator_moments",
           "exact_moments", "exact_table", "gradient_weights", "kept_tokens", "affected_tokens", "additive_terms",
           "make_toy", "resolve_params", "sample_from_sampler", "token_loss"]
