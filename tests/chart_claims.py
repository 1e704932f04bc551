"""What a chart's words say about its lines, checked on the points it draws (a helper for tests that read a page's
charts), independently of the code that wrote the words.

The words: the estimator legend's labels (its ``labelExpr``) and the caption sentence naming the lines drawn in short
dashes ("Drawn in short dashes over the line each lies on: …"). The points: the rows each line layer of the spec draws
— its dataset, its filters, its x and y fields, its y scale (on a log axis only positive values are drawn) — one line per
estimator (and batch size, where the rows carry one: a second batch size is its own line). The rule the words follow
is ``toylab/presentation/coincidence.py``'s docstring, and its two tolerances are the ones read from there: two values
are equal within EXACT (relative), close within APART of the span of the lines of their panel (in log10 on a log axis).

``problems(charts, captions)`` returns one line per false claim (the chart, the claim, what the data shows), so a sweep
can list them all.
"""

import json
import math
import re

import numpy as np
from chart_specs import spec_nodes

from toylab.presentation.coincidence import APART, EXACT

PANELS = {"bias": "relative bias", "std": "relative std at N", "RMSE": "relative RMSE at N",
          "std ratio": "std ÷ on-policy std"} | {objective: objective for objective in
                                                ("bypass", "decoupled", "recompute", "capped")}
# a panel's name in a legend: its metric, or the staleness view's objective
SERIES = ("estimator", "series", "objective")      # the field a chart's lines are coloured by: estimators, or the
                                                   # staleness view's lags (a panel per objective) and objectives
CHART_NAMES = {"the J chart": "does it", "the learning curves": "J against step at each"}   # a caption's chart: its
                                                                                            # title's start
DASHED = re.compile(r"(?:On (?P<chart>.+?), drawn|Drawn) in short dashes over the line each lies on: (?P<words>.*)\.$",
                    re.S)
STRING = r'"(?:[^"\\]|\\.)*"'
LABEL = re.compile(rf'datum\.label === ({STRING}) \? ({STRING}|\[{STRING}(?:, {STRING})*\]) :')


# -- the points each chart draws -----------------------------------------------------------------------

def _leaves(node, data=None, transforms=()):
    """(unit spec, its data name, its transforms and its parents') of every mark in a spec, layers and concatenations
    followed; a facet's inner spec is skipped (no chart with claims is faceted)."""
    data = node.get("data", {}).get("name", data) if isinstance(node.get("data"), dict) else data
    transforms = (*transforms, *node.get("transform", ()))
    if "mark" in node:
        yield node, data, transforms
    for key in ("layer", "vconcat", "hconcat", "concat"):
        for child in node.get(key, ()):
            yield from _leaves(child, data, transforms)


def _filtered(frame, transforms):
    """The rows left by the spec's filters: "(datum.f === 'v')" or "datum.f"; any other transform is not expected."""
    for transform in transforms:
        test = transform.get("filter") if set(transform) == {"filter"} else None
        equal = re.fullmatch(r"\(datum\.(\w+) === '(.*)'\)", test or "")
        flag = re.fullmatch(r"datum\.(\w+)", test or "")
        if equal:
            frame = frame[frame[equal[1]].astype(str) == equal[2]]
        elif flag:
            frame = frame[frame[flag[1]].astype(bool)]
        else:
            raise AssertionError(f"a transform this reader does not know: {transform}")
    return frame


def _mark_type(node):
    return node["mark"] if isinstance(node["mark"], str) else node["mark"]["type"]


def legend_groups(spec, data=None, transforms=()):
    """(part of the spec, its data name, its transforms) for each part that draws its own colour legend: the whole
    spec, or where a concatenation resolves its colours independently, each of its parts (and so on down). The
    words of a part's legend are checked against the lines of that part alone."""
    data = spec.get("data", {}).get("name", data) if isinstance(spec.get("data"), dict) else data
    transforms = (*transforms, *spec.get("transform", ()))
    independent = spec.get("resolve", {}).get("scale", {}).get("color") == "independent"
    parts = [child for key in ("vconcat", "hconcat", "concat") for child in spec.get(key, ())]
    if not (independent and parts):
        yield spec, data, transforms
        return
    for child in parts:
        yield from legend_groups(child, data, transforms)


