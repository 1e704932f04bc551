"""toylab: exact policy-gradient estimates when an LLM's sampler and trainer disagree."""

from toylab.estimators import BASELINES, ESTIMATORS, EXACT_IDS, resolve_params
from toylab.moments import Moments, baseline_value, exact_moments, exact_table
from toylab.toy import EXACT_SIZE_LIMIT, Toy, estimator_moments, make_toy, sample_from_sampler

__all__ = ["BASELINES", "ESTIMATORS", "EXACT_IDS", "EXACT_SIZE_LIMIT", "Moments", "Toy", "baseline_value",
           "estimator_moments", "exact_moments", "exact_table", "make_toy", "resolve_params",
           "sample_from_sampler"]
