"""``python -m toylab [train | inspect]``: which command the first argument names.

    python -m toylab [options]            the exact table (``table``)
    python -m toylab train [options]      gradient ascent with chosen estimators (``train``)
    python -m toylab inspect FILE         a rollout log's statistics and the toy that matches it (``inspect``)
"""

import sys

from toylab.cli import inspect, table, train

COMMANDS = {"train": train.main, "inspect": inspect.main}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    return table.main(argv)
