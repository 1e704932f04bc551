"""An exhaustive sweep in two tiers: the values that reach every code path run in the fast tier, the rest are
marked slow, so ``python -m pytest --all-tiers`` still runs every value (see ``tests/conftest.py``)."""

import pytest


def fast_then_slow(values, fast):
    """``values`` as parameters, each one not in ``fast`` marked slow; test ids stay the values'. A case of several
    arguments is a tuple."""
    return [value if value in fast else pytest.param(*value if isinstance(value, tuple) else (value,),
                                                     marks=pytest.mark.slow) for value in values]


def catalogue_and_one_preset_per_framework(ids):
    """The catalogue's own ids and each framework's first preset. A preset is a product of catalogue factors that
    their own cases check; one preset a framework takes that framework's rules through the code."""
    first_preset = {}
    for id in ids:
        if ":" in id:
            first_preset.setdefault(id.partition(":")[0], id)
    return [id for id in ids if ":" not in id or id in first_preset.values()]
