"""The command line: the exact table as text or JSON, and a one-line error with exit code 2."""

import json
import subprocess
import sys

import pytest

from toylab import PRESET_IDS, exact_moments, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.cli.arguments import DEFAULT_IDS
from toylab.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr()


def test_json_equals_the_library(capsys):
    code, out = run(capsys, "--T", "5", "--V", "3", "--mismatch", "0.7", "--seed", "2", "--N", "32",
                    "--baseline", "logged", "--set", "tok_tis.C=3", "--set", "seq_mis.C=1.5", "--json")
    assert code == 0
    result = json.loads(out.out)
    toy = make_toy(5, 3, 0.7, 2)
    population = diagnostics(toy)
    assert result["toy"]["M"] == 243 and result["toy"]["seed"] == 2
    for key in ("J", "logged_reward", "grad_norm", "kl_mu_pi", "kl_pi_mu", "chi2_seq", "ess"):
        assert result["toy"][key] == pytest.approx(getattr(population, key), rel=1e-12)
    assert [row["name"] for row in result["estimators"]] == list(DEFAULT_IDS)
    rows = {row["name"]: row for row in result["estimators"]}
    assert rows["tok_tis"]["params"] == {"C": 3.0}
    moments = exact_moments(toy, "seq_mis", {"C": 1.5}, "logged")
    assert rows["seq_mis"]["rel_rmse"] == pytest.approx(moments.rel_rmse(32), rel=1e-12)
    assert rows["seq_mis"]["bias"] == pytest.approx(moments.bias, rel=1e-12)
    assert rows["seq_mis"]["var"] == pytest.approx(moments.var, rel=1e-12)


def test_text_table_lists_every_exact_estimator_but_the_presets(capsys):
    code, out = run(capsys)
    assert code == 0
    lines = out.out.splitlines()
    assert "M=4,096" in lines[0]
    for estimator in DEFAULT_IDS:
        assert any(line.startswith(estimator + " ") for line in lines)
    assert not any(line.startswith(preset) for line in lines for preset in PRESET_IDS)
    naive = next(line for line in lines if line.startswith("naive "))
    assert f"{exact_moments(make_toy(), 'naive').rel_rmse(64):.4f}" in naive


def test_presets_by_name_with_their_own_thresholds(capsys):
    code, out = run(capsys, "--estimators", "naive,verl:decoupled_geo_rs,trl:sequence_mask",
                    "--set", "verl:decoupled_geo_rs.rs_threshold=0.8_1.1", "--baseline", "logged", "--json")
    rows = {row["name"]: row for row in json.loads(out.out)["estimators"]}
    assert code == 0 and list(rows) == ["naive", "verl:decoupled_geo_rs", "trl:sequence_mask"]
    moments = exact_moments(make_toy(), "verl:decoupled_geo_rs", {"rs_threshold": "0.8_1.1"}, "logged")
    assert rows["verl:decoupled_geo_rs"]["params"] == {"rs_threshold": "0.8_1.1"}
    assert rows["verl:decoupled_geo_rs"]["rel_bias"] == pytest.approx(moments.rel_bias, rel=1e-12)


def test_undefined_cosine_is_null_with_a_note_in_json(capsys):
    code, out = run(capsys, "--set", "k3_rs.delta=0.0001", "--json")
    result = json.loads(out.out)
    rows = {row["name"]: row for row in result["estimators"]}
    assert rows["k3_rs"]["sequences_affected"] == pytest.approx(1.0)
    assert rows["k3_rs"]["cosine"] is None
    assert [note.split(":")[0] for note in result["notes"]] == ["k3_rs"]
    assert result["notes"][0].startswith("k3_rs: every sequence is masked") and "undefined" in result["notes"][0]


@pytest.mark.parametrize("argv, message", [
    (["--T", "12"], "exact-size limit"), (["--mismatch", "abc"], "--mismatch: 'abc' is not a number"),
    (["--set", "nope.C=2"], "unknown estimator"), (["--set", "tok_tis.D=2"], "no parameter 'D'"),
    (["--set", "tok_tis.C=big"], "must be a number"), (["--set", "tok_tis.C=0.1"], "outside"),
    (["--set", "tok_tis"], "ID.PARAM=VALUE"), (["--baseline", "mean"], "invalid choice"),
    (["--estimators", "naive,grpo"], "not an exact estimator"),
    (["--set", "verl:decoupled_geo_rs.rs_threshold=0.8_1.1"], "name it with --estimators"),
    (["--estimators", "verl:decoupled_geo_rs", "--set", "verl:decoupled_geo_rs.rs_threshold=0_1"], "positive"),
    (["--N", "0"], "--N: '0' is outside 1 to 100000"), (["--V", "1"], "--V: '1' is outside 2 to 8"),
    (["--set", "grpo.weight=naive"], "batch-coupled"),
])
def test_bad_arguments_print_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("toylab: error:") and message in err


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "toylab", "--T", "3", "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["toy"]["M"] == 64
    done = subprocess.run([sys.executable, "-m", "toylab", "--T", "99"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_a_reader_that_stops_early_gets_no_traceback():
    """``python -m toylab | head -1``: the pipe closes before the table is written; no BrokenPipeError reaches
    the user."""
    table = subprocess.Popen([sys.executable, "-m", "toylab"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    table.stdout.close()                                   # the reader goes away before reading anything
    assert table.wait(timeout=120) == 1
    assert table.stderr.read() == b""


def test_the_installed_commands_help_read_by_grep_q_gets_no_traceback():
    """``toylab app --help | grep -q usage``: grep closes the pipe at the first match; status 1, no traceback."""
    script = "import sys\nfrom toylab_app.command import main\nsys.exit(main(['app', '--help']))"
    helper = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    helper.stdout.close()
    assert helper.wait(timeout=120) == 1
    assert helper.stderr.read() == b""


@pytest.mark.parametrize("argv, heavy", [(["--T", "3", "--V", "2"], ("pandas", "pyarrow", "streamlit")),
                                         (["train", "--T", "3", "--V", "2", "--steps", "2"], ("pyarrow", "streamlit"))])
def test_a_command_imports_only_what_it_uses(argv, heavy):
    """The table and train never import the readers' pandas and pyarrow (or the page's Streamlit): the default
    command's start-up and memory stay those of numpy and the engine."""
    script = ("import sys, contextlib, io\nfrom toylab.cli.main import main\n"
              f"with contextlib.redirect_stdout(io.StringIO()): code = main({argv!r})\n"
              f"print(code, sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "0 []"
