"""The frameworks' dumps as their own writers write them (tests/framework_writers/), read by toylab: every step's
statistics against a direct computation on the batches the writers were fed, in every layout they write — NeMo-RL
with its validation dumps, prime-rl over ranks, slime and Miles over data-, tensor-, pipeline- and
context-parallel ranks, SkyRL's pickle and its export — and every drop, merge or pairing said in a notice.

NeMo-RL's writer needs no torch and always runs; prime-rl's and SkyRL's are read from their recorded output
(framework_writers/record.py) without torch and run again with it; slime's and Miles' .pt dumps need torch to be
read at all, so their tests run where torch is installed."""

import json
import math
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from framework_dumps import (
    PRIME_RANKS,
    PRIME_STEPS,
    RECORDED,
    Batch,
    entropies,
    joined,
    prime_batches,
    prime_run,
    toy_batch,
    write_nemo,
)
from framework_writers import nemo_rl

from toylab.cli.main import main
from toylab.your_run.dumps import LAYOUTS, SKYRL_EXPORT, dump_kind
from toylab.your_run.files import LogError
from toylab.your_run.parity import framework_metrics
from toylab.your_run.run import RunFile, directory_files, load_file, step_logs
from toylab.your_run.statistics import log_statistics


def direct(batch):
    """A step's statistics computed here from the batch fed to the writer, sequence by sequence."""
    mu, pi = np.concatenate(batch.sampler), np.concatenate(batch.trainer)
    lengths = np.array([len(row) for row in batch.sampler])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    log_rho = pi - mu
    k1_sums, k3_sums = np.add.reduceat(-log_rho, starts), np.add.reduceat(np.exp(log_rho) - 1 - log_rho, starts)
    B, n = len(lengths), lengths.sum()
    return {"sequences": B, "tokens": int(n), "k1": k1_sums.sum() / n, "k3": k3_sums.sum() / n,
            "k1_se": math.sqrt(B / (B - 1) * np.sum((k1_sums - k1_sums.sum() / n * lengths) ** 2)) / n,
            "k3_sums": k3_sums, "mean_reward": float(np.mean(batch.rewards))}


def assert_step(log, batch, rewards=True):
    numbers, statistics = direct(batch), log_statistics(log)
    assert (statistics.sequences, statistics.tokens) == (numbers["sequences"], numbers["tokens"])
    assert statistics.k1.value == pytest.approx(numbers["k1"], rel=1e-12, abs=1e-15)
    assert statistics.k1.se == pytest.approx(numbers["k1_se"], rel=1e-10)
    assert statistics.k3.value == pytest.approx(numbers["k3"], rel=1e-12)
    assert np.array_equal(log.sampler_logprobs, np.concatenate(batch.sampler))
    assert np.array_equal(log.trainer_logprobs, np.concatenate(batch.trainer))
    if rewards:
        assert np.array_equal(log.rewards, batch.rewards)
        assert statistics.mean_reward.value == pytest.approx(numbers["mean_reward"], rel=1e-15)


def steps_of(directory):
    return {step.step: step for step in step_logs(directory_files(directory), allow_torch=True)}


def inspect(capsys, *argv):
    capsys.readouterr()                                        # what the writers printed ("Logged data to …")
    try:
        code = main(["inspect", *argv])
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr()


def test_every_layout_names_its_framework_and_writer():
    assert [layout.key for layout in LAYOUTS] == ["nemo_validation", "miles_trajectory", "nemo", "prime", "torch",
                                                  "pickle"]
    assert all(layout.framework and "(" in layout.writer for layout in LAYOUTS)


# -- NeMo-RL: Logger.log_batched_dict_as_jsonl, from grpo.py's logging block and validate() -------------------------

def test_nemo_rl_steps_written_by_its_logger_equal_a_direct_computation(tmp_path):
    batches = {step: toy_batch(8 + step, seed=step) for step in (1, 2, 3)}
    for step, batch in batches.items():
        write_nemo(tmp_path, step, batch)
    steps = steps_of(tmp_path)
    assert sorted(steps) == [1, 2, 3]
    for step, batch in batches.items():
        assert steps[step].files == (f"train_data_step{step}.jsonl",) and steps[step].log.notices == ()
        assert_step(steps[step].log, batch)


