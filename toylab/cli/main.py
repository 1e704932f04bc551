"""``python -m toylab [train | inspect]``: which command the first argument names.

    python -m toylab [options]            the exact table (``table``)
    python -m toylab train [options]      gradient ascent with chosen estimators (``train``)
    python -m toylab inspect FILE         a rollout log's statistics and the toy that matches it (``inspect``)
    python -m toylab inspect DIR          a run — a directory, a zip or several files — step by step (``inspect_run``)
"""

import sys

from toylab.cli import inspect, inspect_run, table, train

COMMANDS = {"train": train.main, "inspect": inspect.main}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["inspect"] and inspect_run.is_run(argv[1:]):
        return inspect_run.main(argv[1:])
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    return table.main(argv)
