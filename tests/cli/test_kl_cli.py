"""The reference on the command line: the exact table's KL view and train's --kl, --beta, --reference-distance; their
numbers are the library's, their refusals one line."""

import json

import numpy as np
import pytest
from dense import DenseToy, dense_kl_moments

from toylab import make_toy
from toylab.analysis.kl_view import kl_table, reference_summary
from toylab.catalogue import kl_settings
from toylab.catalogue.kl import KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.cli.main import main
from toylab.engine.kl_moments import Tables, kl_moments
from toylab.engine.reference import Reference
from toylab.training.loop import TrainingConfig, train


def json_of(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and err.startswith("toylab: error:")
    return err


def test_the_table_has_no_kl_view_unless_asked(capsys):
    assert "reference" not in json_of(capsys, "--json")


def test_the_kl_view_is_the_librarys(capsys):
    result = json_of(capsys, "--mismatch", "0.8", "--reference-distance", "2", "--N", "16", "--json",
                     "--kl", "k3.loss,k1.reward.to_go.seq_is,verl:kl_loss")
    toy = make_toy(mismatch=0.8)
    reference = result["reference"]
    assert reference | {"settings": None} == reference_summary(toy, Reference(2.0)) | {"settings": None, "beta": None}
    expected = kl_table(toy, ("k3.loss", "k1.reward.to_go.seq_is", "verl:kl_loss"), Reference(2.0), 16)
    assert reference["settings"] == expected
    log_ref = Reference(2.0).log_probabilities(toy.theta, toy.seed, toy.sampler)
    moments = kl_moments(KLPenalty(1.0, "k1", "reward", "to_go"), Tables.of(toy, log_ref), "seq_is")
    assert expected[1]["rel_bias"] == pytest.approx(moments.rel_bias(), abs=1e-12)


TABLE_TOYS = {"plain": ["--T", "4", "--V", "3", "--mismatch", "0.8", "--seed", "3"],
              "tempered top-p": ["--T", "3", "--V", "4", "--mismatch", "0.7", "--seed", "2", "--top-p", "0.8",
                                 "--temperature", "0.7"],
              "raw, temperature scored": ["--T", "3", "--V", "3", "--mismatch", "1.2", "--seed", "5", "--temperature",
                                          "1.3", "--pipeline", "verl_before_4755"]}
TABLE_SETTINGS = ("k1.loss", "k3.loss.engine", "k3+.loss", "k1.reward.to_go.seq_is", "k3.reward.token.tok_is",
                  "nemo_rl:kl_loss", "miles:unbiased_kl", "verl:kl_in_reward")


@pytest.mark.parametrize("toy_name", TABLE_TOYS)
@pytest.mark.parametrize("beta", [None, 0.3])
def test_the_tables_kl_view_and_beta_are_the_dense_sums(capsys, toy_name, beta):
    """Each row's cosine, rel bias, rel std at N and (with --beta) the penalised errors, from E ĝ, E‖ĝ‖², ∇KL and ∇J
    summed over every sequence (tests/dense.py)."""
    given = ["--beta", str(beta)] if beta is not None else []
    result = json_of(capsys, *TABLE_TOYS[toy_name], "--reference-distance", "1.5", "--N", "16", "--kl",
                     ",".join(TABLE_SETTINGS), *given, "--json")
    toy = make_toy(**{key: result["toy"][key] for key in ("T", "V", "mismatch", "seed", "top_p", "top_k",
                                                          "temperature", "precision", "logged", "scored")})
    dense = DenseToy(toy)
    log_ref = Reference(1.5).log_probabilities(toy.theta, toy.seed, toy.sampler)
    assert result["reference"]["beta"] == beta
    for row in result["reference"]["settings"]:
        penalty, correction = kl_settings.parse(row["setting"])
        mean, second, forward, _ = dense_kl_moments(dense, penalty, log_ref, correction)
        bias, spread = np.linalg.norm(mean - forward), np.sqrt((second - (mean**2).sum()) / 16)
        cosine = (mean * forward).sum() / np.linalg.norm(mean) / np.linalg.norm(forward)
        assert row["cosine"] == pytest.approx(cosine, abs=1e-12), row["setting"]
        assert row["rel_bias"] == pytest.approx(bias / np.linalg.norm(forward), rel=1e-10, abs=1e-12)
        assert row["rel_std"] == pytest.approx(spread / np.linalg.norm(forward), rel=1e-9, abs=1e-12)
        if beta is None:
            assert "penalised_rel_bias" not in row
            continue
        target = np.linalg.norm(dense.true_grad - beta * forward)
        assert row["penalised_rel_bias"] == pytest.approx(beta * bias / target, rel=1e-10, abs=1e-12)
        assert row["penalised_rel_std"] == pytest.approx(beta * spread / target, rel=1e-9, abs=1e-12)


def test_the_kl_view_as_text_has_a_row_per_setting(capsys):
    assert main(["--reference-distance", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split()[0] for line in lines if line.split() and line.split()[0] in kl_settings.VIEW_SETTINGS]
    assert rows == list(kl_settings.VIEW_SETTINGS)


@pytest.mark.parametrize("argv, message", [
    (["--reference-distance", "11"], "--reference-distance: '11' is outside"),
    (["--reference-distance", "-1"], "is outside"), (["--reference-distance", "far"], "is not a number"),
    (["--reference-distance", "1", "--kl", "k4.loss"], "the estimator 'k4' is not one of"),
    (["--reference-distance", "1", "--kl", "k3.advantage"], "the placement must be one of"),
    (["--reference-distance", "1", "--kl", "k3.loss.seq_is"], "is not a modifier of a loss setting"),
    (["--reference-distance", "1", "--kl", "verl:nothing"], "is not a KL preset"),
    (["--reference-distance", "1", "--kl", ","], "name at least one KL setting"),
    (["--kl", "k3.loss"], "--kl sets the KL view: give --reference-distance"),
    (["--beta", "0.1"], "--beta sets the KL view: give --reference-distance"),
    (["--reference-distance", "1", "--beta", "101"], "--beta: '101' is outside"),
    (["--reference-distance", "1", "--beta", "nan"], "--beta: 'nan'"),
])
def test_a_bad_kl_view_argument_is_refused_in_one_line(capsys, argv, message):
    assert message in one_line_error(capsys, *argv)


def test_train_with_a_penalty_is_the_librarys(capsys):
    result = json_of(capsys, "train", "--estimators", "naive,tok_tis", "--steps", "20", "--kl", "k1.reward.to_go",
                     "--beta", "0.4", "--reference-distance", "0.5", "--json")
    config = TrainingConfig(20, kl=KLPenalty(0.4, "k1", "reward", "to_go"), reference=Reference(0.5))
    runs = train(make_toy(), {"on_policy": {}, "naive": {}, "tok_tis": {}}, "none", config)
    for entry in result["trajectories"]:
        np.testing.assert_allclose(entry["kl_ref"], runs[entry["estimator"]].kl_ref, rtol=1e-12)
        np.testing.assert_allclose(entry["J"], runs[entry["estimator"]].J, rtol=1e-12)
    assert result["kl"] == {"penalty": {"setting": "k1.reward.to_go", "beta": 0.4, "estimator": "k1",
                                        "placement": "reward", "reward_sum": "to_go", "ratio": "none",
                                        "log_ratio_clamp": None, "value_clamp": None, "ratio_held_by_clamp": False},
                            "reference_distance": 0.5}
    assert {row["estimator"]: row["final_kl_ref"] for row in result["summary"]} == \
        pytest.approx({row["estimator"]: runs[row["estimator"]].kl_ref[-1] for row in result["summary"]}, rel=1e-12)


def test_a_preset_takes_its_frameworks_beta(capsys):
    result = json_of(capsys, "train", "--estimators", "naive", "--steps", "10", "--kl", "nemo_rl:kl_loss", "--json")
    assert result["kl"]["penalty"]["beta"] == KL_PRESETS["nemo_rl:kl_loss"].default_beta == 0.01
    assert result["kl"]["penalty"]["ratio"] == "current" and result["kl"]["penalty"]["ratio_held_by_clamp"]


def test_without_a_penalty_the_run_still_records_its_kl_to_the_start(capsys):
    result = json_of(capsys, "train", "--estimators", "naive", "--steps", "10", "--json")
    assert result["kl"] == {"penalty": None, "reference_distance": 0.0}
    assert result["trajectories"][0]["kl_ref"][0] == pytest.approx(0, abs=1e-15)


@pytest.mark.parametrize("argv, message", [
    (["--beta", "0.1"], "--beta needs --kl"), (["--kl", "k3.loss"], "needs --beta"),
    (["--kl", "trl:grpo"], "its framework's default β is 0 (off); give --beta"),
    (["--kl", "k1.reward.seq_is", "--beta", "1"], "is not a modifier of a reward setting"),
    (["--kl", "k3.loss", "--beta", "200"], "--beta: '200' is outside"),
    (["--kl", "full.reward", "--beta", "1"], "loss term only"),
    (["--reference-distance", "20"], "--reference-distance: '20' is outside"),
    (["--kl", "k1.reward", "--beta", "1", "--estimators", "k2_penalty"], "adds a penalty term"),
])
def test_a_bad_reference_argument_to_train_is_refused_in_one_line(capsys, argv, message):
    assert message in one_line_error(capsys, "train", "--steps", "10", *argv)
