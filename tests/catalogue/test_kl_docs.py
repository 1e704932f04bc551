"""docs/reference.md's table framework → KL estimator, placement, ratio, default β and source agrees with the presets
(``catalogue.kl_presets``): a row per framework with a preset, naming its commit, its default β and every function
its presets cite; the frameworks without one (``NO_KL_FRAMEWORKS``) have a row saying so."""

import re
from pathlib import Path

import pytest

from toylab.catalogue.kl_presets import KL_PRESETS, NO_KL_FRAMEWORKS

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
HEADER = "| framework (commit) | KL in the loss | KL in the reward | estimator, clamps | ratio on the term | default β | source |"


def table_rows():
    """{framework id (its name lower-cased, '-' as '_'): its cells} of the table under HEADER."""
    lines = DOC.read_text().splitlines()
    start = lines.index(HEADER) + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].split(" (")[0].lower().replace("-", "_")] = cells
    return rows


def cited_functions(code):
    """The functions a preset's ``code`` names: an identifier (not a file) followed by its lines."""
    return [name for name in re.findall(r"([A-Za-z_][\w.]*) \d", code) if not name.endswith((".py", ".yaml"))]


@pytest.mark.parametrize("preset", KL_PRESETS)
def test_each_preset_is_in_the_docs_table_with_its_commit_beta_and_functions(preset):
    row = table_rows()[KL_PRESETS[preset].framework]
    chosen = KL_PRESETS[preset]
    assert f"({chosen.commit[:7]})" in row[0]
    assert chosen.default_beta in [float(number) for number in re.findall(r"\d+(?:\.\d+)?", row[5])], row[5]
    for function in cited_functions(chosen.code):
        assert function.rsplit(".", 1)[-1] in row[6], (preset, function)


def test_frameworks_without_a_kl_preset_say_why():
    rows = table_rows()
    assert "prime_rl" in NO_KL_FRAMEWORKS and "prime_rl" in rows
    assert "distillation" in " ".join(rows["prime_rl"])
