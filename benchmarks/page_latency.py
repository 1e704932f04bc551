"""How long the page takes to settle after a slider step, as a user feels it, against Streamlit's own floor.

    python benchmarks/page_latency.py                             # every tab, 7 presses each, and T=10
    python benchmarks/page_latency.py --tabs Estimators Ratios --presses 9 --json latency.json
    python benchmarks/page_latency.py --against /tmp/main         # this checkout and a copy of main, pressed in turn
    python benchmarks/page_latency.py --query "V=3&mismatch=1" --large-query "" --payload
    python benchmarks/page_latency.py --viewport 1280x720 --query present=1     # a screen-share, presentation mode
    python benchmarks/page_latency.py --tabs Training --without-charts    # and the same page with no chart drawn

Starts the floor app (benchmarks/floor_app.py: one slider, one metric, at Streamlit's fastest settings: no garbage
collection after each run, no file watcher) and the app — this checkout's, and with ``--against`` the app of other
checkouts too, each from its own folder and with its own .streamlit/config.toml — with ``streamlit run``, each under
benchmarks/timed_script.py, which logs when each script run started and how long it took on the server. Drives them in
headless Debian Chromium. For each tab, as listed by the page itself, it presses the mismatch slider's → key N times
on each page in turn — the floor, the app, the other apps, the floor again, … — so that the machine's load, which
moves from second to second on a shared machine, reaches all of them alike (the sidebar may be collapsed: the key still
reaches the slider). Each press is timed in the page's own clock: from the keydown event until
``[data-testid="stApp"]`` returns to ``data-test-script-state="notRunning"`` after having been ``running``.
A MutationObserver, installed before the page loads, timestamps every change of that attribute (and of the
rest of the DOM), so runs shorter than any polling interval are caught. Presses always go one way, so no
value comes from a cache a user would not hit. Before any timing, the floor and each app are pressed a few times
untimed (a cold browser's first steps cost more).

Per view it prints the median key press → idle, its ratio to the floor's median, the server's script time
per press, and where the rest goes: key press → the script's start on the server (the widget's debounce
and the round trip), the script's end → idle (sending and applying the page's deltas), idle → drawn (the
last DOM change: charts and tables drawing), the browser's main-thread busy time per press (Chrome's
TaskDuration), and the bytes and messages sent per press (the websocket frames the page receives).
Also the first load (navigation start → idle with the table drawn), each as a multiple of the floor app's: on the
freshly started server (the page's script served under timed_script.py, not through streamlit_app.py's
``st.App``: the first load imports the page, as a clone's server did before it loaded the page at its start), in a
new session (a new browser profile: nothing cached; ``--loads`` times, in turn with the
floor's) and for a returning visitor (the browser's cache warm); and the first tab at ``--large-query`` (default
T=10). The load average is sampled after every view. It only reports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import browser_available, launch_browser, running_app  # noqa: E402

FLOOR_APP = ROOT / "benchmarks" / "floor_app.py"
FASTEST = ("--runner.postScriptGC", "false", "--server.fileWatcherType", "none")   # the floor: no collection, no watcher
WARM_PRESSES = 3                # untimed presses of the floor and each app before any timing (a cold browser's first
                                # steps cost more)
TIMED_SCRIPT = ROOT / "benchmarks" / "timed_script.py"
VIEWPORT = {"width": 1600, "height": 1000}
SLIDER = "mismatch"
QUIET_MS = 500                  # settled: no script-state change and no DOM change for this long
DOM_QUIET_CAP_MS = 3000         # … or, if something keeps changing the DOM, the script idle this long
TIMEOUT_MS = 180_000
BROWSER_METRICS = {"TaskDuration": "busy", "ScriptDuration": "js", "LayoutDuration": "layout",
                   "RecalcStyleDuration": "style"}

# Installed before any page script runs, so the first load is timed too. Times are performance.now():
# milliseconds since navigation start, the clock of event.timeStamp. Besides the attribute, it notes when each
# run's first and last messages arrive (ForwardMsg fields new_session = 4 and script_finished = 6): React may
# apply both in one render when a run is very short, and then the attribute never shows "running".
PROBE_JS = """(() => {
    const probe = window.__latency = {keys: [], states: [], runs: [], frames: [], updates: 0, lastChange: 0,
                                      table: null, chart: null};
    const TABLE = '[data-testid="stDataFrame"] td[role=gridcell]';
    const CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks';
    const RUN_FIELDS = {4: "start", 6: "end"};
    const topLevelFields = buffer => {
        const bytes = new Uint8Array(buffer), fields = [];
        let i = 0;
        const varint = () => {
            let value = 0, scale = 1, byte;
            do { byte = bytes[i++]; value += (byte & 127) * scale; scale *= 128; } while (byte & 128);
            return value;
        };
        while (i < bytes.length) {
            const tag = varint(), wire = tag % 8;
            fields.push(Math.floor(tag / 8));
            if (wire === 0) varint();
            else if (wire === 2) { const length = varint(); i += length; }
            else if (wire === 1) i += 8; else if (wire === 5) i += 4; else break;
        }
        return fields;
    };
    const NativeWebSocket = window.WebSocket;
    window.WebSocket = class extends NativeWebSocket {
        constructor(...args) {
            super(...args);
            this.addEventListener("message", event => {
                const now = performance.now(), data = event.data;
                probe.frames.push([now, data.byteLength ?? data.size ?? data.length]);
                if (data instanceof ArrayBuffer) {
                    for (const field of topLevelFields(data)) {
                        if (RUN_FIELDS[field]) probe.runs.push([now, RUN_FIELDS[field]]);
                    }
                }
            });
        }
    };
    document.addEventListener("keydown", event => probe.keys.push(event.timeStamp), true);
    new MutationObserver(records => {
        const now = performance.now();
        probe.lastChange = now;
        probe.updates += 1;
        records.forEach((record, i) => {
            if (record.attributeName !== "data-test-script-state") return;
            const next = records.slice(i + 1).find(
                later => later.target === record.target && later.attributeName === record.attributeName);
            probe.states.push([now, next ? next.oldValue : record.target.getAttribute(record.attributeName)]);
        });
        if (probe.table === null && document.querySelector(TABLE)) probe.table = now;
        if (probe.chart === null && document.querySelector(CHART)) probe.chart = now;
    }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true,
                          attributeOldValue: true});
})();"""

MARK_JS = """() => {
    const probe = window.__latency;
    return {t: performance.now(), keys: probe.keys.length, states: probe.states.length, runs: probe.runs.length,
            frames: probe.frames.length, updates: probe.updates};
}"""

# Settled: a script run has ended since the mark, the page shows it idle, the DOM has been quiet a while, nothing
# is still loading (a lazily loaded element shows a skeleton) and every visible chart and table has drawn. The
# cheap checks go first: this is polled while the page works.
SETTLED_JS = """([mark, quiet, cap]) => {
    const probe = window.__latency;
    const ends = probe.runs.slice(mark.runs).filter(([, kind]) => kind === "end");
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || !ends.length || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    const lastState = Math.max(ends[ends.length - 1][0], ...probe.states.slice(mark.states).map(([t]) => t));
    const now = performance.now(), idleFor = now - lastState;
    if (idleFor < quiet || (now - probe.lastChange < quiet && idleFor < cap)) return false;
    const visible = selector => [...document.querySelectorAll(selector)].filter(e => e.checkVisibility());
    return !document.querySelector('[data-testid="stSkeleton"]')
        && visible('[data-testid="stVegaLiteChart"]').every(e => e.querySelector("canvas, svg.marks"))
        && visible('[data-testid="stDataFrame"]').every(e => e.querySelector("td[role=gridcell]"));
}"""

# Seconds from the action: the first keydown after the mark, else the mark itself (a click, a navigation).
# Running: the first run's first message arrives. Idle: the attribute's last return to "notRunning", or the last
# run's last message when React never showed "running".
TIMING_JS = """mark => {
    const probe = window.__latency;
    const start = mark.keys < probe.keys.length ? probe.keys[mark.keys] : mark.t;
    const runs = probe.runs.slice(mark.runs).filter(([t]) => t >= start);
    const running = runs.find(([, kind]) => kind === "start")[0];
    const ends = runs.filter(([, kind]) => kind === "end").map(([t]) => t);
    const shown = probe.states.slice(mark.states).filter(([t, value]) => t >= running && value === "notRunning");
    const idle = Math.max(...ends, ...shown.map(([t]) => t));
    const frames = probe.frames.slice(mark.frames).filter(([t]) => t >= start);
    const since = t => t === null ? null : (t - start) / 1000;
    return {
        start_unix: (performance.timeOrigin + start) / 1000,
        to_running: since(running),
        to_idle: since(idle),
        to_drawn: since(Math.max(probe.lastChange, idle)),
        to_last_message: frames.length ? since(frames[frames.length - 1][0]) : null,
        table: since(probe.table),
        chart: since(probe.chart),
        runs: runs.filter(([, kind]) => kind === "start").length,
        attribute_seen: shown.length > 0,
        messages: frames.length,
        dom_updates: probe.updates - mark.updates,
        bytes: frames.reduce((total, [, size]) => total + size, 0),
    };
}"""


class RunLog:
    """The JSON-lines file timed_script.py appends one line to per script run."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()

    def offset(self) -> int:
        return self.path.stat().st_size

    def runs_since(self, offset: int) -> list[dict]:
        with open(self.path) as log:
            log.seek(offset)
            return [json.loads(line) for line in log if line.strip()]


