"""A reading group on one link: K people open the page within a window and press a slider while the presenter talks.

    python benchmarks/reading_group.py                                   # 40 users, the mix of issue 36
    python benchmarks/reading_group.py --cpu-quota 0.5 --per-tab         # half a core; each tab's room, then the mix
    python benchmarks/reading_group.py --cold --against /tmp/main        # a server just started; main's app in turn
    python benchmarks/reading_group.py --cold --toylab-app               # a server started as `toylab app` starts it
    python benchmarks/reading_group.py --users 100 --json room.json
    python benchmarks/reading_group.py --app /tmp/main                   # another checkout's app and its config
    python benchmarks/reading_group.py --url http://127.0.0.1:8080 --pid 1234 5678      # a running server (nginx)
    python benchmarks/reading_group.py --users 10 --presses 200 --think 0.2 0.5 --walk 10 --memory-every 15  # memory

Each user is a headless client that speaks Streamlit's own protocol, as the browser does (no browser per user, so
the times are the server's share of the wait; the browser's own drawing comes on top, see page_latency.py):

- the page load: GET of the page (``/?tab=…``) and of the scripts and styles it links (a cold browser; not with
  ``--warm-browser``), ``/_stcore/health`` and ``/_stcore/host-config``, keeping the cookies they set (a reverse
  proxy's sticky route, docs/deploying/nginx.conf), then the websocket ``/_stcore/stream``
  (subprotocols "streamlit" and the placeholder auth token, as the frontend's WebsocketConnection sends) and a
  BackMsg ``rerun_script`` carrying the link's query string; loaded when the run's ``script_finished`` arrives.
- a press: after a think time drawn uniformly from ``--think``, the slider (``--slider``: its key or label; its
  widget id read from the ForwardMsg deltas, as the frontend does) moves one step (``--step``, default the slider's
  own) up, back down once it reaches the slider's end or ``--walk`` steps (a long session), and the client sends
  ``rerun_script`` with the slider's value (``double_array_value``), the address the page last wrote
  (``page_info_changed``) and the hashes of the cacheable messages it holds (the frontend's message cache,
  ``max_cached_message_age`` runs). Answered when a run that started after the press finishes.

Users are spread over ``--tabs`` in turn and arrive uniformly over ``--window`` seconds (``--seed``). With
``--spread S`` each user starts at its own slider value (a multiple of the step in [0, S] above the link's), so the
room no longer asks for the same settings at once. Besides the times (p50, p95 and max of presses and loads, per
tab and overall) it counts what went wrong: a run that ends in an exception element or an error alert, a press not
answered within ``--timeout``, a closed socket, a page whose address does not carry the user's own slider value (a
leak between sessions or a lost press), and presses during which the page said it was waiting (a queue notice:
an element whose text starts with ``--queue-text``) or, answered after more than a second, said nothing of it. It samples the
server's CPU (utime + stime of the server and its children, /proc) and resident memory (VmRSS, summed over them)
every 0.25 s. It only reports; no test asserts a time.

CPU-seconds a press: the server's CPU over the room (from the first user's arrival to the last answer) divided by
the presses and page loads it answered. ``--per-tab`` measures it for each tab alone first — a room of
``--users``/len(``--tabs``) users on that tab, the share the mix gives it, on a server of its own — then the mix.
``--cpu-quota F`` holds each server to F of one core (``cpu_quota.py``: a cgroup's CPU quota where one can be made,
else the server pinned beside spinning processes; the output names which, and how often it was throttled).
``--cold`` starts every room on a server just started, without the page load that otherwise warms it first, as a
class meets it: ``streamlit run streamlit_app.py`` loads the page before its server answers (its ``st.App``,
toylab_app/startup.py; a checkout from before it imports the page at the room's first visit, in the room's CPU);
with ``--toylab-app`` the server is started as the installed command starts it (``toylab app``: its own
``st.App``, the same lifespan).
``--against DIR`` runs the same rooms on another checkout's app, in turn with this one (each room of this app, then
the same room of the other), so both meet the machine's load alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_quota import cgroup_of, held_to  # noqa: E402
from toylab_app.startup import PAGE_LOADED  # noqa: E402

MIX = ("Estimators", "Ratios", "Error vs batch size", "Training")
SAMPLE_EVERY_S = 0.25
SILENT_S = 1.0                  # a press answered later than this without the queue notice was a silent wait
QUEUE_TEXT = "Waiting"          # the start of the page's queue notice
ASSETS = re.compile(r'(?:src|href)="\./(static/[^"]+\.(?:js|css|woff2))"')
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the server: started here or given -------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TOYLAB_APP = ["-c", "import sys; from toylab_app.command import main; sys.exit(main())", "app"]


@contextlib.contextmanager
def served(app_dir, options, preexec=None, toylab_app=False):
    """``streamlit run streamlit_app.py`` in ``app_dir`` (so its .streamlit/config.toml is the one read), with extra
    ``--key value`` options, ``preexec`` called in the child before it starts (joining a CPU quota); yields (url, pid,
    log file). With ``toylab_app`` the server is started as the installed ``toylab app`` starts it, and is served
    once its log says the page is loaded: an ``st.App`` logs it before the server answers; an older checkout's
    thread loader, after (at most 60 s after it answers: a checkout without any loader, or a page whose import
    failed, which its log says)."""
    port = free_port()
    command = [sys.executable, *(TOYLAB_APP if toylab_app else ["-m", "streamlit", "run", "streamlit_app.py"]),
               "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true", *options]
    log = tempfile.NamedTemporaryFile("w+", prefix="reading-group-", suffix=".log", delete=False)
    process = subprocess.Popen(command, cwd=app_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=preexec)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while asyncio.run(_status(url, "/_stcore/health")) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.2)
        while toylab_app and PAGE_LOADED not in Path(log.name).read_text() and time.monotonic() < deadline + 60:
            time.sleep(0.2)
        yield url, process.pid, log.name
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def _status(url, path):
    try:
        return (await http_get(url, path))[0]
    except OSError:
        return None


async def http_get(url, path, cookies=None):
    """(status, body bytes) of a plain HTTP/1.1 GET (gzip accepted, as a browser does; the body left compressed),
    sending ``cookies`` (a dict) and keeping there those the response sets (a reverse proxy's sticky route)."""
    parts = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    jar = f"Cookie: {'; '.join(f'{k}={v}' for k, v in cookies.items())}\r\n" if cookies else ""
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept-Encoding: gzip\r\n{jar}"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    if cookies is not None:
        for name, value in re.findall(r"(?im)^set-cookie:\s*([^=;\s]+)=([^;\r\n]*)", head.decode("latin-1")):
            cookies[name] = value
    return int(head.split(b" ", 2)[1]), body


# -- the server's CPU and memory, from /proc -------------------------------------------------------------------------

def process_tree(pids):
    """The given pids and all their descendants."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds_and_rss(pids):
    """(CPU seconds used so far, resident bytes now), summed over the processes."""
    cpu = rss = 0
    for pid in process_tree(pids):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK
            status = Path(f"/proc/{pid}/status").read_text()
            rss += int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
    return cpu, rss


@dataclass
class Samples:
    times: list = field(default_factory=list)
    cpu: list = field(default_factory=list)
    rss: list = field(default_factory=list)


async def sample(pids, samples, stop):
    while not stop.is_set():
        cpu, rss = cpu_seconds_and_rss(pids)
        samples.times.append(time.monotonic())
        samples.cpu.append(cpu)
        samples.rss.append(rss)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)


# -- one user ---------------------------------------------------------------------------------------------------------

@dataclass
class User:
    index: int
    tab: str
    arrival: float
    thinks: list
    start_steps: int
    load: float | None = None
    presses: list = field(default_factory=list)        # seconds per answered press
    silent: int = 0                                    # presses answered after SILENT_S with no queue notice
    told: int = 0                                      # presses during which the page showed the queue notice
    problems: list = field(default_factory=list)       # (kind, text)
    received: int = 0                                  # bytes


class Page:
    """One browser tab's view of the session: the slider's widget, the address, the message cache, and what a run
    showed."""

    def __init__(self, slider):
        self.slider_name = slider
        self.slider = None                             # the Slider element
        self.query = ""
        self.cache = {}                                # hash → run count when last seen
        self.runs = 0
        self.max_age = 2

    def client_state(self, message, query, widgets):
        state = message.rerun_script
        state.query_string = query
        state.page_script_hash = ""
        state.context_info.CopyFrom(ContextInfo(timezone="UTC", timezone_offset=0, locale="en-US",
                                                url="http://localhost/", is_embedded=False, color_scheme="light"))
        state.cached_message_hashes.extend(sorted(self.cache))
        for widget_id, value in widgets.items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            widget.double_array_value.data.extend([value])
        return message

    def seen(self, message, outcome, queue_text):
        """Note what a ForwardMsg shows: the slider, the address, a cacheable message, an exception or an error, the
        queue notice."""
        kind = message.WhichOneof("type")
        if kind == "new_session":
            self.max_age = message.new_session.config.max_cached_message_age or self.max_age
        elif kind == "page_info_changed":
            self.query = message.page_info_changed.query_string
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            what = element.WhichOneof("type")
            if what == "slider" and self.slider_name in (element.slider.label, element.slider.id.rsplit("-", 1)[-1]):
                self.slider = element.slider
            elif what == "exception":
                outcome["exceptions"].append(f"{element.exception.type}: {element.exception.message[:200]}")
            elif what == "alert" and element.alert.format == 1:       # Alert.Format.ERROR
                outcome["errors"].append(element.alert.body[:200])
            elif what in ("alert", "markdown", "toast") and _text(element).startswith(queue_text):
                outcome["told"] = True
        if message.metadata.cacheable and message.hash:
            self.cache[message.hash] = self.runs
        elif kind == "ref_hash":                       # a message the cache held, used again: its age starts anew
            self.cache[message.ref_hash] = self.runs

    def finished_run(self, status):
        """A run finished: the cache's messages age by one, those older than ``max_age`` runs are dropped (as the
        frontend's ForwardMsgCache does; a run stopped early for a rerun does not count)."""
        if status == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
            return
        self.runs += 1
        self.cache = {key: run for key, run in self.cache.items() if self.runs - run <= self.max_age}


def _text(element):
    kind = element.WhichOneof("type")
    return getattr(element, kind).body if kind in ("alert", "markdown", "toast") else ""


async def run_until_answered(socket_, page, started, deadline, queue_text):
    """Read ForwardMsgs until a script run that started after ``started`` finishes successfully; returns (seconds,
    outcome). A run stopped early for another run is waited past."""
    outcome = {"exceptions": [], "errors": [], "told": False, "bytes": 0}
    began = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        data = await asyncio.wait_for(socket_.recv(), remaining)
        now = time.monotonic()
        outcome["bytes"] += len(data)
        message = ForwardMsg()
        message.ParseFromString(data)
        kind = message.WhichOneof("type")
        if kind == "new_session":
            began = True
        page.seen(message, outcome, queue_text)
        if kind == "script_finished":
            status = message.script_finished
            page.finished_run(status)
            if began and status in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR):
                if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    outcome["exceptions"].append("compile error")
                return now - started, outcome


