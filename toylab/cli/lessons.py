"""``python -m toylab lessons``: how often each lesson's claim holds over its population of toys.

    python -m toylab lessons                         every lesson: its claim as tested on a toy, its population, the
                                                     toys where it holds (as shipped with the page), one where it does not
    python -m toylab lessons ID … [--json]           only these lessons
    python -m toylab lessons [ID …] --write          compute them again over every toy of their populations and write
                                                     toylab/lessons/shares.json, and docs/lessons.md's table in a clone

A lesson's tallies are shipped, not computed on the page: after changing a lesson, its check or its population, run
``--write`` (minutes for the training lessons); tests/lessons/test_lesson_shares_recomputed.py fails until then.
"""

from pathlib import Path

from toylab.cli.arguments import ToylabParser, json_text, program
from toylab.lessons.shares import SHIPPED, shipped, write
from toylab.lessons.tour import LESSONS
from toylab.presentation.lesson_shares import counterexample, docs_table, link, population_words, totals
from toylab.text import listed

DOCS = Path(__file__).resolve().parents[2] / "docs" / "lessons.md"
TABLE_START, TABLE_END = "<!-- the table: python -m toylab lessons --write -->", "<!-- end of the table -->"


def parse_arguments(argv):
    parser = ToylabParser(prog=program("lessons"), description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", metavar="ID", help="lessons to show (default: every lesson of the tour)")
    parser.add_argument("--write", action="store_true",
                        help="compute the lessons again over their populations and write the shipped tallies "
                             "(and docs/lessons.md's table, in a clone)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    arguments = parser.parse_args(argv)
    known = [lesson.id for lesson in LESSONS]
    unknown = [id for id in arguments.ids if id not in known]
    if unknown:
        parser.error(f"no lesson {listed(unknown)}; the lessons are {listed(known)}")
    return arguments


def with_table(document, table):
    """``document`` with the text between TABLE_START and TABLE_END replaced by ``table``."""
    head, rest = document.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_START}\n{table}\n{TABLE_END}{tail}"


def lesson_result(number, lesson, tallies):
    count, applicable = totals(tallies)
    broken = counterexample(tallies)
    return {"number": number, "id": lesson.id, "claim": lesson.predicate,
            "population": population_words(lesson.population), "holds": count, "applicable": applicable,
            "groups": [{"label": t.group.label, "holds": t.count, "applicable": t.applicable, "stated": t.group.stated,
                        "held": [seed for seed, held in zip(t.seeds, t.holds, strict=True) if held is True],
                        "broken": list(t.broken)} for t in tallies],
            "a_toy_where_it_does_not_hold": None if broken is None else
            {"group": broken[0].label, "seed": broken[1], "link": link(lesson, *broken)}}


def lesson_text(result):
    lines = [f"{result['number']}. {result['id']}: holds at {result['holds']} of {result['applicable']} toys",
             f"   claim, on each toy: {result['claim']}", f"   population: {result['population']}"]
    lines += [f"   {group['label']}: {group['holds']} of {group['applicable']}"
              + (f" (the lesson states {group['stated']})" if group["stated"] is not None else "")
              + seeds(group) for group in result["groups"]]
    return "\n".join(lines)


def seeds(group):
    """', not at seed 4, 12' — or, where it holds at fewer toys than it breaks at, ', at seed 0, 17'."""
    if not group["broken"]:
        return ""
    if not group["held"]:
        return ", at no seed"
    held = len(group["held"]) < len(group["broken"])
    return f", {'at' if held else 'not at'} seed " + ", ".join(map(str, group["held" if held else "broken"]))


def main(argv):
    arguments = parse_arguments(argv)
    chosen = [lesson for lesson in LESSONS if not arguments.ids or lesson.id in arguments.ids]
    if arguments.write:
        write(LESSONS, {lesson.id for lesson in chosen}, SHIPPED)
        if DOCS.exists():
            DOCS.write_text(with_table(DOCS.read_text(encoding="utf-8"), docs_table(LESSONS, shipped())),
                            encoding="utf-8")
    tallies = shipped()
    results = [lesson_result(number, lesson, tallies[lesson.id])
               for number, lesson in enumerate(LESSONS, start=1) if lesson in chosen]
    print(json_text({"lessons": results}) if arguments.json else "\n".join(map(lesson_text, results)))
    return 0
