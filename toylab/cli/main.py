"""``python -m toylab [train | inspect | lessons | routing | versions]``: which command the first argument names.

    python -m toylab [options]            the exact table (``table``)
    python -m toylab train [options]      gradient ascent with chosen estimators (``train``)
    python -m toylab inspect FILE         a rollout log's statistics and the toy that matches it (``inspect``)
    python -m toylab inspect RUN          a run — a directory, a zip or several files — step by step (``inspect``
                                          parses, ``inspect_run`` reads)
    python -m toylab lessons [ID …]       how often each lesson's claim holds over its toys (``lessons``)
    python -m toylab routing [options]    a mixture of experts' routing mismatch, with and without replay (``hidden``)
    python -m toylab versions [options]   sequences spanning policy versions, by what is logged of them (``hidden``)

An installed package's ``toylab`` command is the same (``toylab inspect RUN``), and serves the page as
``toylab app`` (toylab_app/command.py: the page is not part of this library).

Each command's module is imported only when it runs: the table needs neither pandas nor pyarrow, which the
readers of ``inspect`` import.
"""

import importlib
import os
import sys

COMMANDS = {"train": "toylab.cli.train", "inspect": "toylab.cli.inspect", "lessons": "toylab.cli.lessons",
            "routing": "toylab.cli.hidden", "versions": "toylab.cli.hidden"}
PAGE = ("toylab: error: the page is served by the installed command, `toylab app` (pip install .), or from a clone "
        "by `streamlit run streamlit_app.py`\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["app"]:
        sys.stderr.write(PAGE)
        return 2
    command, arguments = (argv[0], argv[1:]) if argv[:1] and argv[0] in COMMANDS else ("table", argv)
    module = importlib.import_module(COMMANDS.get(command, "toylab.cli.table"))
    return getattr(module, command)(arguments) if command in ("routing", "versions") else module.main(arguments)


def run(argv=None, entry=main):
    """``entry(argv)``'s exit status (``main``'s, or the installed ``toylab`` command's), stopping quietly when the
    reader closes the pipe (``| head``, ``| grep -q``), as Unix tools do."""
    try:
        status = entry(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    return status