async def user_session(user, args, clock0):
    """Arrive, load the page, press the slider; fill ``user``."""
    await asyncio.sleep(max(0.0, clock0 + user.arrival - time.monotonic()))
    page = Page(args.slider)
    query = urllib.parse.urlencode({"tab": user.tab}) + (f"&{args.query}" if args.query else "")
    start = time.monotonic()
    cookies = {}
    try:
        status, body = await http_get(args.url, f"/?{query}", cookies)
        if status != 200:
            user.problems.append(("http", f"GET / answered {status}"))
        if not args.warm_browser:
            paths = sorted(set(ASSETS.findall(body.decode("utf-8", "replace"))))
            for first in range(0, len(paths), 6):                     # a browser's six connections to one host
                for status, _ in await asyncio.gather(*(http_get(args.url, f"/{path}", cookies)
                                                        for path in paths[first:first + 6])):
                    if status != 200:
                        user.problems.append(("http", f"an asset answered {status}"))
        for path in ("/_stcore/health", "/_stcore/host-config"):
            await http_get(args.url, path, cookies)
        ws_url = args.url.replace("http", "ws", 1) + "/_stcore/stream"
        cookie = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
        async with connect(ws_url, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], max_size=None,
                           compression=None, open_timeout=args.timeout, ping_interval=None,
                           additional_headers=cookie) as socket_:
            await socket_.send(page.client_state(BackMsg(), query, {}).SerializeToString())
            seconds, outcome = await run_until_answered(socket_, page, start, start + args.timeout, args.queue_text)
            user.load = seconds
            _note(user, outcome)
            if page.slider is None:
                user.problems.append(("slider", f"no slider {args.slider!r} on the page"))
                return
            step = args.step or page.slider.step
            default = (page.slider.value or page.slider.default)[0]     # what the link left out: the value opened at
            value = default + user.start_steps * step
            if user.start_steps:          # a user who starts elsewhere: one run to get there, not timed
                await socket_.send(page.client_state(BackMsg(), page.query, {page.slider.id: value})
                                   .SerializeToString())
                await run_until_answered(socket_, page, time.monotonic(), time.monotonic() + args.timeout,
                                         args.queue_text)
            direction, walked = 1, 0
            for think in user.thinks:
                await asyncio.sleep(think)
                if not page.slider.min <= value + direction * step <= page.slider.max or walked == args.walk > 0:
                    direction, walked = -direction, 0  # at an end of the slider or of the walk: back the other way
                walked += 1
                value = round(value + direction * step, 10)
                pressed = time.monotonic()
                await socket_.send(page.client_state(BackMsg(), page.query, {page.slider.id: value})
                                   .SerializeToString())
                seconds, outcome = await run_until_answered(socket_, page, pressed, pressed + args.timeout,
                                                            args.queue_text)
                user.presses.append(seconds)
                _note(user, outcome)
                user.silent += seconds > SILENT_S and not outcome["told"]
                shown = urllib.parse.parse_qs(page.query).get(args.slider_param, [None])[0]
                if abs(float(default if shown is None else shown) - value) > 1e-9:    # the link leaves out a default
                    user.problems.append(("address", f"the page's address says {args.slider_param}={shown}, "
                                                     f"the user set {value:g}"))
    except TimeoutError:
        user.problems.append(("timeout", f"no answer within {args.timeout:g} s"))
    except (OSError, WebSocketException) as error:
        user.problems.append(("connection", f"{type(error).__name__}: {error}"))


