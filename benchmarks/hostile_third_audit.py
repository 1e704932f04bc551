"""Issue 41's third audit, case by case, against the command line and the page's script: the process tree's peak PSS,
the wall time, and what the user sees.

    python benchmarks/hostile_third_audit.py cli [--tree PATH] [--python PY] [--only WORDS] [--json out.json]
    python benchmarks/hostile_third_audit.py page [--tree PATH] [--only WORDS] [--json out.json]
    python benchmarks/hostile_third_audit.py table before.json after.json

``cli`` runs each case's command (``python -m toylab inspect|train``) in a fresh process of the code in ``--tree``
(default: this checkout; give a copy of an older commit for the "before" side) with ``--python`` (an environment with
Dask for the --scheduler cases: ``python3 -m venv /tmp/venv-dask && /tmp/venv-dask/bin/pip install -r
requirements-distributed.txt -r requirements-dev.txt``). The peers a --scheduler case needs run here: fake TCP peers
in threads (silent, garbage, a bad frame header, a 3 GB announcement), a real ``dask scheduler`` with no workers, and
one whose worker cannot import toylab. Memory is the PSS of the command's whole process tree (``tests/process_tree.py``:
workers and Dask's processes included), sampled every 50 ms; a case is stopped after ``--timeout`` seconds.

``page`` runs the page's script under streamlit.testing (AppTest) in a fresh process of ``--tree``: an upload on the
Your run tab, or the page's first run on a link, then the tab's answer; the process's peak resident set (VmHWM), its
resident set before the upload (or the link) and after the answer (after a garbage collection: what the server keeps),
and the time of the upload's run (or the link's).

Timings depend on the machine and its load (printed): compare runs made back to back.
"""

import argparse
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hostile_third as hostile  # noqa: E402
from hostile_runs import step_log, zipped  # noqa: E402
from page_latency import page_script  # noqa: E402
from process_tree import tree_peak  # noqa: E402

MB = 1e6
RUN = "examples/example_run.zip"
CASE_7 = ["--temperature", "0.25", "--mismatch", "0", "--anchor", "bypass", "--loss", "ipo_kl", "--weights-at",
          "current", "--lr", "10", "--steps", "10", "--minibatches", "2", "--epochs", "2"]


# -- peers a --scheduler case connects to ---------------------------------------------------------------------------

def serve(answer):
    """tcp://127.0.0.1:PORT of a server answering each connection with ``answer(connection)`` in a thread."""
    server = socket.create_server(("127.0.0.1", 0))

    def loop():
        while True:
            connection, _ = server.accept()
            threading.Thread(target=_answered, args=(answer, connection), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}"


def _answered(answer, connection):
    with contextlib.suppress(OSError), connection:
        answer(connection)


def silent(connection):
    time.sleep(3600)


def garbage(connection):
    connection.sendall(b"\xde\xad\xbe\xef" * 1000)
    time.sleep(3600)


def bad_frame_header(connection):
    connection.sendall(struct.pack("Q", 16) + b"\xff" * 16)
    time.sleep(3600)


