"""How often each lesson's claim holds over its population: computed here, and shipped for the page.

``tally(lesson)`` evaluates the lesson's check on every toy of its population (``population``): a Tally per group,
the seeds where the claim holds and where it breaks. Any other claim — a caption's, a chart's — is tallied the same
way by ``claim_tally(holds, controls, population)``: a predicate of a Settings (True, False, or None where it does
not apply), the sidebar values it is made at, and the toys around them it is claimed for. That is hundreds of exact computations a lesson — training
lessons train every toy —, too slow for a page that must stay instant, so the tallies are shipped in SHIPPED
(shares.json beside this module) and the page reads them (``shipped``). After changing a lesson, its check or its
population, write them again (and docs/lessons.md's table with them):

    python -m toylab lessons --write                 # every lesson of the tour
    python -m toylab lessons keep_mask … --write     # only these (the others kept as shipped)

tests/lessons/test_lesson_shares.py recomputes them and fails when SHIPPED is stale or a claimed share is not met.
"""

import json
from pathlib import Path

from toylab.lessons.lesson import settings_of, view_of
from toylab.lessons.population import Group, Tally
from toylab.state.query import VIEW_DEFAULTS, to_query, toy_problem, view_query

SHIPPED = Path(__file__).with_name("shares.json")


def claim_tally(holds, controls, population, seeds=None):
    """A Tally per group of ``population``: ``holds(settings)`` (True, False, or None where the claim does not apply)
    on each toy — the sidebar values ``controls`` with the group's changes, at each seed (``seeds``: a subset of the
    population's, for a quick look). A toy the page refuses (``toy_problem``) is one where it does not apply."""
    chosen = population.seeds if seeds is None else tuple(seeds)
    return tuple(Tally(group, chosen, tuple(claim_at(holds, controls, group, seed) for seed in chosen))
                 for group in population.groups)


def claim_at(holds, controls, group, seed):
    """``holds`` on one toy of a population (see ``claim_tally``)."""
    settings = settings_of(dict(controls) | dict(group.changes) | {"seed": seed})
    if toy_problem(settings):
        return None
    held = holds(settings)
    return None if held is None else bool(held)


def tally(lesson, seeds=None):
    """A Tally per group of the lesson's population: its check's ``holds`` on each toy."""
    return claim_tally(lambda settings: lesson.check(settings).holds, lesson.controls, lesson.population, seeds)


def holds_at(lesson, group, seed):
    """Whether the lesson's claim holds on one toy of its population: True, False, or None (it does not apply)."""
    return claim_at(lambda settings: lesson.check(settings).holds, lesson.controls, group, seed)


def toy_controls(lesson, group, seed):
    """The sidebar values of one toy of the lesson's population."""
    return dict(lesson.controls) | dict(group.changes) | {"seed": seed}


def toy_link(lesson, group, seed):
    """The link parameters ({URL name: text}) of that toy in the lesson's view: its tab and the tab's controls as the
    lesson's button sets them."""
    return to_query(settings_of(toy_controls(lesson, group, seed))) | view_query(VIEW_DEFAULTS | view_of(lesson))


FLAGS = {True: "1", False: "0", None: "-"}


def record(tallies):
    """Tallies as SHIPPED holds them: per group its label, changes and stated count, and a flag per seed: 1 the claim
    holds, 0 it does not, - it does not apply."""
    return [{"label": t.group.label, "changes": [list(change) for change in t.group.changes],
             "stated": t.group.stated, "seeds": list(t.seeds), "holds": "".join(FLAGS[h] for h in t.holds)}
            for t in tallies]


def read(records):
    """``record``'s inverse."""
    held = {flag: value for value, flag in FLAGS.items()}
    return tuple(Tally(Group(r["label"], tuple(tuple(change) for change in r["changes"]), r["stated"]),
                       tuple(r["seeds"]), tuple(held[flag] for flag in r["holds"])) for r in records)


def shipped(path=SHIPPED):
    """{lesson id: its Tallies} as shipped."""
    return {id: read(records) for id, records in json.loads(path.read_text(encoding="utf-8")).items()}


def write(lessons, ids=None, path=SHIPPED, progress=print):
    """Write ``path``: an entry per lesson of ``lessons``, in their order, computed again for the ``ids`` (every
    lesson if None, and any lesson ``path`` does not hold yet), the others kept as they are there."""
    before = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    everything = {}
    for lesson in lessons:
        if (ids is None or lesson.id in ids) or lesson.id not in before:
            tallies = tally(lesson)
            progress(f"{lesson.id}: " + "; ".join(map(str, tallies)))
            everything[lesson.id] = record(tallies)
        else:
            everything[lesson.id] = before[lesson.id]
    path.write_text(dumped(everything), encoding="utf-8")


def dumped(everything):
    """SHIPPED's text: a line per group, so that a change reads as a line in ``git diff``."""
    lessons = (f"{json.dumps(id)}: [\n" + ",\n".join(f"  {json.dumps(group, ensure_ascii=False)}" for group in groups)
               + "\n ]" for id, groups in everything.items())
    return "{\n " + ",\n ".join(lessons) + "\n}\n"
