"""toylab as a researcher installs it: the wheel built from this tree, installed with its dependencies into a new
virtual environment outside the checkout, on the oldest Python it declares (3.11, this one) and the newest one this
machine has (pyenv's 3.13: 3.14 is declared, not found here); its ``toylab`` command runs the exact
table, ``train`` and ``inspect`` (a log and a run's zip), and ``toylab app`` serves the page, with the project's
settings, from a folder that is not the checkout."""

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.browser import (
    REPO_ROOT,
    browser_available,
    launch_browser,
    running_app,
    skip_or_fail,
    wait_for_app,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PYENV = Path.home() / ".pyenv" / "versions"
NEWEST = max((path for path in PYENV.glob("3.1[1-9].*") if (path / "bin/python3").exists()),
             key=lambda path: tuple(int(part) for part in path.name.split(".")), default=None)
PYTHONS = sorted({sys.base_prefix, *([str(NEWEST)] if NEWEST else [])})
EXAMPLES = REPO_ROOT / "examples"
PRIMARY_LIGHT = "rgb(0, 114, 178)"        # .streamlit/config.toml's [theme.light] primaryColor, #0072B2


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel ``pip wheel .`` builds from this tree (in a copy, so the checkout gains no build folders)."""
    source = tmp_path_factory.mktemp("source")
    tree = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                          capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, tree):
        if (REPO_ROOT / name).exists():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name, follow_symlinks=False)
    out = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w",
                    str(out), str(source)], check=True, capture_output=True)
    [built] = out.glob("toylab-*.whl")
    return built


def these_versions():
    """``name==version`` of each package requirements.txt names, as this environment has it: CI runs the tiers at the
    newest versions the ranges allow and at their lower bounds, and the package on this Python is installed at the
    same ones."""
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    names = [re.match(r"[A-Za-z0-9_.-]+", line)[0] for line in lines if line and not line.startswith("#")]
    return [f"{name}=={metadata.version(name)}" for name in names]


@pytest.fixture(scope="module", params=PYTHONS, ids=lambda prefix: Path(prefix).name)
def installed(request, wheel, tmp_path_factory):
    """A new virtual environment of that Python with the wheel and its dependencies (on this Python, at the versions
    this environment has; on the newer one, the newest allowed), and a folder outside the checkout to run it from."""
    python = Path(request.param) / "bin" / "python3"
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    pins = these_versions() if request.param == sys.base_prefix else []
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", str(wheel), *pins],
                   check=True, capture_output=True)
    return venv, tmp_path_factory.mktemp("elsewhere")


def toylab(installed, *arguments):
    venv, elsewhere = installed
    return subprocess.run([str(venv / "bin/toylab"), *arguments], cwd=elsewhere, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ""})


def test_the_installed_packages_are_the_wheels_not_the_checkouts(installed):
    venv, elsewhere = installed
    where = subprocess.run([str(venv / "bin/python"), "-c", "import toylab, toylab_app; print(toylab.__file__); "
                            "print(toylab_app.__file__)"], cwd=elsewhere, capture_output=True, text=True, check=True)
    for path in where.stdout.split():
        assert "site-packages" in path and str(REPO_ROOT) not in path, path


def test_the_command_gives_the_exact_table_train_and_inspect(installed):
    table = toylab(installed, "--T", "3", "--V", "2")
    assert table.returncode == 0 and "T=3 V=2 M=8" in table.stdout and "E_mu[W]=1.0000" in table.stdout, table.stderr
    trained = toylab(installed, "train", "--T", "3", "--V", "2", "--steps", "3", "--estimators", "naive,seq_tis")
    assert trained.returncode == 0 and "seq_tis" in trained.stdout, trained.stderr
    log = toylab(installed, "inspect", str(EXAMPLES / "rollouts_per_token.jsonl"))
    assert log.returncode == 0 and "13,224 response tokens" in log.stdout, log.stderr
    run = toylab(installed, "inspect", str(EXAMPLES / "example_run.zip"), "--workers", "1")
    assert run.returncode == 0 and "step" in run.stdout, run.stderr
    refused = toylab(installed, "--T", "99")
    assert refused.returncode == 2 and refused.stderr.startswith("toylab: error:") and refused.stderr.count("\n") == 1


def test_toylab_app_serves_the_page_with_the_projects_settings(installed):
    ok, reason = browser_available()
    if not ok:
        skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    venv, elsewhere = installed
    assert not (elsewhere / ".streamlit").exists()
    with running_app(server=(str(venv / "bin/toylab"), "app"), cwd=elsewhere) as url, sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720}, color_scheme="light")
            page.goto(url)
            wait_for_app(page, timeout=120000)
            assert page.get_by_test_id("stException").count() == 0
            assert page.get_by_test_id("stMetric").count() >= 7
            value = page.get_by_test_id("stSliderThumbValue").first          # the mismatch slider's value
            assert value.evaluate("e => getComputedStyle(e).color") == PRIMARY_LIGHT
        finally:
            browser.close()