class Payload:
    """Bytes the server sends per view, by kind of message, decoded from the websocket frames (``--payload``)."""

    def __init__(self):
        self.bytes = defaultdict(lambda: defaultdict(int))
        self.view = None

    def watch(self, page) -> None:
        page.on("websocket", lambda socket: socket.on("framereceived", self.add))

    def add(self, frame) -> None:
        if self.view is not None and isinstance(frame, bytes):
            for kind, size in message_parts(frame):
                self.bytes[self.view][kind] += size


def message_parts(frame: bytes) -> list[tuple[str, int]]:
    """[(kind, bytes)] of one ForwardMsg: an element's type; a chart split into its spec and its data."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg.FromString(frame)
    kind = message.WhichOneof("type")
    if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
        element = message.delta.new_element
        kind = element.WhichOneof("type")
        if kind == "vega_lite_chart":
            spec = len(element.vega_lite_chart.spec.encode())
            return [("chart spec", spec), ("chart data", len(frame) - spec)]
    elif kind == "delta":
        kind = f"delta {message.delta.WhichOneof('type')}"
    return [(kind, len(frame))]


@contextlib.contextmanager
def served(script: Path, log: RunLog, profile_dir: str | None = None, options: tuple[str, ...] = (),
           folder: Path | None = None, without_charts: bool = False):
    """``streamlit run`` SCRIPT under timed_script.py, in ``folder`` (default SCRIPT's own; so that folder's
    .streamlit/config.toml is read), with extra streamlit ``options``, ``without_charts`` (each chart an empty
    placeholder); yield its base URL."""
    settings = {"TOYLAB_TIMED_SCRIPT": str(script), "TOYLAB_TIMED_LOG": str(log.path),
                "TOYLAB_PROFILE_DIR": str(Path(profile_dir).resolve()) if profile_dir else None,
                "TOYLAB_TIMED_WITHOUT_CHARTS": "1" if without_charts else None}
    with contextlib.ExitStack() as stack:
        with environment(settings):                  # the server inherits this environment when it starts
            url = stack.enter_context(running_app(TIMED_SCRIPT, cwd=folder or script.parent, options=options))
        yield url


def page_script(folder: Path) -> Path:
    """The script a checkout's page runs on every rerun: ``toylab_app/script/streamlit_app.py`` (its root
    ``streamlit_app.py`` is the ``st.App`` that serves it), else the folder's own ``streamlit_app.py`` (the layout
    app)."""
    script = folder / "toylab_app" / "script" / "streamlit_app.py"
    return script if script.is_file() else folder / "streamlit_app.py"


@contextlib.contextmanager
def environment(values: dict):
    """os.environ with VALUES set (None: unset) inside the block, as it was after it."""
    saved = {name: os.environ.get(name) for name in values}

    def put(items):
        for name, value in items:
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    put(values.items())
    try:
        yield
    finally:
        put(saved.items())


class Page:
    """One browser page (its own context, so its own Streamlit session) with the probe installed."""

    def __init__(self, browser, log: RunLog, payload: Payload | None = None, profile_dir: str | None = None,
                 context=None, viewport=VIEWPORT):
        """A new browser context unless CONTEXT is given (then the browser's cache is shared with it)."""
        if context is None:
            context = browser.new_context(viewport=viewport)
            context.add_init_script(PROBE_JS)
        self.page = context.new_page()
        self.log = log
        if payload:
            payload.watch(self.page)
        self.devtools = context.new_cdp_session(self.page)
        self.devtools.send("Performance.enable")
        self.profile_dir = profile_dir
        if profile_dir:
            self.devtools.send("Profiler.enable")

    def load(self, url: str) -> dict:
        """Open URL; the timing of its first load, from navigation start."""
        start = {"t": 0, "keys": 0, "states": 0, "runs": 0, "frames": 0, "updates": 0}
        return self._timed(lambda: self.page.goto(url), start)

    def press(self, key: str = "ArrowRight") -> dict:
        """Press KEY on the mismatch slider; the timing from the keydown."""
        self.page.bring_to_front()
        slider = self.page.get_by_role("slider", name=SLIDER)
        return self._timed(lambda: slider.press(key), self.page.evaluate(MARK_JS))

    def tab_labels(self) -> list[str]:
        return [label.strip() for label in self._tabs().get_by_role("tab").all_inner_texts()]

    def open_tab(self, label: str) -> None:
        tab = self._tabs().get_by_role("tab", name=label, exact=True)
        if tab.get_attribute("aria-selected") != "true":
            self._timed(tab.click, self.page.evaluate(MARK_JS))

    def _tabs(self):
        return self.page.locator('[data-testid="stTabs"]').first

    def _timed(self, action, mark) -> dict:
        offset, before = self.log.offset(), self._browser_seconds()
        if self.profile_dir:
            self.devtools.send("Profiler.start")
        action()
        self._settle(mark)
        timing = self.page.evaluate(TIMING_JS, mark)
        after = self._browser_seconds()
        timing["browser"] = {name: after[name] - before[name] for name in after}
        if self.profile_dir:
            profile = self.devtools.send("Profiler.stop")["profile"]
            path = Path(self.profile_dir) / f"browser-{time.time_ns()}.cpuprofile"
            path.write_text(json.dumps(profile))
            timing["browser_profile"] = str(path)
        runs = self.log.runs_since(offset)
        timing["server"] = sum(run["seconds"] for run in runs)
        timing["server_runs"] = [run["outcome"] for run in runs]
        timing["server_profiles"] = [run["profile"] for run in runs if run.get("profile")]
        if runs:
            timing["to_script"] = runs[0]["start"] - timing["start_unix"]
            timing["script_to_idle"] = timing["to_idle"] - (runs[-1]["start"] + runs[-1]["seconds"]
                                                           - timing["start_unix"])
        return timing

    def _settle(self, mark) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.wait_for_function(SETTLED_JS, arg=[mark, QUIET_MS, DOM_QUIET_CAP_MS], polling=50,
                                        timeout=TIMEOUT_MS)
        except PlaywrightTimeout:
            probe = self.page.evaluate("""mark => ({states: window.__latency.states.slice(mark.states),
                runs: window.__latency.runs.slice(mark.runs),
                keys: window.__latency.keys.slice(mark.keys), now: performance.now(),
                app: document.querySelector('[data-testid="stApp"]')?.outerHTML.slice(0, 200)})""", mark)
            raise TimeoutError(f"{self.page.url} did not run and settle in {TIMEOUT_MS / 1000:.0f} s: {probe}") from None

    def _browser_seconds(self) -> dict:
        metrics = {m["name"]: m["value"] for m in self.devtools.send("Performance.getMetrics")["metrics"]}
        return {short: metrics[name] for name, short in BROWSER_METRICS.items()}


def server_profile(paths: list[str], presses: int, top: int = 12) -> list[tuple[str, float]]:
    """The page's own functions (and Streamlit's element commands) by cumulative seconds per press."""
    import pstats

    stats = pstats.Stats(*paths).stats
    ours = [(f"{Path(file).relative_to(ROOT)}:{name}" if file.startswith(str(ROOT)) else
             f"streamlit {Path(file).stem}.{name}", entry[3] / presses)
            for (file, _, name), entry in stats.items()
            if (file.startswith(str(ROOT)) and "benchmarks" not in file) or f"streamlit{os.sep}elements" in file]
    return sorted(ours, key=lambda item: -item[1])[:top]


def browser_profile(paths: list[str], presses: int, top: int = 10) -> list[tuple[str, float]]:
    """Browser main-thread self time per press by script file (Streamlit's bundles), from CPU profiles."""
    by_script = defaultdict(float)
    for path in paths:
        profile = json.loads(Path(path).read_text())
        frames = {node["id"]: node["callFrame"] for node in profile["nodes"]}
        for node, delta in zip(profile["samples"][:-1], profile["timeDeltas"][1:], strict=True):
            frame = frames[node]
            by_script[frame["url"].rsplit("/", 1)[-1] or frame["functionName"]] += delta / 1e6 / presses
    return sorted(by_script.items(), key=lambda item: -item[1])[:top]


def median(values) -> float | None:
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def summary(presses: list[dict], floor: float) -> dict:
    """Medians over the presses of one view."""
    idle = median(p["to_idle"] for p in presses)
    return {
        "presses": len(presses), "to_idle": idle, "ratio": idle / floor,
        "server": median(p["server"] for p in presses),
        "to_script": median(p.get("to_script") for p in presses),
        "script_to_idle": median(p.get("script_to_idle") for p in presses),
        "drawn_after_idle": median(p["to_drawn"] - p["to_idle"] for p in presses),
        "browser_busy": median(p["browser"]["busy"] for p in presses),
        "kB": median(p["bytes"] for p in presses) / 1e3,
        "messages": median(p["messages"] for p in presses),
        "dom_updates": median(p["dom_updates"] for p in presses),
        "runs": max(p["runs"] for p in presses),
        **({"server_profile": server_profile([f for p in presses for f in p["server_profiles"]], len(presses))}
           if presses[0]["server_profiles"] else {}),
        **({"browser_profile": browser_profile([p["browser_profile"] for p in presses], len(presses))}
           if presses[0].get("browser_profile") else {}),
    }


def measure(args) -> dict:
    """Serve the floor app and each app (this checkout's, and ``--against`` checkouts'), then time, tab by tab, the
    presses in turn — floor, app, other app, floor, … — so that a change in the machine's load reaches all alike."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="page-latency-") as folder, contextlib.ExitStack() as stack:
        run = Measurement(args, Path(folder), stack, launch_browser(stack.enter_context(sync_playwright())))
        stack.callback(run.browser.close)
        labels = run.tab_labels()
        for label in labels:
            if not args.tabs or label in args.tabs:
                for app in run.apps.values():
                    app["page"].open_tab(label)
                run.time_view(label, {name: app["page"] for name, app in run.apps.items()})
        if args.large_query:
            run.time_large_query(f"{labels[0]} at {args.large_query}")
        for _ in range(args.loads):                  # new sessions in turn: the floor's, then each app's
            run.time_new_sessions()
        run.load_averages.append(os.getloadavg()[0])
    return run.result()


class Measurement:
    """The floor app and the apps served, their pages open in one browser, and every timing taken so far."""

    def __init__(self, args, folder: Path, stack: contextlib.ExitStack, browser):
        self.args, self.browser = args, browser
        self.load_averages = [os.getloadavg()[0]]
        self.floor_log = RunLog(folder / "floor.jsonl")
        self.floor_url = stack.enter_context(served(FLOOR_APP, self.floor_log, options=FASTEST))
        self.apps = {}
        for name, checkout, without_charts in app_folders(args):
            log = RunLog(folder / f"app-{len(self.apps)}.jsonl")
            self.apps[name] = {"log": log, "url": stack.enter_context(
                served(page_script(checkout), log, args.profile, folder=checkout, without_charts=without_charts))}
        self.payload = Payload() if args.payload else None
        self.query = f"/?{args.query.lstrip('?')}" if args.query else ""
        self.loads = {name: {"fresh server": [], "new session": [], "returning visitor": []}
                      for name in ["floor", *self.apps]}
        self.floor = Page(browser, self.floor_log, profile_dir=args.profile, viewport=args.viewport)
        self.loads["floor"]["fresh server"].append(self.floor.load(self.floor_url))
        for name, app in self.apps.items():
            app["page"] = self.app_page(name)
            self.loads[name]["fresh server"].append(app["page"].load(app["url"] + self.query))
        for _ in range(WARM_PRESSES):
            for page in (self.floor, *(app["page"] for app in self.apps.values())):
                page.press()
        self.floor_presses = []
        self.presses = {name: {} for name in self.apps}

    def app_page(self, name: str) -> Page:
        return Page(self.browser, self.apps[name]["log"], self.payload if name == THIS else None,
                    self.args.profile, viewport=self.args.viewport)

    def tab_labels(self) -> list[str]:
        """This checkout's tabs; every other app must have the same, or with ``--tabs`` those named (an older checkout,
        before a tab was added, timed on the tabs both have); ``--tabs`` may name only this checkout's."""
        labels = self.apps[THIS]["page"].tab_labels()
        for name, app in self.apps.items():
            theirs = app["page"].tab_labels()
            if (set(self.args.tabs) - set(theirs) if self.args.tabs else theirs != labels):
                raise SystemExit(f"page_latency: error: {name} has the tabs {app['page'].tab_labels()}, "
                                 f"this checkout {labels}")
        unknown = set(self.args.tabs or []) - set(labels)
        if unknown:
            raise SystemExit(f"page_latency: error: no tab {sorted(unknown)}; the page has {labels}")
        return labels

    def time_view(self, view: str, pages: dict) -> None:
        """``--presses`` presses of the floor, then of each page, in turn; the load average after them."""
        if self.payload:
            self.payload.view = view
        for name in self.apps:
            self.presses[name][view] = []
        for _ in range(self.args.presses):
            self.floor_presses.append(self.floor.press())
            for name, page in pages.items():
                self.presses[name][view].append(page.press())
        if self.payload:
            self.payload.view = None
        self.load_averages.append(os.getloadavg()[0])
        print(f"  {view}: " + "; ".join(
            f"{name} " + ", ".join(f"{p['to_idle']:.2f}" for p in self.presses[name][view]) for name in self.apps)
            + f" s (load {self.load_averages[-1]:.1f})", file=sys.stderr, flush=True)

    def time_large_query(self, view: str) -> None:
        large = {}
        for name, app in self.apps.items():
            large[name] = self.app_page(name)
            large[name].load(f"{app['url']}/?{self.args.large_query.lstrip('?')}")
        self.time_view(view, large)

    def time_new_sessions(self) -> None:
        """One first load in a new session and one as a returning visitor: the floor's, then each app's."""
        viewport, loads = self.args.viewport, self.loads
        loads["floor"]["new session"].append(Page(self.browser, self.floor_log, viewport=viewport).load(self.floor_url))
        loads["floor"]["returning visitor"].append(
            Page(self.browser, self.floor_log, context=self.floor.page.context).load(self.floor_url))
        for name, app in self.apps.items():
            loads[name]["new session"].append(
                Page(self.browser, app["log"], viewport=viewport).load(app["url"] + self.query))
        for name, app in self.apps.items():
            loads[name]["returning visitor"].append(
                Page(self.browser, app["log"], context=app["page"].page.context).load(app["url"] + self.query))

    def result(self) -> dict:
        """Every number: medians per view and per kind of first load (each also as a multiple of the floor's),
        and every press."""
        args, payload = self.args, self.payload
        floor_median = median(p["to_idle"] for p in self.floor_presses)
        first_loads = {name: {kind: load_summary(rows) for kind, rows in kinds.items() if rows}
                       for name, kinds in self.loads.items()}
        for kinds in first_loads.values():
            for kind, summary_ in kinds.items():
                summary_["ratio"] = summary_["first_load"] / first_loads["floor"][kind]["first_load"]
        return {
            "query": args.query, "presses_per_view": args.presses, "load_average": self.load_averages,
            "apps": {name: str(page_script(checkout)) + (" (every chart an empty placeholder)" if without_charts else "")
                     for name, checkout, without_charts in app_folders(args)},
            "floor": summary(self.floor_presses, floor_median),
            "views": {name: {view: summary(rows, floor_median) for view, rows in views.items()}
                      for name, views in self.presses.items()},
            "first_load": first_loads,
            "presses": {"floor": self.floor_presses, **self.presses},
            **({"payload_bytes_per_press": {view: {kind: size / args.presses for kind, size in kinds.items()}
                                            for view, kinds in payload.bytes.items()}} if payload else {}),
        }


