"""What a weight function returns (``Weights``) and what its thresholds are (``Param``).

A weight function maps the sequences' statistics (every sequence of the toy, or given sequences: see
``sequences``) and its parameters to the factors of the per-token coefficient

    c_t(y) = sequence(y) · token_{A(y)}[t, y_t] · ∏_{s<t} carry[s, y_s]

where ``token_{A}`` is ``negative_token`` for a sequence with advantage A < 0 (PPO-style clipping against
the sampler treats the two signs differently) and ``token`` otherwise. A factor that is None is 1.

Two kinds of "affected": ``*_affected`` marks a weight that was masked or clipped (what the table counts);
``*_rejected`` marks tokens removed from the loss mask, which the loss aggregations that divide by the kept
tokens (``aggregation``) leave out of their denominators.
"""

from dataclasses import dataclass, fields, replace

import numpy as np


@dataclass(frozen=True)
class Weights:
    """c_t(y) = sequence(y)·token_{A(y)}[t, y_t]·∏_{s<t} carry[s, y_s]; None means 1 (or nothing affected)."""
    sequence: object = 1.0
    token: np.ndarray | None = None
    carry: np.ndarray | None = None
    sequence_affected: np.ndarray | None = None
    token_affected: np.ndarray | None = None
    negative_token: np.ndarray | None = None            # token factor where A < 0 (None: the same as token)
    negative_token_affected: np.ndarray | None = None
    sequence_rejected: np.ndarray | None = None
    token_rejected: np.ndarray | None = None

    @property
    def splits_by_sign(self):
        """True when the token factor depends on the sign of the advantage."""
        return self.negative_token is not None

    def for_sign(self, negative):
        """(token factor, token affected) for sequences with A < 0 (``negative``) or A ≥ 0."""
        if negative and self.splits_by_sign:
            return self.negative_token, self.negative_token_affected
        return self.token, self.token_affected

    def without_rejection(self):
        """The same weights, with nothing removed from the loss mask (masks that only zero a weight)."""
        return replace(self, sequence_rejected=None, token_rejected=None)


@dataclass(frozen=True)
class Param:
    """A threshold: its default and the range a user may choose from.

    A string default is a choice: among ``choices`` if given, a text checked by ``parse`` (which raises
    ValueError) if given, otherwise the id of an exact estimator (``weight`` of grpo, rloo and the families).
    """
    default: object
    low: float | None = None
    high: float | None = None
    help: str = ""
    choices: tuple | None = None
    parse: object = None


def combine(*factors):
    """The product of several Weights: factors multiply, affected and rejected marks are OR-ed."""
    result = Weights()
    for factor in factors:
        result = _product(result, factor)
    return result


def _product(a, b):
    negative = None
    if a.splits_by_sign or b.splits_by_sign:
        negative = _times(a.for_sign(True)[0], b.for_sign(True)[0])
    values = {
        "sequence": _sequence_product(a.sequence, b.sequence),
        "token": _times(a.token, b.token),
        "carry": _times(a.carry, b.carry),
        "negative_token": negative,
        "sequence_affected": _either(a.sequence_affected, b.sequence_affected),
        "token_affected": _either(a.token_affected, b.token_affected),
        "negative_token_affected": _either(a.for_sign(True)[1], b.for_sign(True)[1])
        if negative is not None else None,
        "sequence_rejected": _either(a.sequence_rejected, b.sequence_rejected),
        "token_rejected": _either(a.token_rejected, b.token_rejected),
    }
    assert set(values) == {f.name for f in fields(Weights)}
    return Weights(**values)


def _sequence_product(x, y):
    if np.ndim(x) == 0 and x == 1:
        return y
    if np.ndim(y) == 0 and y == 1:
        return x
    return _multiplied(x, y)


def _times(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return _multiplied(x, y)


def _multiplied(x, y):
    """x·y, and 0 wherever either is 0: a mask (0) times a ratio that is ∞ outside μ's support
    (``engine.sequences``) is 0 there, not NaN."""
    if np.isfinite(x).all() and np.isfinite(y).all():
        return x * y
    return np.multiply(x, y, out=np.zeros(np.broadcast_shapes(np.shape(x), np.shape(y))), where=(x != 0) & (y != 0))


def _either(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return x | y
