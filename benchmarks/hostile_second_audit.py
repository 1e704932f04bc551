"""Issue 25's hostile classes against the command line and the page's script: peak memory, wall time, outcome.

    python benchmarks/hostile_second_audit.py cli [--tree PATH] [--only WORDS] [--json out.json]
    python benchmarks/hostile_second_audit.py page [--tree PATH] [--only WORDS] [--json out.json]
    python benchmarks/hostile_second_audit.py table before.json after.json

``cli`` builds each class (tests/hostile_runs.py, at the sizes the issue tried) in a temporary directory and runs
``python -m toylab inspect`` (or ``train``) on it in a fresh process of the code in ``--tree`` (default: this
checkout; give a copy of an older commit for the "before" side), as benchmarks/hostile_upload.py does: its peak
resident memory (VmHWM), its wall time, its outcome (read, one line, a traceback, out of memory at the cap, no answer).

``page`` runs the page's script under streamlit.testing (AppTest) in a fresh process of that tree: a link, or an
upload on the Your run tab, then the script's reruns; the process's peak resident memory, the wall time, and what the
tab shows (its first error, or a traceback). Two rows measure what persists: the bytes a session still holds after
four refused 45 MB uploads (the run's uploader), and how many times two compared logs are read over five reruns.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hostile_runs as hostile  # noqa: E402
from hostile_logs import jsonl, row  # noqa: E402
from hostile_upload import high_water_mb, outcome  # noqa: E402
from page_latency import page_script  # noqa: E402

PYTHON = sys.executable
MB = 1_000_000
TRAIN_LINK = {"tab": "Training", "T": "16", "V": "2", "N": "2", "train_mode": "sampled", "train_runs": "64",
              "train_steps": "1000"}


def fifo_run():
    return "fifo_run", {"step_1.jsonl": None, "step_2.jsonl": hostile.step_log()}


FILES = {
    "a zip with an encrypted member": hostile.encrypted_member,
    "a zip with a Deflate64 member": hostile.deflate64_member,
    "JSONL whose first line opens 100,000 [": hostile.deep_json,
    "a NeMo-named dump whose first line opens 100,000 [": hostile.deep_dump,
    "a run zip naming a step of 5,000 digits": hostile.exotic_step_names,
    "a run zip whose step column holds 1e300": hostile.exotic_step_column,
    "ids that are lone surrogates (JSONL)": hostile.surrogate_ids,
    "a 1 MB zip whose member declares 0 bytes and inflates to 1 GiB": hostile.zip_bomb,
    "a zip holding step_1.jsonl twice (6, then 10 sequences)": hostile.duplicate_members,
    "a zip of 10,000 tiny steps": hostile.many_steps,
    "gzip: a log, then 2.2 million empty members (44 MB)": hostile.gzip_empty_members,
    "gzip: a 45 MB file-name field": hostile.gzip_long_name,
    "Parquet with 860,000 column chunks": hostile.parquet_many_chunks,
    "a run folder with a named pipe step_1.jsonl": fifo_run,
}
PAGE_FILES = {label: build for label, build in FILES.items() if "pipe" not in label} | {
    "Parquet with 420,000 column chunks (within the page's 50 MB)": lambda: hostile.parquet_many_chunks(42_000),
}


# -- the command line --------------------------------------------------------------------------------------------

def run_child(tree, argv, timeout, cap_bytes, code):
    """(peak MB, seconds, outcome) of a fresh process running ``code`` with ``argv`` in ``tree``."""
    import contextlib
    import signal
    import threading
    import time
    start = time.perf_counter()
    child = subprocess.Popen(["prlimit", f"--as={cap_bytes}", PYTHON, "-c", code, *argv], cwd=tree,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    peak, timed_out, results = 0.0, False, {}
    reader = threading.Thread(target=lambda: results.update(zip(("out", "err"), child.communicate(), strict=True)))
    reader.start()
    while reader.is_alive():
        peak = max(peak, high_water_mb(child.pid) or 0.0)
        if time.perf_counter() - start > timeout:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        reader.join(0.1)
    seconds = time.perf_counter() - start
    return peak, seconds, (child.returncode, results.get("out", ""), results.get("err", ""), timed_out)


CLI = "import sys\nfrom toylab.cli.main import main\nmain(sys.argv[1:])\n"


def cli(arguments):
    rows = []
    cap = int(arguments.cap_gb * 1e9)
    with tempfile.TemporaryDirectory(prefix="hostile-runs-") as directory:
        cases = {label: ("inspect", build) for label, build in FILES.items()}
        cases["train: every estimator, sampled, T = 16, N = 2, 64 runs of 1,000 steps"] = ("train", [
            "train", "--T", "16", "--V", "2", "--N", "2", "--mode", "sampled", "--runs", "64", "--steps", "1000",
            "--estimators", "ALL"])
        cases["train: the default estimators, sampled, T = 16, 1,000 steps"] = ("train", [
            "train", "--T", "16", "--V", "2", "--mode", "sampled", "--steps", "1000"])
        for label, (kind, build) in cases.items():
            if arguments.only and not any(word in label for word in arguments.only):
                continue
            if kind == "train":
                argv = [item if item != "ALL" else every_id(arguments.tree) for item in build]
                size = None
            else:
                name, content = build()
                path = Path(directory) / name
                if isinstance(content, dict):
                    path.mkdir()
                    for member, data in content.items():
                        os.mkfifo(path / member) if data is None else (path / member).write_bytes(data)
                else:
                    path.write_bytes(content)
                size = sum(len(data or b"") for data in content.values()) if isinstance(content, dict) \
                    else len(content)
                del content
                argv = ["inspect", str(path)]
            peak, seconds, (code, out, err, timed_out) = run_child(arguments.tree, argv, arguments.timeout, cap, CLI)
            result = outcome(code, out, err, timed_out, arguments.timeout, cap)
            rows.append({"file": label, "size_mb": None if size is None else size / MB, "peak_mb": peak,
                         "seconds": seconds, "outcome": result})
            print(f"{label:<72}{'' if size is None else f'{size / MB:9.2f} MB'}{peak:8.0f} MB{seconds:8.1f} s  "
                  f"{result}", flush=True)
    return {"tree": str(arguments.tree), "load": os.getloadavg(), "cli": rows}


def every_id(tree):
    done = subprocess.run([PYTHON, "-c", "from toylab.catalogue.estimators import ESTIMATORS; "
                                        "print(','.join(ESTIMATORS))"], cwd=tree, capture_output=True, text=True)
    return done.stdout.strip()


# -- the page's script -------------------------------------------------------------------------------------------

PAGE = r"""
import json, sys, time
from pathlib import Path
from streamlit.testing.v1 import AppTest

