"""A run read step by step: steps and ranks from paths, ranks merged, a step column, a zip, a malformed step, and
the per-step numbers against a direct computation on the batches the test drew."""

import io
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from framework_dumps import expected, joined, prime_run, toy_batch, write_nemo
from messages import says

from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.files import LogError
from toylab.your_run.run import directory_files, step_and_rank, step_logs, uploaded_files, zip_files
from toylab.your_run.statistics import log_statistics
from toylab.your_run.steps import departures, first_departure


@pytest.mark.parametrize("path, step, rank", [
    ("token_exports/step_12/rank_3.jsonl", 12, 3),           # prime-rl
    ("logs/exp_1/train_data_step7.jsonl", 7, None),          # NeMo-RL
    ("dumped_data/global_step_40_training_input.pkl", 40, None),   # SkyRL
    ("dump_details/train_data/15.pt", 15, None),             # slime
    ("dump_details/train_data/15_2.pt", 15, 2),              # Miles
    ("rollout_data/9.jsonl", 9, None),                        # verl's rollout_data_dir
    ("run/step-3/rank-1.parquet", 3, 1),
    ("step5/part.parquet", 5, None),
    ("logprobs.parquet", None, None),
    ("upstep_2.parquet", None, None),                         # "step" inside a word is not a step
])
def test_step_and_rank_come_from_the_path(path, step, rank):
    assert step_and_rank(path) == (step, rank)


def assert_step(step_log, batch):
    numbers = expected(batch)
    statistics = log_statistics(step_log.log)
    assert (statistics.sequences, statistics.tokens) == (numbers["sequences"], numbers["tokens"])
    assert statistics.k1.value == pytest.approx(numbers["k1"], rel=1e-12)
    assert statistics.k1.se == pytest.approx(numbers["k1_se"], rel=1e-10)


def test_a_prime_rl_run_merges_the_ranks_of_each_step(tmp_path):
    batches = prime_run(tmp_path, steps=(1, 2, 4))
    steps = list(step_logs(directory_files(tmp_path)))
    assert [step.step for step in steps] == [1, 2, 4]
    for step in steps:
        assert step.files == (f"token_exports/step_{step.step}/rank_0.jsonl",
                              f"token_exports/step_{step.step}/rank_1.jsonl")
        assert_step(step, joined(batches[step.step, 0], batches[step.step, 1]))


def test_a_malformed_step_is_reported_and_the_others_read(tmp_path):
    batches = {step: toy_batch(10, seed=step) for step in (1, 2, 3)}
    for step, batch in batches.items():
        write_nemo(tmp_path, step, batch)
    bad = tmp_path / "train_data_step2.jsonl"
    bad.write_text(bad.read_text().replace('"prev_logprobs": [[0.0', '"prev_logprobs": [[true', 1))
    steps = list(step_logs(directory_files(tmp_path)))
    assert [(step.step, step.log is None) for step in steps] == [(1, False), (2, True), (3, False)]
    assert steps[1].error.startswith("train_data_step2.jsonl: row 1, column 'prev_logprobs'")
    assert_step(steps[0], batches[1])
    assert_step(steps[2], batches[3])


def test_a_file_with_a_step_column_is_split_by_it(tmp_path):
    batches = {3: toy_batch(6, seed=1), 1: toy_batch(9, seed=2)}
    rows = [{"step": step, "rollout_log_probs": mu, "old_log_probs": pi, "reward": float(r)}
            for step, batch in batches.items() for mu, pi, r in zip(batch.sampler, batch.trainer, batch.rewards,
                                                                    strict=True)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "all_steps.parquet")
    steps = list(step_logs(directory_files(tmp_path)))
    assert [step.step for step in steps] == [1, 3]
    assert_step(steps[0], batches[1])
    assert_step(steps[1], batches[3])
    assert np.array_equal(steps[1].log.rewards, batches[3].rewards)


def test_a_file_without_a_step_says_so(tmp_path):
    batch = toy_batch(4, seed=1)
    pq.write_table(pa.table({"rollout_log_probs": batch.sampler, "old_log_probs": batch.trainer}),
                   tmp_path / "logprobs.parquet")
    with pytest.raises(LogError, match=r"logprobs.parquet: which step is it\? Its path names none"):
        list(step_logs(directory_files(tmp_path)))


def test_a_zip_of_a_run_reads_as_the_directory(tmp_path):
    prime_run(tmp_path / "run", steps=(1, 2), ranks=(0,))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as writer:
        for file in directory_files(tmp_path / "run"):
            writer.write(file.path, f"run/{file.name}")
    from_zip = list(step_logs(zip_files("run.zip", archive.getvalue(), CLI_BOUNDS)))
    from_directory = list(step_logs(directory_files(tmp_path / "run")))
    for a, b in zip(from_zip, from_directory, strict=True):
        assert a.step == b.step and log_statistics(a.log) == log_statistics(b.log)


def test_uploads_and_a_zip_that_is_too_large(tmp_path):
    prime_run(tmp_path, steps=(4,), ranks=(0,))
    path = tmp_path / "token_exports" / "step_4" / "rank_0.jsonl"
    files = uploaded_files([("token_exports/step_4/rank_0.jsonl", path.read_bytes())])
    assert [step.step for step in step_logs(files)] == [4]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as writer:
        writer.write(path, "step_4/rank_0.jsonl")
    with pytest.raises(LogError, match="the archive's log files .* bytes uncompressed. is over the limit of 10 bytes"):
        zip_files("run.zip", archive.getvalue(), CLI_BOUNDS.but(text_bytes=10))
    with pytest.raises(LogError, match="not a readable zip archive"):
        zip_files("run.zip", b"PK\x03\x04 truncated", CLI_BOUNDS)