def _note(user, outcome):
    user.received += outcome["bytes"]
    user.told += outcome["told"]
    user.problems += [("exception", text) for text in outcome["exceptions"]]
    user.problems += [("error", text) for text in outcome["errors"]]


# -- the room ---------------------------------------------------------------------------------------------------------

def make_users(args):
    chance = random.Random(args.seed)
    users = []
    for index in range(args.users):
        arrival = chance.uniform(0, args.window)
        thinks = [chance.uniform(*args.think) for _ in range(args.presses)]
        start_steps = chance.randint(0, round(args.spread / (args.step or 0.01))) if args.spread else 0
        users.append(User(index, args.tabs[index % len(args.tabs)], arrival, thinks, start_steps))
    return users


async def room(args, pids):
    users = make_users(args)
    samples, stop = Samples(), asyncio.Event()
    sampler = asyncio.create_task(sample(pids, samples, stop))
    client_cpu = time.process_time()
    clock0 = time.monotonic() + 0.5
    memory = asyncio.create_task(memory_probe(args, samples, clock0)) if args.memory_every else None
    await asyncio.gather(*(user_session(user, args, clock0) for user in users))
    stop.set()
    await sampler
    if memory:
        memory.cancel()
    return users, samples, time.process_time() - client_cpu, clock0