def test_nemo_rl_validation_dumps_are_left_out_never_merged_into_a_training_step(tmp_path, capsys):
    """val_at_start and val_period 2: validate() writes val_data_step0, 2 and 4 beside train_data_step1…4."""
    batches = {step: toy_batch(6, seed=step) for step in (1, 2, 3, 4)}
    for step, batch in batches.items():
        write_nemo(tmp_path, step, batch)
    for step in (0, 2, 4):
        nemo_rl.write_validation(tmp_path, step, [1.0, 0.0, 1.0])
    assert dump_kind("val_data_step2.jsonl", (tmp_path / "val_data_step2.jsonl").read_bytes()) == "nemo_validation"
    steps = steps_of(tmp_path)
    assert steps[0].log is None and "validation" in steps[0].error and "left out" in steps[0].error
    for step in (1, 2, 3, 4):
        assert_step(steps[step].log, batches[step])
        noticed = [notice for notice in steps[step].log.notices if "val_data_step" in notice]
        assert (len(noticed) == 1) == (step in (2, 4))
    code, out = inspect(capsys, str(tmp_path), "--json")
    result = json.loads(out.out)
    assert code == 0 and any("val_data_step2.jsonl" in note and "left out" in note for note in result["notes"])
    code, out = inspect(capsys, str(tmp_path))
    assert "Notice: step 4: val_data_step4.jsonl: NeMo-RL's validation data" in out.out


# -- prime-rl: TokenExporter.export, rank by rank --------------------------------------------------------------

def test_prime_rl_exports_equal_a_direct_computation_kl_ent_ratio_included(tmp_path):
    batches = prime_run(tmp_path)
    recorded = json.loads((RECORDED / "prime_rl" / "batches.json").read_text())
    steps = steps_of(tmp_path)
    assert sorted(steps) == list(PRIME_STEPS)
    for step in PRIME_STEPS:
        batch = joined(*(batches[step, rank] for rank in PRIME_RANKS))
        log = steps[step].log
        assert_step(log, batch, rewards=False)
        assert log.rewards is None and np.allclose(log.advantages, batch.advantages, rtol=0, atol=0)
        entropy = np.array([sum(recorded[f"{step},{rank}"]["entropy"][i]) for rank in PRIME_RANKS
                            for i in range(len(batches[step, rank].sampler))])
        assert np.allclose(log.entropy_sums, entropy, rtol=1e-15, atol=0)
        ratio = next(metric for metric in framework_metrics(log) if metric.name == "kl_ent_ratio/mean")
        assert ratio.value == pytest.approx(direct(batch)["k3_sums"].sum() / entropy.sum(), rel=1e-12)
        residual = direct(batch)["k3_sums"] - ratio.value * entropy
        B = len(entropy)
        assert ratio.se == pytest.approx(math.sqrt(B / (B - 1) * np.sum(residual**2)) / entropy.sum(), rel=1e-10)


def test_a_log_without_the_entropy_says_why_kl_ent_ratio_has_no_value(tmp_path):
    log = load_file(RunFile("nemo.jsonl", None, None, path=str(write_nemo(tmp_path, 1, toy_batch(4, seed=1)))))[0]
    ratio = next(metric for metric in framework_metrics(log) if metric.name == "kl_ent_ratio/mean")
    assert ratio.value is None and "entropy" in ratio.note


def test_a_missing_rank_is_a_notice_naming_the_ranks_found(tmp_path, capsys):
    batches = prime_run(tmp_path)
    os.remove(tmp_path / "token_exports" / "step_3" / "rank_1.jsonl")
    steps = steps_of(tmp_path)
    assert_step(steps[3].log, batches[3, 0], rewards=False)
    assert steps[3].log.notices == ("ranks found: 0; rank 1 of the run is missing from this step: its numbers are of "
                                    "the ranks found",)
    assert all(steps[step].log.notices == () for step in (1, 2, 4))
    code, out = inspect(capsys, str(tmp_path))
    assert code == 0 and "Notice: step 3: ranks found: 0; rank 1" in out.out


