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


MOST = run_map.most_workers()


@pytest.mark.parametrize("value, message", [("0", f"'0' is outside 1 to {MOST}"),
                                            (str(MOST + 1), f"'{MOST + 1}' is outside 1 to {MOST}"),
                                            ("256", f"'256' is outside 1 to {MOST}"), ("two", "'two'"),
                                            ("1.5", "'1.5'")])
def test_a_bad_worker_count_is_one_line_and_exit_2(capsys, directory, value, message):
    """Issue 41, case 3: --workers 256 started 256 processes on a 2-core machine (over 5 GB); the most is what the
    machine holds, said in --help and in the refusal."""
    code, out = run(capsys, directory, "--workers", value)
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("toylab: error: argument --workers:") and message in out.err
    assert "this machine gives this process" in out.err


def test_the_most_workers_are_the_cores_and_a_gigabyte_of_available_memory_each(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683792 kB\nMemAvailable:    3500000 kB\n")
    assert run_map.available_bytes(str(meminfo), str(tmp_path)) == 3_584_000_000
    (tmp_path / "memory.max").write_text("3000000000\n")
    (tmp_path / "memory.current").write_text("1000000000\n")
    assert run_map.available_bytes(str(meminfo), str(tmp_path)) == 2_000_000_000            # the cgroup's limit
    for cores, memory, most in ((2, 24e9, 2), (16, 3.5e9, 3), (8, None, 8), (4, 0.2e9, 1)):
        monkeypatch.setattr(run_map, "machine", lambda cores=cores, memory=memory: (cores, memory))
        assert run_map.most_workers() == most


def test_the_help_says_the_most_workers(capsys):
    code, out = run(capsys, "examples/example_run.zip", "--help")
    help = " ".join(out.out.split())
    assert code == 0 and f"at most one per core this process may use and per 1 GB of memory available ({MOST} here" \
        in help


def test_without_dask_the_scheduler_option_says_how_to_install_it(capsys, directory, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "distributed" else
                        real(name, *rest))
    code, out = run(capsys, directory, "--scheduler", "local")
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("toylab: error: --scheduler needs Dask") and \
        "pip install -r requirements-distributed.txt" in out.err


@pytest.mark.slow                 # starts two worker processes: about 4 s alone
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
    assert run_map.default_workers(files) == MOST


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


@pytest.mark.slow
def test_two_workers_on_a_run_of_lying_files_hold_under_a_gigabyte_in_all(tmp_path):
    """Issue 41's bounds on the process tree (PSS: the parent, the pool's server and its two workers): four steps, each
    a 240-byte Parquet file whose one page holds 10⁸ values (3.3 GB each when decoded); every step is refused unread."""
    from hostile_third import lying_parquet
    from process_tree import tree_peak
    for step in range(1, 5):
        (tmp_path / f"step_{step}.parquet").write_bytes(lying_parquet()[1])
    peak, _, done = tree_peak([sys.executable, "-m", "toylab", "inspect", str(tmp_path), "--workers", "2"], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "its pages hold 100,000,000 values" in done.stderr, done.stderr
    assert peak < 1e9
