"""Check that every block a generator marks as verbatim is, line for line, the framework's file at its commit.

A block in ``<framework>/generate.py`` (or ``kl_generate.py``) starts with a line

    # verbatim: <owner>/<name> <commit> <path> <first>-<last>

and ends with ``# end verbatim``; between them stand lines first to last of that file. Given a clone of each
repository (any clone holding the commit; a bare one will do), this prints one line per block and exits 1 if a
block differs:

    python tests/catalogue/reference/verbatim.py --clone THUDM/slime=/path/to/slime [--clone …] [generate.py …]

Blocks of repositories without a --clone are listed as not checked. No torch needed.

Without generators named it also checks the pipeline presets' quotes (``QUOTES`` of tests/catalogue/
test_pipelines.py: preset, side, commit, path, (first, last), the lines), each against its preset's repository
(``toylab.catalogue.pipelines.PIPELINES``), and the routing-replay and version-handling presets' quotes (``QUOTES`` of
tests/catalogue/test_hidden_presets.py: preset, repository, commit, path, (first, last), the lines).
"""

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PIPELINE_TESTS = HERE.parent / "test_pipelines.py"
HIDDEN_PRESET_TESTS = HERE.parent / "test_hidden_presets.py"
START = re.compile(r"^# verbatim: (\S+) ([0-9a-f]{7,40}) (\S+) (\d+)-(\d+)$")
END = "# end verbatim"


def blocks(path):
    """(repository, commit, path, first, last, lines) of each verbatim block of a generator."""
    lines = Path(path).read_text().splitlines()
    found, current = [], None
    for line in lines:
        if current is None:
            match = START.match(line)
            if match:
                repository, commit, source, first, last = match.groups()
                current = (repository, commit, source, int(first), int(last), [])
        elif line == END:
            found.append(current)
            current = None
        else:
            current[5].append(line)
    if current is not None:
        raise ValueError(f"{path}: a verbatim block has no end")
    return found


def pipeline_quotes():
    """(repository, commit, path, first, last, lines) of each quote in test_pipelines.QUOTES, read without importing
    the test module (its repository from the preset's row)."""
    sys.path.insert(0, str(ROOT))
    from toylab.catalogue.pipelines import PIPELINES
    tree = ast.parse(PIPELINE_TESTS.read_text())
    quotes = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", None) == "QUOTES" for target in node.targets))
    return [(PIPELINES[preset].repository, commit, path, first, last, text.split("\n"))
            for preset, _, commit, path, (first, last), text in quotes]


def hidden_preset_quotes():
    """(repository, commit, path, first, last, lines) of each quote in test_hidden_presets.QUOTES."""
    tree = ast.parse(HIDDEN_PRESET_TESTS.read_text())
    quotes = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", None) == "QUOTES" for target in node.targets))
    return [(repository, commit, path, first, last, text.split("\n"))
            for _, repository, commit, path, (first, last), text in quotes]


def source_lines(clone, commit, path, first, last):
    text = subprocess.run(["git", "-C", clone, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    return text.splitlines()[first - 1:last]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", action="append", default=[], help="owner/name=path of a clone")
    parser.add_argument("generators", nargs="*", help="generate.py files (default: all)")
    args = parser.parse_args(argv)
    clones = dict(item.split("=", 1) for item in args.clone)
    generators = args.generators or sorted(str(p) for pattern in ("*/generate.py", "*/kl_generate.py")
                                           for p in HERE.glob(pattern))
    sources = [(Path(generator).parent.name, block) for generator in generators for block in blocks(generator)]
    if not args.generators:
        sources += [("pipelines", quote) for quote in pipeline_quotes()]
        sources += [("hidden presets", quote) for quote in hidden_preset_quotes()]
    failed = False
    for name, (repository, commit, path, first, last, lines) in sources:
        where = f"{name}: {repository} {commit[:7]} {path} {first}-{last}"
        if repository not in clones:
            print(f"not checked  {where}")
            continue
        same = source_lines(clones[repository], commit, path, first, last) == lines
        failed |= not same
        print(f"{'verbatim' if same else 'DIFFERS':11}  {where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
