"""The sampler model on the command line: --top-p --top-k --temperature --precision (table, train, inspect), echoed
in the JSON's toy, the bias split when it truncates, train --noise, and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dense import DenseToy

from toylab import exact_table, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.cli.main import main
from toylab.engine.sampler import Sampler
from toylab.training.loop import TrainingConfig, train

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rollouts_per_sequence.parquet"
SAMPLER = ["--top-p", "0.9", "--top-k", "3", "--temperature", "0.8", "--precision", "bf16"]


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr()


def test_the_table_json_echoes_the_sampler_and_equals_the_library_and_the_dense_sums(capsys):
    code, out = run(capsys, "--T", "4", "--V", "4", "--mismatch", "0.5", "--baseline", "logged", *SAMPLER,
                    "--estimators", "naive,tok_tis,seq_is,seq_mis", "--json")
    assert code == 0
    result = json.loads(out.out)
    sampler = Sampler(0.9, 3, 0.8, "bf16")
    toy = make_toy(4, 4, 0.5, 0, sampler)
    assert {key: result["toy"][key] for key in sampler.parameters()} == sampler.parameters()
    population = diagnostics(toy)
    assert result["toy"]["unreachable_mass"] == pytest.approx(population.unreachable_mass, rel=1e-12)
    assert result["toy"]["unreachable_mass"] == pytest.approx(DenseToy(toy).unreachable_mass(), rel=1e-10)
    assert result["toy"]["unreachable_mass"] > 0
    assert result["toy"]["kl_pi_mu"] is None and any("kl_pi_mu is infinite" in note for note in result["notes"])
    dense = DenseToy(toy)
    scale = np.linalg.norm(dense.true_grad)
    out_of_reach = np.linalg.norm(dense.true_grad - dense.reachable_gradient("logged")) / scale
    expected = {row["estimator"]: row for row in exact_table(toy, {id: {} for id in ("naive", "tok_tis", "seq_is",
                                                                                       "seq_mis")}, "logged", 64)}
    for row in result["estimators"]:
        assert row["rel_bias"] == pytest.approx(expected[row["name"]]["rel_bias"], rel=1e-12)
        assert row["rel_out_of_reach"] == pytest.approx(out_of_reach, rel=1e-9)
        mean = dense.moments(row["name"], expected[row["name"]]["params"], "logged")[0]
        assert row["rel_within_reach"] == pytest.approx(np.linalg.norm(mean - dense.reachable_gradient("logged")) / scale,
                                                rel=1e-9, abs=1e-12)


def test_the_text_table_shows_the_split_only_when_the_sampler_truncates(capsys):
    code, out = run(capsys, "--top-p", "0.9", "--mismatch", "0")
    assert code == 0 and "sampler: top-p 0.9" in out.out and "out of reach" in out.out and "not a floor" in out.out and "pi-mass out of reach" in out.out
    code, out = run(capsys, "--temperature", "2")
    assert code == 0 and "sampler: τ = 2" in out.out and "within reach" not in out.out
    code, out = run(capsys)
    assert "sampler" not in out.out and "within reach" not in out.out


def test_train_noise_redrawn_echoes_and_equals_the_library(capsys):
    argv = ["train", "--mismatch", "1", "--estimators", "on_policy,tok_mis", "--steps", "20", "--noise", "redrawn",
            "--top-p", "0.95", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    toy = make_toy(mismatch=1.0, top_p=0.95)
    expected = train(toy, {"on_policy": {}, "tok_mis": {}}, "none", TrainingConfig(20, noise="redrawn"))
    assert result["noise"] == "redrawn" and result["toy"]["top_p"] == 0.95
    for entry in result["trajectories"]:
        assert entry["noise"] == "redrawn"
        for name in ("J", "cosine", "step_cosine", "kl_mu_pi"):
            np.testing.assert_array_equal(entry[name], getattr(expected[entry["estimator"]], name), err_msg=name)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == result                         # seeded: the same again


def test_inspect_matches_with_the_sampler_model(capsys):
    assert main(["inspect", str(EXAMPLE), "--temperature", "1.5", "--json"]) == 0
    matched = json.loads(capsys.readouterr().out)["matched_toy"]
    assert matched["temperature"] == 1.5 and matched["top_p"] == 1.0 and matched["precision"] == "none"


@pytest.mark.parametrize("argv, message", [
    (["--top-k", "5"], "--top-k: top_k must be 0 (off) or between 1 and V = 4, got 5"),
    (["--top-p", "0"], "argument --top-p: '0' is outside 0.01 to 1"),
    (["--temperature", "5"], "argument --temperature: '5' is outside 0.25 to 4"),
    (["--precision", "fp8"], "argument --precision: invalid choice 'fp8'"),
    (["--T", "4", "--mismatch", "2", "--seed", "3558", "--temperature", "0.25"], "beyond float64's range"),
    (["train", "--noise", "sometimes"], "argument --noise: invalid choice 'sometimes'"),
    (["inspect", str(EXAMPLE), "--V", "3", "--top-k", "4"], "between 1 and V = 3"),
])
def test_bad_sampler_arguments_print_one_line_and_exit_2(argv, message):
    result = subprocess.run([sys.executable, "-m", "toylab", *argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toylab: error: ") and message in lines[0], result.stderr