def announces_3_gb(connection):
    connection.sendall(struct.pack("Q", 3 * 10**9))
    block = b"\0" * (1 << 20)
    while True:
        connection.sendall(block)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def started(python, arguments, env):
    """A Dask scheduler (and workers) in processes of their own, in a folder where toylab is not importable."""
    return subprocess.Popen([python, "-m", *arguments], cwd=tempfile.gettempdir(), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def scheduler(python, tree, workers_without_toylab):
    """(address, processes) of a real scheduler that imports toylab (of ``tree``) with no workers, or of one that
    cannot, with a worker that cannot either."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    if not workers_without_toylab:
        env["PYTHONPATH"] = str(tree)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes = [started(python, ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--dashboard-address", ":0"], env)]
    for _ in range(600):
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        time.sleep(0.2)
    if workers_without_toylab:
        processes.append(started(python, ["distributed.cli.dask_worker", address, "--nthreads", "1",
                                          "--no-dashboard"], env))
        time.sleep(8)
    return address, processes


# -- the command line ---------------------------------------------------------------------------------------------

def cli_cases(directory, python):
    """{label: (argv after ``python -m toylab``, what to look for in the output, a setup returning cleanups)}."""
    lying = write(directory, *hostile.lying_parquet())
    understated = write(directory, *hostile.understated_zip(real={"step_1.jsonl": step_log()}))
    escaped = Path(directory) / "escaped_run"
    escaped.mkdir()
    (escaped / "step_1.jsonl").write_bytes(step_log())
    (escaped / hostile.escape_named(2)).write_bytes(b"not json\n")
    linked = Path(directory) / "linked_run"
    linked.mkdir()
    (linked / "step_1.jsonl").write_bytes(step_log())
    (Path(directory) / "secret.jsonl").write_bytes(step_log(5))
    (linked / "step_2.jsonl").symlink_to(Path(directory) / "secret.jsonl")
    ranks = Path(directory) / "ranks_run"
    for step, kept in ((1, (0, 5)), (2, (0,))):
        (ranks / f"step_{step}").mkdir(parents=True)
        for rank in kept:
            (ranks / f"step_{step}" / f"rank_{rank}.jsonl").write_bytes(step_log())
    trainable = every_trainable(python, "expected")
    trainable_sampled = every_trainable(python, "sampled")
    return {
        "1. a 240-byte Parquet file whose footer says 2 values over a page of 10^8": (["inspect", lying], None),
        "2. --scheduler: an address that accepts TCP and stays silent": (
            ["inspect", RUN, "--scheduler", "PEER:silent"], None),
        "2. --scheduler: a real Dask scheduler with no workers": (["inspect", RUN, "--scheduler", "SCHEDULER"], None),
        "3. --workers 32 (on 2 cores)": (["inspect", RUN, "--workers", "32"], None),
        "3. --workers 2": (["inspect", RUN, "--workers", "2"], None),
        "4. --scheduler: a bad frame header": (["inspect", RUN, "--scheduler", "PEER:bad_frame_header"], None),
        "4. --scheduler ucx://127.0.0.1:13337": (["inspect", RUN, "--scheduler", "ucx://127.0.0.1:13337"], None),
        "4. --scheduler tls://127.0.0.1:1": (["inspect", RUN, "--scheduler", "tls://127.0.0.1:1"], None),
        "4. --scheduler: a scheduler (and its worker) lacking toylab": (
            ["inspect", RUN, "--scheduler", "SCHEDULER_WITHOUT_TOYLAB"], None),
        "4. --scheduler: garbage bytes": (["inspect", RUN, "--scheduler", "PEER:garbage"], None),
        "4. --scheduler inproc://x": (["inspect", RUN, "--scheduler", "inproc://x"], None),
        "4. --scheduler: a peer announcing a 3 GB message": (
            ["inspect", RUN, "--scheduler", "PEER:announces_3_gb"], None),
        "4. --scheduler tcp://10.255.255.1:8786 (a private address)": (
            ["inspect", RUN, "--scheduler", "tcp://10.255.255.1:8786"], None),
        "5. train: every trainable estimator, U = 64, lag 16, T = 11, V = 4, 2,000 steps": (
            ["train", "--T", "11", "--V", "4", "--estimators", trainable, "--minibatches", "8", "--epochs", "8",
             "--lag", "16", "--steps", "2000"], None),
        "5. train: the same, sampled, V = 2, 500 steps": (
            ["train", "--T", "11", "--V", "2", "--mode", "sampled", "--estimators", trainable_sampled,
             "--minibatches", "8", "--epochs", "8", "--lag", "16", "--steps", "500"], None),
        "7. train: tok_is's update overflows at step 4 (case 7's link)": (["train", *CASE_7], "nan"),
        "8. train: rloo, N = 4096, 8 minibatches, weights at π_θ": (
            ["train", "--estimators", "rloo", "--N", "4096", "--mode", "sampled", "--minibatches", "8",
             "--weights-at", "current"], None),
        "9. inspect: a step file named with ESC sequences": (["inspect", str(escaped)], "\x1b"),
        "10. a zip whose end record says 1 entry over 550,175": (["inspect", understated], None),
        "minor: --eps-low 0.3 with --loss-param eps_low=0.1": (
            ["train", "--steps", "5", "--eps-low", "0.3", "--loss-param", "eps_low=0.1", "--json"], None),
        "minor: a symlink out of the run folder": (["inspect", str(linked)], "not followed"),
        "minor: ranks 0 and 5, step 2 has rank 0": (["inspect", str(ranks)], "ranks 1, 2, 3, 4, 5"),
    }


def every_trainable(python, mode):
    code = ("from toylab.catalogue.estimators import ESTIMATORS; from toylab.training.loop import cannot_train; "
            f"print(','.join(i for i in ESTIMATORS if not cannot_train(i, {mode!r}, 64, True)))")
    return subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def write(directory, name, content):
    path = Path(directory) / name
    path.write_bytes(content)
    return str(path)


def resolved(argv, python, tree):
    """The argv with its PEER:… and SCHEDULER… stand-ins started; (argv, processes to stop)."""
    processes, out = [], []
    for item in argv:
        if item.startswith("PEER:"):
            item = serve(globals()[item.removeprefix("PEER:")])
        elif item.startswith("SCHEDULER"):
            item, started_here = scheduler(python, tree, item == "SCHEDULER_WITHOUT_TOYLAB")
            processes += started_here
        out.append(item)
    return out, processes


def outcome(done, seconds, timeout, look_for):
    if done.returncode is None:
        return f"no answer in {timeout:.0f} s (stopped)"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    said = f"{len(lines)} lines on stderr, the last: {lines[-1][:150]}" if len(lines) > 1 else \
        (lines[0][:240] if lines else "")
    found = "" if look_for is None else f" [{look_for!r} in the output: {look_for in done.stdout + done.stderr}]"
    return f"exit {done.returncode}: {said or 'read'}{found}"


def cli(arguments):
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile-third-") as directory:
        for label, (argv, look_for) in cli_cases(directory, arguments.python).items():
            if arguments.only and not any(word in label for word in arguments.only):
                continue
            argv, processes = resolved(argv, arguments.python, arguments.tree)
            try:
                peak, seconds, done = tree_peak([arguments.python, "-m", "toylab", *argv], cwd=arguments.tree,
                                                env={**os.environ, "PYTHONPATH": str(arguments.tree)},
                                                timeout=arguments.timeout)
            finally:
                for process in processes:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, 9)
            result = outcome(done, seconds, arguments.timeout, look_for)
            rows.append({"case": label, "peak_mb": peak / MB, "seconds": seconds, "outcome": result})
            print(f"{label:<80}{peak / MB:8.0f} MB{seconds:8.1f} s  {result}", flush=True)
    return {"tree": str(arguments.tree), "load": os.getloadavg(), "cli": rows}


# -- the page's script ----------------------------------------------------------------------------------------------

PAGE = r"""
import gc, json, sys, time
from pathlib import Path
from streamlit.testing.v1 import AppTest

def status(field):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field))
    return int(line.split()[1]) / 1000

