"""The test tiers: ``python -m pytest`` runs the fast tier, ``python -m pytest --all-tiers`` every test.

A test is in the slow tier when it carries ``@pytest.mark.slow``: it drives a browser, reads a large file, sweeps a
space exhaustively, or takes more than about 2 s. Browser tests (``@pytest.mark.browser``) count as slow. The slow
tier is deselected unless ``--all-tiers`` is given or ``-m`` chooses the tests (``-m slow``, ``-m browser``). An
exhaustive sweep keeps a fast subset that reaches every code path: ``tests/tiers.py``.

Under pytest-xdist, CI runs ``-n 2 --dist loadfile``: a file's tests go to one process, so a browser module starts
its served app (the module-scoped ``app`` fixture of ``tests/page/conftest.py``) once. (``--dist loadgroup`` with
``xdist_group`` marks would spread the rest finer, but pytest-xdist 3.8 ignores the marks under pytest 9.2:
pytest-dev/pytest-xdist#1386.)
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test marked ``time_limit(SECONDS)`` (or in a module so marked) fails once its call takes longer
    (``tests/time_limit.py``)."""
    marker = item.get_closest_marker("time_limit")
    if marker is None:
        return (yield)
    from time_limit import at_most
    with at_most(marker.args[0]):
        return (yield)