def peak_mb():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
    return int(line.split()[1]) / 1024

case = json.loads(Path(sys.argv[1]).read_text())
at = AppTest.from_file(sys.argv[2], default_timeout=900)              # the tree's page script
at.query_params.update(case.get("link", {}))
if {"upload", "upload_together", "compare"} & set(case):
    at.session_state["tab"] = "Your run"
start = time.perf_counter()
at.run()
answer = ""
if "upload" in case:
    for name in case["upload"]:
        content = Path(name).read_bytes()
        at.file_uploader(key="your_run_upload").set_value((Path(name).name, content, "application/octet-stream")).run()
        del content
if "upload_together" in case:
    at.file_uploader(key="your_run_run_upload").set_value(
        [(Path(name).name, Path(name).read_bytes(), "application/octet-stream") for name in case["upload_together"]]).run()
if "compare" in case:
    reads = []
    from toylab_app.caches import your_run_cache
    original = your_run_cache.read_log
    your_run_cache.read_log = lambda file, *a, **k: (reads.append(file.name), original(file, *a, **k))[1]
    at.file_uploader(key="your_run_upload").set_value(("first.jsonl", Path(case["compare"][0]).read_bytes(), "x")).run()
    at.file_uploader(key="your_run_compare").set_value(("second.jsonl", Path(case["compare"][1]).read_bytes(), "x")).run()
    for mismatch in (0.4, 0.5, 0.6, 0.7, 0.8):
        at.slider(key="mismatch").set_value(mismatch).run()
    answer = f"{len(reads)} reads of the two logs over 7 runs; "
seconds = time.perf_counter() - start
if "held" in case:
    import gc
    gc.collect()
    held = sum({id(o.data): len(o.data) for o in gc.get_objects() if type(o).__name__ == "Source"}.values())
    answer += f"{held / 1e6:,.0f} MB of uploads still held; "
if at.exception:
    answer += "traceback: " + at.exception[0].message.splitlines()[0][:90]