case = json.loads(Path(sys.argv[1]).read_text())
at = AppTest.from_file(sys.argv[2], default_timeout=900)              # the tree's page script
if "upload" in case:                                   # the tab first, then the upload: its time and what it keeps
    at.session_state["tab"] = "Your run"
    at.run()
gc.collect()
before = status("VmRSS")
start = time.perf_counter()
if "upload" in case:
    content = Path(case["upload"]).read_bytes()
    at.file_uploader(key="your_run_upload").set_value((Path(case["upload"]).name, content, "x")).run()
    del content
else:                                                  # a link: the page's first run on it
    at.query_params.update(case["link"])
    at.run()
seconds = time.perf_counter() - start
gc.collect()
after = status("VmRSS")
notes = [w.value for w in at.warning] + [i.value for i in at.info]
if at.exception:
    answer = "traceback: " + at.exception[0].message.splitlines()[0][:120]
elif at.error:
    answer = "error: " + at.error[0].value.strip("` ")[:200]
else:
    busy = [caption.value for caption in at.caption if "busy" in caption.value]
    notes += busy
    answer = "shown" + (": " + " | ".join(note[:160] for note in notes if case.get("about", "") in note)[:400]
                        if notes else "")
if case.get("table"):
    frame = at.dataframe[0].value
    answer += " | table: " + "; ".join(f"{k}={v!r}" for k, v in frame.iloc[0].items())[:300]
if case.get("bidi"):
    shown = " ".join(str(v) for v in at.dataframe[0].value.to_numpy().ravel()) if at.dataframe else ""
    shown += " ".join(notes) + " ".join(e.value for e in at.error)
    answer += f" [U+202E shown raw: {chr(0x202e) in shown}]"
print(json.dumps({"seconds": seconds, "peak_mb": status("VmHWM"), "before_mb": before, "after_mb": after,
                  "answer": answer}))
