"""The DataFrames and words behind the staleness view: a ``staleness.Staleness`` (one toy's runs) and, across a
population, its ``Reading``s and ``Tally``, arranged, never re-derived.

The learning curves: one panel per objective, one line per lag (its name the lag's number: s, or η with the uniform
draw), and on_policy, the reference, in every panel; a lag's line that lies on another is found on each panel
(``coincidence``, series = the lag) and drawn and said as every chart of lines does. The steps to the target: one line
per objective against the lag, "never" (not within the run's K steps) drawn above the run's end.
"""

import numpy as np
import pandas as pd

from toylab.presentation import coincidence
from toylab.training.staleness import LABELS, SATURATED

REFERENCE = "on_policy"
SHORT = {"bypass": "bypass", "decoupled": "decoupled", "recompute": "recompute", "capped": "capped"}
LAG_WORDS = {"fixed": "lag s", "uniform": "η (s drawn from 0 … η each batch)"}


def lag_name(lag):
    """A lag's series name, in the legend under its title (``LAG_WORDS``): its number."""
    return str(lag)


def curve_frame(result):
    """(frame, {objective: [Coincidence]}): one row per (objective, series, step) — the panel's objective, the series
    (on_policy, then each lag), step k and J, and each panel's line styles — and the lines that lie on others
    (``coincident``). Its names are categories: sent once each, not once a row (a third of the bytes a step sends)."""
    steps = np.arange(result.steps + 1)
    parts = []
    for objective, curves in result.curves.items():
        parts.append(pd.DataFrame({"objective": objective, "series": REFERENCE, "step": steps,
                                   "J": result.on_policy_curve}))
        parts += [pd.DataFrame({"objective": objective, "series": lag_name(lag), "step": steps, "J": curve})
                  for lag, curve in zip(result.lags, curves, strict=True)]
    frame = pd.concat(parts, ignore_index=True)
    found = coincident(frame)
    styles = {objective: coincidence.line_styles(lying, frame["series"].unique().tolist(), REFERENCE)
              for objective, lying in found.items()}
    frame = frame.assign(line=[styles[objective].get(series, "own") for objective, series in
                               zip(frame["objective"], frame["series"], strict=True)])
    return frame.astype({"objective": "category", "series": "category", "line": "category"}), found


def coincident(frame):
    """{objective: [Coincidence]}: on each panel, the lines (lags, and on_policy) that lie on an earlier one."""
    return {objective: coincidence.coincidences(rows, "step", "J", series="series")
            for objective, rows in frame.groupby("objective", sort=False)}


def legend_words(found):
    """{series: its legend label} over the panels (``coincidence.panel_legend_words``, panels by objective)."""
    return coincidence.panel_legend_words(found, {objective: SHORT[objective] for objective in found})


def coincident_note(found):
    """'decoupled: 1 ≈ 0 at step ≥ 40 (within 0.0021); …' for each panel with lines that lie on others."""
    return "; ".join(f"{SHORT[objective]}: {coincidence.describe(lying, 'step')}"
                     for objective, lying in found.items() if lying)


def steps_frame(result):
    """One row per (objective, lag): the first step at which the run reaches the target (``steps``, NaN if never),
    ``never``, ``drawn``: the steps, or where "never" is drawn (NEVER_AT of the run's K above its end), and each
    line's style (``steps_coincident``)."""
    rows = [{"objective": objective, "label": LABELS[objective], "lag": float(lag),
             "steps": np.nan if steps is None else float(steps), "never": steps is None,
             "drawn": never_at(result.steps) if steps is None else float(steps)}
            for objective, values in result.steps_to_target().items()
            for lag, steps in zip(result.lags, values, strict=True)]
    frame = pd.DataFrame(rows, columns=["objective", "label", "lag", "steps", "never", "drawn"])
    styles = coincidence.line_styles(steps_coincident(frame), frame["objective"].unique().tolist())
    return coincidence.with_line_styles(frame, styles, series="objective")


def steps_coincident(frame):
    """[Coincidence] of the objectives' lines of steps to the target (the lags where they reach it)."""
    return coincidence.coincidences(frame[~frame["never"]], "lag", "steps", series="objective")


NEVER_AT = 0.12          # "never" is drawn this far (a share of K) above the run's last step


def never_at(steps):
    return steps * (1 + NEVER_AT)


def saturation_note(result):
    """'' or the sentence saying which runs have saturated: within SATURATED of J = 1 after the K steps."""
    flags, reference = result.saturated()
    runs = [(objective, lag) for objective, values in flags.items()
            for lag, flag in zip(result.lags, values, strict=True) if flag]
    total = sum(len(values) for values in flags.values())
    if not runs:
        return ""
    which = "every run" if len(runs) == total else f"{len(runs)} of the {total} runs"
    return (f"Saturated: after {result.steps} steps {which} (and on_policy{'' if reference else ' not'}) ended within "
            f"{SATURATED:g} of J = 1, the most J can be, so J at the last step no longer tells them apart; the steps "
            "to the target (below) and the curves' rise do.")


def ahead_words(reading, objective):
    """On one toy, where a lag puts the run of ``objective`` ahead of its run at the first lag (what a reader takes as
    "staleness helps"), in words: '' if nowhere; else 'a lag of 4, 8 or 16 puts decoupled ahead of its run at lag 0 (by
    up to 0.016 in J at some step; the target no sooner)'."""
    lags = [lag for lag, flag in zip(reading.lags[1:], reading.ahead(objective), strict=True) if flag]
    if not lags:
        return ""
    steps = reading.steps[objective]
    sooner = [lag for lag, value in zip(reading.lags[1:], steps[1:], strict=True)
              if value is not None and (steps[0] is None or value < steps[0])]
    return (f"a lag of {_either(lags)} puts {objective} ahead of its run at lag {reading.lags[0]:g} (by up to "
            f"{max(reading.lead[objective]):.3f} in J at some step; the target "
            + (f"sooner at {_either(sooner)})" if sooner else "no sooner)"))


def _either(values):
    words = [f"{value:g}" for value in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def population_frame(readings, current):
    """One row per (toy, objective, lag) of ``readings`` ({seed: Reading}): the steps to the target as
    ``steps_frame`` draws them, and whether the toy is the current one (seed ``current``)."""
    rows = []
    for seed, reading in readings.items():
        K = reading.run_steps
        rows += [{"seed": seed, "current": seed == current, "objective": objective, "lag": float(lag),
                  "never": steps is None, "drawn": never_at(K) if steps is None else float(steps)}
                 for objective, values in reading.steps.items() for lag, steps in zip(reading.lags, values, strict=True)]
    return pd.DataFrame(rows, columns=["seed", "current", "objective", "lag", "never", "drawn"])


def tally_words(tally, objective, largest):
    """How often a population's toys show what the view shows of one objective: 'ahead of lag 0 at some lag at 27 of
    30 toys; later at lag 16 than at lag 0 at 18'."""
    return (f"{SHORT[objective]}: ahead of its run at lag 0 at some lag on {tally.ahead[objective]} of {tally.toys} "
            f"toys; later to the target at {largest:g} than at 0 on {tally.behind[objective]}")