async def memory_probe(args, samples, clock0):
    """Print the server's RSS every ``--memory-every`` seconds (a long session's memory over time)."""
    while True:
        await asyncio.sleep(args.memory_every)
        if samples.rss:
            print(f"  t = {time.monotonic() - clock0:6.0f} s  RSS {samples.rss[-1] / 2**20:6.0f} MiB", flush=True)


def warm(args):
    """One page load of the first tab before the clock starts (the server's imports, not a room's wait)."""
    settings = argparse.Namespace(**{**vars(args), "presses": 0})
    user = User(-1, args.tabs[0], 0.0, [], 0)
    asyncio.run(user_session(user, settings, time.monotonic()))
    return user


def quantiles(values):
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(ordered), "p50": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))], "max": ordered[-1]}


def summary(args, users, samples, client_cpu, clock0):
    by_tab = {tab: [user for user in users if user.tab == tab] for tab in args.tabs}
    rows = {tab: {"press": quantiles([p for user in group for p in user.presses]),
                  "load": quantiles([user.load for user in group if user.load is not None])}
            for tab, group in by_tab.items()}
    rows["all"] = {"press": quantiles([p for user in users for p in user.presses]),
                   "load": quantiles([user.load for user in users if user.load is not None])}
    problems = {}
    for user in users:
        for kind, text in user.problems:
            problems.setdefault(kind, []).append(text)
    active = [i for i, t in enumerate(samples.times) if t >= clock0]
    wall = samples.times[active[-1]] - samples.times[active[0]] if len(active) > 1 else 0
    cpu = samples.cpu[active[-1]] - samples.cpu[active[0]] if len(active) > 1 else 0
    return {"users": args.users, "tabs": list(args.tabs), "presses_asked": args.users * args.presses,
            "presses_answered": sum(len(user.presses) for user in users),
            "loads_answered": sum(user.load is not None for user in users), "rows": rows,
            "silent_presses": sum(user.silent for user in users), "told_presses": sum(user.told for user in users),
            "problems": {kind: {"count": len(texts), "first": texts[0]} for kind, texts in problems.items()},
            "server_cpu_share": cpu / wall if wall else None, "server_cpu_seconds": cpu, "wall_seconds": wall,
            "rss_peak_mib": max(samples.rss) / 2**20 if samples.rss else None,
            "rss_end_mib": samples.rss[-1] / 2**20 if samples.rss else None,
            "client_cpu_seconds": client_cpu, "received_mib": sum(user.received for user in users) / 2**20,
            "load_average": os.getloadavg(), "cpu": cpu_model()}


