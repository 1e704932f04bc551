"""The test tiers: ``python -m pytest`` runs the fast tier, ``python -m pytest --all-tiers`` every test.

A test is in the slow tier when it carries ``@pytest.mark.slow``: it drives a browser, reads a large file, sweeps a
space exhaustively, or takes more than about 2 s. Browser tests (``@pytest.mark.browser``) count as slow. The slow
tier is deselected unless ``--all-tiers`` is given or ``-m`` chooses the tests (``-m slow``, ``-m browser``). An
exhaustive sweep keeps a fast subset that reaches every code path: ``tests/tiers.py``.

Under pytest-xdist (``-n 2 --dist loadgroup``, as CI runs), the tests that share a module's served app (the ``app``
fixture of ``tests/page/conftest.py``) go to one worker, so each module starts its app once.
"""

import pytest

SLOW_DESELECTED = pytest.StashKey[int]()


def pytest_addoption(parser):
    parser.addoption("--all-tiers", action="store_true",
                     help="run the slow tier too (browser tests, large files, exhaustive sweeps), as CI does")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        if "app" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))
    if config.getoption("--all-tiers") or config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.stash[SLOW_DESELECTED] = len(slow)


def pytest_terminal_summary(terminalreporter, config):
    if deselected := config.stash.get(SLOW_DESELECTED, 0):
        terminalreporter.write_line(f"fast tier: {deselected} slow tests deselected; "
                                    "python -m pytest --all-tiers runs every tier")
