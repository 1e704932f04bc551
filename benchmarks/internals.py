"""What each use of a library's internals (toylab_app/internals.py) gains, measured with and without it, back to back.

    python benchmarks/internals.py charts [--steps 7]      # a slider step's server time per tab, Altair's internals
    python benchmarks/internals.py charts --kept           # … between two positions already made (the run itself)
    python benchmarks/internals.py uploads [--sessions 3]  # the server's memory after uploads, Streamlit's

``charts`` runs the page in AppTest, one tab (or view) at a time: it opens the view, then times mismatch steps with
each setting in turn — the page as shipped, Altair's own deep copies and parameter validation instead of the page's
one-level copies (``copy_whole_charts_one_level`` undone), and Altair's debug mode on as well (``disable_debug_mode``
undone) — so the machine's load reaches each alike. It prints the median step per setting and the gain. With
``--kept`` the steps go back and forth between two positions the view has shown, so their pictures are kept and a
step is the page's run alone (what an internal that is not about computing changes; a new position's computing hides
it).

``uploads`` starts the app with ``streamlit run`` twice, as shipped and with ``drop_uploaded_copies`` made a no-op
(benchmarks/internals_app.py), and in each drives --sessions headless Chromium sessions on the Your run tab that
upload a ~45 MB log each and then another in its place; it prints the server's resident memory (the process tree's
VmRSS) once each session shows its second log, and 20 s later. The tab holds a log's bytes as long as it shows the
log, sharing them with Streamlit's copy; what the internal frees is the copy of the log the tab let go, which
Streamlit would otherwise keep until the session ends. Memory depends on the machine: compare the two sides of one
run.
"""

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import altair as alt

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from benchmarks.hostile_upload import answered, idle, session_log, tree_rss_mb, upload  # noqa: E402
from toylab_app import internals  # noqa: E402

APP = ROOT / "toylab_app" / "script" / "streamlit_app.py"
WITHOUT_DROP_APP = ROOT / "benchmarks" / "internals_app.py"
VIEWS = {"Estimators": {}, "Ratios": {"tab": "Ratios"}, "Error vs batch size": {"tab": "Error vs batch size"},
         "Threshold sweep": {"tab": "Threshold sweep"}, "Mismatch sweep": {"tab": "Mismatch sweep"},
         "Sequence length": {"tab": "Sequence length"}, "Training": {"tab": "Training"},
         "Experts & versions": {"tab": "Experts & versions"},
         "Threshold sweep, presenting": {"tab": "Threshold sweep", "present": "1"}}


def as_shipped():
    internals.copy_whole_charts_one_level()
    internals.disable_debug_mode()


def deep_copies():
    """Altair's own copies and parameter comparisons (debug mode still off, as shipped)."""
    if "copy" in vars(alt.TopLevelMixin):
        del alt.TopLevelMixin.copy
    internals.ALTAIR_API._viewless_dict = internals.ALTAIR_PARAMETER_DICT
    internals.disable_debug_mode()


def deep_copies_and_debug_mode():
    deep_copies()
    alt.utils.schemapi.enable_debug_mode()


SETTINGS = {"as shipped": as_shipped, "Altair's deep copies": deep_copies,
            "… and its debug mode": deep_copies_and_debug_mode}


def charts(arguments):
    from streamlit.testing.v1 import AppTest

    print(f"load {os.getloadavg()[0]:.1f}; median of {arguments.steps} mismatch steps per setting, in turn"
          + (", between two positions already shown" if arguments.kept else ""))
    print(f"{'view':<30}" + "".join(f"{name:>24}" for name in SETTINGS))
    for view, query in VIEWS.items():
        at = AppTest.from_file(str(APP), default_timeout=300)
        at.query_params.update(query)
        at.run()
        times = {name: [] for name in SETTINGS}
        mismatch = 0.3
        if arguments.kept:
            for mismatch in (0.31, 0.32):
                at.slider(key="mismatch").set_value(mismatch).run()
        for _ in range(arguments.steps):
            for name, setting in SETTINGS.items():
                setting()
                mismatch = (0.31 if mismatch == 0.32 else 0.32) if arguments.kept else round(mismatch + 0.01, 2)
                start = time.perf_counter()
                at.slider(key="mismatch").set_value(mismatch).run()
                times[name].append(time.perf_counter() - start)
                assert not at.exception, at.exception
        as_shipped()
        shipped = statistics.median(times["as shipped"])
        cells = [f"{statistics.median(values) * 1000:8.0f} ms ({statistics.median(values) / shipped:4.2f}×)"
                 for values in times.values()]
        print(f"{view:<30}" + "".join(f"{cell:>24}" for cell in cells))
    print(f"load {os.getloadavg()[0]:.1f}")


async def uploads_on(script, sessions):
    from playwright.async_api import async_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS, running_app

    with running_app(script) as url:
        pid = _server_pid(url)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = []
            for _ in range(sessions):
                page = await browser.new_page()
                await page.goto(f"{url}/?tab=Your%20run")
                await idle(page)
                pages.append(page)
            before = tree_rss_mb(pid)
            for index, page in enumerate(pages):
                for replaced in (0, 1):                 # a log, then another in its place
                    name, content = session_log(2 * index + replaced)
                    await upload(page, name, content)
                    await shown(page, name)
            served = tree_rss_mb(pid)
            await asyncio.sleep(20)
            later = tree_rss_mb(pid)
            await browser.close()
    return before, served, later


async def shown(page, name, timeout=900):
    """Until the tab shows the log ``name`` read (its name and its statistics), and the page is idle."""
    panel = page.get_by_role("tabpanel", name="Your run")
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if name in await panel.inner_text() and await answered(page) == "read":
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{name} not shown in {timeout} s")


def _server_pid(url):
    """The pid of the streamlit server listening at ``url`` (the harness starts it in its own process group)."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"streamlit" in b" ".join(command) and port.encode() in command:
                return int(entry.name)
    raise RuntimeError(f"no streamlit server on port {port}")


def uploads(arguments):
    print(f"load {os.getloadavg()[0]:.1f}; {arguments.sessions} sessions, each a ~45 MB log and another in its place")
    for name, script in (("as shipped", APP), ("without drop_uploaded_copies", WITHOUT_DROP_APP)):
        before, shown, later = asyncio.run(uploads_on(script, arguments.sessions))
        print(f"{name:<32} before {before:6.0f} MB, second logs shown {shown:6.0f} MB (+{shown - before:4.0f}), "
              f"20 s later {later:6.0f} MB (+{later - before:4.0f})")
    print(f"load {os.getloadavg()[0]:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    charts_parser = commands.add_parser("charts")
    charts_parser.add_argument("--steps", type=int, default=7)
    charts_parser.add_argument("--kept", action="store_true", help="step between two positions already shown")
    uploads_parser = commands.add_parser("uploads")
    uploads_parser.add_argument("--sessions", type=int, default=3)
    arguments = parser.parse_args()
    {"charts": charts, "uploads": uploads}[arguments.command](arguments)


if __name__ == "__main__":
    main()
