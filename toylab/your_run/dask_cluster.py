"""A Dask cluster for a run's steps, reached within deadlines: every wait on it has one, and each failure is one line
naming its cause. The one module that knows Dask's wire format (tests/cli/test_inspect_distributed.py checks it
against a real scheduler).

Dask's own client waits without a bound where a hostile or wrong address can hold it: its ``connect`` reads the
scheduler's greeting with no deadline (an address that accepts TCP and stays silent held the command past 590 s), and
allocates whatever length the peer's first 8 bytes announce (an HTTP server's "HTTP/1.1" read as 3·10¹⁸ bytes, a peer
announcing 3 GB grew the client to 2.5 GB). So before Dask's client is given an address, it is checked here:

    scheme      tcp:// (or none) and tls:// only; inproc:// (one process's own), ucx:// (UCX-Py, not installed with
                Dask), ws:// and others refused in words
    reachable   a TCP connection within CONNECT_SECONDS (tls://: and its TLS handshake, with the context Dask's
                configuration gives: distributed.comm.tls.*)
    a scheduler its greeting within CONNECT_SECONDS: a Dask scheduler speaks first, a message of at most
                GREETING_BYTES (8 bytes of length, then frames: their count, their lengths, each frame) whose first
                frame is a msgpack map naming "python" and "pickle-protocol" (``distributed.comm.core.connect``'s
                handshake, read by ``comm.tcp.TCP.read``)

and once connected: at least one worker within WORKERS_SECONDS (``Client.wait_for_workers``), and a task on one of them
that imports toylab and finds the run's first file at its path, within WORKER_CHECK_SECONDS (the scheduler unpickles
the task too: a scheduler without toylab fails it the same way). The run's own steps are
waited for within the run's seconds (``run_map``).
"""

import logging
import os
import socket
import ssl
import struct
import warnings
from contextlib import contextmanager

from toylab.text import quoted
from toylab.your_run.bounds import LogError

CONNECT_SECONDS = 10.0          # a TCP connection and the scheduler's greeting
WORKERS_SECONDS = 30.0          # a cluster without workers: how long one may take to join
WORKER_CHECK_SECONDS = 60.0     # a worker's check that it imports toylab and sees the run (its first import of it)
GREETING_BYTES = 1 << 16        # a scheduler's greeting: 58 bytes in distributed 2026.8 (native byte order, as Dask)
DISTRIBUTED_EXTRA = ("Dask distributed is an optional extra: pip install -r requirements-distributed.txt "
                     "(dask[distributed])")
OTHER_SCHEMES = {"inproc": "an address inside one Python process (inproc://), which no other process can reach",
                 "ucx": "UCX (ucx://), whose comm Dask no longer ships (UCX-Py and distributed-ucxx are not installed "
                        "with it)",
                 "ws": "a websocket (ws://)", "wss": "a websocket over TLS (wss://)"}


