"""toylab: exact policy-gradient estimates when an LLM's sampler and trainer disagree."""

from toylab.aggregation import AGGREGATIONS, gradient_weights
from toylab.coefficients import affected_tokens, coefficients, kept_tokens
from toylab.estimators import BASELINES, ESTIMATORS, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.moments import Moments, baseline_value, exact_moments, exact_table
from toylab.toy import EXACT_SIZE_LIMIT, Toy, estimator_moments, make_toy, sample_from_sampler

__all__ = ["AGGREGATIONS", "BASELINES", "ESTIMATORS", "EXACT_IDS", "EXACT_SIZE_LIMIT", "Moments", "PRESET_IDS", "Toy",
           "baseline_value", "coefficients", "estimator_moments", "exact_moments", "exact_table", "gradient_weights",
           "kept_tokens", "affected_tokens", "make_toy", "resolve_params", "sample_from_sampler"]
