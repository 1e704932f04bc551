"""``python -m toylab inspect RUN --workers N`` (local processes) and ``--scheduler`` (Dask, an optional extra): the
same numbers as one process, bad values one line with exit code 2, Dask's absence one line saying how to install it,
and the progress line on a terminal."""

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from framework_dumps import prime_run
from test_inspect_run_cli import run

from toylab.cli import inspect_run
from toylab.your_run import run_map
from toylab.your_run.run import directory_files

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def directory(tmp_path):
    prime_run(tmp_path)
    return str(tmp_path)


@pytest.mark.parametrize("value, message", [("0", "'0' is outside 1 to 256"), ("257", "'257' is outside 1 to 256"),
                                            ("two", "'two'"), ("1.5", "'1.5'")])
def test_a_bad_worker_count_is_one_line_and_exit_2(capsys, directory, value, message):
    code, out = run(capsys, directory, "--workers", value)
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("toylab: error: argument --workers:") and message in out.err


def test_without_dask_the_scheduler_option_says_how_to_install_it(capsys, directory, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "distributed" else
                        real(name, *rest))
    code, out = run(capsys, directory, "--scheduler", "local")
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("toylab: error: --scheduler needs Dask") and \
        "pip install -r requirements-distributed.txt" in out.err


def test_two_local_workers_give_one_process_numbers_without_dask(capsys, directory):
    """Two workers in a process of its own, as from the command line (a pool's processes import the main module's
    file, and a page test in this process leaves the page's script there), Dask hidden from it."""
    code, one = run(capsys, directory, "--json", "--workers", "1")
    hidden = "import sys; sys.modules['distributed'] = None; from toylab.cli.main import main; main(sys.argv[1:])"
    two = subprocess.run([sys.executable, "-c", hidden, "inspect", directory, "--json", "--workers", "2"], cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert code == 0 and one.err == two.stderr == ""
    assert json.loads(one.out) == json.loads(two.stdout)


def test_a_large_run_uses_every_core_by_default(directory, monkeypatch):
    files = directory_files(directory)
    assert run_map.default_workers(files) == 1                          # a few kilobytes: one process
    monkeypatch.setattr(run_map, "PARALLEL_BYTES", 1)
    assert run_map.default_workers(files) == len(run_map.os.sched_getaffinity(0))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_a_progress_line_gives_steps_tokens_per_second_and_time_left(capsys, directory, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(inspect_run.sys, "stderr", terminal)
    code, out = run(capsys, directory, "--json")
    drawn = terminal.getvalue()
    assert code == 0 and json.loads(out.out)["steps"]
    assert "4 of 4 steps" in drawn and "M tokens/s" in drawn and "s left" in drawn and drawn.endswith("\n")
