"""Hostile rollout logs against the command line and the page's server: peak memory, wall time, outcome; isolation.

    python benchmarks/hostile_upload.py cli [--tree PATH] [--only WORDS] [--json out.json]
    python benchmarks/hostile_upload.py server [--tree PATH] [--sessions 4] [--json out.json]
    python benchmarks/hostile_upload.py table before.json after.json          # the before/after table

``cli`` writes every file class of issue 20 (tests/hostile_logs.py, at the sizes the issue tried) and the largest
logs the bounds accept to a temporary directory, and runs ``python -m toylab inspect FILE`` on each in a fresh
process of the code in ``--tree`` (default: this checkout; give an older worktree for the "before" side). The
parent samples the child's VmHWM (its resident high-water mark, /proc/<pid>/status) every 0.1 s; a child is
stopped after --timeout seconds, and runs under an address-space cap (--cap-gb, prlimit) so a runaway "before"
cannot take the machine down. Outcome: read (and whether "nan" or "inf" is in the text), refused in one line (the
message's start), a traceback (its last line), out of memory at the cap, or no answer.

``server`` starts the app of ``--tree`` (``streamlit run``), loads the Your run tab once (the example log: its
modules and charts), and drives headless Chromium sessions. It samples the server's resident memory (the process
tree's VmRSS) every 50 ms. A watching session at the default toy presses the mismatch slider (key press → its
table redrawn) alone, and all through each of: the largest logs the page accepts, uploaded one at a time (the
memory each adds at its peak); --sessions sessions each uploading its own ~40 MB log at once (the peak, the slider
alone again right after them as a control at the same machine load, and what is left 30 s after they closed and once Streamlit has dropped them: it keeps a closed session two minutes for a
reconnect); one user uploading a gzip bomb of rows. Timings depend on the machine (2 shared cores here): compare runs back to back, and note
the load (printed).
"""

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import hostile_logs as hostile  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

PYTHON = sys.executable
INSPECT = """
import sys
from toylab.cli.main import main
main(["inspect", sys.argv[1]])
"""


# -- the files ---------------------------------------------------------------------------------------------------

