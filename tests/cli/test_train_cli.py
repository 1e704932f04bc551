"""``python -m toylab train``: JSON equal to the library, K + 1 values per list, runs and medians, one-line errors."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from messages import says

from toylab import make_toy
from toylab.catalogue.updates import Update
from toylab.cli import progress
from toylab.cli import train as train_cli
from toylab.cli.main import main
from toylab.state.settings import Settings
from toylab.training import cost
from toylab.training.cost import PAGE_SECONDS, command_line_bytes
from toylab.training.loop import TrainingConfig, train


def run_json(capsys, *argv):
    assert main(["train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_expected_json_equals_the_library(capsys):
    result = run_json(capsys, "--T", "5", "--V", "3", "--mismatch", "0.7", "--seed", "2", "--baseline", "logged",
                      "--estimators", "on_policy,tok_tis,seq_mis", "--set", "tok_tis.C=3", "--steps", "12",
                      "--lr", "0.5", "--optimizer", "adam")
    toy = make_toy(5, 3, 0.7, 2)
    expected = train(toy, {"on_policy": {}, "tok_tis": {"C": 3}, "seq_mis": {}}, "logged",
                     TrainingConfig(12, 0.5, "adam"))
    assert result["toy"]["M"] == 243 and result["toy"]["J"] == pytest.approx(toy.J, abs=1e-14)
    assert [t["estimator"] for t in result["trajectories"]] == ["on_policy", "tok_tis", "seq_mis"]
    for entry in result["trajectories"]:
        trajectory = expected[entry["estimator"]]
        assert entry["mode"] == "expected" and entry["optimizer"] == "adam" and entry["lr"] == 0.5
        assert entry["steps"] == list(range(13))
        for name in ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "cosine", "rel_bias"):
            assert len(entry[name]) == 13
            np.testing.assert_array_equal(entry[name], getattr(trajectory, name), err_msg=name)
    assert result["trajectories"][1]["params"] == {"C": 3.0}
    assert {row["estimator"] for row in result["summary"]} == {"on_policy", "tok_tis", "seq_mis"}


def test_sampled_json_has_a_list_per_run_and_the_medians(capsys):
    result = run_json(capsys, "--estimators", "naive,grpo", "--set", "grpo.weight=seq_tis", "--mode", "sampled",
                      "--N", "16", "--runs", "3", "--steps", "4")
    expected = train(make_toy(), {"naive": {}, "grpo": {"weight": "seq_tis"}}, "none",
                     TrainingConfig(4, mode="sampled", N=16, runs=3))
    for entry in result["trajectories"]:
        trajectory = expected[entry["estimator"]]
        assert entry["N"] == 16 and entry["runs"] == 3
        assert len(entry["J"]) == 3 and all(len(run) == 5 for run in entry["J"])
        np.testing.assert_array_equal(entry["J"], trajectory.J)
        np.testing.assert_array_equal(entry["median"]["J"], np.median(trajectory.J, axis=0))
        np.testing.assert_array_equal(entry["median"]["cosine"], np.nanmedian(trajectory.cosine, axis=0))
        assert entry["rel_bias"] is None and any("sampled mode" in note for note in entry["notes"])
    grpo = result["trajectories"][1]            # a batch whose rewards are all equal has a zero centred step
    assert None in sum(grpo["cosine"], []) and any("step taken is zero" in note for note in grpo["notes"])


def test_undefined_cosines_are_null_with_a_note(capsys):
    result = run_json(capsys, "--mismatch", "1", "--estimators", "trm,on_policy", "--steps", "3")
    trm, on_policy = result["trajectories"]
    assert trm["cosine"] == [None] * 4 and trm["rel_bias"] == [1.0] * 4          # mean 0: ‖0 − ∇J‖/‖∇J‖ = 1
    assert len(trm["notes"]) == 1 and "mean is zero" in trm["notes"][0]
    assert on_policy["notes"] == [] and None not in on_policy["cosine"]


def test_text_summary_lists_every_estimator(capsys):
    assert main(["train", "--mismatch", "1", "--steps", "300", "--estimators", "on_policy,naive,tok_mis"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[5:8]}
    assert set(rows) == {"on_policy", "naive", "tok_mis"} and rows["tok_mis"][2] == "never"
    assert rows["on_policy"][3] == "0.0000"


@pytest.mark.parametrize("argv, message", [
    (["--estimators", "bogus"], "unknown estimator"), (["--estimators", ","], "names no estimator"),
    (["--estimators", "grpo"], "batch-coupled"), (["--set", "seq_snis.C=2"], "not among the estimators"),
    (["--set", "tok_tis.C=0.1"], "outside"), (["--set", "tok_tis"], "ID.PARAM=VALUE"),
    (["--steps", "0"], "--steps: '0' is outside"), (["--lr", "-1"], "--lr: '-1' is outside"), (["--lr", "nan"], "--lr: 'nan' is not a finite number"),
    (["--optimizer", "rmsprop"], "invalid choice"), (["--mode", "exact"], "invalid choice"),
    (["--runs", "0"], "--runs: '0' is outside"), (["--mode", "sampled", "--estimators", "rloo", "--N", "1"], "N ≥ 2"),
    (["--T", "12"], "exact-size limit"), (["--steps", "ten"], "is not a number"),
])
def test_bad_arguments_print_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("toylab: error:") and message in err


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "toylab", "train", "--steps", "3", "--json"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and len(json.loads(done.stdout)["trajectories"][0]["J"]) == 4
    done = subprocess.run([sys.executable, "-m", "toylab", "train", "--lr", "0"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1


# -- bounded like the page: refused before any work, or shown with its progress ---------------------------------

def one_line_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and err.startswith("toylab: error:")
    return err


def test_a_run_over_the_memory_bound_is_refused_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(train_cli, "make_toy", pytest.fail)                 # no work at all: no toy, no probe
    monkeypatch.setattr(cost, "make_toy", pytest.fail)
    err = one_line_error(capsys, "--mode", "sampled", "--runs", "10000")
    assert says(err, "6.3 GB", "limit of 1 GB")
    records = 8 * 9 * 10_000 * 101 * (6 * 4 + 10)                           # θ_k and the numbers of every run
    listed = 32 * 9 * 10_000 * 101 * 9                                      # the per-step lists, Python floats
    assert command_line_bytes(6, 4, TrainingConfig(mode="sampled", runs=10_000), [0] * 9) > records + listed > 3e9


def test_a_run_whose_per_step_lists_would_pass_the_bound_is_refused(capsys, monkeypatch):
    """110 runs of 2,000 steps at T = 11, V = 4 peaked at 1,254 MB (records 824 MB, the per-step lists 317 MB); 50
    runs with --json at 633 MB (the JSON text is written once the records are freed), before each step recorded four
    more numbers (the clipped share, PPO KL, w's spread, the lag: 1.6 GB estimated now)."""
    monkeypatch.setattr(train_cli, "make_toy", pytest.fail)
    monkeypatch.setattr(cost, "make_toy", pytest.fail)
    err = one_line_error(capsys, "--T", "11", "--V", "4", "--mode", "sampled", "--steps", "2000", "--runs", "110")
    assert says(err, "1.6 GB", "limit of 1 GB")
    config = TrainingConfig(steps=2000, mode="sampled", runs=50)
    assert command_line_bytes(6, 4, config, [0] * 9, as_json=True) > command_line_bytes(6, 4, config, [0] * 9)


def test_a_run_over_the_time_bound_is_refused_before_it_runs(capsys, monkeypatch):
    """Its time is a probe's: small copies of the run, timed; the run itself never starts."""
    monkeypatch.setattr(train_cli, "train", pytest.fail)
    monkeypatch.setattr(cost, "probe", lambda *args, **kwargs: cost.Probe("expected", 0.0, 1e-5, probed=4**11))
    err = one_line_error(capsys, "--T", "11", "--V", "4", "--steps", "2000", "--estimators", "seq_mis,geo_rs,k3_rs")
    assert says(err, f"{2001 * 4**11 * 1e-5:,.0f} s", "limit of 300 s")          # b per sequence


def test_a_long_run_shows_its_progress_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr(train_cli, "PROGRESS_AFTER_S", -1.0)          # every run shows it
    result = run_json(capsys, "--steps", "7", "--estimators", "on_policy,naive")
    assert len(result["trajectories"][0]["J"]) == 8                        # stdout is the JSON alone
    main(["train", "--steps", "7", "--estimators", "on_policy,naive"])
    err = capsys.readouterr().err
    assert err.startswith("\rtraining [") and "100%" in err and "8/8" in err and err.endswith("\n")


def test_the_progress_bar_estimates_the_time_left(monkeypatch):
    clock = iter([0.0, 10.0, 10.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    stream = io.StringIO()
    bar = progress.ProgressBar("training", total=8, stream=stream)
    bar.update(2)                                                          # 2 of 8 in 10 s: 30 s left
    assert "25%" in stream.getvalue() and "2/8" in stream.getvalue() and "about 30 s left" in stream.getvalue()


def test_the_page_and_the_command_line_share_the_estimate(monkeypatch):
    from toylab_app.caches import training_cache
    assert training_cache.LIMIT_SECONDS == PAGE_SECONDS
    line = cost.Probe("sampled", 1e-3, 1e-4, 1e-5)
    monkeypatch.setattr(training_cache, "probe", lambda *args: line)
    settings = Settings(T=10, V=4)
    config = TrainingConfig(steps=50, mode="sampled", N=128, runs=4000)
    selection = (("naive", ()), ("seq_is", ()))
    expected = cost.refusal(10, 4, config, ["naive", "seq_is"], lambda: line, PAGE_SECONDS)
    assert training_cache.refusal(settings, config, selection) == expected
    assert expected.startswith(f"this run is estimated at {51 * (1e-3 + 1e-4 * 4000 + 1e-5 * 4000 * 128):,.0f} s")


# -- three policies: the lag, the anchor, the loss and the updates per batch ---------------------------------

def test_three_policy_options_reach_the_library_and_the_json_says_them(capsys):
    result = run_json(capsys, "--T", "4", "--V", "3", "--mismatch", "0.9", "--estimators", "on_policy,tok_tis,seq_tis",
                      "--steps", "6", "--anchor", "rollout", "--loss", "ppo", "--eps-low", "0.1", "--eps-high", "0.3",
                      "--dual-clip", "3", "--loss-param", "clamp=20", "--minibatches", "2", "--epochs", "3",
                      "--lag", "4", "--lag-draw", "uniform", "--weights-at", "current")
    update = Update("rollout", "ppo", {"eps_low": 0.1, "eps_high": 0.3, "dual_clip": 3.0, "clamp": 20.0}, 2, 3, "current")
    expected = train(make_toy(4, 3, 0.9), {"on_policy": {}, "tok_tis": {}, "seq_tis": {}}, "none",
                     TrainingConfig(6, update=update, lag=4, lag_draw="uniform"))
    assert result["update"] == {"anchor": "rollout", "loss": "ppo", "loss_params": update.loss_params, "minibatches": 2,
                                "epochs": 3, "U": 6, "weights_at": "current", "lag": 4, "lag_draw": "uniform"}
    for entry in result["trajectories"]:
        for name in ("J", "clip_share", "ppo_kl", "w_std", "lag", "cosine"):
            np.testing.assert_array_equal(entry[name], getattr(expected[entry["estimator"]], name), err_msg=name)
    assert max(result["trajectories"][1]["lag"]) > 0 and max(result["trajectories"][1]["clip_share"]) > 0
    assert main(["train", "--steps", "3", "--anchor", "bypass", "--loss", "dppo_kl", "--loss-param", "tau=0.01"]) == 0
    text = capsys.readouterr().out
    assert says(text, "anchor bypass, loss dppo_kl (delta_high 0.2, delta_low 0.2, tau 0.01), U = 1", "clipped",
                "PPO KL")


@pytest.mark.parametrize("argv, message", [
    (["--lag", "17"], "--lag: '17' is outside 0 to 16"), (["--lag-draw", "normal"], "invalid choice"),
    (["--anchor", "stale"], "invalid choice"), (["--loss", "grpo"], "invalid choice"),
    (["--eps-low", "2"], "--eps-low: '2' is outside 0 to 1"), (["--dual-clip", "1"], "dual_clip must be above 1"),
    (["--dual-clip", "many"], "ppo.dual_clip must be a number"), (["--loss", "reinforce", "--eps-high", "0.3"],
                                                                 "loss reinforce has no parameter 'eps_high'"),
    (["--loss-param", "tau"], "NAME=VALUE"), (["--loss-param", "tau=1"], "loss ppo has no parameter 'tau'"),
    (["--loss", "dppo_kl", "--loss-param", "tau=-1"], "dppo_kl.tau = '-1' is outside"),
    (["--minibatches", "0"], "--minibatches: '0' is outside"), (["--epochs", "65"], "--epochs: '65' is outside"),
    (["--minibatches", "8", "--epochs", "9"], "at most 64"),
    (["--mode", "sampled", "--N", "3", "--minibatches", "4"], "cannot make 4 minibatches"),
    (["--estimators", "k2_penalty", "--anchor", "bypass"], "a loss, not a correction weight"),
    (["--weights-at", "later"], "invalid choice"),
])
def test_bad_three_policy_arguments_print_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("toylab: error:") and message in err