THIS = "this"                   # the app of this checkout, under its name in the report
WITHOUT_CHARTS = "no charts"    # this checkout's page with each chart an empty placeholder (--without-charts)


def app_folders(args) -> list[tuple[str, Path, bool]]:
    """(name, checkout folder, without charts) of each app: this checkout's; with ``--without-charts`` the same page
    with every chart an empty placeholder; each ``--against`` checkout's under its folder's name."""
    apps = [(THIS, ROOT, False)] + ([(WITHOUT_CHARTS, ROOT, True)] if args.without_charts else [])
    for folder in args.against or []:
        checkout = Path(folder).resolve()
        if not page_script(checkout).is_file():
            raise SystemExit(f"page_latency: error: no streamlit_app.py in {folder}")
        apps.append((checkout.name, checkout, False))
    return apps


def load_summary(loads: list[dict]) -> dict:
    """Medians over first loads: the load as a user feels it (idle, with the first table drawn), idle, all drawn,
    the server's script time and the bytes sent."""
    for load in loads:
        load["first_load"] = max(load["to_idle"], load["table"] or 0)
    return {"loads": len(loads), **{name: median(load[name] for load in loads)
                                    for name in ("first_load", "to_idle", "to_drawn", "table", "chart", "server",
                                                 "bytes", "messages")}}


