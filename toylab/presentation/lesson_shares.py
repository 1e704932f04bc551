"""How often a lesson's claim holds over its population of toys, in words and as a grid: what the Lessons tab, the
tour and docs/lessons.md show of the shipped tallies (``toylab.lessons.shares``).

The grid has a row per group of the population (its setting, then each neighbour) and a cell per seed: ● the claim
holds on that toy, ■ it does not (a counterexample), ○ it does not apply there; the three glyphs are as wide, so a
seed is a column. Each cell is a link to that toy in the lesson's view, opened in a new tab, so a counterexample is one
click away.
"""

from urllib.parse import urlencode

from toylab.lessons.shares import toy_link

CELLS = {True: ":green[●]", False: ":red[■]", None: ":gray[○]"}
VERDICTS = {True: "holds", False: "does not hold", None: "does not apply"}


def totals(tallies):
    """(toys where the claim holds, toys it applies to) over the whole population."""
    return sum(t.count for t in tallies), sum(t.applicable for t in tallies)


def counterexample(tallies):
    """(group, seed) of the first toy that breaks the claim, or None."""
    return next(((t.group, t.broken[0]) for t in tallies if t.broken), None)


def summary(lesson, tallies):
    """'Holds at 118 of 120 toys: 29 of 30 at its setting · 30 of 30 at half the mismatch · … · not at [seed 4 at
    twice the mismatch](link)': the first toy where it does not hold, as a link."""
    count, applicable = totals(tallies)
    groups = " · ".join(f"{t.count} of {t.applicable} {t.group.label}" for t in tallies)
    broken = counterexample(tallies)
    example = f" · not at [seed {broken[1]} {broken[0].label}]({link(lesson, *broken)})" if broken else ""
    return f"Holds at {count} of {applicable} toys: {groups}{example}"


def legend(lesson):
    """What a cell of the grid says, with what the lesson's check tests on each toy."""
    return (f"On each toy the check tests: {lesson.predicate}. {CELLS[True]} holds · {CELLS[False]} does not · "
            f"{CELLS[None]} does not apply (or the page refuses the toy). A cell opens its toy in a new tab.")


def population_words(population):
    """'seeds 0–29 at its setting, at half the mismatch, …'."""
    seeds = population.seeds
    return f"seeds {seeds[0]}–{seeds[-1]} " + ", ".join(group.label for group in population.groups)


def link(lesson, group, seed):
    """The relative link ('?T=4&seed=7&…') of one toy of the lesson's population, in the lesson's view."""
    return "?" + urlencode(toy_link(lesson, group, seed))


def grid(lesson, tallies):
    """The population as a markdown table: a row per group with its count, and a linked cell per seed (thin spaces
    between them, so that thirty fit on a line of the page)."""
    seeds = tallies[0].seeds
    rows = [f"| toys: holds at | seeds {seeds[0]} … {seeds[-1]}, each a link to that toy |", "|---|---|"]
    for t in tallies:
        cells = "\u2009".join(f"[{CELLS[held]}]({link(lesson, t.group, seed)} \"seed {seed} {t.group.label}: the claim "
                              f"{VERDICTS[held]}\")" for seed, held in zip(t.seeds, t.holds, strict=True))
        rows.append(f"| {t.group.label}: **{t.count} of {t.applicable}** | {cells} |")
    return "\n".join(rows)


def docs_table(lessons, shipped):
    """docs/lessons.md's table: a row per lesson — its claim as its check tests it on a toy, its population, how
    often the claim holds, and the first toy where it does not, with its link (after the page's address)."""
    rows = ["| # | lesson | claim, as tested on each toy | population | holds at | a toy where it does not |",
            "|---|---|---|---|---|---|"]
    for number, lesson in enumerate(lessons, start=1):
        tallies = shipped[lesson.id]
        count, applicable = totals(tallies)
        broken = counterexample(tallies)
        groups = "; ".join(f"{t.count} of {t.applicable} {t.group.label}" for t in tallies)
        claim = lesson.predicate.replace("|", "∣")
        example = f"seed {broken[1]} {broken[0].label}: `{link(lesson, *broken)}`" if broken else "none"
        rows.append(f"| {number} | `{lesson.id}` | {claim} | {population_words(lesson.population)} | "
                    f"**{count} of {applicable}** ({groups}) | {example} |")
    return "\n".join(rows)
