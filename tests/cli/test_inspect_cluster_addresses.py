"""``--scheduler ADDRESS`` against what can answer there (issue 41, cases 2 and 4): a silent TCP peer, garbage, a bad
frame header, a peer announcing 3 GB, schemes toylab does not connect to, TLS that fails, a real scheduler without
workers, one whose workers lack toylab. Each is one line naming the cause, exit 2, within its deadline and without
growing the process. Needs Dask (skipped without it, unless TOYLAB_REQUIRE_DISTRIBUTED=1, CI's last step)."""

import importlib.util
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from messages import says
from process_tree import tree_peak

from toylab.cli.main import main
from toylab.your_run import dask_cluster

INSTALLED = importlib.util.find_spec("distributed") is not None
REQUIRED = os.environ.get("TOYLAB_REQUIRE_DISTRIBUTED") == "1"
DASK_SECONDS = 300              # each test's time limit (tests/time_limit.py): a hang fails, it does not hold CI
pytestmark = [pytest.mark.slow, pytest.mark.time_limit(DASK_SECONDS), pytest.mark.skipif(
    not INSTALLED and not REQUIRED, reason="Dask distributed, an optional extra, is not installed (pip install -r "
    "requirements-distributed.txt); TOYLAB_REQUIRE_DISTRIBUTED=1 makes that a failure")]

ROOT = Path(__file__).resolve().parents[2]
RUN = "examples/example_run.zip"


@pytest.fixture(autouse=True)
def dask_is_there():
    if not INSTALLED:
        pytest.fail("TOYLAB_REQUIRE_DISTRIBUTED=1, but Dask distributed is not installed")


def one_line(capsys, address, *options):
    """The one error line of ``inspect RUN --scheduler address`` (exit 2, nothing on stdout)."""
    try:
        code = main(["inspect", str(ROOT / RUN), "--scheduler", address, *options])
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err.count("\n") == 1 and out.err.startswith("toylab: error:"), out
    return out.err


class Peer:
    """A TCP server on 127.0.0.1 that answers every connection with ``answer(connection)``, in threads."""

    def __init__(self, answer):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.answer, self.done = answer, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.done.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answered, args=(connection,), daemon=True).start()

    def _answered(self, connection):
        with connection:
            try:
                self.answer(connection)
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.server.close()


@pytest.fixture
def peer():
    peers = []

    def start(answer):
        peers.append(Peer(answer))
        return peers[-1].address
    yield start
    for each in peers:
        each.close()


def silent(connection):
    time.sleep(30)


def garbage(connection):
    connection.sendall(b"\xde\xad\xbe\xef" * 1000)
    time.sleep(5)


def bad_frame_header(connection):
    connection.sendall(struct.pack("Q", 16) + b"\xff" * 16)          # a length Dask reads, then no frames in it
    time.sleep(5)


def announces_3_gb(connection):
    connection.sendall(struct.pack("Q", 3 * 10**9))
    block = b"\0" * (1 << 20)
    for _ in range(3_000):
        connection.sendall(block)


def http(connection):
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")


def test_a_silent_peer_is_one_line_within_the_connect_deadline(capsys, peer, monkeypatch):
    """Case 2: an address that accepts TCP and says nothing held the command past 590 s (Dask's connect reads the
    scheduler's greeting without a deadline)."""
    monkeypatch.setattr(dask_cluster, "CONNECT_SECONDS", 1.0)
    err = one_line(capsys, peer(silent))
    assert says(err, "not a Dask scheduler: it accepted the connection but said nothing within 1 s")


@pytest.mark.parametrize("answer, words", [
    (garbage, ["not a Dask scheduler: its first message announces 17,275,436,393,656,397,278 bytes"]),
    (bad_frame_header, ["not a Dask scheduler (it answered, but not as Dask's scheduler greets a client)"]),
    (announces_3_gb, ["not a Dask scheduler: its first message announces 3,000,000,000 bytes"]),
    (http, ["not a Dask scheduler: its first message announces", "the bytes b'HTTP/1.1'"]),
], ids=["garbage", "bad frame header", "3 GB", "an HTTP server"])
def test_a_peer_that_is_not_a_dask_scheduler_is_one_line_and_reads_no_more_than_its_greeting(capsys, peer, answer,
                                                                                             words):
    """Case 4: a bad frame header printed a 50-line traceback, garbage "Maximum allowed dimension exceeded", a peer
    announcing 3 GB grew the client to 2.5 GB in 8 s, an address answering HTTP "out of memory: the run is too
    large"."""
    address = peer(answer)
    tracemalloc.start()
    err = one_line(capsys, address)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert says(err, f"--scheduler {address}:", *words)
    assert peak < 50 * 2**20