@contextmanager
def cluster_client(scheduler, workers, first_path):
    """A Dask client: of a new local cluster of ``workers`` processes (one thread each) for "local", else of the
    running scheduler at the address, checked first (see the module docstring); its workers checked to import toylab
    and see ``first_path`` (None: a run in memory). LogError, one line, for each way it can fail."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise LogError(f"--scheduler needs Dask, which is not installed: {DISTRIBUTED_EXTRA}") from None
    if scheduler == "local":
        with warnings.catch_warnings():              # its HTTP server moving off a busy port 8787 is no news here
            warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=logging.ERROR)
        with cluster, Client(cluster) as client:
            yield client
        return
    address = checked_address(scheduler)
    try:
        client = Client(address, timeout=f"{CONNECT_SECONDS:g}s")
    except Exception as error:                      # Dask's own errors, whatever their class: one line
        raise LogError(f"--scheduler {scheduler}: Dask could not connect ({_first_line(error)})") from None
    with client:
        _check_workers(client, scheduler, first_path)
        yield client


def checked_address(scheduler):
    """The address Dask's client is given (tcp:// added to a bare host:port) once a Dask scheduler has answered at it
    within CONNECT_SECONDS; LogError naming why not."""
    scheme, _, location = scheduler.rpartition("://")
    scheme = scheme.lower() or "tcp"
    if scheme not in ("tcp", "tls"):
        what = OTHER_SCHEMES.get(scheme, f"an address of a kind toylab does not connect to ({quoted(scheme + '://')})")
        raise LogError(f"--scheduler {scheduler}: {what}; give the scheduler's tcp://HOST:PORT (or tls://)")
    host, _, port = location.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LogError(f"--scheduler {scheduler}: not an address: give tcp://HOST:PORT (a Dask scheduler's is "
                       "shown when it starts, port 8786 by default)")
    context = _tls_context(scheduler) if scheme == "tls" else None
    greeting = _greeting(scheduler, host, int(port), context, CONNECT_SECONDS)
    if not _is_dask_greeting(greeting):
        raise LogError(f"--scheduler {scheduler}: not a Dask scheduler (it answered, but not as Dask's scheduler "
                       "greets a client)")
    return f"{scheme}://{location}"


def _tls_context(scheduler):
    """The client's SSL context from Dask's configuration (distributed.comm.tls.*); LogError when it sets none."""
    from distributed.security import Security
    context = Security().get_connection_args("client").get("ssl_context")
    if context is None:
        raise LogError(f"--scheduler {scheduler}: tls:// needs Dask's TLS configuration (distributed.comm.tls.ca-file, "
                       ".client.cert and .client.key, or DASK_DISTRIBUTED__COMM__TLS__… variables), and none is set")
    return context


def _greeting(scheduler, host, port, context, seconds):
    """The first message the peer sends (at most GREETING_BYTES), within ``seconds`` of connecting; LogError saying
    why none came."""
    try:
        connection = socket.create_connection((host, port), timeout=seconds)
    except TimeoutError:
        raise LogError(f"--scheduler {scheduler}: unreachable: no connection within {seconds:g} s") from None
    except OSError as error:
        raise LogError(f"--scheduler {scheduler}: unreachable ({error.strerror or error})") from None
    with connection:
        try:
            if context is not None:
                connection = context.wrap_socket(connection, server_hostname=host)
            head = _exactly(connection, 8)
            length = struct.unpack("Q", head)[0]
            if length > GREETING_BYTES:
                raise LogError(f"--scheduler {scheduler}: not a Dask scheduler: its first message announces "
                               f"{length:,} bytes (a scheduler's greeting takes {GREETING_BYTES:,} at most; "
                               f"the bytes {head!r})")
            return _exactly(connection, length)
        except ssl.SSLError as error:
            raise LogError(f"--scheduler {scheduler}: refused by TLS ({error.reason or error})") from None
        except TimeoutError:
            raise LogError(f"--scheduler {scheduler}: not a Dask scheduler: it accepted the connection but said "
                           f"nothing within {seconds:g} s (a Dask scheduler greets a client at once)") from None
        except (EOFError, OSError) as error:
            raise LogError(f"--scheduler {scheduler}: not a Dask scheduler: it closed the connection "
                           f"({_first_line(error)})") from None


def _exactly(connection, count):
    """``count`` bytes from the connection (its timeout for each read); EOFError if it closes first."""
    data = bytearray()
    while len(data) < count:
        chunk = connection.recv(min(count - len(data), 1 << 16))
        if not chunk:
            raise EOFError(f"after {len(data):,} of {count:,} bytes")
        data += chunk
    return bytes(data)


def _is_dask_greeting(message):
    """Whether ``message`` is Dask's greeting: frames (their count, their lengths, each frame, the lengths adding up)
    whose first is a msgpack map with "python" and "pickle-protocol"."""
    import msgpack  # a dependency of distributed
    if len(message) < 16:
        return False
    count = struct.unpack_from("Q", message)[0]
    if not 1 <= count <= 64 or len(message) < 8 * (count + 1):
        return False
    lengths = struct.unpack_from(f"{count}Q", message, 8)
    if 8 * (count + 1) + sum(lengths) != len(message):
        return False
    start = 8 * (count + 1)
    try:
        first = msgpack.unpackb(message[start:start + lengths[0]], raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException):
        return False
    return isinstance(first, dict) and {"python", "pickle-protocol"} <= set(first)


def _check_workers(client, scheduler, first_path):
    """LogError unless a worker joins within WORKERS_SECONDS, imports toylab and sees ``first_path``."""
    try:
        client.wait_for_workers(1, timeout=WORKERS_SECONDS)
    except TimeoutError:
        raise LogError(f"--scheduler {scheduler}: the scheduler has no workers (none joined within "
                       f"{WORKERS_SECONDS:g} s); start some (dask worker {scheduler})") from None
    try:                                              # a function of toylab's: a worker must import toylab to run it
        sees = client.submit(sees_path, first_path, pure=False).result(timeout=WORKER_CHECK_SECONDS)
    except TimeoutError:
        raise LogError(f"--scheduler {scheduler}: its workers did not run a task within {WORKER_CHECK_SECONDS:g} s")\
            from None
    except Exception as error:                       # raised on the worker (or in unpickling it there): one line
        cause = _root(error)                         # the scheduler unpickles a task too: either may lack toylab
        what = "cannot import toylab" if isinstance(cause, ImportError) else "failed a task of toylab's"
        raise LogError(f"--scheduler {scheduler}: the cluster {what} ({type(cause).__name__}: {_first_line(cause)}); "
                       "install toylab where its scheduler and workers run (pip install -r "
                       "requirements-distributed.txt and the repository on PYTHONPATH)") from None
    if not sees:
        raise LogError(f"--scheduler {scheduler}: the workers do not see the run at {first_path}: give them the same "
                       "path (a shared disk), or read it here with --workers")


def _root(error):
    """The first error of a chain (Dask wraps a worker's ModuleNotFoundError in a RuntimeError of its own)."""
    seen = {id(error)}
    while (cause := error.__cause__ or error.__context__) is not None and id(cause) not in seen:
        error, _ = cause, seen.add(id(cause))
    return error


def _first_line(error):
    text = str(error).strip()
    return (text.splitlines()[0][:160] if text else "") or type(error).__name__


def sees_path(path):
    """On a worker: whether it sees the run's file at ``path`` (None: nothing to see)."""
    return path is None or os.path.exists(path)