@pytest.mark.slow
def test_the_recorded_prime_rl_run_is_what_its_exporter_writes(tmp_path):
    pytest.importorskip("torch", reason="prime-rl's exporter needs torch; the recorded run is read without it")
    from framework_writers import prime_rl
    from framework_writers.record import prime_steps
    steps = prime_steps()
    batches = prime_batches()
    assert all(steps[step][rank][0].sampler == batches[step, rank].sampler for step, rank in batches)
    assert all(steps[step][rank][1] == entropies(batches[step, rank]) for step, rank in batches)
    written = prime_rl.export_run(tmp_path, steps, vocabulary=4)
    for step in PRIME_STEPS:
        for rank in PRIME_RANKS:
            path = f"step_{step}/rank_{rank}.jsonl"
            assert (written / path).read_bytes() == (RECORDED / "prime_rl" / "token_exports" / path).read_bytes()


# -- slime: save_debug_train_data, one file per rollout -----------------------------------------------------------

SLIME_LAYOUTS = {"DP 1": (1, 1, 1), "DP 2": (2, 1, 1), "DP 2 TP 2 PP 2": (2, 2, 2), "DP 4 PP 2": (4, 1, 2)}


@pytest.mark.parametrize("layout", SLIME_LAYOUTS)
def test_slime_dumps_in_every_layout_equal_a_direct_computation(tmp_path, layout):
    torch = pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import slime
    dp, tp, pp = SLIME_LAYOUTS[layout]
    batches = {rollout: toy_batch(8, seed=20 + rollout) for rollout in (0, 1)}
    for rollout, batch in batches.items():
        slime.write_rollout(tmp_path, rollout, batch, dp=dp, tp=tp, pp=pp)
    assert sorted(os.listdir(tmp_path / "train_data")) == ["0.pt", "1.pt"]
    payload = torch.load(tmp_path / "train_data" / "1.pt", weights_only=True)
    assert [shard["sample_indices"] for shard in payload["dp_shards"]] == [list(range(r, 8, dp)) for r in range(dp)]
    steps = steps_of(tmp_path)
    for rollout, batch in batches.items():
        assert_step(steps[rollout].log, batch)
        assert steps[rollout].log.notices == ()


def test_slime_rewards_are_paired_by_rollout_position_and_refused_without_one(tmp_path):
    torch = pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import slime
    batch = toy_batch(8, seed=4)
    path = slime.write_rollout(tmp_path, 0, batch, dp=2)
    payload = torch.load(path, weights_only=True)
    payload["samples"] = payload["samples"][::-1]                 # its rows in another order: rewards follow
    for sample in payload["samples"]:
        del sample["local_raw_reward"]
    torch.save(payload, path)
    log = steps_of(tmp_path)[0].log
    assert np.array_equal(log.rewards, batch.rewards[::-1])
    for sample in payload["samples"]:
        del sample["rollout_position"]
    torch.save(payload, path)
    log = steps_of(tmp_path)[0].log
    assert log.rewards is None and any("no reward read" in notice and "rollout_position" in notice
                                       for notice in log.notices)


def test_slime_bf16_log_probs_are_read_with_a_notice(tmp_path):
    torch = pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import slime
    batch = toy_batch(6, seed=5)
    slime.write_rollout(tmp_path, 0, batch, log_dtype=torch.bfloat16)
    log = steps_of(tmp_path)[0].log
    assert_step(log, slime.seen(batch, torch.bfloat16))
    assert any("bfloat16" in notice for notice in log.notices)


# -- Miles: train_dump_utils, one file per rank, and the rollout dump -----------------------------------------------

MILES_LAYOUTS = {"DP 1": {}, "DP 2": {"dp": 2}, "TP 2": {"tp": 2}, "PP 2": {"pp": 2}, "CP 2": {"cp": 2},
                 "DP 2 TP 2 PP 2": {"dp": 2, "tp": 2, "pp": 2}}


