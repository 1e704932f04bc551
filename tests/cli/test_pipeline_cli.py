"""The pipeline on the command line: --logged, --scored, --pipeline (table, train, inspect), echoed in the JSON with
the identity check, the scored objective beside softmax(θ)'s, and one-line errors."""

import json
import subprocess
import sys

import numpy as np
import pytest
from dense import DenseToy

from toylab import exact_table, make_toy
from toylab.cli.main import main
from toylab.training.loop import TrainingConfig, train


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr()


def test_the_table_json_echoes_the_pipeline_and_equals_the_library_and_the_dense_sums(capsys):
    code, out = run(capsys, "--T", "4", "--mismatch", "0.5", "--temperature", "0.6", "--top-p", "0.9",
                    "--pipeline", "trl_colocate_before_4163", "--estimators", "naive,tok_tis,seq_is", "--json")
    assert code == 0
    result = json.loads(out.out)
    toy = make_toy(4, 4, 0.5, 0, temperature=0.6, top_p=0.9, logged="raw", scored="temperature")
    dense = DenseToy(toy).population()
    assert {key: result["toy"][key] for key in ("logged", "scored", "pipeline")} == {
        "logged": "raw", "scored": "temperature", "pipeline": "trl_colocate_before_4163"}
    assert result["toy"]["identity"] == pytest.approx(dense["identity"], rel=1e-10)
    assert result["toy"]["plain_J"] == pytest.approx(dense["plain_J"], rel=1e-12)
    assert result["toy"]["objective_shift"] == pytest.approx(dense["objective_shift"], rel=1e-9)
    expected = {row["estimator"]: row for row in exact_table(toy, {"naive": {}, "tok_tis": {}, "seq_is": {}}, "none")}
    for row in result["estimators"]:
        assert row["rel_bias"] == pytest.approx(expected[row["name"]]["rel_bias"], rel=1e-12)
        assert row["rel_plain_bias"] == pytest.approx(expected[row["name"]]["rel_plain_bias"], rel=1e-12)
    assert any("the trainer scores another π" in note for note in result["notes"])


def test_the_text_table_shows_the_identity_check_and_the_plain_objective_only_when_it_moved(capsys):
    code, out = run(capsys, "--scored", "temperature", "--temperature", "1.5")
    assert code == 0 and "scored temperature" in out.out and "E_mu[W]=" in out.out and "vs plain" in out.out
    code, out = run(capsys, "--logged", "raw", "--temperature", "1.5")
    assert code == 0 and "logged raw" in out.out and "vs plain" not in out.out


def test_train_with_a_pipeline_equals_the_library(capsys):
    argv = ["train", "--mismatch", "0.5", "--estimators", "on_policy,seq_tis", "--steps", "10", "--pipeline", "slime",
            "--top-p", "0.9", "--temperature", "0.8", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    toy = make_toy(mismatch=0.5, top_p=0.9, temperature=0.8, logged="processed", scored="keep_mask")
    expected = train(toy, {"on_policy": {}, "seq_tis": {}}, "none", TrainingConfig(10))
    assert result["toy"]["scored"] == "keep_mask"
    for entry in result["trajectories"]:
        np.testing.assert_array_equal(entry["J"], expected[entry["estimator"]].J)


@pytest.mark.parametrize("argv, message", [
    (["--pipeline", "skyrl", "--logged", "processed"], "--pipeline skyrl logs raw and scores temperature"),
    (["--logged", "post"], "argument --logged: invalid choice 'post'"),
    (["--scored", "masked"], "argument --scored: invalid choice 'masked'"),
    (["--pipeline", "verl2"], "argument --pipeline: invalid choice 'verl2'"),
    (["--T", "3", "--mismatch", "0.5", "--temperature", "0.6", "--top-p", "0.8", "--scored", "keep_mask"],
     "does not depend on θ"),
])
def test_bad_pipeline_arguments_print_one_line_and_exit_2(argv, message):
    result = subprocess.run([sys.executable, "-m", "toylab", *argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toylab: error: ") and message in lines[0], result.stderr
