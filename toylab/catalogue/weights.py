"""What a weight function returns (``Weights``) and what its thresholds are (``Param``).

A weight function maps the sequences' statistics (every sequence of the toy, or given sequences: see
``sequences``) and its parameters to the factors of the single-sample gradient estimate

    ĝ(y) = Σ_t (c_t(y)·A(y) + additive[t, y_t])·s_t,
    c_t(y) = sequence(y) · token_{k(y)}[t, y_t] · ∏_{s<t} carry[s, y_s]

where k(y) is the sequence's token class: a ``TokenClass`` whose ``members`` hold y uses its own token table
(PPO-style clipping treats the two signs of the advantage differently; a sequence-level mask may switch a
token mask on), every other sequence uses ``token``. A factor that is None is 1. ``additive`` is a term that
does not depend on the advantage (the gradient of an additive penalty, e.g. prime-rl's kl_tau·(log ρ_t)²); it
must depend on the position and the token only, so its moments are closed-form (``engine.moments``).

Two kinds of "affected": ``*_affected`` marks a weight that was masked or clipped (what the table counts);
``*_rejected`` marks tokens removed from the loss mask, which the loss aggregations that divide by the kept
tokens (``aggregation``) leave out of their denominators.
"""

from dataclasses import dataclass, fields, replace

import numpy as np


@dataclass(frozen=True)
class TokenClass:
    """The sequences ``members`` (a per-sequence bool vector) use ``token`` (None: 1) and ``token_affected``."""
    members: np.ndarray
    token: np.ndarray | None = None
    token_affected: np.ndarray | None = None


@dataclass(frozen=True)
class Weights:
    """ĝ = Σ_t (sequence·token_k·∏_{s<t} carry·A + additive)·s_t; None means 1 (0 for additive, nothing for marks)."""
    sequence: object = 1.0
    token: np.ndarray | None = None
    carry: np.ndarray | None = None
    sequence_affected: np.ndarray | None = None
    token_affected: np.ndarray | None = None
    classes: tuple = ()                                 # TokenClass, disjoint: their members use their own token
    sequence_rejected: np.ndarray | None = None
    token_rejected: np.ndarray | None = None
    additive: np.ndarray | None = None                  # per position and token, independent of A

    def token_classes(self):
        """[(members or None for every sequence, token, token affected)]: the default class (the sequences in no
        TokenClass) first, then each class."""
        if not self.classes:
            return [(None, self.token, self.token_affected)]
        others = ~np.logical_or.reduce([np.asarray(c.members, bool) for c in self.classes])
        return [(others, self.token, self.token_affected)] + [(np.asarray(c.members, bool), c.token, c.token_affected)
                                                              for c in self.classes]

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
    """The product of several Weights: factors multiply, additive terms add, affected and rejected marks are
    OR-ed; the token classes of two factors intersect."""
    result = Weights()
    for factor in factors:
        result = _product(result, factor)
    return result


def _product(a, b):
    values = {
        "sequence": _sequence_product(a.sequence, b.sequence),
        "token": _times(a.token, b.token),
        "carry": _times(a.carry, b.carry),
        "classes": _class_product(a, b),
        "sequence_affected": _either(a.sequence_affected, b.sequence_affected),
        "token_affected": _either(a.token_affected, b.token_affected),
        "sequence_rejected": _either(a.sequence_rejected, b.sequence_rejected),
        "token_rejected": _either(a.token_rejected, b.token_rejected),
        "additive": _plus(a.additive, b.additive),
    }
    assert set(values) == {f.name for f in fields(Weights)}
    return Weights(**values)


def _class_product(a, b):
    """The non-default cells of the two partitions' intersection, each with the product of its two tables."""
    if not a.classes and not b.classes:
        return ()
    cells = []
    for index_a, (members_a, token_a, hit_a) in enumerate(a.token_classes()):
        for index_b, (members_b, token_b, hit_b) in enumerate(b.token_classes()):
            if index_a == index_b == 0:
                continue
            members = members_a if members_b is None else members_b if members_a is None else members_a & members_b
            cells.append(TokenClass(members, _times(token_a, token_b), _either(hit_a, hit_b)))
    return tuple(cells)


def _sequence_product(x, y):
    if np.ndim(x) == 0 and x == 1:
        return y
    if np.ndim(y) == 0 and y == 1:
        return x
    return product(x, y)


def _times(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return product(x, y)


def product(x, y):
    """x·y where a zero factor (a mask) wins over an infinite one: a weight beyond float64 (e^{log ρ}, log ρ > 709)
    times a mask that drops it is 0, not NaN."""
    with np.errstate(invalid="ignore"):
        result = np.multiply(x, y)
    return np.where((np.asarray(x) == 0) | (np.asarray(y) == 0), 0.0, result)


def _plus(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return x + y


def _either(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return x | y
