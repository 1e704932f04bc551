"""A run summarised on Dask (the optional extra, requirements-distributed.txt): a local cluster of two worker
processes (``--scheduler local --workers 2``) and a running cluster's address (``--scheduler ADDRESS``) give the
numbers one process gives, exactly. Skipped when Dask is not installed, unless TOYLAB_REQUIRE_DISTRIBUTED=1 (CI
with the extra), which makes its absence a failure."""

import importlib.util
import json
import os

import pytest
from framework_dumps import prime_run

from toylab.cli.main import main

INSTALLED = importlib.util.find_spec("distributed") is not None
REQUIRED = os.environ.get("TOYLAB_REQUIRE_DISTRIBUTED") == "1"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not INSTALLED and not REQUIRED, reason="Dask distributed, an optional extra, is not installed (pip install -r "
    "requirements-distributed.txt); TOYLAB_REQUIRE_DISTRIBUTED=1 makes that a failure")]


def inspected(capsys, *argv):
    assert main(["inspect", *argv, "--json"]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    return json.loads(out.out)


@pytest.fixture(scope="module")
def cluster():
    if not INSTALLED:
        pytest.fail("TOYLAB_REQUIRE_DISTRIBUTED=1, but Dask distributed is not installed: pip install -r "
                    "requirements-distributed.txt")
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as running:
        yield running


@pytest.fixture
def directory(tmp_path):
    prime_run(tmp_path)
    return str(tmp_path)


def test_a_local_cluster_of_two_gives_the_single_process_numbers(capsys, directory):
    if not INSTALLED:
        pytest.fail("TOYLAB_REQUIRE_DISTRIBUTED=1, but Dask distributed is not installed")
    single = inspected(capsys, directory, "--workers", "1")
    assert inspected(capsys, directory, "--scheduler", "local", "--workers", "2") == single


def test_a_running_cluster_gives_the_single_process_numbers(capsys, directory, cluster):
    single = inspected(capsys, "examples/example_run.zip", "--workers", "1")
    assert inspected(capsys, "examples/example_run.zip", "--scheduler", cluster.scheduler_address) == single
    assert inspected(capsys, directory, "--scheduler", cluster.scheduler_address) == inspected(capsys, directory)


def test_an_address_where_no_scheduler_answers_is_one_line_and_exit_2(capsys):
    try:
        code = main(["inspect", "examples/example_run.zip", "--scheduler", "tcp://127.0.0.1:9"])
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1
    assert out.err.startswith("toylab: error: --scheduler tcp://127.0.0.1:9: no Dask scheduler answers there")