def drawn_panels(spec, datasets, inherited=None, inherited_transforms=()):
    """[Panel] of every line layer coloured by estimator: its key (metric, batch) — the metric its rows hold (None where
    they carry none), the batch size where its rows draw several — whether its y axis is log, its x field, and
    {estimator: (x values, y values)} as drawn (x ascending, or in the rows' order for names). ``inherited`` and
    ``inherited_transforms``: the data name and transforms a part of a spec inherits (``legend_groups``)."""
    panels = []
    for node, data, transforms in _leaves(spec, inherited, inherited_transforms):
        encoding = node.get("encoding", {})
        series = encoding.get("color", {}).get("field")
        if _mark_type(node) != "line" or series not in SERIES:
            continue
        frame = _filtered(datasets[data], transforms)
        x, y = encoding["x"]["field"], encoding["y"]["field"]
        log = encoding["y"].get("scale", {}).get("type") == "log"
        panel = "metric" if "metric" in frame else "objective" if "objective" in frame and series != "objective" \
            else None
        metrics = frame[panel].unique().tolist() if panel else [None]
        assert len(metrics) <= 1, f"one line layer draws several metrics: {metrics}"
        batches = frame["batch"].unique().tolist() if "batch" in frame else []
        for batch in batches if len(batches) > 1 else [None]:
            rows = frame if batch is None else frame[frame["batch"] == batch]
            panels.append(Panel((metrics[0] if metrics else None, batch), log, x, _lines(rows, x, y, log, series),
                                _styles(rows, series)))
    return panels


def _lines(rows, x, y, log, series="estimator"):
    lines = {}
    for id in rows[series].unique().tolist():
        line = rows[rows[series] == id]
        xs, ys = line[x].to_numpy(), line[y].to_numpy(float)
        keep = np.isfinite(ys) & ~np.array([value is None or value != value for value in xs]) & ((ys > 0) if log else True)
        xs, ys = xs[keep], ys[keep]
        assert len(set(xs.tolist())) == len(xs), f"{id} draws one x twice"
        if all(isinstance(value, int | float | np.number) for value in xs):
            order = np.argsort(xs.astype(float), kind="stable")
            xs, ys = xs[order].astype(float), ys[order]
        lines[id] = (list(xs.tolist()), ys)
    return lines


def _styles(rows, series="estimator"):
    """{series: its line style} where the rows carry one (the ``line`` field the dashes are drawn by)."""
    if "line" not in rows:
        return {}
    return dict(zip(rows[series].tolist(), rows["line"].tolist(), strict=True))


class Panel:
    def __init__(self, key, log, x, lines, styles):
        self.key, self.log, self.x, self.lines, self.styles = key, log, x, lines, styles
        values = np.concatenate([ys for _, ys in lines.values()]) if lines else np.array([])
        values = np.log10(values) if log else values
        self.tolerance = APART * (float(np.ptp(values)) if len(values) > 1 else 0.0)

    def sets(self, id, first):
        """(shared x, x where equal, x where close, {x: difference}) of ``id``'s line against ``first``'s."""
        (xs, ys), (other_xs, other_ys) = self.lines.get(id, ([], [])), self.lines.get(first, ([], []))
        at = {x: y for x, y in zip(other_xs, other_ys, strict=True)}
        shared = [x for x in xs if x in at]
        a = np.array([y for x, y in zip(xs, ys, strict=True) if x in at])
        b = np.array([at[x] for x in shared])
        size = np.maximum(np.abs(a), np.abs(b))
        equal = np.abs(a - b) <= EXACT * size
        gap = np.abs(np.log10(a) - np.log10(b)) if self.log else np.abs(a - b)
        close = equal | (gap <= self.tolerance)
        difference = np.abs(a - b) / np.where(size > 0, size, 1.0) if self.log else np.abs(a - b)
        return (shared, [x for x, e in zip(shared, equal, strict=True) if e],
                [x for x, c in zip(shared, close, strict=True) if c], dict(zip(shared, difference, strict=True)))