def within_bounds(shape, format, tokens=4_000_000, sequences=250_000):
    """(name, bytes) of a clean log at the command line's bounds: ``tokens`` tokens in ``sequences`` sequences."""
    rng = np.random.default_rng(0)
    sampler = np.round(rng.uniform(-3, 0, tokens), 6)
    trainer = np.round(sampler - rng.uniform(0, 0.1, tokens), 6)
    if shape == "sequence":
        offsets = np.linspace(0, tokens, sequences + 1).astype(np.int64)
        table = pa.table({"rollout_log_probs": pa.ListArray.from_arrays(offsets, sampler),
                          "old_log_probs": pa.ListArray.from_arrays(offsets, trainer), "reward": np.ones(sequences)})
    else:
        ids = np.char.add("sequence-", (np.arange(tokens) * sequences // tokens).astype(str))
        table = pa.table({"sequence_id": ids, "position": np.arange(tokens) % (tokens // sequences),
                          "sampler_logprobs": sampler, "trainer_logprobs": trainer, "reward": np.ones(tokens)})
    if format == "parquet":
        return f"bounds_{shape}.parquet", hostile.parquet(table)
    text = table.to_pandas().to_json(orient="records", lines=True, double_precision=6)
    return f"bounds_{shape}.jsonl.gz", gzip.compress(text.encode(), compresslevel=1)


CASES = {
    "gzip bomb, one giant row (.csv.gz, 4.4 GB)": hostile.bomb_one_giant_row,
    "gzip bomb, spaces (.jsonl.gz, 4.4 GB)": hostile.bomb_spaces,
    "gzip bomb, many rows (.jsonl.gz, 4.4 GB)": hostile.bomb_many_rows,
    "CSV with 100,000 columns": hostile.wide_csv,
    "the same, one row per token": lambda: hostile.wide_csv(per_token=True),
    "one row with 10^7 log-probs (JSONL)": lambda: hostile.long_list("jsonl"),
    "the same, Parquet": lambda: hostile.long_list("parquet"),
    "the same, CSV": lambda: hostile.long_list("csv"),
    "a 200 MB JSON line": hostile.long_line,
    "row per token, 5M sequences (Parquet)": hostile.many_sequences,
    "a Parquet decimal column": hostile.decimal_columns,
    "duplicate names (Parquet)": hostile.duplicate_names,
    "integers past int64 (JSONL)": hostile.huge_integers,
    "a single sequence": lambda: hostile.tiny("single sequence"),
    "a single token": lambda: hostile.tiny("single token"),
    "some empty lists": lambda: hostile.tiny("some empty lists"),
    "extra columns": lambda: hostile.tiny("extra columns"),
    "CSV cells over 131,072 characters": hostile.long_csv_cells,
    "log W between 355 and 709": lambda: hostile.extreme("log W 355 to 709"),
    "log-probs of -1e308": lambda: hostile.extreme("log-probs -1e308"),
    "|log ρ| over 709": lambda: hostile.extreme("|log rho| over 709"),
    "rewards of 1e308": lambda: hostile.extreme("rewards 1e308"),
    "markup in a reward cell": hostile.markup_cell,
    "within the bounds: 4M tokens, 250k sequences, row per token (Parquet)":
        lambda: within_bounds("token", "parquet"),
    "within the bounds: the same, JSON Lines, gzip": lambda: within_bounds("token", "jsonl"),
    "within the bounds: 4M tokens, 250k sequences, row per sequence (Parquet)":
        lambda: within_bounds("sequence", "parquet"),
}


# -- the command line --------------------------------------------------------------------------------------------

def high_water_mb(pid):
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((line for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return int(line.split()[1]) / 1024 if line else None


def run_inspect(tree, path, timeout, cap_bytes):
    """(peak MB, seconds, outcome) of a fresh ``python -m toylab inspect path`` of the code in ``tree``."""
    start = time.perf_counter()
    child = subprocess.Popen(["prlimit", f"--as={cap_bytes}", PYTHON, "-c", INSPECT, str(path)], cwd=tree,
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
    out, err = results.get("out", ""), results.get("err", "")
    return peak, seconds, outcome(child.returncode, out, err, timed_out, timeout, cap_bytes)


def outcome(code, out, err, timed_out, timeout, cap_bytes):
    lines = [line for line in err.strip().splitlines() if line.strip()]
    if timed_out:
        return f"no answer in {timeout:.0f} s"
    if code == 0:
        lowered = out.lower()
        bad = [word for word in ("nan", "inf") if f" {word}" in lowered or f"±{word}" in lowered]
        return "read" + (f", with {' and '.join(bad)} in the output" if bad else "")
    if code == 2 and len(lines) == 1 and lines[0].startswith("toylab: error:"):
        message = lines[0].split(": ", 2)[-1]
        message = message.split(": ", 1)[-1] if message.startswith("/") else message
        if "out of memory" in message:
            return f"out of memory at the {cap_bytes / 1e9:g} GB cap (one line)"
        return "one line: " + message[:90]
    if any("MemoryError" in line for line in lines) or code in (-9, 137):
        return f"out of memory at the {cap_bytes / 1e9:g} GB cap"
    return "traceback: " + (lines[-1][:90] if lines else f"exit {code}")


def cli(arguments):
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as directory:
        for label, build in CASES.items():
            if arguments.only and not any(word in label for word in arguments.only):
                continue
            name, content = build()
            path = Path(directory) / name
            path.write_bytes(content)
            del content
            peak, seconds, result = run_inspect(arguments.tree, path, arguments.timeout, int(arguments.cap_gb * 1e9))
            rows.append({"file": label, "size_mb": path.stat().st_size / 1e6, "peak_mb": peak, "seconds": seconds,
                         "outcome": result})
            print(f"{label:<72}{path.stat().st_size / 1e6:9.2f} MB{peak:8.0f} MB{seconds:8.1f} s  {result}",
                  flush=True)
            path.unlink()
    return {"tree": str(arguments.tree), "load": os.getloadavg(), "cli": rows}


# -- the server --------------------------------------------------------------------------------------------------

def tree_rss_mb(root):
    """VmRSS of ``root`` and every descendant, in MB."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parent = next(line for line in (entry / "status").read_text().splitlines()
                              if line.startswith("PPid:")).split()[1]
                children.setdefault(int(parent), []).append(int(entry.name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        with contextlib.suppress(OSError, StopIteration):
            total += int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                              if line.startswith("VmRSS:")).split()[1])
        stack += children.get(pid, [])
    return total / 1024


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.now, self._since, self._done = pid, 0.0, 0.0, 0.0, threading.Event()

    def run(self):
        while not self._done.is_set():
            self.now = tree_rss_mb(self.pid)
            self.peak, self._since = max(self.peak, self.now), max(self._since, self.now)
            time.sleep(0.05)

    def round_peak(self):
        peak, self._since = self._since, self.now
        return peak

    def stop(self):
        self._done.set()
        self.join()


@contextlib.contextmanager
def served(tree, cap_bytes):
    """``streamlit run`` of the tree's app on a free port, under an address-space cap; yields (url, pid)."""
    port = free_port()
    command = ["prlimit", f"--as={cap_bytes}", PYTHON, "-m", "streamlit", "run", "streamlit_app.py",
               "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
               "--browser.gatherUsageStats", "false"]
    server = subprocess.Popen(command, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request
        for _ in range(240):
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            time.sleep(0.25)
        yield url, server.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


TABLE_CHANGED_JS = """before => {
    const status = document.querySelector('[data-testid="stStatusWidget"]');
    const busy = !!status && status.getClientRects().length > 0 && /Running/i.test(status.innerText || "");
    const tables = document.querySelectorAll('[data-testid="stDataFrame"]');
    const cells = tables.length ? [...tables[0].querySelectorAll('td[role=gridcell]')] : [];
    const text = cells.map(c => c.textContent).join("|");
    return !busy && text.length > 0 && text !== before;
}"""
TABLE_TEXT_JS = """() => {
    const tables = document.querySelectorAll('[data-testid="stDataFrame"]');
    return tables.length ? [...tables[0].querySelectorAll('td[role=gridcell]')].map(c => c.textContent).join("|") : "";
}"""


async def press(page):
    """Seconds from a → key on the mismatch slider until the Estimators table shows new numbers."""
    before = await page.evaluate(TABLE_TEXT_JS)
    slider = page.get_by_role("slider", name="mismatch")
    await slider.focus()
    start = time.perf_counter()
    await slider.press("ArrowRight")
    await page.wait_for_function(TABLE_CHANGED_JS, arg=before, polling=50, timeout=180_000)
    return time.perf_counter() - start


async def idle(page, timeout=600):
    await page.wait_for_selector('[data-testid="stApp"]', state="attached", timeout=timeout * 1000)
    quiet, start = None, time.perf_counter()
    while time.perf_counter() - start < timeout:
        state = await page.evaluate("""() => {
            const app = document.querySelector('[data-testid="stApp"]');
            const status = document.querySelector('[data-testid="stStatusWidget"]');
            const shown = !!status && status.getClientRects().length > 0;
            return app && app.getAttribute("data-test-script-state") !== "running" && !shown;
        }""")
        quiet = (quiet or time.perf_counter()) if state else None
        if quiet and time.perf_counter() - quiet > 0.7:
            return
        await asyncio.sleep(0.1)


async def answered(page, timeout=900):
    """'read' once the tab shows the log's statistics, or the start of its error message."""
    panel = page.get_by_role("tabpanel", name="Your run")
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        text = await panel.inner_text()
        if "response tokens" in text and "k1 = mean" in text:
            await idle(page)
            return "read"
        alerts = await panel.locator('[data-testid="stAlertContentError"]').all_inner_texts()
        if alerts:
            return "error: " + alerts[0][:80]
        await asyncio.sleep(0.2)
    return f"no answer in {timeout} s"


async def upload(page, name, content):
    """Upload ``content`` as ``name`` from a file on disk, which Chromium reads itself (the file stays until the
    benchmark ends: the page reads it after this returns). Given as a buffer, the bytes would travel base64-encoded
    through this process and Playwright's driver and hold up the watcher's key presses for seconds: a delay of the
    benchmark's own, not of the server."""
    path = Path(UPLOADS.name) / name
    path.write_bytes(content)
    panel = page.get_by_role("tabpanel", name="Your run")
    log_uploader = panel.locator('input[type="file"]').first        # the log's (issue 17 adds the run's after it)
    await log_uploader.set_input_files(files=[str(path)], timeout=600_000)


UPLOADS = tempfile.TemporaryDirectory(prefix="hostile-uploads-")


def session_log(index, tokens=1_900_000, sequences=2_000):
    """A ~45 MB row-per-sequence JSON log within the page's bounds (its own numbers per session)."""
    rng = np.random.default_rng(index)
    lengths = np.full(sequences, tokens // sequences)
    sampler = np.round(rng.uniform(-3, 0, tokens), 5)
    trainer = np.round(sampler - rng.uniform(0, 0.1, tokens), 5)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows = [{"rollout_log_probs": sampler[a:b].tolist(), "old_log_probs": trainer[a:b].tolist(), "reward": 1.0}
            for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    return f"session{index}.jsonl", "".join(json.dumps(row) + "\n" for row in rows).encode()


async def presses_while(page, task, least=5):
    """Slider presses on ``page`` until ``task`` is done (at least ``least``): their seconds, and the task's result."""
    seconds = []
    while not task.done() or len(seconds) < least:
        seconds.append(await press(page))
    return seconds, await task


async def drive(url, sampler, sessions):
    from playwright.async_api import async_playwright
    result = {}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        new_page = lambda: new_context_page(browser)                                  # noqa: E731
        warm = await new_page()                                  # the tab's modules and charts, loaded once
        await warm.goto(f"{url}/?tab=Your%20run")
        await idle(warm)
        await warm.get_by_role("button", name="Use the example log").click()
        await answered(warm)
        await warm.context.close()
        watcher = await new_page()
        await watcher.goto(url)
        await idle(watcher)
        await asyncio.sleep(5)
        result["idle_mb"] = sampler.now
        result["slider_alone_s"] = [await press(watcher) for _ in range(5)]

        result["largest"] = []
        for shape, format in (("token", "parquet"), ("token", "jsonl"), ("sequence", "parquet")):
            name, content = within_bounds(shape, format, tokens=2_000_000)
            page = await new_page()
            await page.goto(f"{url}/?tab=Your%20run")
            await idle(page)
            before = sampler.now
            sampler.round_peak()
            await upload(page, name, content)
            answer = await answered(page)
            result["largest"].append({"file": f"{name}, {len(content) / 1e6:.0f} MB, 2M tokens in 250k sequences",
                                      "answer": answer, "added_mb": sampler.round_peak() - before})
            await page.context.close()
            await asyncio.sleep(5)

        pages = [await new_page() for _ in range(sessions)]
        await asyncio.gather(*(page.goto(f"{url}/?tab=Your%20run") for page in pages))
        await asyncio.gather(*(idle(page) for page in pages))
        logs = [session_log(index) for index in range(sessions)]
        result["upload_mb"] = [len(content) / 1e6 for _, content in logs]
        sampler.round_peak()
        start = time.perf_counter()

        async def all_upload():
            await asyncio.gather(*(upload(page, *log) for page, log in zip(pages, logs, strict=True)))
            return await asyncio.gather(*(answered(page) for page in pages))
        result["slider_during_uploads_s"], answers = await presses_while(watcher, asyncio.ensure_future(all_upload()))
        result["uploads_seconds"] = time.perf_counter() - start
        result["uploads_peak_mb"] = sampler.round_peak()
        result["uploads_read"] = sum(answer == "read" for answer in answers)
        result["uploads_answers"] = answers
        result["slider_alone_after_s"] = [await press(watcher) for _ in range(10)]     # the same load, no upload
        for page in pages:
            await page.context.close()
        await asyncio.sleep(30)
        result["after_close_mb"] = sampler.now
        await asyncio.sleep(120)                  # Streamlit keeps a closed session 2 minutes for a reconnect
        late = await new_page()
        await late.goto(url)                      # a new session makes the server drop the expired ones
        await idle(late)
        await late.context.close()
        await asyncio.sleep(10)
        result["after_expiry_mb"] = sampler.now

        hostile_page = await new_page()
        await hostile_page.goto(f"{url}/?tab=Your%20run")
        await idle(hostile_page)
        sampler.round_peak()
        name, bomb = hostile.bomb_many_rows(2_200 * 1_000_000)
        result["bomb_mb"] = len(bomb) / 1e6
        start = time.perf_counter()
        await upload(hostile_page, name, bomb)
        result["slider_during_bomb_s"], answer = await presses_while(watcher, asyncio.ensure_future(answered(hostile_page)))
        result["bomb_seconds"] = time.perf_counter() - start
        result["bomb_peak_mb"] = sampler.round_peak()
        result["bomb_answer"] = answer
        await browser.close()
    return result


async def new_context_page(browser):
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    return await context.new_page()


def server(arguments):
    with served(arguments.tree, int(arguments.cap_gb * 1e9)) as (url, pid):
        sampler = Sampler(pid)
        sampler.start()
        try:
            result = asyncio.run(drive(url, sampler, arguments.sessions))
        finally:
            sampler.stop()
        result["peak_mb"] = sampler.peak
    result.update(tree=str(arguments.tree), load=os.getloadavg())
    s = result

    def slider(seconds):
        return f"{statistics.median(seconds):.2f} s median, {max(seconds):.2f} s at most ({len(seconds)} presses)"
    print(f"server (process tree) idle {s['idle_mb']:.0f} MB; another session's slider alone: "
          f"{slider(s['slider_alone_s'])}")
    for row in s["largest"]:
        print(f"  the largest the page accepts, alone: {row['file']}: {row['answer']}, +{row['added_mb']:.0f} MB at peak")
    print(f"{arguments.sessions} sessions uploading {', '.join(f'{m:.0f}' for m in s['upload_mb'])} MB logs at once: "
          f"peak {s['uploads_peak_mb']:.0f} MB, {s['uploads_read']} read in {s['uploads_seconds']:.1f} s; the slider "
          f"meanwhile: {slider(s['slider_during_uploads_s'])}; after they closed: {s['after_close_mb']:.0f} MB (30 s), "
          f"{s['after_expiry_mb']:.0f} MB (2.5 min, the sessions expired); the slider alone again right after: "
          f"{slider(s['slider_alone_after_s'])}")
    print(f"a {s['bomb_mb']:.1f} MB gzip bomb of rows: {s['bomb_answer'][:100]} in {s['bomb_seconds']:.1f} s, "
          f"peak {s['bomb_peak_mb']:.0f} MB; the slider meanwhile: {slider(s['slider_during_bomb_s'])}")
    return result


# -- the before/after table --------------------------------------------------------------------------------------

def table(arguments):
    before, after = (json.loads(Path(path).read_text()) for path in (arguments.before, arguments.after))
    old = {row["file"]: row for row in before.get("cli", [])}
    print("| file | size | before: peak, time, outcome | after: peak, time, outcome |")
    print("|---|---|---|---|")
    for row in after.get("cli", []):
        was = old.get(row["file"])
        cell = (lambda r: f"{r['peak_mb']:,.0f} MB, {r['seconds']:.1f} s, {r['outcome']}") if was else None
        print(f"| {row['file']} | {row['size_mb']:,.2f} MB | {cell(was) if was else '–'} | {cell(row)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("cli", "server"):
        command = commands.add_parser(name)
        command.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code runs")
        command.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of the child (prlimit)")
        command.add_argument("--json", type=Path, help="also write the results here")
    commands.choices["cli"].add_argument("--only", nargs="*", help="only the cases whose label holds one of these")
    commands.choices["cli"].add_argument("--timeout", type=float, default=240.0)
    commands.choices["server"].add_argument("--sessions", type=int, default=4)
    compare = commands.add_parser("table")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    arguments = parser.parse_args()
    if arguments.command == "table":
        return table(arguments)
    print(f"load average {os.getloadavg()[0]:.2f}; code of {arguments.tree}", flush=True)
    result = cli(arguments) if arguments.command == "cli" else server(arguments)
    if arguments.json:
        arguments.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
