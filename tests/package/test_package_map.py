"""The package's folders are its map: every folder's docstring names its modules, the top level stays small,
CONTRIBUTING.md's map names every folder, and the library never imports the page."""

import re
from pathlib import Path

import toylab

PACKAGE = Path(toylab.__file__).parent
CONTRIBUTING = PACKAGE.parent / "CONTRIBUTING.md"
TOP_LEVEL_LIMIT = 12


def folders():
    """Every package folder of toylab/, the top one included."""
    return [init.parent for init in sorted(PACKAGE.rglob("__init__.py"))]


def entries(folder):
    """The modules and subfolders a folder's docstring must name (not __init__ or __main__)."""
    modules = {path.stem for path in folder.glob("*.py")} - {"__init__", "__main__"}
    subfolders = {path.parent.name for path in folder.glob("*/__init__.py")}
    return modules | subfolders


def docstring(folder):
    text = (folder / "__init__.py").read_text()
    match = re.match(r'\s*"""(.*?)"""', text, re.S)
    assert match, f"{folder} has no docstring"
    return match.group(1)


def test_every_folder_docstring_names_each_of_its_modules():
    for folder in folders():
        named = set(re.findall(r"[a-z_]+", docstring(folder)))
        assert entries(folder) - named == set(), folder.relative_to(PACKAGE.parent)


def test_the_top_level_holds_at_most_twelve_entries():
    top = [path.name for path in PACKAGE.iterdir() if path.name != "__pycache__"]
    assert len(top) <= TOP_LEVEL_LIMIT, sorted(top)


def test_every_folder_but_the_top_only_documents():
    """A subpackage's __init__ holds its docstring and nothing else, so importing a module runs no other code."""
    for folder in folders()[1:]:
        text = (folder / "__init__.py").read_text()
        assert text.strip().endswith('"""') and text.count('"""') == 2, folder.relative_to(PACKAGE.parent)


def test_contributing_names_every_folder_with_its_idea():
    section = CONTRIBUTING.read_text().split("# How it is organised", 1)[1].split("\n## ", 1)[0]
    for folder in folders()[1:]:
        assert f"{folder.relative_to(PACKAGE.parent).as_posix()}/" in section, folder.name


def test_the_library_imports_neither_streamlit_nor_the_views():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(streamlit|toylab_app)\b", text, re.M), path.name
