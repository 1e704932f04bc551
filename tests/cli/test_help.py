"""Every command's ``--help`` names every option its parser holds, with its default, and says what FILE may be; its
usage line names the command as the user called it.

The options come from the parsers themselves (``table_parser``, ``train_parser``, ``inspect_parser``), so an option
added without a default in its help fails here; the text comes from ``main([..., "--help"])`` as a user sees it.
"""

import argparse

import pytest

from toylab.cli.hidden import parser_for
from toylab.cli.inspect import inspect_parser
from toylab.cli.main import main
from toylab.cli.table import table_parser
from toylab.cli.train import train_parser

PARSERS = {(): table_parser, ("train",): train_parser, ("inspect",): inspect_parser,
           ("routing",): lambda: parser_for("routing"), ("versions",): lambda: parser_for("versions")}


def help_text(capsys, command):
    with pytest.raises(SystemExit) as exit:
        main([*command, "--help"])
    assert exit.value.code == 0
    return capsys.readouterr().out


def default_texts(default):
    """The ways a help may write the default ``default``."""
    if isinstance(default, bool) or default is None or default == []:
        return None
    if isinstance(default, float):
        return {f"{default:g}"}
    if isinstance(default, int):
        return {str(default), f"{default:,}"}
    return {str(default)}


def flat(text):
    """``text`` without its white space: argparse wraps a help at spaces and hyphens."""
    return "".join(text.split())


@pytest.mark.parametrize("command", PARSERS, ids=lambda command: " ".join(command) or "table")
def test_every_option_is_in_the_help_with_its_default(capsys, command):
    shown = flat(help_text(capsys, command))
    options = [action for action in PARSERS[command]()._actions if not isinstance(action, argparse._HelpAction)]
    assert options
    for action in options:
        for name in action.option_strings:
            assert name in shown, name
        if not action.option_strings or action.nargs == 0:           # FILE (below) and flags such as --json
            continue
        name = action.option_strings[0]
        assert "default" in action.help, f"{name}: its help names no default"
        texts = default_texts(action.default)
        after = flat(action.help)[flat(action.help).index("default"):]      # "(default 6)", "(default: …)"
        assert texts is None or any(flat(text) in after for text in texts), (name, action.default)
        assert flat(action.help) in shown, name


def test_inspect_says_what_file_may_be_and_how_a_run_is_read(capsys):
    shown = flat(help_text(capsys, ("inspect",)))
    for form in ("Parquet", "JSONL", "CSV", ".gz", "directory", "a zip", "several files", "--workers", "--scheduler",
                 "default: that many for a run of 64 MB or more", "tcp://host:8786"):
        assert flat(form) in shown, form
    positional = [action for action in inspect_parser()._actions if not action.option_strings]
    assert [action.metavar for action in positional] == ["FILE"]


@pytest.mark.parametrize("command", [*PARSERS, ("lessons",)], ids=lambda command: " ".join(command) or "table")
@pytest.mark.parametrize("called, shown", [("/home/me/.venv/bin/toylab", "toylab"),
                                           ("/repo/toylab/__main__.py", "python -m toylab")])
def test_the_usage_line_names_the_command_as_it_was_called(capsys, monkeypatch, command, called, shown):
    """The installed command's sys.argv[0] is its script, named toylab; ``python -m toylab`` runs __main__.py."""
    monkeypatch.setattr("sys.argv", [called, *command, "--help"])
    usage = help_text(capsys, command).split("\n", 1)[0]
    assert usage.startswith(f"usage: {' '.join([shown, *command])} ["), usage
    assert "python -m" not in usage or shown != "toylab", usage