@pytest.mark.parametrize("address, words", [
    ("ucx://127.0.0.1:13337", ["UCX (ucx://), whose comm Dask no longer ships"]),
    ("inproc://x", ["an address inside one Python process (inproc://)"]),
    ("ws://127.0.0.1:1", ["a websocket (ws://)"]),
    ("gopher://127.0.0.1:1", ["an address of a kind toylab does not connect to ('gopher://')"]),
    ("127.0.0.1", ["not an address: give tcp://HOST:PORT"]),
    ("tls://127.0.0.1:1", ["tls:// needs Dask's TLS configuration"]),
    ("tcp://127.0.0.1:1", ["unreachable (Connection refused)"]),
])
def test_an_address_toylab_does_not_connect_to_is_one_line(capsys, address, words):
    """Case 4: ucx:// and tls:// printed 47- and 55-line tracebacks, inproc://x "not enough values to unpack"."""
    assert says(one_line(capsys, address), *words)


def test_a_tls_handshake_that_fails_is_refused_by_tls(capsys, peer, monkeypatch):
    """With Dask's TLS configured (here a client context that checks nothing), a peer that is not TLS refuses."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    monkeypatch.setattr(dask_cluster, "_tls_context", lambda scheduler: context)
    address = peer(http).replace("tcp://", "tls://")
    assert says(one_line(capsys, address), f"--scheduler {address}: refused by TLS")


def test_a_scheduler_without_workers_is_one_line_within_the_workers_deadline(capsys, monkeypatch):
    """Case 2: a real scheduler with no workers held the command past 720 s (the steps were never run, and the
    run's 600 s were checked only between results)."""
    from distributed import LocalCluster
    monkeypatch.setattr(dask_cluster, "WORKERS_SECONDS", 2.0)
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1") as cluster:
        err = one_line(capsys, cluster.scheduler_address)
    assert says(err, "the scheduler has no workers (none joined within 2 s)",
                f"start some (dask worker {cluster.scheduler_address})")


def test_a_scheduler_whose_workers_lack_toylab_is_one_line(capsys, tmp_path):
    """Case 4: a scheduler whose environment (and its workers') lacks toylab printed a traceback."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    started = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                 "--port", str(port), "--dashboard-address", ":0"], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        listening(port)
        started.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                                         "1", "--no-dashboard"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        err = one_line(capsys, address)
    finally:
        stopped(started)
    assert says(err, "the cluster cannot import toylab (ModuleNotFoundError: No module named 'toylab')",
                "install toylab where its scheduler and workers run")


def stopped(processes, seconds=60):
    """Each process (the worker first, then its scheduler) asked to stop, and killed if it has not within ``seconds``
    (a worker whose scheduler is gone may take long to stop on a loaded machine)."""
    for process in reversed(processes):
        process.terminate()
    for process in reversed(processes):
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def listening(port, seconds=120):
    """Once something listens at the port (the scheduler started), or after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_peer_announcing_3_gb_leaves_the_process_tree_as_small_as_an_error(peer):
    """Case 4's memory on the process tree (PSS): the command against the 3 GB peer against the same command
    against a closed port; before, 2.5 GB."""
    command = [sys.executable, "-m", "toylab", "inspect", RUN, "--scheduler"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    large, _, done = tree_peak([*command, peer(announces_3_gb)], cwd=ROOT, env=env)
    closed, _, _ = tree_peak([*command, f"tcp://127.0.0.1:{free_port()}"], cwd=ROOT, env=env)
    assert done.returncode == 2 and large < closed + 50e6


def test_a_local_cluster_of_two_workers_holds_under_a_gigabyte_in_all():
    """The process tree's PSS with --scheduler local --workers 2 (the parent, the scheduler's, two workers)."""
    peak, _, done = tree_peak([sys.executable, "-m", "toylab", "inspect", RUN, "--scheduler", "local", "--workers",
                               "2", "--json"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert peak < 1e9
    assert shutil.which("true") is None or done.stderr == ""