@pytest.mark.parametrize("layout", MILES_LAYOUTS)
def test_miles_dumps_in_every_layout_equal_a_direct_computation(tmp_path, layout):
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    parallel = MILES_LAYOUTS[layout]
    batches = {rollout: toy_batch(8, seed=40 + rollout) for rollout in (0, 1, 2)}
    for rollout, batch in batches.items():
        paths = miles.write_rollout(tmp_path, rollout, batch, **parallel)
    ranks = math.prod(parallel.values())
    assert len(paths) == ranks and (tmp_path / "rollout_data" / "2.pt").exists()
    steps = steps_of(tmp_path)
    assert sorted(steps) == [0, 1, 2]
    for rollout, batch in batches.items():
        log = steps[rollout].log
        assert_step(log, batch)                                # one copy of each sequence, rewards paired
        notices = " ".join(log.notices)
        assert ("tensor-parallel copies, equal value for value): counted once" in notices) == ("tp" in parallel)
        assert ("pipeline stages before the last" in notices) == ("pp" in parallel)
        assert ("reassembled" in notices) == ("cp" in parallel)


def test_miles_trajectory_sidecars_are_left_out_of_their_steps(tmp_path):
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    batches = {rollout: toy_batch(6, seed=rollout) for rollout in (0, 1)}
    for rollout, batch in batches.items():
        miles.write_rollout(tmp_path, rollout, batch, dp=2, conversations=True)
    assert sorted(os.listdir(tmp_path / "trajectory")) == ["0.jsonl", "1.jsonl"]
    steps = steps_of(tmp_path)
    for rollout, batch in batches.items():
        assert_step(steps[rollout].log, batch)
        assert f"trajectory/{rollout}.jsonl: Miles' trajectory sidecar (each sample's conversation, no log-probs): " \
               "left out" in steps[rollout].log.notices


def test_miles_rewards_without_the_rollout_dump_are_refused_with_the_reason(tmp_path):
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    batch = toy_batch(8, seed=7)
    miles.write_rollout(tmp_path, 0, batch, dp=2)
    log = steps_of(tmp_path / "train_data")[0].log
    assert_step(log, batch, rewards=False)                     # by sample index: here the rollout order
    assert log.rewards is None
    assert any("no reward read" in notice and "rollout_data/" in notice for notice in log.notices)


def test_a_missing_miles_data_parallel_rank_is_a_notice(tmp_path):
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    batch = toy_batch(8, seed=8)
    miles.write_rollout(tmp_path, 0, batch, dp=2)
    os.remove(tmp_path / "train_data" / "0_1.pt")
    log = steps_of(tmp_path)[0].log
    kept = Batch(batch.sampler[::2], batch.trainer[::2], batch.rewards[::2], batch.advantages[::2])
    assert_step(log, kept)
    assert any("4 of the batch's 8 sequences found" in notice for notice in log.notices)


