"""The tiers: ``python -m pytest`` leaves the slow tier out, ``--all-tiers`` (what the README says CI runs, and what
``.ci/run`` runs) keeps it, and a sweep split by ``tests/tiers.py`` keeps every case in one tier or the other."""

import re
from pathlib import Path

import pytest
from tiers import catalogue_and_one_preset_per_framework, fast_then_slow

from toylab import EXACT_IDS
from toylab.catalogue.presets import FRAMEWORKS

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
TIERED = """
import pytest

def test_fast():
    pass

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.browser
def test_in_a_browser():
    pass
"""


def readme_commands():
    """The commands of the README's "Tests" code block, comments dropped."""
    section = (ROOT / "README.md").read_text().split("\n## Tests\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines()]


def test_ci_runs_the_readmes_every_tier_command():
    fast, every = readme_commands()
    assert fast == "python -m pytest -n 2" and "--all-tiers" in every and "-n 2" in every
    ci = [line.split("||", 1)[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert every in ci


@pytest.fixture
def tiered(pytester, monkeypatch):
    """A project with the tiers' conftest and a fast, a slow and a browser test (no other plugin: quicker)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow tier\n    browser: drives a browser\n    time_limit: a limit\n")
    pytester.makepyfile(TIERED)
    return pytester


def test_the_fast_tier_leaves_out_slow_and_browser_tests_and_says_so(tiered):
    result = tiered.runpytest()
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*2 slow tests deselected*--all-tiers*"])


@pytest.mark.parametrize("options, passed", [(["--all-tiers"], 3), (["-m", "slow"], 2), (["-m", "browser"], 1)])
def test_all_tiers_or_a_marker_choice_runs_the_slow_tier(tiered, options, passed):
    tiered.runpytest(*options).assert_outcomes(passed=passed, deselected=3 - passed)


def test_a_split_sweep_keeps_every_value_and_its_id():
    fast = catalogue_and_one_preset_per_framework(EXACT_IDS)
    split = fast_then_slow(EXACT_IDS, fast)
    values = [getattr(param, "values", (param,))[0] for param in split]
    assert values == list(EXACT_IDS)
    assert [param for param in split if not hasattr(param, "marks")] == fast
    assert all(mark.name == "slow" for param in split if hasattr(param, "marks") for mark in param.marks)


def test_the_fast_cases_are_the_catalogue_and_one_preset_of_each_framework():
    fast = catalogue_and_one_preset_per_framework(EXACT_IDS)
    assert {id for id in EXACT_IDS if ":" not in id} <= set(fast)
    presets = [id for id in fast if ":" in id]
    assert sorted(id.partition(":")[0] for id in presets) == sorted(FRAMEWORKS)


def test_a_case_of_several_arguments_keeps_them_in_either_tier():
    fast, slow = fast_then_slow([("T3", 4), ("T6", 4)], [("T3", 4)])
    assert fast == ("T3", 4) and slow.values == ("T6", 4) and [mark.name for mark in slow.marks] == ["slow"]


LIMITED = """
import time
import pytest

@pytest.mark.time_limit(0.5)
def test_hangs():
    time.sleep(30)

@pytest.mark.time_limit(30)
def test_in_time():
    pass
"""


def test_a_test_over_its_time_limit_fails_and_does_not_hang(tiered):
    tiered.makepyfile(test_limited=LIMITED)
    result = tiered.runpytest("test_limited.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*TimeLimitExceeded: over its time limit of 0.5 s*"])


def dask_test_files():
    """The test files that need Dask distributed (they fail without it under TOYLAB_REQUIRE_DISTRIBUTED=1)."""
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")
                  if 'os.environ.get("TOYLAB_REQUIRE_DISTRIBUTED")' in path.read_text() and path != Path(__file__))


def test_ci_s_dask_step_runs_every_dask_test_file_each_test_with_a_time_limit():
    """CI installs the Dask extra last and runs these files with TOYLAB_REQUIRE_DISTRIBUTED=1: a file left out of
    that step is skipped everywhere (the earlier steps lack Dask); a test without a limit could hold CI on a
    cluster that never answers."""
    ci = (ROOT / ".ci" / "run").read_text()
    step = ci.split('step "optional extra: Dask distributed', 1)[1]
    files = dask_test_files()
    assert len(files) >= 2
    assert [name for name in files if name not in step] == []
    for name in files:
        source = (ROOT / name).read_text()
        assert re.search(r"pytestmark = \[[^\]]*pytest\.mark\.time_limit\(", source), name
