"""Every command in the README's and docs/'s code blocks runs as written from a fresh clone, and says what it says.

The commands are read out of README.md's and docs/*.md's fenced blocks, and each is one kind of ``KINDS`` — the
first whose pattern it matches; a command of no kind fails here, so a new one is sorted when it is written:

- ``setup`` (a virtual environment, pip, apt-get) is not run: the requirements files it names exist;
- ``tests`` (``python -m pytest …``) collects this file with its options (so they exist), nothing more;
- ``app`` (``streamlit run streamlit_app.py``, ``toylab app``) keeps running: it is started on a free port, answers
  its health check, and is stopped;
- ``deploy`` (several servers behind nginx, docs/deploying.md) is not run: the files it names exist;
- ``toylab`` (``python -m toylab …``, or the installed command ``toylab …``, run here as the package's entry point
  ``toylab_app.command:main`` would run it) runs and exits 0 with its output (valid JSON for ``--json``), unless it names
  one of ``YOUR_OWN_PATHS``, a reader's own run, which no clone has: then it exits 2 with one line naming the
  missing path (not an argument error);
- a ``python`` block runs as a script (the fragments of docs/command-line.md with ``PRELUDES``), unless it
  subclasses a framework's trainer (``FRAMEWORK_RECIPE``): then it is compiled only.

"A fresh clone" is a folder holding links to the files git tracks, and nothing else (no outputs/, no .venv), as
the current directory. Running the commands is the slow tier; sorting them and the files named is fast.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "shell", "console", "")
KINDS = [                                                     # (kind, pattern): the first that matches
    ("setup", r"(python3? -m venv |\. \.venv/bin/activate|pip install |apt-get )"),
    ("tests", r"python -m pytest\b"),
    ("app", r"(streamlit run streamlit_app\.py|toylab app)\b"),
    ("deploy", r"for port in .*streamlit run .*nginx -c "),
    ("toylab", r"(python -m toylab|toylab)( |$)"),
]
YOUR_OWN_PATHS = {"outputs/token_exports", "logs/exp_001", "dump_details", "outputs/logprobs", "/shared/run"}
EXPECTED = {                                                  # a command (its start) → what its output says
    "python -m toylab train --steps 200 --estimators on_policy,naive,seq_tis": ["steps to 90%", "seq_tis"],
    "python -m toylab inspect examples/example_run.zip --workers 2": ["12 steps", "First step outside the early"],
    "python -m toylab inspect examples/rollouts_per_token.jsonl": ["240 sequences", "k1 = mean(log μ − log π)"],
}
FRAMEWORK_RECIPE = re.compile(r"^from (verl|trl)[. ]", re.MULTILINE)
PRELUDES = {             # names a fragment of the docs takes as given, on the shapes the docs describe
    "c = toylab.coefficients(": "import numpy as np, toylab\nrng = np.random.default_rng(0)\n"
                                "trainer_logprobs = -rng.random((4, 5))\n"
                                "sampler_logprobs = trainer_logprobs + 0.1 * rng.standard_normal((4, 5))\n"
                                "mask = np.arange(5) < np.array([[5], [3], [4], [1]])\n",
}
APP_SECONDS = 60


@dataclass(frozen=True)
class Command:
    document: str
    line: int
    text: str
    language: str

    @property
    def id(self):
        return f"{self.document}:{self.line}"


def fenced_blocks(path):
    """(language, line of the first line, text) of each fenced code block of a Markdown file."""
    blocks, language, start, lines = [], None, 0, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence and language is None:
            language, start, lines = fence.group(1), number + 1, []
        elif fence:
            blocks.append((language, start, "\n".join(lines)))
            language = None
        elif language is not None:
            lines.append(line)
    return blocks


def shell_commands(text, first):
    """(line, command) of a shell block: its comments dropped, a ``for … done`` loop one command."""
    commands, loop = [], None
    for number, line in enumerate(text.splitlines(), start=first):
        code = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not code:
            continue
        if loop is not None:
            loop = (loop[0], f"{loop[1]} {code}")
            if code == "done":
                commands.append(loop)
                loop = None
        elif code.startswith("for "):
            loop = (number, code)
        elif commands and commands[-1][1].endswith("done"):
            commands[-1] = (commands[-1][0], f"{commands[-1][1]}; {code}")     # the line after a loop goes with it
        else:
            commands.append((number, code))
    return commands


def documented():
    found = []
    for path in DOCUMENTS:
        name = str(path.relative_to(ROOT))
        for language, first, text in fenced_blocks(path):
            if language in SHELL:
                found += [Command(name, line, code, "shell") for line, code in shell_commands(text, first)]
            elif language == "python":
                found.append(Command(name, first, text, "python"))
    return found


COMMANDS = documented()
SHELL_COMMANDS = [command for command in COMMANDS if command.language == "shell"]
PYTHON_BLOCKS = [command for command in COMMANDS if command.language == "python"]


def kind(command):
    return next((kind for kind, pattern in KINDS if re.match(pattern, command.text)), None)


def of_kind(name):
    return [pytest.param(command, id=command.id) for command in SHELL_COMMANDS if kind(command) == name]


INSTALLED = "import sys; from toylab_app.command import main; sys.exit(main())"     # pyproject.toml's [project.scripts]


def words(command):
    """The command's words, ``python`` being this interpreter, ``streamlit`` its module and ``toylab`` the entry point
    an installed package puts on the PATH."""
    argv = shlex.split(command.text)
    if argv[0] == "toylab":
        return [sys.executable, "-c", INSTALLED, *argv[1:]]
    if argv[0] == "streamlit":
        return [sys.executable, "-m", *argv]
    return [sys.executable, *argv[1:]] if argv[0] in ("python", "python3") else argv


def named_paths(command):
    """The paths an inspect command names: its words after ``inspect`` that are not options or their values."""
    argv = words(command)
    if "inspect" not in argv:
        return []
    after, paths = argv[argv.index("inspect") + 1:], []
    for index, word in enumerate(after):
        if not word.startswith("-") and (index == 0 or not after[index - 1].startswith("-")
                                         or after[index - 1] == "--json"):
            paths.append(word)
    return paths


def tracked_files():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A folder like a fresh clone: a link to each of the repository's tracked top-level entries."""
    folder = tmp_path_factory.mktemp("clone")
    for top in sorted({name.split("/")[0] for name in tracked_files()}):
        (folder / top).symlink_to(ROOT / top)
    return folder