def test_a_metric_leaves_its_early_range_at_the_first_step_wholly_outside():
    flat = [(1.0, 0.1)] * 5
    assert first_departure(flat + [(1.3, 0.1), (1.6, 0.1)]) == 6      # 1.3 − 0.2 = 1.1 < 1.2: still inside
    assert first_departure(flat + [(0.3, 0.1)]) == 5
    assert first_departure(flat) is None and first_departure([(1.0, 0.1)] * 3 + [(9.0, 0.0)]) == 3
    summaries = [{"step": 10 * i, "k1": {"value": v, "se": 0.01}} for i, v in enumerate([1, 1, 1, 1, 1, 2])]
    summaries.insert(2, {"step": 15, "files": [], "error": "bad"})
    assert departures(summaries, keys=("k1", "k3")) == {"k1": 50, "k3": None}


def test_parquet_files_of_a_run_share_a_column_choice_only_when_their_schemas_match(tmp_path):
    batches = {1: toy_batch(5, seed=1), 2: toy_batch(6, seed=2), 3: toy_batch(7, seed=3)}
    names = {1: ("rollout_log_probs", "old_log_probs"), 2: ("rollout_log_probs", "old_log_probs"),
             3: ("sampler_logprobs", "trainer_logprobs")}
    for step, batch in batches.items():
        sampler, trainer = names[step]
        pq.write_table(pa.table({sampler: batch.sampler, trainer: batch.trainer}), tmp_path / f"step_{step}.parquet")
    steps = list(step_logs(directory_files(tmp_path)))
    assert [step.log.columns.sampler for step in steps] == ["rollout_log_probs", "rollout_log_probs",
                                                             "sampler_logprobs"]
    for step in steps:
        assert_step(step, batches[step.step])


def parquet_members(archive):
    """{name: table} of a zip of Parquet files: what a run holds, whatever pyarrow wrote in the files' metadata
    (its version, so the bytes differ between pyarrow versions)."""
    import io
    import zipfile

    import pyarrow.parquet as pq

    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        return {name: pq.read_table(io.BytesIO(opened.read(name))).to_pydict() for name in opened.namelist()}


def test_the_example_run_is_reproducible_and_its_drift_is_found_first_by_k3():
    from rollout_logs import EXAMPLES

    from examples.make_example_run import MISMATCH, run_zip
    from toylab.your_run.steps import step_summary

    data = (EXAMPLES / "example_run.zip").read_bytes()
    assert parquet_members(run_zip()) == parquet_members(data)
    summaries = [step_summary(step.step, step.files, step.log, {}) for step in
                 step_logs(zip_files("example_run.zip", data, CLI_BOUNDS))]
    assert [summary["step"] for summary in summaries] == list(range(1, len(MISMATCH) + 1))
    left = departures(summaries)
    first_drift = next(step for step, mismatch in enumerate(MISMATCH, start=1) if mismatch > MISMATCH[0])
    assert left["k3"] == first_drift and left["chi2_low_variance"] == first_drift
    assert left["k1"] is None or left["k1"] > first_drift           # k1's standard error is ~100× k3's here


def test_tail_shares_and_estimators_shares_are_followed_over_a_run():
    """Each step's share of tokens with |log ρ| > c and each estimator's share of tokens affected, as series of the
    run: their values against a direct count on the step's tokens, and their departures where the drift is."""
    from rollout_logs import EXAMPLES

    from examples.make_example_run import MISMATCH
    from toylab.your_run.steps import series_keys, step_summary, value_and_se

    data = (EXAMPLES / "example_run.zip").read_bytes()
    selection = {"tok_mis": {"lo": 0.99, "hi": 1.01}}             # masks the tokens with ρ outside [0.99, 1.01]
    steps = list(step_logs(zip_files("example_run.zip", data, CLI_BOUNDS)))
    summaries = [step_summary(step.step, step.files, step.log, selection) for step in steps]
    keys = series_keys(summaries)
    assert "tail_share>0.001" in keys and "tail_share>1" in keys and "tokens_affected:tok_mis" in keys
    for step, summary in zip(steps, summaries, strict=True):
        log = step.log
        log_rho = log.trainer_logprobs - log.sampler_logprobs
        assert value_and_se(summary, "tail_share>0.001")[0] == pytest.approx(np.mean(np.abs(log_rho) > 1e-3))
        rho = np.exp(log_rho)
        assert value_and_se(summary, "tokens_affected:tok_mis")[0] == pytest.approx(np.mean((rho < 0.99) | (rho > 1.01)))
    left = departures(summaries)
    first_drift = next(step for step, mismatch in enumerate(MISMATCH, start=1) if mismatch > MISMATCH[0])
    assert left["tail_share>0.001"] == left["tail_share>0.01"] == left["tokens_affected:tok_mis"] == first_drift
    assert left["tail_share>1"] is None                                  # no token is that far off at any step


def test_rewards_that_only_some_ranks_give_are_left_out_with_a_notice(tmp_path):
    batches = {rank: toy_batch(5, seed=rank) for rank in (0, 1)}
    for rank, batch in batches.items():
        columns = {"rollout_log_probs": batch.sampler, "old_log_probs": batch.trainer}
        if rank == 0:
            columns["reward"] = batch.rewards
        (tmp_path / "step_1").mkdir(exist_ok=True)
        pq.write_table(pa.table(columns), tmp_path / "step_1" / f"rank_{rank}.parquet")
    step = next(step_logs(directory_files(tmp_path)))
    assert_step(step, joined(batches[0], batches[1]))
    assert step.log.rewards is None
    assert len(step.log.notices) == 1 and says(step.log.notices[0], "rewards left out", "step_1/rank_1.parquet")
