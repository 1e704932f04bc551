"""One rule for every chart of lines: a series that lies on an earlier one, over the plotted range or a part of it, is
drawn so that both show, and said in words.

Two series of a long frame (one row per series and x) lie on each other at an x where their values are equal — within
EXACT (relative: rounding, not the toy) — or closer than APART of the plotted span (the y axis's, in logs on a log
axis: about 2 pixels on a 300-pixel plot, under a 2.5-pixel line). A later series (in the frame's order: the
registry's) lies on an earlier one where it equals it at RUN or more consecutive x values (or at all, if fewer), or is
drawn on top of it at a share HIDDEN or more of them; of several, the one it lies on most. It is drawn in short dashes over that one, the k-th of n on one line in its own phase of the dash
(``line_styles``: each colour shows in turn), and named: "geo_rs = naive" where equal everywhere, "tok_mis = tok_is
at step ≤ 16" where equal on a part, "tok_tis ≈ tok_is (within 0.0011)" where only drawn on top of each other. A
line whose colour looks like an earlier line's (``colours``) is dash-dotted, so colour is never the only difference.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toylab.catalogue.estimators import ESTIMATORS
from toylab.presentation import colours

EXACT = 1e-12            # relative: numbers this close are one number
APART = 1 / 150          # of the plotted span: lines closer than this are drawn on top of each other
RUN = 3                  # consecutive equal x values: fewer (lines crossing, or starting from one point) hide nothing
HIDDEN = 0.9             # the share of x values at which a line drawn on top of another has no pixel of its own
MOST_ON_ONE = 4          # dash phases: at most this many series drawn over one line


@dataclass(frozen=True)
class Coincidence:
    """A series (``id``) that lies on an earlier one (``first``, itself drawn plainly or not)."""
    id: str
    first: str
    shared: int           # x values both series have
    equal: tuple          # the x values where they are equal within EXACT
    close: tuple          # the x values where they lie on each other (equal ones included)
    within: float         # the largest difference where they lie on each other: relative on a log axis, else absolute
    relative: bool = True

    @property
    def everywhere(self):
        """Equal at every shared x: one series on this chart."""
        return len(self.equal) == self.shared


def _run(mask):
    """The longest run of True in a boolean array."""
    longest = current = 0
    for value in mask:
        current = current + 1 if value else 0
        longest = max(longest, current)
    return longest


def span(values, log=False):
    """The plotted span of ``values``: max − min, in log10 on a log axis (positive values only)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)] if log else values[np.isfinite(values)]
    if len(values) < 2:
        return 0.0
    return float(np.ptp(np.log10(values)) if log else np.ptp(values))


def coincidences(frame, x, y, series="estimator", log=False):
    """[Coincidence] of each series of ``frame`` (rows: series, x, y) that lies on an earlier one, in frame order:
    equal to it at RUN or more consecutive x values (or all, if fewer), or drawn on top of it at a share HIDDEN or more
    of the x values they share; of several such earlier series, the one it lies on at the most x values."""
    tolerance = APART * span(frame[y], log)
    order = frame[series].unique().tolist()
    curves = _curves(frame, x, y, series, order)
    found = []
    for index, id in enumerate(order):
        candidates = []
        for first in order[:index]:
            xs, a, b = _shared(curves[id], curves[first])
            if not len(a):
                continue
            size = np.maximum(np.abs(a), np.abs(b))
            equal = np.abs(a - b) <= EXACT * size
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = np.abs(np.log10(a) - np.log10(b)) if log else np.abs(a - b)
            close = equal | (gap <= tolerance)
            if _run(equal) >= min(RUN, len(a)) or close.mean() >= HIDDEN:
                gaps = np.abs(a - b) / np.where(size > 0, size, 1.0) if log else np.abs(a - b)
                candidates.append(Coincidence(id, first, len(a), tuple(xs[equal].tolist()), tuple(xs[close].tolist()),
                                              float(gaps[close].max()), log))
        if candidates:
            found.append(max(candidates, key=lambda c: (len(c.close), len(c.equal))))   # the first on ties
    return found


def _curves(frame, x, y, series, order):
    """{series: (its x values, its y values)}: its rows in frame order, those with a missing x or y left out, and of
    rows with the same x the first (numpy: a step's chart has about 45 pairs of series to compare)."""
    ids, xs, ys = frame[series].to_numpy(), frame[x].to_numpy(), frame[y].to_numpy(float)
    curves = {}
    for id in order:
        rows = np.flatnonzero((ids == id) & ~(pd.isna(xs) | pd.isna(ys)))
        _, first = np.unique(xs[rows], return_index=True)
        rows = rows[np.sort(first)]
        curves[id] = xs[rows], ys[rows]
    return curves


def _shared(curve, other):
    """(x, curve's y, other's y) at the x values both have, in ``curve``'s order."""
    (xs, ys), (other_xs, other_ys) = curve, other
    inside = np.isin(xs, other_xs)
    sort = np.argsort(other_xs, kind="stable")
    at = sort[np.searchsorted(other_xs, xs[inside], sorter=sort)]
    return xs[inside], ys[inside], other_ys[at]


