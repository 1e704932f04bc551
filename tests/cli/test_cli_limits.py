"""The command line is as strict as the page: the issue's commands, the shared ranges, undefined numbers.

Every command either prints finite numbers (exit 0) or one line ``toylab: error: …`` (exit 2) before any
work proportional to its input (RuntimeWarnings fail the tests: pyproject.toml).
"""

import json
import subprocess
import sys
import tracemalloc

import pytest
from messages import says

from toylab import ESTIMATORS, make_toy, resolve_params
from toylab.cli.main import main
from toylab.state.query import INTEGER_RANGES, MISMATCH_RANGE
from toylab.text import UNDEFINED

GUARD_S = 60                          # a subprocess that takes longer has hung (the issue's runs took 30 s to forever)


def refused(capsys, *argv):
    """The single stderr line of a refused command (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("toylab: error: ")
    return err


def test_plain_command_writes_a_dash_and_the_reason_for_k3_rs(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    k3_rs = next(line for line in out.splitlines() if line.startswith("k3_rs "))
    assert k3_rs.split()[4] == UNDEFINED                               # the cosine column
    note = next(line for line in out.splitlines() if line.startswith(f"{UNDEFINED} k3_rs:"))
    assert "A = r − b = 0" in note and "undefined" in note


def test_json_writes_null_with_a_notes_list(capsys):
    assert main(["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    cosines = {row["name"]: row["cosine"] for row in result["estimators"]}
    assert cosines["k3_rs"] is None and all(value is not None for name, value in cosines.items() if name != "k3_rs")
    assert len(result["notes"]) == 1 and result["notes"][0].startswith("k3_rs: ") and says(result["notes"][0], "A = r − b = 0", "b = 0")


@pytest.mark.parametrize("argv, message", [
    (["--mismatch", "50"], "--mismatch: '50' is outside 0 to 2"),
    (["--mismatch", "1000"], "--mismatch: '1000' is outside 0 to 2"),
    (["--mismatch", "1e308"], "--mismatch: '1e308' is outside 0 to 2"),
    (["--mismatch", "nan"], "--mismatch: 'nan' is not a finite number"),
    (["--mismatch=-inf"], "is not a finite number"),
    (["--N", str(10**400)], "--N: '1000000000000000000000000000000000000000'… (401 characters) is too long"),
    (["--N", "1e30"], "--N: '1e30' is outside 1 to 100000"),
    (["--T", "1e9"], "--T: '1e9' is outside 1 to 16"),
    (["--T", "1e30"], "--T: '1e30' is outside 1 to 16"),
    (["--T", str(10**9)], "--T: '1000000000' is outside 1 to 16"),
    (["--T", "-0"], "--T: '-0' is outside 1 to 16"),
    (["--T", "2.5"], "--T: '2.5' is not an integer"),
    (["--T", "1", "--V", "4194304"], "--V: '4194304' is outside 2 to 8"),
    (["--T", "1", "--V", "65536"], "--V: '65536' is outside 2 to 8"),
    (["--T", "16", "--V", "8"], "T ≤ 7 at V = 8"),
    (["--seed", "10001"], "--seed: '10001' is outside 0 to 10000"),
    (["--set", "trm.eps=1e400"], "trm.eps = inf is outside [0.01, 10]"),
    (["--baseline", "x" * 10_000], "invalid choice 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… (10,000 characters)"),
    (["--set", "y" * 10_000], "got 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'… (10,000 characters)"),
    (["--T", "5", "extra\nline", "more"], "unrecognized arguments 'extra\\nline', 'more'"),
])
def test_out_of_range_arguments_are_refused_in_one_line(capsys, argv, message):
    assert message in refused(capsys, *argv)


@pytest.mark.parametrize("argv", [["--T", "1e30"], ["--T", str(10**4000)], ["--T", "1", "--V", "4194304"],
                                  ["--mismatch", "1e308"], ["--N", str(10**400)]])
def test_the_issues_slow_commands_answer_at_once_in_a_process(argv):
    done = subprocess.run([sys.executable, "-W", "error", "-m", "toylab", *argv], capture_output=True, text=True,
                          timeout=GUARD_S)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1


@pytest.mark.slow                 # every range end of every option: about 4 s alone
def test_every_range_end_gives_finite_output(capsys):
    low_T, high_T = INTEGER_RANGES["T"]
    for argv in (["--T", str(low_T), "--mismatch", str(MISMATCH_RANGE[1]), "--N", "1"],
                 ["--T", "7", "--V", str(INTEGER_RANGES["V"][1]), "--mismatch", "2", "--baseline", "true"],
                 ["--T", str(high_T), "--V", "2", "--mismatch", "0", "--seed", "10000", "--N", "100000"],
                 ["--T", "1", "--V", "2", "--mismatch", "2", "--baseline", "logged", "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "nan" not in out.lower() and "inf" not in out.lower() and "null" not in out.replace(
            '"cosine": null', ""), argv


def extreme_settings(estimator):
    """Every numeric threshold at each end of its range (where a bound pair then crosses, e.g. lo above hi, both
    bounds at that end) and every choice of a choice parameter: {name: value} each, all within the ranges; a
    setting a preset's framework refuses (AReaL's ratio metric with upper ≤ 1, TRL's clip_min ≥ clip_max) is left
    out: it is an error, tested in tests/catalogue/test_framework_code.py."""
    params = ESTIMATORS[estimator].params
    numeric = [name for name, param in params.items() if param.low is not None]
    for name in numeric:
        for end in ("low", "high"):
            for setting in ({name: getattr(params[name], end)}, {other: getattr(params[other], end) for other in numeric}):
                try:
                    resolve_params(estimator, setting)
                except ValueError:
                    continue
                yield setting
                break
    for name, param in params.items():
        for choice in param.choices or ():
            yield {name: choice}


@pytest.mark.parametrize("estimator", [id for id, e in ESTIMATORS.items() if e.exact and e.params])
def test_every_threshold_at_both_ends_gives_finite_output(capsys, estimator):
    for overrides in extreme_settings(estimator):
        assignments = [item for name, value in overrides.items()
                       for item in ("--set", f"{estimator}.{name}={value:g}" if isinstance(value, float)
                                    else f"{estimator}.{name}={value}")]
        argv = ["--T", "3", "--mismatch", "2", "--estimators", estimator, *assignments, "--json"]
        assert main(argv) == 0, argv
        result = json.loads(capsys.readouterr().out)        # json.loads refuses NaN only if asked: check below
        row = next(row for row in result["estimators"] if row["name"] == estimator)
        assert all(value is not None for key, value in row.items() if key != "cosine"), argv
        assert (row["cosine"] is None) == any(note.startswith(f"{estimator}:") for note in result["notes"])
        assert row["cosine"] is None or -1 <= row["cosine"] <= 1


def test_make_toy_refuses_a_huge_size_up_front():
    for T in (10**9, 10**30, 10**4000):
        with pytest.raises(ValueError, match="over the exact-size limit"):
            make_toy(T=T)
    with pytest.raises(ValueError, match=r"T·V entries"):
        make_toy(T=10**30, max_sequences=None)


def test_one_position_with_a_large_vocabulary_builds_no_V_by_V_array():
    tracemalloc.start()
    toy = make_toy(T=1, V=2**20)
    assert toy.R.sum() == 1 and toy.J == pytest.approx(toy.pi[0, 0])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * 2**20          # about ten vectors of 2**20 floats; eye(V) alone would take 1 TiB