# -- the words -----------------------------------------------------------------------------------------

def legend_labels(spec):
    """{id: label} of the estimator legend (every layer gives it the same labels: checked), or None: no legend. A label
    of several lines is a list."""
    found = []
    for node in spec_nodes(spec):
        legend = node.get("legend") if node.get("field") in SERIES else None
        if isinstance(legend, dict) and "labelExpr" in legend:
            found.append({json.loads(id): json.loads(text) for id, text in LABEL.findall(legend["labelExpr"])})
    assert all(labels == found[0] for labels in found), "the layers' legends differ"
    return found[0] if found else None


def _panel_key(name):
    short, _, batch = name.partition(" at ")
    assert short in PANELS, f"a panel this reader does not know: {name!r}"
    return PANELS[short], batch or None


def legend_problems(panels, labels, where):
    """The legend's false claims: each label "id = first here", "id ≈ first in part", "id ≈ first (bias)", or one such
    claim a line ["id ≈ first (bias)", "= other in part (RMSE)"], checked on each panel it names (every panel when it
    names none)."""
    problems = []
    keys = [panel.key for panel in panels]
    for id, label in (labels or {}).items():
        if label == id:
            continue
        lines = [label] if isinstance(label, str) else label
        assert lines[0].startswith(f"{id} "), label
        for phrase in [lines[0][len(id) + 1:], *lines[1:]]:
            claim = re.fullmatch(r"(?P<sign>[=≈]) (?P<first>\S+)(?P<scope> in part| here)?(?: \((?P<panels>.+)\))?",
                                 phrase)
            assert claim, f"{where}: a legend label this reader does not know: {label!r}"
            named = [_panel_key(name) for name in claim["panels"].split(", ")] if claim["panels"] else keys
            assert not (claim["panels"] and claim["scope"] == " here"), label
            for key in named:
                panel = next((panel for panel in panels if panel.key == key), None)
                if panel is None:
                    problems.append(f"{where}: legend {label!r} names a panel not drawn: {key}")
                    continue
                shared, equal, close, _ = panel.sets(id, claim["first"])
                relation = claim["sign"] + (" in part" if claim["scope"] == " in part" else "")
                holds = {"=": shared and equal == shared,
                         "= in part": equal and equal != shared and close == equal,
                         "≈": shared and close == shared and equal != shared,
                         "≈ in part": close and close != shared}[relation]
                if not holds:
                    problems.append(f"{where}: legend {label!r} on {_key_text(key)}: {len(shared)} x shared, equal at "
                                    f"{_x_text(equal)}, close at {_x_text(close)} of {_x_text(shared)}")
    return problems


def caption_problems(panels, words, where):
    """The caption's false claims: each "id = first[ at …]" or "id ≈ first[ at …] (within w[, equal at …])", under
    the panel its "metric: " names (the one panel drawn when none is named), checked on that panel: the x values
    named are exactly those where it holds, w is the largest difference there to two digits."""
    problems = []
    prefix = re.compile(r"(?P<metric>" + "|".join(map(re.escape, PANELS.values())) + r")(?: \((?P<batch>N = [\d,]+)\))?: ")
    key = panels[0].key if len(panels) == 1 else None
    for item in words.split("; "):
        head = prefix.match(item)
        if head:
            key, item = (head["metric"], head["batch"]), item[head.end():]
        panel = next((panel for panel in panels if panel.key == key), None)
        if panel is None:
            problems.append(f"{where}: caption {item!r} is about a panel not drawn: {key}")
            continue
        claim = (re.fullmatch(r"(?P<id>\S+) (?P<sign>=) (?P<first>\S+)(?: at (?P<at>.+))?", item) or
                 re.fullmatch(r"(?P<id>\S+) (?P<sign>≈) (?P<first>\S+)(?: at (?P<at>.+?))? \(within (?P<within>[^,]+?)"
                              r"(?:, equal at (?P<equal>.+))?\)", item))
        assert claim, f"{where}: a caption claim this reader does not know: {item!r}"
        shared, equal, close, difference = panel.sets(claim["id"], claim["first"])
        holds = equal if claim["sign"] == "=" else close
        named = _named(claim["at"], shared, panel.x) if claim["at"] else shared
        wrong = []
        if not shared or not _same(named, holds, shared):
            wrong.append(f"{'equal' if claim['sign'] == '=' else 'close'} at {_x_text(holds)} of {_x_text(shared)}")
        if claim["sign"] == "≈" and holds:
            if not _within_says(claim["within"], max(difference[x] for x in holds), panel.log):
                wrong.append(f"largest difference {max(difference[x] for x in holds):.3g} "
                             f"({'relative' if panel.log else 'absolute'})")
            if claim["equal"] and not _same(_named(claim["equal"], shared, panel.x), equal, shared):
                wrong.append(f"equal at {_x_text(equal)}")
        if wrong:
            problems.append(f"{where}: caption {item!r} on {_key_text(key)}: " + "; ".join(wrong))
    return problems


