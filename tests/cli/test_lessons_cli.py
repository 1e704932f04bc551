"""``python -m toylab lessons``: each lesson's claim, population and how often it holds, as shipped; --write computes
them again into the file it is given, keeping the other lessons; a bad lesson id is one line and exit status 2."""

import json
import shutil

import pytest

from toylab.cli import lessons as command
from toylab.cli.main import main
from toylab.lessons.shares import SHIPPED, shipped, write
from toylab.lessons.tour import LESSONS
from toylab.presentation.lesson_shares import totals


def test_every_lesson_in_text_with_its_count_and_groups(capsys):
    assert main(["lessons"]) == 0
    out = capsys.readouterr().out
    shares = shipped()
    for number, lesson in enumerate(LESSONS, start=1):
        count, applicable = totals(shares[lesson.id])
        assert f"{number}. {lesson.id}: holds at {count} of {applicable} toys" in out
        assert f"   claim, on each toy: {lesson.predicate}" in out
        for t in shares[lesson.id]:
            assert f"   {t.group.label}: {t.count} of {t.applicable}" in out


def test_one_lesson_as_json(capsys):
    assert main(["lessons", "logged_reward", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["lessons"]
    tallies = shipped()["logged_reward"]
    assert (result["id"], result["number"]) == ("logged_reward", 6)
    assert [g["holds"] for g in result["groups"]] == [t.count for t in tallies]
    assert [g["broken"] for g in result["groups"]] == [list(t.broken) for t in tallies]
    first = next(t for t in tallies if t.broken)
    where = result["a_toy_where_it_does_not_hold"]
    assert (where["group"], where["seed"]) == (first.group.label, first.broken[0])
    assert where["link"].startswith("?") and f"seed={first.broken[0]}" in where["link"]


def test_an_unknown_lesson_is_one_line_and_status_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["lessons", "weight_below_one", "no_such_lesson"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith("toylab: error: no lesson 'no_such_lesson'")


def test_write_computes_the_chosen_lessons_and_keeps_the_others(tmp_path):
    path = tmp_path / "shares.json"
    shutil.copy(SHIPPED, path)
    before = json.loads(path.read_text(encoding="utf-8"))
    before["weight_below_one"][0]["holds"] = "0" * 30                  # a stale entry, to be computed again
    before["token_bias"][0]["holds"] = "0" * 30                         # another, to be kept as it is
    path.write_text(json.dumps(before), encoding="utf-8")
    write(LESSONS, {"weight_below_one"}, path, progress=lambda line: None)
    after = shipped(path)
    assert after["weight_below_one"] == shipped()["weight_below_one"]
    assert after["token_bias"][0].holds == (False,) * 30
    assert list(after) == [lesson.id for lesson in LESSONS]


def test_the_docs_table_is_replaced_between_its_markers():
    document = f"intro\n{command.TABLE_START}\nold\n{command.TABLE_END}\nafter\n"
    assert command.with_table(document, "new") == f"intro\n{command.TABLE_START}\nnew\n{command.TABLE_END}\nafter\n"
