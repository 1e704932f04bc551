"""The words of a run's view (several steps, every metric against step): its headline, the notices of its steps,
and the captions under its two charts, each from the run's summaries and the steps at which metrics left their
early range (``toylab.your_run.steps``)."""

from toylab.presentation.coincidence import dashed_caption, describe
from toylab.presentation.estimates import value_text
from toylab.your_run.steps import AFFECTED_SERIES, EARLY_MIN, EARLY_SHARE

NOTICES_SHOWN = 5


def run_headline(summaries):
    """"**A run of N steps** (tokens in sequences, steps read)": the read steps' totals, in Markdown."""
    read = [summary for summary in summaries if "error" not in summary]
    plural = "s" if len(summaries) != 1 else ""
    return (f"**A run of {len(summaries):,} step{plural}** ({sum(s['tokens'] for s in read):,} response tokens in "
            f"{sum(s['sequences'] for s in read):,} sequences, {len(read):,} steps read)")


def failed_steps_note(failed):
    """The warning over the table of ``failed`` steps (``run_frames.failed_steps_frame``)."""
    return f"{len(failed)} step(s) could not be read; the others are shown, and the chart skips those steps."


def step_notices(summaries, shown=NOTICES_SHOWN):
    """The read steps' notices, each after its step ("step 3: …"), the first ``shown`` and how many more; "" if
    none."""
    noticed = [f"step {summary['step']}: {notice}" for summary in summaries if "error" not in summary
               for notice in summary.get("notices", ())]
    more = [f"… and {len(noticed) - shown} more"] if len(noticed) > shown else []
    return "; ".join(noticed[:shown] + more)


def steps_caption(labels, departures, constant):
    """Under the metrics chart: what the dots, band and dashed rule are, the metrics that left their early range
    (``departures``, those with a label) at which step, and the metrics not drawn (``constant``: the same at every
    step) with their value."""
    left = [f"{labels[key]} at step {step}" for key, step in departures.items() if step is not None and key in labels]
    return (f"Each panel against the step (its x axis). Each step's value (orange dots) ± 2 standard errors (the band; "
            f"clustered by sequence). Dashed vermilion rule: the first step whose value ± 2 se lies wholly outside the "
            f"metric's early range (its first {EARLY_SHARE:.0%} of steps, at least {EARLY_MIN})"
            + (": " + ", ".join(left) + "." if left else "; none left it.")
            + (" Not drawn, the same at every step: " + "; ".join(f"{metric} = {value_text(number)}"
                                                                 for metric, number in constant.items()) + "."
               if constant else ""))


def affected_caption(departures, lying):
    """Under the shares chart: what it shows, the estimators whose share left its early range at which step, and
    the lines drawn dashed over the one they lie on (``lying``, ``coincidence.coincidences`` of the shares, against step)."""
    moved = [f"{key[len(AFFECTED_SERIES):]} at step {step}" for key, step in departures.items()
             if step is not None and key.startswith(AFFECTED_SERIES)]
    return ("Shares of this sample's response tokens, at the sidebar's thresholds (no standard error). Dashed rule in "
            "the estimator's colour: the first step where its share left its early range (its early values' range "
            "widened by its own width)" + (": " + ", ".join(moved) + "." if moved else "; none left it.")
            + (" " + dashed_caption(describe(lying, "step")) if lying else ""))
