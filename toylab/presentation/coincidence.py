"""One rule for every chart of lines: a series that lies on an earlier one, over the plotted range or a part of it, is
drawn so that both show, and said in words that hold on the very points the chart draws.

What is compared: the rows one panel draws, in a long frame (one row per series and x; a caller passes exactly those:
one metric's rows, one batch size's lines) — without the rows a chart cannot draw (x missing, y not finite, or on a log
axis not positive). Two series are compared at the x values both draw, their *shared* x. At such an x they are
**equal** when |a − b| ≤ EXACT·max(|a|, |b|) (EXACT = 1e-12: rounding, not the toy), and **close** when equal or
|a − b| ≤ APART·span — on a log axis |log10 a − log10 b| ≤ APART·span in log10 — where span is max − min of every y the
compared series draw (APART = 1/150: about 2 pixels on a 300-pixel plot, under a 2.5-pixel line; an axis wider than the
lines only brings them closer in pixels).

Which lines are said: a later series (in the frame's order: the registry's) lies on an earlier one when it equals it at
RUN or more consecutive shared x values (or at all, if fewer), or is close to it at a share HIDDEN or more of them; of
several, the one it lies on most. It is drawn in short dashes over that one, the k-th of n on one line in its own phase
of the dash (``line_styles``: each colour shows in turn). A line whose colour looks like an earlier line's (``colours``)
is dash-dotted, so colour is never the only difference.

What the words claim (``Coincidence.relation``), always of the shared x values:
- "=": equal at every one of them;
- "= … in part": equal at RUN or more of them, and at every other one not close;
- "≈": close at every one of them, equal at some or none;
- "≈ … in part": close at some of them, and not at the others.
A caption (``describe``) names the x values where the relation holds: "tok_mis = tok_is at step ≤ 16", "tok_tis ≈ tok_is
at mismatch ≤ 0.35 (within 5.3 %, equal at mismatch ≤ 0.25)". "≤ a" runs from the first shared x to a, "≥ a" from a to
the last, "a–b" over the shared x from a to b, a lone value is that x (numbers to 6 digits; on a nominal axis each name);
beyond three runs "at 27 of 101 points" (of the shared x). "within" is the largest difference at the x values named
(relative, |a − b|/max(|a|, |b|), on a log axis; in the axis's units on a linear one), to two digits, and "equal at"
names the equal ones when there are RUN or more. A legend (``legend_words``) says the relation alone: "geo_rs = naive
here", "tok_mis = tok_is in part", "tok_tis ≈ tok_is", "tok_tis ≈ tok_is in part". One legend over several panels
(``panel_legend_words``) says a relation as on one panel only when it holds on every panel drawn ("=" and "≈" on
different panels are said "≈", "= in part" and "≈ in part" are said "≈ in part": equal points are close); otherwise it
names the panels it holds on, "seq_is ≈ on_policy (bias)", one relation a line when there are several.
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
    shared: tuple         # the x values both series draw, in order (numbers ascending, names as the frame has them)
    equal: tuple          # those where they are equal within EXACT
    close: tuple          # those where they lie on each other (equal ones included)
    within: float         # the largest difference where they lie on each other: relative on a log axis, else absolute
    relative: bool = True

    @property
    def everywhere(self):
        """Equal at every shared x: one series on this chart."""
        return len(self.equal) == len(self.shared)

    @property
    def named_equal(self):
        """The x values where they are equal, if enough to name (RUN or all shared); one shared point says nothing."""
        return self.equal if len(self.equal) >= min(RUN, len(self.shared)) else ()

    @property
    def relation(self):
        """What the words claim (the module's list): "=", "= in part", "≈" or "≈ in part"."""
        if self.everywhere:
            return "="
        if self.named_equal and len(self.equal) == len(self.close):
            return "= in part"
        return "≈" if len(self.close) == len(self.shared) else "≈ in part"


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
    """[Coincidence] of each series of ``frame`` (rows: series, x, y; the rows one panel draws) that lies on an earlier
    one, in frame order: equal to it at RUN or more consecutive shared x values (or all, if fewer), or close to it at a
    share HIDDEN or more of them; of several such earlier series, the one it lies on at the most x values."""
    order = frame[series].unique().tolist()
    curves = _curves(frame, x, y, series, order, log)
    tolerance = APART * span(np.concatenate([ys for _, ys in curves.values()] or [[]]), log)
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
                candidates.append(Coincidence(id, first, tuple(xs.tolist()), tuple(xs[equal].tolist()),
                                              tuple(xs[close].tolist()), float(gaps[close].max()), log))
        if candidates:
            found.append(max(candidates, key=lambda c: (len(c.close), len(c.equal))))   # the first on ties
    return found


def _curves(frame, x, y, series, order, log):
    """{series: (its x values, its y values)}: the points it draws — its rows in frame order, without those whose x or
    y is missing or not finite (or, on a log axis, not positive), and of rows with the same x the first — with numeric
    x values ascending (numpy: a step's chart has about 45 pairs of series to compare)."""
    ids, xs, ys = frame[series].to_numpy(), frame[x].to_numpy(), frame[y].to_numpy(float)
    drawn = ~pd.isna(xs) & np.isfinite(ys) & ((ys > 0) if log else True)
    curves = {}
    for id in order:
        rows = np.flatnonzero((ids == id) & drawn)
        _, first = np.unique(xs[rows], return_index=True)
        rows = rows[np.sort(first)]
        if len(rows) and all(isinstance(value, int | float | np.number) for value in xs[rows]):
            rows = rows[np.argsort(xs[rows].astype(float), kind="stable")]
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
    """Where along the shared x values ``of`` (in order) ``values`` lie, as at most ``most`` runs: '' (at all of them),
    ' at step ≤ 16', ' at mismatch 0 and ≥ 0.55', ' at T 4–16'; names (a nominal axis) one by one, ' at precision none
    and fp16'; more runs: ' at 27 of 101 points'."""
    inside = [x in set(values) for x in of]
    if all(inside):
        return ""
    if not all(isinstance(x, int | float | np.number) for x in of):
        return f" at {name} " + " and ".join(str(x) for x, flag in zip(of, inside, strict=True) if flag)
    runs = _runs(inside)
    if len(runs) > most:
        return f" at {sum(inside)} of {len(of)} points"
    value, last = _short(of), len(of) - 1
    words = [value[of[a]] if a == b else f"≤ {value[of[b]]}" if a == 0 else f"≥ {value[of[a]]}" if b == last
             else f"{value[of[a]]}–{value[of[b]]}" for a, b in runs]
    return f" at {name} " + " and ".join(words)


def _runs(flags):
    """(first, last) index of each run of True in ``flags``."""
    runs, start = [], None
    for index, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index - 1))
            start = None
    return runs


