"""Every link inside the repository's Markdown resolves: to a file that exists, and to a heading of that file
when it names one (GitHub's anchors: the heading lower-cased, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchor of each heading outside fenced code."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.*)", line)):
            found.add(re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-"))
    return found


def links(path: Path) -> list[str]:
    """Links outside fenced code that stay inside the repository."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("requirements", ["requirements.txt", "requirements-dev.txt"])
def test_the_requirements_comments_name_files_that_exist(requirements):
    named = re.findall(r"\(((?:toylab|tests)/[\w/.]+\.py)", (ROOT / requirements).read_text(encoding="utf-8"))
    assert named and all((ROOT / path).is_file() for path in named), named


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_resolves(document):
    assert links(document) or document.name != "README.md"
    for target in links(document):
        file, _, anchor = target.partition("#")
        linked = (document.parent / file).resolve() if file else document
        assert linked.exists(), f"{target} in {document.name}: no such file"
        if anchor:
            assert anchor in anchors(linked), f"{target} in {document.name}: no such heading"
