"""A run summarised on Dask (the optional extra, requirements-distributed.txt): a local cluster of two worker
processes (``--scheduler local --workers 2``) and a running cluster's address (``--scheduler ADDRESS``) give the
numbers one process gives, exactly. Skipped when Dask is not installed, unless TOYLAB_REQUIRE_DISTRIBUTED=1 (CI
with the extra), which makes its absence a failure."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from framework_dumps import prime_run

from toylab.cli.main import main

INSTALLED = importlib.util.find_spec("distributed") is not None
REQUIRED = os.environ.get("TOYLAB_REQUIRE_DISTRIBUTED") == "1"
DASK_SECONDS = 300              # each test's time limit (tests/time_limit.py): a hang fails, it does not hold CI
pytestmark = [pytest.mark.slow, pytest.mark.time_limit(DASK_SECONDS), pytest.mark.skipif(
    not INSTALLED and not REQUIRED, reason="Dask distributed, an optional extra, is not installed (pip install -r "
    "requirements-distributed.txt); TOYLAB_REQUIRE_DISTRIBUTED=1 makes that a failure")]


ROOT = Path(__file__).resolve().parents[2]
CLUSTER = """
import json, sys
from distributed import LocalCluster
from toylab.cli.main import main
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        main(["inspect", sys.argv[1], "--json", "--scheduler", cluster.scheduler_address])
"""


def inspected(*argv, code=None):
    """The JSON of ``python -m toylab inspect ARGV --json`` (or of ``code`` run with them) in a process of its own: a
    cluster's processes import the main module's file, and a page test in this process leaves the page's script
    there."""
    command = ["-c", code, *argv] if code else ["-m", "toylab", "inspect", *argv, "--json"]
    done = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def directory(tmp_path):
    prime_run(tmp_path)
    return str(tmp_path)


def test_a_local_cluster_of_two_gives_the_single_process_numbers(directory):
    if not INSTALLED:
        pytest.fail("TOYLAB_REQUIRE_DISTRIBUTED=1, but Dask distributed is not installed")
    assert inspected(directory, "--scheduler", "local", "--workers", "2") == inspected(directory, "--workers", "1")


def test_a_running_cluster_gives_the_single_process_numbers(directory):
    if not INSTALLED:
        pytest.fail("TOYLAB_REQUIRE_DISTRIBUTED=1, but Dask distributed is not installed")
    for run in ("examples/example_run.zip", directory):
        assert inspected(run, code=CLUSTER) == inspected(run, "--workers", "1")


def test_an_address_where_no_scheduler_answers_is_one_line_and_exit_2(capsys):
    try:
        code = main(["inspect", "examples/example_run.zip", "--scheduler", "tcp://127.0.0.1:9"])
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1
    assert out.err.startswith("toylab: error: --scheduler tcp://127.0.0.1:9: unreachable (Connection refused)")
