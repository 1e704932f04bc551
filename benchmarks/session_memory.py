"""Server memory with several users: 4 concurrent browser sessions, each at the largest toy, every tab.

    python benchmarks/session_memory.py [--sessions 4] [--T 11] [--V 4]

Starts the app with ``streamlit run`` (the tests' harness, tests/browser.py), opens one headless Chromium
with one page per session, each at the largest allowed toy with its own mismatch, then opens every tab in
turn on all pages at once (the server renders the sessions concurrently). A sampler thread reads the
resident memory (VmRSS in /proc/<pid>/status) of the server process and all its descendants every 50 ms.
Prints the peak, the peak during each round of tabs, and each session's re-render time per tab: from the
tab click until the app is idle again after the rerun the click started (the script finished and the
"Running…" widget hidden for 0.5 s; the time reported is when it went idle, not the end of the quiet period).

Timings depend on the machine's load (2 shared cores here): compare figures from runs back to back.
"""

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import _APP_STATE_JS, CHROMIUM, CHROMIUM_ARGS, running_app  # noqa: E402

MISMATCHES = (0.1, 0.5, 1.0, 1.5, 0.3, 0.8, 1.2, 2.0)
SAMPLE_EVERY_S = 0.05
QUIET_S = 0.5
RERUN_WAIT_S = 10
TIMEOUT_S = 600


# -- resident memory of a process tree, from /proc ---------------------------------------------------------

def _status(pid):
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def _field(status, name):
    for line in status.splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    return None


def server_pid(port):
    """The pid of the ``streamlit run`` process listening on ``port`` (found by its command line)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"streamlit" in b" ".join(command) and str(port).encode() in command:
            return int(entry.name)
    raise RuntimeError(f"no streamlit process on port {port}")


def tree_rss_mb(root):
    """VmRSS of ``root`` and every descendant, in MB."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _field(_status(entry.name), "PPid")
            if parent is not None:
                children.setdefault(int(parent), []).append(int(entry.name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        rss = _field(_status(pid), "VmRSS")
        total += int(rss) if rss else 0
        stack += children.get(pid, [])
    return total / 1024


class Sampler(threading.Thread):
    """Samples the tree's RSS until stopped, in MB: the overall ``peak`` and the peak since ``round_peak()``."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self._since, self._done = pid, 0.0, 0.0, threading.Event()

    def run(self):
        while not self._done.is_set():
            rss = tree_rss_mb(self.pid)
            self.peak, self._since = max(self.peak, rss), max(self._since, rss)
            time.sleep(SAMPLE_EVERY_S)

    def round_peak(self):
        """The peak since the last call (and start a new round)."""
        peak, self._since = self._since, 0.0
        return peak

    def stop(self):
        self._done.set()
        self.join()


# -- driving the pages ----------------------------------------------------------------------------------------

async def idle_after(page, start, rerun=True):
    """Seconds from ``start`` until the app went idle (and stayed idle for QUIET_S). With ``rerun``, idle counts
    only once the run the click asked for has started (a busy server may start it late), or after
    RERUN_WAIT_S without one."""
    quiet_since, started = None, not rerun
    while time.perf_counter() - start < TIMEOUT_S:
        state = await page.evaluate(_APP_STATE_JS)
        now = time.perf_counter()
        started = started or state.get("script") == "running" or state.get("statusShown") \
            or now - start > RERUN_WAIT_S
        idle = started and state.get("present") and state.get("connection") == "CONNECTED" \
            and state.get("script") in ("notRunning", "compilationError") and not state.get("statusShown")
        if not idle:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= QUIET_S:
            return quiet_since - start
        await asyncio.sleep(0.05)
    raise TimeoutError(f"page not idle after {TIMEOUT_S} s")


async def open_tab(page, label):
    start = time.perf_counter()
    await page.get_by_role("tab", name=label, exact=True).click(timeout=TIMEOUT_S * 1000)
    return await idle_after(page, start)


async def drive(url, sessions, T, V, sampler):
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        contexts = [await browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(sessions)]
        pages = [await context.new_page() for context in contexts]
        queries = [f"T={T}&V={V}&mismatch={MISMATCHES[i % len(MISMATCHES)]}" for i in range(sessions)]
        start = time.perf_counter()
        await asyncio.gather(*(page.goto(f"{url}/?{query}") for page, query in zip(pages, queries, strict=True)))
        first = await asyncio.gather(*(idle_after(page, start, rerun=False) for page in pages))
        rows = [("open (Estimators)", first, sampler.round_peak())]
        labels = [label.strip() for label in await pages[0].get_by_role("tab").all_inner_texts()]
        for label in labels[1:]:
            seconds = await asyncio.gather(*(open_tab(page, label) for page in pages))
            rows.append((label, seconds, sampler.round_peak()))
        for page in pages:
            if await page.locator('[data-testid="stException"]').count():
                raise RuntimeError(f"an exception is shown on {page.url}")
        await browser.close()
        return queries, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--T", type=int, default=11)
    parser.add_argument("--V", type=int, default=4)
    arguments = parser.parse_args()
    with running_app() as url:
        pid = server_pid(int(url.rsplit(":", 1)[1]))
        idle_mb = tree_rss_mb(pid)
        sampler = Sampler(pid)
        sampler.start()
        try:
            queries, rows = asyncio.run(drive(url, arguments.sessions, arguments.T, arguments.V, sampler))
        finally:
            sampler.stop()
    print(f"{arguments.sessions} concurrent sessions: " + "; ".join(f"?{query}" for query in queries))
    print(f"server RSS (process tree): {idle_mb:,.0f} MB idle, peak {sampler.peak:,.0f} MB")
    print(f"{'tab':<22}{'re-render per session (s)':<36}{'median':>8}{'peak (MB)':>12}")
    for label, seconds, rss in rows:
        print(f"{label:<22}{', '.join(f'{s:5.1f}' for s in seconds):<36}{statistics.median(seconds):8.1f}"
              f"{rss:12,.0f}")


if __name__ == "__main__":
    main()
