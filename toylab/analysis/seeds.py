"""The toys a view's takeaway is read over: the current toy among POPULATION toys that differ from it in their seed
alone — the same T, V, mismatch, sampler, estimators, thresholds and baseline; each seed its own θ and b.

    seeds_around(seed)    seeds 0 … 29 when ``seed`` is one of them (the current toy is one of the 30); else ``seed``
                          and seeds 0 … 28

and each toy's takeaway, exact: the estimators ranked by an exact number (``ranks``), first the lowest (an error) or
the highest (a J); equal numbers (within SAME, rounding) share the better rank, an undefined one (NaN) ranks last.
"""

import math

import numpy as np

POPULATION = 30
SAME = 1e-12              # relative: numbers this close are one number (rounding, not the toy)


def seeds_around(seed):
    """The POPULATION seeds the current toy is read among, the current one included."""
    return tuple(range(POPULATION)) if 0 <= seed < POPULATION else (seed, *range(POPULATION - 1))


def ranks(values, lowest_first=True):
    """{id: its rank, 1 the best} of ``values`` ({id: number}): ascending when ``lowest_first``, else descending;
    a number within SAME of a better one shares its rank; NaN ranks after every number."""
    sign = 1.0 if lowest_first else -1.0
    defined = {id: sign * value for id, value in values.items() if not math.isnan(value)}
    ordered = sorted(defined.values())
    found = {}
    for id, value in defined.items():
        first = next(index for index, other in enumerate(ordered)
                     if abs(other - value) <= SAME * max(abs(other), abs(value)) or other == value)
        found[id] = first + 1
    return {id: found.get(id, len(defined) + 1) for id in values}


def share_of_toys(flags):
    """(how many, of how many) of a population's booleans are true."""
    flags = np.asarray(list(flags), dtype=bool)
    return int(flags.sum()), len(flags)