"""


def page_cases(directory):
    every_sampled = every_trainable(sys.executable, "sampled")
    bidi = write(directory, "run.zip", zipped({"step_1.jsonl": step_log(), "step_2_\u202elmth.jsonl": b"not json\n"}))
    return {
        "1. upload: a 240-byte Parquet file whose footer says 2 values over 10^8": {
            "upload": write(directory, *hostile.lying_parquet())},
        "10. upload: a zip whose end record says 1 entry over 550,175": {
            "upload": write(directory, *hostile.understated_zip(real={"step_1.jsonl": step_log()}))},
        "9. upload: a zip member named with U+202E": {"upload": bidi, "bidi": True},
        "6. ?tab=Training&staleness=1&train_steps=340": {
            "link": {"tab": "Training", "staleness": "1", "train_steps": "340"}, "about": "staleness"},
        "7. case 7's link (tok_is overflows at step 4)": {
            "link": {"temperature": "0.25", "mismatch": "0", "tab": "Training", "train_anchor": "bypass",
                     "train_loss": "ipo_kl", "train_weights": "current", "train_lr": "10", "train_steps": "10",
                     "train_minibatches": "2", "train_epochs": "2"}, "about": "stopped"},
        "8. ?tab=Training&est=rloo&N=4096&train_mode=sampled&train_minibatches=8&train_weights=current": {
            "link": {"tab": "Training", "est": "rloo", "N": "4096", "train_mode": "sampled",
                     "train_minibatches": "8", "train_weights": "current"}, "about": "dvantages"},
        "minor: a run of about 5 s of computing on a busy machine (?tab=Training&T=10&V=4&train_steps=100)": {
            "link": {"tab": "Training", "T": "10", "V": "4", "train_steps": "100"}, "about": "s"},
        "5. every trainable estimator, sampled, U = 64, lag 16, T = 11, V = 4, 1,000 steps": {
            "link": {"tab": "Training", "T": "11", "V": "4", "est": every_sampled, "train_mode": "sampled",
                     "train_minibatches": "8", "train_epochs": "8", "train_lag": "16", "train_steps": "1000"},
            "about": "estimated"},
    }


def page(arguments):
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile-third-page-") as directory:
        for label, case in page_cases(directory).items():
            if arguments.only and not any(word in label for word in arguments.only):
                continue
            spec = Path(directory) / "case.json"
            spec.write_text(json.dumps(case))
            pss, seconds, done = tree_peak([sys.executable, "-c", PAGE, str(spec), str(page_script(Path(arguments.tree).resolve()))],
                                           cwd=arguments.tree,
                                           env={**os.environ, "PYTHONPATH": str(arguments.tree)},
                                           timeout=arguments.timeout)
            lines = done.stderr.strip().splitlines()
            stopped = {"seconds": seconds, "peak_mb": pss / MB, "before_mb": 0, "after_mb": 0}
            if done.returncode is None:
                result = stopped | {"answer": f"no answer in {arguments.timeout:.0f} s (stopped; its peak: PSS)"}
            elif done.returncode:
                result = stopped | {"answer": "crashed: " + (lines[-1][:120] if lines else f"exit {done.returncode}")}
            else:
                result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"case": label, **result})
            print(f"{label:<80}{result['peak_mb']:8.0f} MB peak, {result['before_mb']:.0f} → {result['after_mb']:.0f} "
                  f"MB held, {result['seconds']:7.1f} s  {result['answer']}", flush=True)
    return {"tree": str(arguments.tree), "load": os.getloadavg(), "page": rows}


# -- the before/after table ---------------------------------------------------------------------------------------

def table(arguments):
    before, after = (json.loads(Path(path).read_text()) for path in (arguments.before, arguments.after))
    for side in ("cli", "page"):
        if not after.get(side):
            continue
        old = {entry["case"]: entry for entry in before.get(side, [])}
        print(f"\n{'command line' if side == 'cli' else 'the page (its script under streamlit.testing)'} "
              f"(load before {before['load'][0]:.1f}, after {after['load'][0]:.1f})\n")
        print("| case | before | after |")
        print("|---|---|---|")
        for entry in after[side]:
            was = old.get(entry["case"])
            print(f"| {entry['case']} | {_cell(was, side) if was else '–'} | {_cell(entry, side)} |")


def _cell(row, side):
    memory = f"{row['peak_mb']:,.0f} MB PSS" if side == "cli" else \
        f"{row['peak_mb']:,.0f} MB peak, {row['before_mb']:,.0f} → {row['after_mb']:,.0f} MB held"
    return f"{row['seconds']:.1f} s, {memory}: {row.get('outcome') or row.get('answer')}".replace("|", "/")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("cli", "page"):
        command = commands.add_parser(name)
        command.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code runs")
        command.add_argument("--python", default=sys.executable, help="the environment (Dask for --scheduler)")
        command.add_argument("--json", type=Path, help="also write the results here")
        command.add_argument("--only", nargs="*", help="only the cases whose label holds one of these")
        command.add_argument("--timeout", type=float, default=240.0, help="a case's seconds before it is stopped")
    compare = commands.add_parser("table")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    arguments = parser.parse_args()
    if arguments.command == "table":
        return table(arguments)
    print(f"load average {os.getloadavg()[0]:.2f}; code of {arguments.tree}", flush=True)
    result = cli(arguments) if arguments.command == "cli" else page(arguments)
    if arguments.json:
        arguments.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