def _part(values, of, name, most=3):
    """Where along x (``of``: the chart's x values in order), as at most ``most`` runs: '' (everywhere), ' at step ≤
    16', ' at mismatch 0 and ≥ 0.55', ' at T 4–16'; more runs: ' at 27 of 101 points'."""
    inside = [x in set(values) for x in of]
    if all(inside):
        return ""
    runs, start = [], None
    for index, flag in enumerate([*inside, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index - 1))
            start = None
    if len(runs) > most:
        return f" at {sum(inside)} of {len(of)} points"
    last = len(of) - 1
    words = [_value(of[a]) if a == b else f"≤ {_value(of[b])}" if a == 0 else f"≥ {_value(of[a])}" if b == last
             else f"{_value(of[a])}–{_value(of[b])}" for a, b in runs]
    return f" at {name} " + " and ".join(words)


def _value(x):
    return f"{x:g}" if isinstance(x, int | float | np.number) else str(x)


def _within(c):
    """How close: '0.28 %' or '1.1e-08 relative' on a log axis, '0.0021' (in the axis's units) on a linear one."""
    if not c.relative:
        return f"{c.within:.2g}"
    return f"{100 * c.within:.2g} %" if c.within >= 1e-4 else f"{c.within:.2g} relative"


def describe(found, xs, name):
    """Each coincidence in words, for a caption: 'geo_rs = naive', 'tok_mis = tok_is at step ≤ 16', 'tok_tis ≈
    tok_is (within 0.0011)'; ``xs`` are the chart's x values (in order), ``name`` what x is ("step")."""
    xs = sorted(set(xs)) if all(isinstance(x, int | float | np.number) for x in xs) else list(dict.fromkeys(xs))
    words = []
    for c in found:
        equal = c.equal if len(c.equal) >= min(RUN, c.shared) else ()     # one shared starting point says nothing
        if c.everywhere:
            words.append(f"{c.id} = {c.first}")
        elif equal and len(equal) == len(c.close):
            words.append(f"{c.id} = {c.first}{_part(equal, xs, name)}")
        else:
            also = f", equal{_part(equal, xs, name)}" if equal else ""
            words.append(f"{c.id} ≈ {c.first}{_part(c.close, xs, name)} (within {_within(c)}{also})")
    return "; ".join(words)


def legend_words(found):
    """{id: its legend label}: 'geo_rs = naive here', 'tok_mis = tok_is in part', 'tok_tis ≈ tok_is'."""
    return {c.id: f"{c.id} = {c.first} here" if c.everywhere else
            f"{c.id} = {c.first} in part" if len(c.equal) >= min(RUN, c.shared) and len(c.equal) == len(c.close)
            else f"{c.id} ≈ {c.first}" for c in found}


def line_styles(found, ids, reference=None):
    """{id: its line style, a key of DASHES}: "own" (solid), "reference" (long dashes; "compared", longer still, is a
    second batch size's line on a sweep), "k of n" for the k-th of n series drawn over one line (the first series of
    its group, followed through the ones it lies on), and "alike" (dash-dot) for a line of its own whose registry
    colour looks like an earlier line's (``colours.alike``)."""
    root = {}
    for c in found:
        root[c.id] = root.get(c.first, c.first)
    groups = {}
    for id, first in root.items():
        groups.setdefault(first, []).append(id)
    looks_like = colours.alike({id: ESTIMATORS[id].colour for id in ids if id in ESTIMATORS})
    styles = {id: "reference" if id == reference else "alike" if id in looks_like else "own" for id in ids}
    for members in groups.values():
        n = min(len(members), MOST_ON_ONE)
        for k, id in enumerate(members, start=1):
            styles[id] = f"{min(k, n)} of {n}"
    return styles


def _dash(k, n, length=4):
    """The k-th of n dash patterns of one period, each showing ``length`` pixels in its own phase, the line under
    them in the last phase."""
    period = length * (n + 1)
    return [length, period - length] if k == 1 else [0, length * (k - 1), length, period - length * k]


DASHES = {"own": [1, 0], "reference": [7, 4], "compared": [10, 5], "alike": [9, 3, 2, 3]} | {
    f"{k} of {n}": _dash(k, n) for n in range(1, MOST_ON_ONE + 1) for k in range(1, n + 1)}


def with_line_styles(frame, styles, series="estimator"):
    """The frame with a ``line`` column: each row's series's style (``line_styles``)."""
    return frame.assign(line=[styles.get(id, "own") for id in frame[series].tolist()])


def cap(text, most=400):
    """A caption's list of coincidences, cut to ``most`` characters (a chart of twenty series can have many)."""
    return text if len(text) <= most else text[:most - 1].rsplit("; ", 1)[0] + "; …"


def dashed_caption(words, chart=None):
    """The sentence naming the lines drawn in short dashes over the ones they lie on (``words``: ``describe``'s),
    "On the J chart, drawn …" when a caption covers several charts (``chart``); "" when no line lies on another."""
    if not words:
        return ""
    return f"{f'On {chart}, drawn' if chart else 'Drawn'} in short dashes over the line each lies on: {words}."

