"""The registry factors several frameworks' rules share, so each framework's module says only which ones it uses.

A factor is (registry id, parameters) or (registry id, parameters, False): the third entry says that the
framework only zeroes the weight, leaving the masked tokens in its loss mask (and in its loss's denominators);
without it the framework's own convention holds (``preset.Rules``). Bands on the ratio are ``rs`` on log ρ: per
token (ρ_t), over the sequence's sum (W) or mean (ρ_geo); a bound that is None is absent.
"""

import math


def log_or_none(value):
    """log of a ratio bound; a bound ≤ 0 is −∞ (every ratio is above it), None stays absent."""
    if value is None:
        return None
    return -math.inf if value <= 0 else math.log(value)


def ratio_band(scope, lower=None, upper=None):
    """Keep a token (scope token) or sequence (seq_sum: W, seq_mean: ρ_geo, seq_max: max_t ρ_t) whose ratio lies in
    [lower, upper]."""
    return "rs", {"statistic": "log_ratio", "scope": scope, "lo": log_or_none(lower), "hi": log_or_none(upper)}


def weights_only(factor):
    """The factor, its rejections left in the loss mask: the framework zeroes the weight and keeps the token."""
    return factor[0], factor[1], False