def _named(text, shared, name):
    """The shared x values a range names: "27 of 101 points" (a count: (27, 101)), or "name ≤ a and b–c and ≥ d and e"
    (each number one shared x written to its significant digits: "2.24" is 2.23872, when no other x rounds to it), or
    "name p and q" on a nominal axis."""
    count = re.fullmatch(r"(\d+) of (\d+) points", text)
    if count:
        return int(count[1]), int(count[2])
    assert text.startswith(f"{name} "), f"a range not along {name}: {text!r}"
    parts = text[len(name) + 1:].split(" and ")
    if not all(isinstance(x, float) for x in shared):
        return [x for x in shared if x in parts]
    index = {}

    def at(value):
        """The shared x nearest ``value``, which must be that x to 3 significant digits or more (half a unit of the
        third digit away at most) and nearer to it than to any other."""
        distance = [abs(x - float(value)) for x in shared]
        nearest = min(range(len(shared)), key=distance.__getitem__)
        x = shared[nearest]
        assert distance[nearest] <= 0.5 * 10 ** (math.floor(math.log10(abs(x))) - 2) if x else float(value) == 0, \
            f"{value} is not one shared x of {shared}"
        assert sorted(distance)[1:2] != [distance[nearest]], f"{value} is two shared x of {shared}"
        return nearest

    for part in parts:
        if part.startswith("≤ "):
            index.update(dict.fromkeys(range(0, at(part[2:]) + 1)))
        elif part.startswith("≥ "):
            index.update(dict.fromkeys(range(at(part[2:]), len(shared))))
        elif "–" in part:
            low, high = part.split("–")
            index.update(dict.fromkeys(range(at(low), at(high) + 1)))
        else:
            index[at(part)] = None
    return [shared[i] for i in sorted(index)]


def _same(named, holds, shared):
    if isinstance(named, tuple):                      # "k of n points"
        return named == (len(holds), len(shared))
    return list(named) == list(holds)


def _within_says(text, largest, log):
    """Whether "within" says the largest difference to two significant digits, in the axis's kind of number."""
    if log:
        percent = re.fullmatch(r"(\S+) %", text)
        relative = re.fullmatch(r"(\S+) relative", text)
        value = float(percent[1]) / 100 if percent else float(relative[1]) if relative else None
        return value is not None and np.isclose(value, float(f"{largest:.2g}") if relative else
                                                float(f"{100 * largest:.2g}") / 100, rtol=1e-9)
    return re.fullmatch(r"\S+", text) is not None and np.isclose(float(text), float(f"{largest:.2g}"), rtol=1e-9)


def dashed_problems(panels, labels, words, where):
    """Every line drawn in short dashes over another ("k of n") is named: in the legend when the chart has one, and in
    the caption when it has one."""
    problems = []
    for panel in panels:
        for id, style in panel.styles.items():
            if " of " in style and labels is not None and labels.get(id, id) == id:
                problems.append(f"{where}: {id} is dashed over another on {_key_text(panel.key)} but the legend does "
                                "not say so")
            if " of " in style and words is not None and not re.search(rf"(^|; |: ){re.escape(id)} [=≈] ", words):
                problems.append(f"{where}: {id} is dashed over another on {_key_text(panel.key)} but the caption does "
                                "not say so")
    return problems