def run(argv, cwd, timeout=300):
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment)


# -- fast: every command is sorted, and what it names exists --------------------------------------------------------

def test_the_documents_hold_commands_of_every_kind():
    assert {kind(command) for command in SHELL_COMMANDS} == {name for name, _ in KINDS}
    assert len(PYTHON_BLOCKS) >= 4
    assert set(EXPECTED) <= {command.text for command in SHELL_COMMANDS}, "EXPECTED names a command no longer shown"


@pytest.mark.parametrize("command", SHELL_COMMANDS, ids=lambda command: command.id)
def test_every_command_is_of_a_known_kind(command):
    assert kind(command) is not None, f"{command.id}: {command.text!r} is of no kind in KINDS: sort it there"


@pytest.mark.parametrize("command", SHELL_COMMANDS, ids=lambda command: command.id)
def test_the_files_a_command_names_are_in_the_clone_or_a_readers_own(command):
    tracked = tracked_files()
    named = [word for word in shlex.split(command.text) if re.match(r"(requirements[\w-]*\.txt|docs/\S+|examples/\S+)",
                                                                      word.replace('"$PWD/', ""))]
    for name in named:
        name = name.replace("$PWD/", "").strip('"')
        assert name in tracked, f"{command.id}: {name} is not in a clone"
    for path in named_paths(command):
        assert (path in YOUR_OWN_PATHS) != any(name == path or name.startswith(path.rstrip("/") + "/")
                                               for name in tracked), f"{command.id}: {path}"


def test_the_readme_names_only_paths_a_clone_has():
    readme = [command for command in SHELL_COMMANDS if command.document == "README.md"]
    assert not [path for command in readme for path in named_paths(command) if path in YOUR_OWN_PATHS]


# -- slow: each runs --------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("command", of_kind("toylab"))
def test_each_toylab_command_runs_as_written(command, clone):
    done = run(words(command), clone)
    missing = [path for path in named_paths(command) if path in YOUR_OWN_PATHS]
    if missing:
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr == f"toylab: error: {missing[0]}: no such file or directory\n"
        return
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    if "--json" in words(command):
        json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    for text in next((said for start, said in EXPECTED.items() if command.text.startswith(start)), []):
        assert text in done.stdout, (text, done.stdout[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("command", of_kind("tests"))
def test_each_test_command_takes_its_options(command, clone):
    this = str(Path(__file__).relative_to(ROOT))
    done = run([*words(command), "--collect-only", "-p", "no:cacheprovider", this], clone)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+(/\d+)? tests? collected", done.stdout), done.stdout[-500:]


@pytest.mark.slow
@pytest.mark.parametrize("command", of_kind("app"))
def test_the_app_command_serves_the_page_until_stopped(command, clone):
    from tests.browser import free_port

    port = free_port()
    argv = [*words(command), "--server.port", str(port), "--server.headless", "true"]
    server = subprocess.Popen(argv, cwd=clone, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + APP_SECONDS
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    if response.read() == b"ok":
                        break
            except OSError:
                time.sleep(0.25)
        else:
            pytest.fail(f"{command.text}: not serving after {APP_SECONDS} s: {server.stderr.read()[-2000:]}")
        assert server.poll() is None                             # it keeps running: the README says so
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("block", [pytest.param(block, id=block.id) for block in PYTHON_BLOCKS])
def test_each_python_block_runs(block, clone):
    if FRAMEWORK_RECIPE.search(block.text):
        compile(block.text, block.id, "exec")                    # a framework's trainer subclassed: needs it
        return
    prelude = next((text for start, text in PRELUDES.items() if block.text.startswith(start)), "")
    done = run([sys.executable, "-c", prelude + block.text], clone)
    assert done.returncode == 0, done.stderr[-2000:]
    if "# equal" in block.text:
        first, second = map(float, done.stdout.split())
        assert first == pytest.approx(second, rel=1e-9)
