"""Helpers for end-to-end tests that drive a real Streamlit server in headless Chromium.

Not a test module. Typical use::

    from tests.browser import browser_available, launch_browser, running_app, skip_or_fail, wait_for_app

    ok, reason = browser_available()
    if not ok:
        skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    with running_app() as url, sync_playwright() as pw:
        browser = launch_browser(pw)
        page = browser.new_page()
        page.goto(url)
        wait_for_app(page)

Set TOYLAB_REQUIRE_BROWSER=1 (CI does) to turn a missing browser into a failure instead of a skip.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO_ROOT = Path(__file__).resolve().parent.parent
HEALTH_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0


GZIP_MAY_NOT_SHRINK_BYTES = 1024    # a static file this small may be sent plain (gzip may not shrink it)


def frontend_assets() -> tuple[Path, list[str]]:
    """Streamlit's static folder and the scripts, styles and fonts its index.html names (what a new browser fetches
    first)."""
    import re

    from streamlit import file_util

    static = Path(file_util.get_static_dir())
    names = re.findall(r'(?:src|href)="\./(static/[^"]+\.(?:js|css|woff2))"', (static / "index.html").read_text())
    return static, sorted(set(names))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.read().decode("utf-8", "replace").strip()
    except (OSError, urllib.error.URLError):
        return None


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server's whole process group; kill it if it is still alive after the grace time."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE_S)


@contextlib.contextmanager
def running_app(script: str | os.PathLike = "streamlit_app.py", query: str = "", cwd: str | os.PathLike = REPO_ROOT,
                options: tuple[str, ...] = (), server: tuple[str, ...] = ()) -> Iterator[str]:
    """Run ``streamlit run SCRIPT`` on a free loopback port, in ``cwd`` (whose .streamlit/config.toml it reads), with
    extra command-line ``options`` (e.g. ``("--runner.postScriptGC", "false")``); yield its URL (plus ``?query`` if
    given). ``server``, if given, is the command that serves the page instead of ``python -m streamlit run SCRIPT``
    (e.g. an installed package's ``("…/bin/toylab", "app")``), given the same options.

    The server always stops when the block exits, even on error.
    """
    script_path = Path(script)
    if not script_path.is_absolute():
        script_path = REPO_ROOT / script_path
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        *(server or (sys.executable, "-m", "streamlit", "run", str(script_path))),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
        *options,
    ]
    with tempfile.TemporaryFile(mode="w+", prefix="streamlit-", suffix=".log") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so the whole tree can be stopped
        )

        def server_log() -> str:
            log.flush()
            log.seek(0)
            return log.read()

        try:
            deadline = time.monotonic() + HEALTH_TIMEOUT_S
            while _health(base) != "ok":
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"streamlit exited with code {proc.returncode} before it was healthy.\n"
                        f"--- server log ---\n{server_log()}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"streamlit not healthy at {base} after {HEALTH_TIMEOUT_S:.0f} s.\n"
                        f"--- server log ---\n{server_log()}"
                    )
                time.sleep(0.25)
            yield f"{base}/?{query.lstrip('?')}" if query else base
        finally:
            _stop(proc)


def browser_available() -> tuple[bool, str]:
    """(True, "") when Playwright imports and Debian's chromium is installed, else (False, why)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return False, f"{CHROMIUM} not found (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return False, f"playwright not importable: {exc}"
    return True, ""


def skip_or_fail(reason: str) -> None:
    """Skip the test, or fail it when TOYLAB_REQUIRE_BROWSER=1 (as in CI)."""
    if os.environ.get("TOYLAB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser required (TOYLAB_REQUIRE_BROWSER=1) but unavailable: {reason}")
    pytest.skip(reason)


def launch_browser(playwright):
    """Headless Debian chromium (Playwright's own browser downloads are not available here)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


_APP_STATE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app) return {present: false};
    const status = document.querySelector('[data-testid="stStatusWidget"]');
    const statusShown = !!status && status.getClientRects().length > 0
        && getComputedStyle(status).visibility !== "hidden";
    return {
        present: true,
        connection: app.getAttribute("data-test-connection-state"),
        script: app.getAttribute("data-test-script-state"),
        running: statusShown && /Running/i.test(status.innerText || ""),
        statusShown: statusShown,
    };
}"""


def wait_for_app(page, timeout: float = 60000) -> None:
    """Wait until the app has connected and its script run has finished.

    Done when ``[data-testid="stApp"]`` reports a connected session whose script has run at least
    once and is not running, and the "Running..." status widget has stayed hidden for about a
    second in a row. ``timeout`` is in milliseconds, as in Playwright.
    """
    deadline = time.monotonic() + timeout / 1000
    page.wait_for_selector('[data-testid="stApp"]', state="attached", timeout=timeout)
    quiet_since: float | None = None
    state: dict = {}
    while True:
        now = time.monotonic()
        state = page.evaluate(_APP_STATE_JS)
        idle = (
            state.get("present")
            and state.get("connection") == "CONNECTED"
            and state.get("script") in ("notRunning", "compilationError")
            and not state.get("statusShown")
        )
        if not idle:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 1.0:
            return
        if now > deadline:
            raise TimeoutError(
                f"Streamlit app not connected and idle after {timeout / 1000:.0f} s; last state: {state}"
            )
        page.wait_for_timeout(100)


def file_input(container, label: str):
    """The file input of the uploader in ``container`` whose label contains ``label``."""
    return container.get_by_test_id("stFileUploader").filter(has_text=label).locator('input[type="file"]')