@pytest.mark.parametrize("flag, dtype", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_miles_half_precision_rollout_log_probs_are_read(tmp_path, flag, dtype):
    """--true-on-policy-mode with --bf16 or --fp16 keeps the sampler's log-probs in that dtype (data.py 25–31)."""
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    batch = toy_batch(8, seed=9)
    miles.write_rollout(tmp_path, 0, batch, dp=2, rollout_dtype=flag)
    log = steps_of(tmp_path)[0].log
    assert_step(log, miles.seen(batch, rollout_dtype=flag))
    assert any(notice.startswith(f"rollout_log_probs stored in {dtype} ") for notice in log.notices)


def test_miles_notices_reach_the_text_and_the_json(tmp_path, capsys):
    pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    for rollout in (0, 1):
        miles.write_rollout(tmp_path, rollout, toy_batch(6, seed=rollout), tp=2, pp=2)
    code, out = inspect(capsys, str(tmp_path), "--json")
    result = json.loads(out.out)
    assert code == 0 and [step["sequences"] for step in result["steps"]] == [6, 6]
    assert any("counted once" in notice for notice in result["steps"][0]["notices"])
    code, out = inspect(capsys, str(tmp_path))
    assert "Notice: step 1: ranks 0–1 hold no trainer log-probs" in out.out


# -- SkyRL: a pickle, refused with its export command, and the export read ----------------------------------------

SKYRL = RECORDED / "skyrl" / "dumped_data"


def skyrl_batch():
    recorded = json.loads((RECORDED / "skyrl" / "batch.json").read_text())
    return Batch(recorded["sampler"], recorded["trainer"], np.array(recorded["rewards"]),
                 np.array(recorded["advantages"]))


def test_a_skyrl_pickle_is_refused_with_the_whole_export_command_even_on_a_long_path(tmp_path, capsys):
    folder = tmp_path.joinpath(*["a_rather_long_experiment_folder_name"] * 3, "dumped_data")
    folder.mkdir(parents=True)
    shutil.copy(SKYRL / "global_step_3_training_input.pkl", folder)
    path = folder / "global_step_3_training_input.pkl"
    with pytest.raises(LogError, match="never opened") as refusal:
        load_file(RunFile(str(path), None, None, path=str(path)))
    assert SKYRL_EXPORT in str(refusal.value)
    assert len(str(refusal.value)) > 400                       # the one-line limit would cut the command
    code, out = inspect(capsys, str(path))
    assert code == 2 and SKYRL_EXPORT in out.err.splitlines()
    assert out.err.splitlines()[-1].startswith("toylab: error: ") and "printed above" in out.err.splitlines()[-1]


def test_a_folder_with_a_skyrl_pickle_and_its_export_is_read_from_the_export(tmp_path):
    shutil.copytree(SKYRL, tmp_path / "dumped_data")
    steps = steps_of(tmp_path)
    log = steps[3].log
    assert_step(log, skyrl_batch(), rewards=False)
    assert np.allclose(log.advantages, skyrl_batch().advantages, rtol=0, atol=0)
    assert any("global_step_3_training_input.pkl: a pickle, never opened: read from its export" in notice
               for notice in log.notices)


@pytest.mark.slow
def test_the_recorded_skyrl_dump_and_export_are_what_skyrl_and_the_command_write(tmp_path):
    pytest.importorskip("torch", reason="SkyRL's dump needs torch; the recorded one is read without it")
    import pyarrow.parquet as pq
    from framework_writers import skyrl
    from framework_writers.record import export
    from framework_writers.record import skyrl_batch as recorded_batch
    assert recorded_batch().sampler == skyrl_batch().sampler
    path = skyrl.dump(tmp_path, 3, recorded_batch())
    assert path.read_bytes() == (SKYRL / path.name).read_bytes()
    assert pq.read_table(export(path)).equals(pq.read_table(SKYRL / "global_step_3_training_input.parquet"))


@pytest.mark.slow
def test_the_export_command_runs_as_printed(tmp_path):
    """The command, split as a shell splits it, run on the recorded pickle with SkyRL's class importable."""
    pytest.importorskip("torch", reason="unpickling SkyRL's batch needs torch")
    from framework_writers import skyrl
    shutil.copy(SKYRL / "global_step_3_training_input.pkl", tmp_path)
    command = shlex.split(SKYRL_EXPORT.replace("FILE.pkl", str(tmp_path / "global_step_3_training_input.pkl")))
    path = os.pathsep.join([skyrl.importable(tmp_path / "shim"), *sys.path])
    subprocess.run([sys.executable, *command[1:]], env={**os.environ, "PYTHONPATH": path}, check=True)
    assert_step(steps_of(tmp_path)[3].log, skyrl_batch(), rewards=False)


def test_a_miles_file_that_does_not_hold_what_its_writer_writes_is_one_line(tmp_path):
    torch = pytest.importorskip("torch", reason="a .pt dump is read only with torch installed")
    from framework_writers import miles
    miles.write_rollout(tmp_path, 0, toy_batch(4, seed=1), dp=2)
    path = tmp_path / "train_data" / "0_0.pt"
    payload = torch.load(path, weights_only=True)
    for change, words in ((lambda data: data.update(sample_indices=["a", "b"]), "does not hold numbers"),
                          (lambda data: data["log_probs"].pop(), "'log_probs' has 1 samples"),
                          (lambda data: data.update(raw_reward=[{"acc": 1.0}] * 4), "not numbers"),
                          (lambda data: data.update(sample_indices=[90, 91]), "not in the rollout dump")):
        broken = {**payload, "rollout_data": {key: list(value) if isinstance(value, list) else value
                                              for key, value in payload["rollout_data"].items()}}
        change(broken["rollout_data"])
        torch.save(broken, path)
        step = steps_of(tmp_path)[0]
        assert step.log is None and words in step.error and "\n" not in step.error