def report(result: dict) -> str:
    names = list(result["views"])

    def row(view, s):
        return (f"{view:<36} {s['to_idle']:7.3f} {s['ratio']:6.1f}× {s['server']:7.3f} {s['to_script']:7.3f} "
                f"{s['script_to_idle']:7.3f} {s['drawn_after_idle']:7.3f} {s['browser_busy']:7.3f} {s['kB']:7.1f} "
                f"{s['messages']:5.0f} {s['dom_updates']:5.0f}"
                + (f"  ({s['runs']} runs in a press)" if s["runs"] > 1 else ""))

    def named(view, name):
        return view if len(names) == 1 else f"{view} [{name}]"

    views = list(result["views"][THIS])
    lines = [f"{'seconds (median per press)':<36} {'→idle':>7} {'floor':>7} {'script':>7} {'→script':>7} "
             f"{'→idle':>7} {'drawn+':>7} {'browser':>7} {'kB':>7} {'msgs':>5} {'DOM':>5}",
             row("floor app", result["floor"]),
             *(row(named(view, name), result["views"][name][view]) for view in views for name in names),
             f"(median of {result['presses_per_view']} presses a view, the floor's of all {result['floor']['presses']}, "
             "pressed in turn; →idle: key press to idle; floor: its multiple of the floor; script: server script time; "
             "→script: key press to the script's start; →idle: script end to idle; drawn+: idle to the last DOM "
             "change; browser: main-thread busy time; kB, msgs: what the server sent; DOM: DOM updates, about one per "
             "React commit)"]
    for name, kinds in result["first_load"].items():
        for kind, load in kinds.items():
            table = f", table {load['table']:.2f} s" if load["table"] is not None else ""
            chart = f", first chart {load['chart']:.2f} s" if load["chart"] is not None else ""
            lines.append(f"first load, {name}, {kind}: {load['first_load']:.2f} s = {load['ratio']:.1f}× the floor's "
                         f"(median of {load['loads']}: idle {load['to_idle']:.2f} s{table}{chart}, all drawn "
                         f"{load['to_drawn']:.2f} s; script {load['server']:.2f} s; {load['bytes'] / 1e3:.0f} kB, "
                         f"{load['messages']:.0f} messages)")
    for view, kinds in result.get("payload_bytes_per_press", {}).items():
        parts = ", ".join(f"{kind} {size / 1e3:.1f}" for kind, size in sorted(kinds.items(), key=lambda kv: -kv[1])
                          if size >= 100)
        lines.append(f"kB per press, {view}: {parts}")
    for name in names:
        for view, summary_ in [("floor app", result["floor"]), *result["views"][name].items()]:
            for side in ("server_profile", "browser_profile"):
                if side in summary_:
                    parts = ", ".join(f"{entry} {seconds * 1e3:.0f}" for entry, seconds in summary_[side])
                    lines.append(f"{side.replace('_', ' ')}, ms per press, {named(view, name)}: {parts}")
    averages = result["load_average"]
    lines.append(f"(load average {min(averages):.1f}–{max(averages):.1f} during the run, on {os.cpu_count()} cores; "
                 + ", ".join(f"{name}: {script}" for name, script in result["apps"].items()) + ")")
    return "\n".join(lines)


