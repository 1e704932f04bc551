"""toylab/__init__'s map names every module of the package, and the library never imports the page."""

import re
from pathlib import Path

import toylab

PACKAGE = Path(toylab.__file__).parent


def test_the_package_docstring_maps_every_module():
    named = set(re.findall(r"[a-z_]+", toylab.__doc__))
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert modules - named == set()


def test_the_library_imports_neither_streamlit_nor_the_views():
    for path in PACKAGE.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(streamlit|views)\b", text, re.M), path.name
