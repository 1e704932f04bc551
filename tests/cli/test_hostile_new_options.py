"""Hostile values for the command line's options merged with issues 45 and 46 (issue 41's promise extended): the KL
penalty (``train --kl --beta --reference-distance``), the mixture of experts (``--replay``, ``--moe-…``,
``--router-…``, ``--expert-spread``; the ``routing`` command) and version switches (``--switch``, ``--switch-at``,
``--stamp``, ``--prox``, ``--versions``; the ``versions`` command). Every refused value or combination is one line,
``toylab: error: …``, exit 2, nothing on stdout, before any training; a control character in a value is shown
escaped."""

import json
import math

import pytest
from messages import says

from toylab.cli import train as train_cli
from toylab.cli.main import main
from toylab.training import cost

NOT_NUMBERS = ["", "nan", "inf", "-inf", "1e400", "abc", "0x10", "x" * 5_000, "\x1b[2J"]
OUT_OF_RANGE = ["-1", "1e9", "9" * 30]
NUMBER_OPTIONS = {
    "train": ["--beta", "--reference-distance", "--moe-layers", "--moe-experts", "--moe-top-k", "--router-error",
              "--router-draws", "--expert-spread", "--switch-at"],
    "routing": ["--moe-layers", "--moe-experts", "--moe-top-k", "--router-error", "--router-draws", "--expert-spread"],
    "versions": ["--switch-at", "--lag", "--step", "--lr"],
}
CHOICE_OPTIONS = {
    "train": ["--kl", "--replay", "--router-draw", "--switch", "--stamp", "--prox", "--versions", "--update"],
    "routing": ["--router-draw"],
    "versions": ["--switch", "--stamp", "--prox", "--versions", "--anchor"],
}
NOT_CHOICES = ["", "nan", "R4", "k9.loss", "verl", "\x1b]0;owned\x07", "\u202eR3", "x" * 5_000]
NEEDED = {"train": [], "routing": [], "versions": ["--switch", "fixed"]}      # what the option is read with


def one_line(capsys, argv):
    """The one error line of ``python -m toylab ARGV``: exit 2, nothing on stdout."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out = capsys.readouterr()
    assert exit_info.value.code == 2 and out.out == "", out
    assert out.err.count("\n") == 1 and out.err.startswith("toylab: error:"), out.err
    assert "\x1b" not in out.err and "\x07" not in out.err and "\u202e" not in out.err
    return out.err


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    """A refusal comes before any toy is trained or probed."""
    monkeypatch.setattr(train_cli, "make_toy", pytest.fail)
    monkeypatch.setattr(cost, "make_toy", pytest.fail)


def sweep(options, values):
    return [(command, option, value) for command, names in options.items() for option in names for value in values
            if not (option == "--expert-spread" and value == "-1") and not (option == "--switch-at" and value == "-1")]


@pytest.mark.parametrize("command, option, value", sweep(NUMBER_OPTIONS, NOT_NUMBERS + OUT_OF_RANGE))
def test_a_number_option_given_no_number_in_its_range_is_one_line(capsys, command, option, value):
    err = one_line(capsys, [command, *NEEDED[command], option, value])
    assert says(err, f"argument {option}:")


@pytest.mark.parametrize("command, option, value", sweep(CHOICE_OPTIONS, NOT_CHOICES))
def test_a_choice_option_given_none_of_its_choices_is_one_line(capsys, command, option, value):
    one_line(capsys, [command, *NEEDED[command], option, value])


@pytest.mark.parametrize("argv, words", [
    (["train", "--kl", "k3.loss"], ["--kl k3.loss needs --beta"]),
    (["train", "--beta", "0.3"], ["--beta needs --kl"]),
    (["train", "--kl", "k3.loss", "--beta", "0.1", "--replay", "R3"], ["train one at a time"]),
    (["train", "--kl", "k3.loss", "--beta", "0.1", "--switch", "fixed"], ["train one at a time"]),
    (["train", "--replay", "R3", "--switch", "drawn"], ["separate models", "train one at a time"]),
    (["train", "--moe-layers", "2"], ["add --replay"]),
    (["train", "--replay", "R3", "--mode", "sampled"], ["train in expected mode"]),
    (["train", "--switch", "fixed", "--mode", "sampled"], ["train in expected mode"]),
    (["train", "--replay", "R3", "--moe-experts", "4", "--moe-top-k", "4"], ["top_k", "experts − 1 = 3"]),
    (["train", "--versions", "areal:loglinear", "--prox", "recompute", "--switch", "fixed"],
     ["--versions areal:loglinear sets prox loglinear, not recompute"]),
    (["train", "--versions", "slime:partial_rollout", "--stamp", "tail", "--switch", "fixed"],
     ["--versions slime:partial_rollout sets stamp"]),
    (["train", "--versions", "areal:loglinear", "--switch", "fixed", "--anchor", "rollout"], ["use the anchor recompute"]),
    (["train", "--update", "verl:bypass", "--anchor", "rollout"], ["--update verl:bypass sets the update and the lag"]),
    (["train", "--switch", "fixed", "--switch-at", "15"], ["between 1 and T − 1 = 5, got 15"]),
    (["train", "--switch", "drawn", "--T", "1"], ["at least T = 2 tokens"]),
    (["train", "--switch", "fixed", "--T", "1"], ["between 1 and T − 1 = 0"]),
    (["routing", "--moe-experts", "4", "--moe-top-k", "4"], ["top_k", "experts − 1 = 3"]),
    (["versions", "--switch", "off"], ["give a switch"]),
    (["versions", "--switch", "fixed", "--switch-at", "6"], ["between 1 and T − 1 = 5, got 6"]),
    (["versions", "--switch", "drawn", "--T", "1"], ["at least T = 2 tokens"]),
    (["versions", "--switch", "fixed", "--versions", "areal:loglinear", "--prox", "recompute"],
     ["sets prox loglinear, not recompute"]),
], ids=lambda value: " ".join(value) if isinstance(value, list) and value[0] in ("train", "routing", "versions")
    else None)
def test_a_combination_the_models_refuse_is_one_line_before_any_work(capsys, argv, words):
    assert says(one_line(capsys, argv), *words)


@pytest.mark.parametrize("argv", [
    ["routing", "--T", "10", "--V", "4", "--router-draws", "16", "--router-draw", "token"],
    ["routing", "--T", "11", "--V", "4", "--moe-layers", "8", "--moe-experts", "16", "--router-draws", "16"],
], ids=["per-token draws", "the largest mixture"])
def test_a_toy_too_large_for_the_hidden_sums_is_one_line(capsys, monkeypatch, argv):
    """moe_draws × (D·V)^T hidden values for an estimator that does not factorise over positions: refused by the
    count, before any sum (the routing table's own toy is built: it is small)."""
    monkeypatch.undo()
    assert says(one_line(capsys, argv), "do not factorise over positions", "over the limit of 4,194,304")


def test_a_sampler_that_almost_never_serves_a_reward_has_no_relative_bias_to_its_gradient(capsys):
    """At top-p 0.01, τ 0.25 and mismatch 2 the served ∇J_μ is about 1e-300: the routing table's 'rel bias (∇J_μ)' read
    7e298 (a division by max(‖∇J_μ‖, 1e-300)); it is undefined (null) there, the trainer's numbers still given."""
    assert main(["routing", "--top-p", "0.01", "--temperature", "0.25", "--mismatch", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["served_J"] < 1e-10
    assert all(row["served_rel_bias"] is None for row in result["rows"])
    assert all(math.isfinite(row["rel_bias"]) and row["rel_bias"] < 1e3 for row in result["rows"])