def viewport_size(text: str) -> dict:
    """'1280x720' as Playwright's viewport {"width": 1280, "height": 720}."""
    width, _, height = text.partition("x")
    return {"width": int(width), "height": int(height)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tabs", nargs="+", metavar="LABEL", help="tabs to time (default: every tab of the page)")
    parser.add_argument("--presses", type=int, default=7, help="key presses per view (default 7)")
    parser.add_argument("--loads", type=int, default=3, help="first loads of each app in a new session (default 3)")
    parser.add_argument("--against", nargs="+", metavar="DIR",
                        help="also time the app of these checkouts (e.g. a copy of main), pressed in turn with this one")
    parser.add_argument("--query", default="", help="URL query to start from, e.g. 'V=3&mismatch=1'")
    parser.add_argument("--large-query", default="T=10",
                        help="also time the first tab opened from this query (default T=10; '' to skip)")
    parser.add_argument("--viewport", type=viewport_size, default=VIEWPORT, metavar="WxH",
                        help=f"the browser window in CSS pixels (default {VIEWPORT['width']}x{VIEWPORT['height']})")
    parser.add_argument("--json", metavar="PATH", help="write every number, per press, as JSON")
    parser.add_argument("--without-charts", action="store_true",
                        help="also time this checkout's page with every chart an empty placeholder: what a browser "
                             "spends on the page's other elements")
    parser.add_argument("--payload", action="store_true", help="bytes per press by element (decodes every frame)")
    parser.add_argument("--profile", metavar="DIR",
                        help="profile every press into DIR: the app's script runs (cProfile) and the browser's "
                             "main thread (CPU profile); prints the top entries per view (slows everything)")
    args = parser.parse_args(argv)
    ok, reason = browser_available()
    if not ok:
        raise SystemExit(f"page_latency: error: {reason}")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = measure(args)
    print(report(result))
    print(f"({time.perf_counter() - started:.0f} s in all)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
