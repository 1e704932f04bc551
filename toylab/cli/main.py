"""``python -m toylab [train | inspect]``: which command the first argument names.

    python -m toylab [options]            the exact table (``table``)
    python -m toylab train [options]      gradient ascent with chosen estimators (``train``)
    python -m toylab inspect FILE         a rollout log's statistics and the toy that matches it (``inspect``)
    python -m toylab inspect RUN          a run — a directory, a zip or several files — step by step (``inspect``
                                          parses, ``inspect_run`` reads)

Each command's module is imported only when it runs: the table needs neither pandas nor pyarrow, which the
readers of ``inspect`` import.
"""

import importlib
import sys

COMMANDS = {"train": "toylab.cli.train", "inspect": "toylab.cli.inspect"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    command, arguments = (argv[0], argv[1:]) if argv[:1] and argv[0] in COMMANDS else ("table", argv)
    module = COMMANDS.get(command, "toylab.cli.table")
    return importlib.import_module(module).main(arguments)
