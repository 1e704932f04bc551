"""A sample estimate and its standard error, written one way everywhere (the Your run tab's metrics and tables, the
run's steps, two logs side by side, the verdict, the command line).

A value is written to 3 significant digits, its standard error to 2 (``text.significant``: never 0.0000 for a small
number). A missing value — None, or NaN from a table — is UNDEFINED ("—"); a missing standard error is left out: an
extreme (a largest ρ) has none, and a one-sequence log's absence of one is said once, in a caption.
"""

import math

from toylab.text import UNDEFINED, significant


def _missing(number):
    return number is None or (isinstance(number, float) and math.isnan(number))


def value_text(value, digits=3):
    """'6.16e-05', or UNDEFINED for a missing value."""
    return UNDEFINED if _missing(value) else significant(value, digits)


def se_text(se):
    """'1.7e-05', or '' for a missing standard error."""
    return "" if _missing(se) else significant(se, 2)


def with_se(value, se, digits=3):
    """'6.16e-05 ± 1.7e-05'; the value alone when it has no standard error; UNDEFINED for a missing value."""
    if _missing(value):
        return UNDEFINED
    return value_text(value, digits) + ("" if _missing(se) else f" ± {se_text(se)}")


def estimate_text(estimate, digits=3):
    """An ``Estimate`` (value, se) as ``with_se`` writes it; UNDEFINED for None."""
    return UNDEFINED if estimate is None else with_se(estimate.value, estimate.se, digits)


def record_text(record):
    """An estimate as the command line's JSON holds it ({"value", "se"}), as ``with_se`` writes it."""
    return with_se(record["value"], record["se"])