def _key_text(key):
    metric, batch = key
    return (metric or "the chart") + (f" ({batch})" if batch else "")


def _x_text(values):
    values = list(values)
    return "none" if not values else f"{len(values)} x ({_value(values[0])} … {_value(values[-1])})"


def _value(x):
    return f"{x:g}" if isinstance(x, float) else str(x)


# -- a page's charts ---------------------------------------------------------------------------------------

def problems(charts, captions, where):
    """Every false claim of a page's charts (``charts``: [(spec, {dataset name: DataFrame})]) and of the captions under
    them (``captions``: their texts): each chart's legend and dashes, each dashed-lines caption against the chart it is
    under (the one chart of estimator lines on the page, or the one it names: "On the J chart")."""
    found, drawn = [], []
    for spec, datasets in charts:
        panels = drawn_panels(spec, datasets)
        if panels:
            drawn.append((spec, panels))
            for part, data, transforms in legend_groups(spec):     # each legend, of the lines under it alone
                found += legend_problems(drawn_panels(part, datasets, data, transforms), legend_labels(part), where)
        elif _scatter(datasets) is None and any(label != id for id, label in (legend_labels(spec) or {}).items()):
            found.append(f"{where}: a legend speaks of lines on a chart that draws no estimator line this reader reads: "
                         f"{legend_labels(spec)}")
    said = {}
    for caption in captions:
        dashed = DASHED.search(caption)
        if not dashed:
            continue
        under = [index for index, (spec, _) in enumerate(drawn) if dashed["chart"] is None or
                 dashed["chart"] in CHART_NAMES and _title(spec).startswith(CHART_NAMES[dashed["chart"]])]
        if not under:
            found.append(f"{where}: a caption names lines lying on others, but no chart of estimator lines is drawn: "
                         f"{dashed['words']!r}")
            continue
        assert len(under) == 1, f"{where}: which chart is {caption[:60]!r} under?"
        said[under[0]] = dashed["words"]
        found += caption_problems(drawn[under[0]][1], dashed["words"], where)
    for index, (spec, panels) in enumerate(drawn):
        found += dashed_problems(panels, legend_labels(spec), said.get(index), where)
    return found


def _title(spec):
    title = spec.get("title", "")
    return title.get("text", "") if isinstance(title, dict) else title


def _scatter(datasets):
    """The scatter's points (estimator, rel_bias, rel_std, ring), or None: not the scatter."""
    return next((frame for frame in datasets.values() if {"ring", "rel_bias", "rel_std"} <= set(frame)), None)


def scatter_problems(charts, where):
    """The scatter's words about estimators that are one: its names ("naive = geo_rs") and its legend ("geo_rs = naive
    here"), each point at the first one's point (within 1e-9 relative: rounding)."""
    found = []
    for spec, datasets in charts:
        points = _scatter(datasets)
        if points is None:
            continue
        labels = next((frame for frame in datasets.values() if {"text", "kind"} <= set(frame)), None)
        named = [text.split(" = ") for text in labels.loc[labels["kind"] == "estimator", "text"]]
        for id, label in (legend_labels(spec) or {}).items():
            if label != id:
                claim = re.fullmatch(rf"{re.escape(id)} = (\S+) here", label)
                assert claim, f"{where}: a scatter legend label this reader does not know: {label!r}"
                named.append([claim[1], id])
        at = points.set_index("estimator")
        for ids in named:
            for id in ids[1:]:
                if not all(np.isclose(at.loc[id, column], at.loc[ids[0], column], rtol=1e-9, atol=0)
                           for column in ("rel_bias", "rel_std")):
                    found.append(f"{where}: scatter {' = '.join(ids)!r}: {id} at ({at.loc[id, 'rel_bias']:.6g}, "
                                 f"{at.loc[id, 'rel_std']:.6g}), {ids[0]} at ({at.loc[ids[0], 'rel_bias']:.6g}, "
                                 f"{at.loc[ids[0], 'rel_std']:.6g})")
    return found