def print_summary(result):
    print(f"{result['users']} users, {result['presses_answered']} of {result['presses_asked']} presses and "
          f"{result['loads_answered']} of {result['users']} loads answered")
    print(f"{'tab':<22} {'press p50':>9} {'p95':>7} {'max':>7} {'n':>5}   {'load p50':>8} {'p95':>7} {'max':>7}")
    for tab, row in result["rows"].items():
        press, load = row["press"], row["load"]
        cells = [f"{press.get(k, float('nan')):7.2f}" for k in ("p50", "p95", "max")]
        loads = [f"{load.get(k, float('nan')):7.2f}" for k in ("p50", "p95", "max")]
        print(f"{tab:<22} {cells[0]:>9} {cells[1]} {cells[2]} {press['n']:>5}   {loads[0]:>8} {loads[1]} {loads[2]}")
    print(f"server CPU {result['server_cpu_share']:.0%} of a core over {result['wall_seconds']:.0f} s "
          f"({result['server_cpu_seconds']:.1f} CPU-s), RSS peak {result['rss_peak_mib']:.0f} MiB, end "
          f"{result['rss_end_mib']:.0f} MiB; this client {result['client_cpu_seconds']:.1f} CPU-s, "
          f"{result['received_mib']:.1f} MiB received")
    print(f"presses with the queue notice {result['told_presses']}, silent waits (answered after {SILENT_S:g} s, "
          f"no notice) {result['silent_presses']}")
    for kind, problem in result["problems"].items():
        print(f"PROBLEM {kind}: {problem['count']} (first: {problem['first']})")
    if not result["problems"]:
        print("no errors, exceptions, timeouts, lost presses or leaks")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in result["load_average"]))
    if result.get("quota"):
        throttled = result.get("throttled")
        print(f"CPU quota: {result['quota']}" + (f"; throttled in {throttled[0]} of {throttled[1]} periods, "
                                                 f"{throttled[2]:.1f} s in all" if throttled else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--tabs", nargs="+", default=list(MIX), help="users are spread over these in turn")
    parser.add_argument("--slider", default="mismatch", help="the slider pressed: its key or label")
    parser.add_argument("--slider-param", default=None, help="its name in the address (default: --slider)")
    parser.add_argument("--step", type=float, default=None, help="one press (default: the slider's step)")
    parser.add_argument("--window", type=float, default=20.0, help="users arrive uniformly over this many seconds")
    parser.add_argument("--think", type=float, nargs=2, default=(2.0, 8.0), help="seconds between presses")
    parser.add_argument("--presses", type=int, default=6, help="presses per user")
    parser.add_argument("--walk", type=int, default=0,
                        help="turn back after this many presses one way (0: only at the slider's ends)")
    parser.add_argument("--spread", type=float, default=0.0,
                        help="each user starts up to this far above the link's value (0: all at the same)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--query", default="", help="more of the link, e.g. 'T=8&V=4'")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a load or press may take")
    parser.add_argument("--warm-browser", action="store_true", help="do not fetch the page's scripts and styles")
    parser.add_argument("--queue-text", default=QUEUE_TEXT, help="how the page's queue notice begins")
    parser.add_argument("--app", default=str(ROOT), help="the checkout whose streamlit_app.py and config to run")
    parser.add_argument("--option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                        help="a streamlit option for this run, e.g. --option runner.postScriptGC false")
    parser.add_argument("--url", help="a server already running (then --pid for its CPU and memory)")
    parser.add_argument("--pid", type=int, nargs="*", default=[], help="server processes to sample (with --url)")
    parser.add_argument("--no-warm-up", "--cold", dest="cold", action="store_true",
                        help="no page load before the clock starts: with a server started here, a cold one")
    parser.add_argument("--toylab-app", action="store_true",
                        help="start the server as the installed `toylab app` does, not by `streamlit run "
                             "streamlit_app.py`; the room begins once the page is loaded")
    parser.add_argument("--cpu-quota", type=float, default=0,
                        help="hold the server to this fraction of one core (cpu_quota.py; 0: no quota)")
    parser.add_argument("--per-tab", action="store_true",
                        help="first a room for each tab alone (its share of --users), then the mix")
    parser.add_argument("--against", action="append", default=[], metavar="DIR",
                        help="also another checkout's app, room by room in turn with --app's")
    parser.add_argument("--memory-every", type=float, default=0, help="print the server's RSS this often (s)")
    parser.add_argument("--json", help="write the summaries here")
    args = parser.parse_args()
    args.slider_param = args.slider_param or args.slider
    rooms = [[tab] for tab in args.tabs] if args.per_tab and len(args.tabs) > 1 else []
    rooms.append(list(args.tabs))
    results = []
    for tabs in rooms:
        for app in [args.app, *args.against]:
            room_args = argparse.Namespace(**{**vars(args), "tabs": tabs, "app": app,
                                              "users": max(1, args.users * len(tabs) // len(args.tabs))})
            print(f"\n== {app}: {room_args.users} users on {', '.join(tabs)}"
                  + (", cold" if args.cold else "") + f"; load average {os.getloadavg()[0]:.2f}", flush=True)
            result = measured(room_args)
            print_summary(result)
            results.append(result)
    if len(results) > 1:
        print_cpu_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results if len(results) > 1 else results[0], indent=1))


def measured(args):
    """One room: its server started here (under the CPU quota) or given, warmed unless cold; the summary."""
    with contextlib.ExitStack() as stack:
        quota = stack.enter_context(held_to(args.cpu_quota if not args.url else 0))
        if args.url:
            pids, log = args.pid, None
        else:
            options = [f"--{key}={value}" for key, value in args.option]
            args.url, pid, log = stack.enter_context(served(args.app, options, preexec=quota.join,
                                                            toylab_app=args.toylab_app))
            pids = [pid]
            if quota.kind in ("v1", "v2"):
                print(f"the server {pid} is in {', '.join(sorted(set(cgroup_of(pid)) - {'/'}))}")
        started_cpu, _ = cpu_seconds_and_rss(pids)
        if not args.cold:
            warmed = warm(args)
            print(f"warm-up load {warmed.load:.2f} s" if warmed.load else f"warm-up failed: {warmed.problems}")
        users, samples, client_cpu, clock0 = asyncio.run(room(args, pids))
        result = summary(args, users, samples, client_cpu, clock0)
        result |= {"app": args.app, "cold": args.cold, "toylab_app": args.toylab_app, "quota": quota.describe(), "throttled": quota.throttled(),
                   "server_start_cpu_seconds": started_cpu}
        if log:
            text = Path(log).read_text()
            result["server_log_tracebacks"] = text.count("Traceback")
            if result["server_log_tracebacks"]:
                print(f"PROBLEM the server logged {result['server_log_tracebacks']} tracebacks ({log})")
    return result


def cpu_model():
    """The machine's CPU as /proc/cpuinfo names it, and how many this process may use."""
    info = Path("/proc/cpuinfo").read_text()
    field = {name: (re.findall(rf"^{name}\s*:\s*(.+)$", info, re.M) or ["?"])[0]
             for name in ("model name", "cpu family", "model")}
    return (f"{field['model name']} (family {field['cpu family']}, model {field['model']}) × "
            f"{len(os.sched_getaffinity(0))}")


def print_cpu_table(results):
    """CPU-seconds a press (or load) of each room, by app: the per-tab rooms and the mix."""
    print(f"\n{cpu_model()}; load average (1 min) {min(r['load_average'][0] for r in results):.1f} to "
          f"{max(r['load_average'][0] for r in results):.1f} at the rooms' ends")
    print("server CPU-s a press or load (server CPU over the room / presses and loads answered); press p50 / p95 s")
    apps = list(dict.fromkeys(result["app"] for result in results))
    print(f"{'room':<34}" + "".join(f"{Path(app).name[:24]:>26}" for app in apps))
    for tabs in dict.fromkeys(tuple(result["tabs"]) for result in results):
        cells = []
        for app in apps:
            result = next(r for r in results if r["app"] == app and tuple(r["tabs"]) == tabs)
            events = result["presses_answered"] + result["loads_answered"]
            press = result["rows"]["all"]["press"]
            cells.append(f"{result['server_cpu_seconds'] / max(events, 1):.4f} ({press.get('p50', float('nan')):.2f}"
                         f" / {press.get('p95', float('nan')):.2f})")
        name = "the mix: " + ", ".join(tabs) if len(tabs) > 1 else tabs[0]
        print(f"{name[:34]:<34}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    main()