def _short(of):
    """Each x of ``of`` written to the fewest significant digits, 3 to 6, that still tell every two apart: a threshold
    grid's 2.23872 is '2.24', a step or a length stays whole."""
    distinct = set(of)

    def text(x, digits):
        return f"{int(x)}" if float(x).is_integer() else f"{x:.{digits}g}"
    digits = next((digits for digits in range(3, 7) if len({text(x, digits) for x in distinct}) == len(distinct)), 6)
    return {x: text(x, digits) for x in distinct}


def _within(c):
    """How close: '0.28 %' or '1.1e-08 relative' on a log axis, '0.0021' (in the axis's units) on a linear one."""
    if not c.relative:
        return f"{c.within:.2g}"
    return f"{100 * c.within:.2g} %" if c.within >= 1e-4 else f"{c.within:.2g} relative"


def describe(found, name):
    """Each coincidence in words, for a caption: 'geo_rs = naive', 'tok_mis = tok_is at step ≤ 16', 'tok_tis ≈
    tok_is at step ≤ 40 (within 0.0011, equal at step ≤ 12)'; ``name`` is what x is ("step")."""
    words = []
    for c in found:
        if c.relation == "=":
            words.append(f"{c.id} = {c.first}")
        elif c.relation == "= in part":
            words.append(f"{c.id} = {c.first}{_part(c.equal, c.shared, name)}")
        else:
            equal = c.named_equal
            also = f", equal{_part(equal, c.shared, name)}" if equal else ""
            words.append(f"{c.id} ≈ {c.first}{_part(c.close, c.shared, name)} (within {_within(c)}{also})")
    return "; ".join(words)


def _phrase(relation, first, here=False):
    """A relation with the series it is to: '= naive', '= naive here' (``here``: said of the whole chart), '= tok_is in
    part', '≈ tok_is', '≈ tok_is in part'."""
    sign, _, scope = relation.partition(" ")
    return f"{sign} {first}" + (f" {scope}" if scope else " here" if here and sign == "=" else "")


def legend_words(found):
    """{id: its legend label} on a chart of one panel: 'geo_rs = naive here', 'tok_mis = tok_is in part', 'tok_tis ≈
    tok_is', 'tok_tis ≈ tok_is in part'."""
    return {c.id: f"{c.id} {_phrase(c.relation, c.first, here=True)}" for c in found}


IMPLIED = {"=": "≈", "= in part": "≈ in part"}      # equal points are close: what each "=" also says


def _merged(relations):
    """One relation true of every panel in ``relations`` ({relation: [panel]}, all to one series), or None: the same
    one, or "≈" / "≈ in part" where the others are "=" / "= in part"."""
    implied = {IMPLIED.get(relation, relation) for relation in relations}
    if len(relations) == 1:
        return next(iter(relations))
    return implied.pop() if len(implied) == 1 else None


def panel_legend_words(found, names):
    """{id: its legend label} on a chart of several panels under one legend (``found``: {panel: [Coincidence]} of every
    panel drawn; ``names``: {panel: its short name}). Where an id lies on one series in several panels, one relation
    true of each (``_merged``); a relation that holds on every panel is said as on one panel, else with the panels it
    holds on: 'tok_tis ≈ tok_is in part' (= in part in one panel, ≈ in part in the other), 'seq_is ≈ on_policy
    (bias)'; several such relations, one a line: ('tok_mis = tok_is in part (bias)', '≈ tok_tis in part (RMSE)')."""
    held = {}
    for panel, lying in found.items():
        for c in lying:
            held.setdefault(c.id, {}).setdefault(c.first, {}).setdefault(c.relation, []).append(panel)
    words = {}
    for id, firsts in held.items():
        phrases = []
        for first, relations in firsts.items():
            merged = _merged(relations)
            phrases += ([(merged, first, [panel for on in relations.values() for panel in on])] if merged else
                        [(relation, first, on) for relation, on in relations.items()])
        if len(phrases) == 1 and len(phrases[0][2]) == len(found):
            words[id] = f"{id} {_phrase(*phrases[0][:2], here=True)}"
        else:
            lines = tuple(f"{_phrase(relation, first)} ({', '.join(names[panel] for panel in on)})"
                          for relation, first, on in phrases)
            words[id] = f"{id} {lines[0]}" if len(lines) == 1 else (f"{id} {lines[0]}", *lines[1:])
    return words


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


def dashed_caption(words, chart=None):
    """The sentence naming the lines drawn in short dashes over the ones they lie on (``words``: ``describe``'s),
    "On the J chart, drawn …" when a caption covers several charts (``chart``); "" when no line lies on another."""
    if not words:
        return ""
    return f"{f'On {chart}, drawn' if chart else 'Drawn'} in short dashes over the line each lies on: {words}."