elif at.error:
    answer += "error: " + at.error[0].value.strip("` ")[:90]
else:
    notes = [w.value for w in at.warning] + [i.value for i in at.info]
    answer += "shown" + (": " + notes[0][:80] if notes else "")
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb(), "answer": answer}))
"""


def page(arguments):
    rows = []
    cap = int(arguments.cap_gb * 1e9)
    with tempfile.TemporaryDirectory(prefix="hostile-page-") as directory:
        cases = {}
        for label, build in PAGE_FILES.items():
            cases[label] = lambda build=build: {"upload": [write(directory, *build())]}
        cases["the link ?est=areal:token_mask"] = lambda: {"link": {"est": "areal:token_mask"}}
        cases["the Training link of the issue, every estimator"] = lambda: {
            "link": TRAIN_LINK | {"est": every_id(arguments.tree)}}
        cases["the default estimators, sampled, T = 16, 1,000 steps (Training)"] = lambda: {
            "link": {"tab": "Training", "T": "16", "V": "2", "train_mode": "sampled", "train_steps": "1000"}}
        cases["four 45 MB files dropped on the run's uploader, none readable"] = lambda: {
            "upload_together": [write(directory, f"step_{index}.jsonl", b"[" + b"1," * 22_000_000 + b"1]\n")
                                for index in range(4)], "held": True}
        cases["two compared logs, five reruns"] = lambda: {
            "compare": [write(directory, "a.jsonl", jsonl([row(400) for _ in range(5000)])),
                        write(directory, "b.jsonl", jsonl([row(300, reward=0.0) for _ in range(6000)]))]}
        for label, make in cases.items():
            if arguments.only and not any(word in label for word in arguments.only):
                continue
            case = make()
            spec = Path(directory) / "case.json"
            spec.write_text(json.dumps(case))
            peak, seconds, (code, out, err, timed_out) = run_child(arguments.tree, [str(spec), str(
                page_script(Path(arguments.tree).resolve()))], arguments.timeout, cap, PAGE)
            if timed_out:
                result = {"seconds": seconds, "peak_mb": peak, "answer": f"no answer in {arguments.timeout:.0f} s"}
            elif code:
                lines = [line for line in err.strip().splitlines() if line.strip()]
                result = {"seconds": seconds, "peak_mb": peak, "answer": "crashed: " + (lines[-1][:90] if lines
                                                                                        else f"exit {code}")}
            else:
                result = json.loads(out.strip().splitlines()[-1]) | {"peak_mb": peak}
            rows.append({"file": label, "peak_mb": result["peak_mb"], "seconds": result["seconds"],
                         "outcome": result["answer"]})
            print(f"{label:<72}{result['peak_mb']:8.0f} MB{result['seconds']:8.1f} s  {result['answer']}", flush=True)
            for name in case.get("upload", []) + case.get("compare", []) + case.get("upload_together", []):
                Path(name).unlink(missing_ok=True)
    return {"tree": str(arguments.tree), "load": os.getloadavg(), "page": rows}


def write(directory, name, content):
    path = Path(directory) / name
    if isinstance(content, dict):
        raise ValueError("a folder is not an upload")
    path.write_bytes(content)
    return str(path)


# -- the before/after table --------------------------------------------------------------------------------------

def table(arguments):
    before, after = (json.loads(Path(path).read_text()) for path in (arguments.before, arguments.after))
    for side in ("cli", "page"):
        old = {entry["file"]: entry for entry in before.get(side, [])}
        if not after.get(side):
            continue
        print(f"\n{'command line' if side == 'cli' else 'the page (its script under streamlit.testing)'}\n")
        print("| class | before: peak, time, outcome | after: peak, time, outcome |")
        print("|---|---|---|")
        for entry in after[side]:
            was = old.get(entry["file"])
            cell = lambda r: f"{r['peak_mb']:,.0f} MB, {r['seconds']:.1f} s, {r['outcome']}"       # noqa: E731
            print(f"| {entry['file']} | {cell(was) if was else '–'} | {cell(entry)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("cli", "page"):
        command = commands.add_parser(name)
        command.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code runs")
        command.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of the child (prlimit)")
        command.add_argument("--json", type=Path, help="also write the results here")
        command.add_argument("--only", nargs="*", help="only the cases whose label holds one of these")
        command.add_argument("--timeout", type=float, default=240.0)
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
