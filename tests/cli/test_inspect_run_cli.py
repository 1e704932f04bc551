"""``python -m toylab inspect DIR``: a run's steps as JSON (sorted, each against a direct computation on the batches
the test drew) or text (significant digits), a malformed step reported, and one-line errors with exit code 2."""

import json

import numpy as np
import pytest
from framework_dumps import Batch, expected, joined, toy_batch, write_nemo
from framework_dumps import prime_run as recorded_prime_run

from toylab.cli.main import main


def run(capsys, *argv):
    try:
        code = main(["inspect", *argv])
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr()


@pytest.fixture
def prime_run(tmp_path):
    batches = recorded_prime_run(tmp_path, steps=(1, 3, 4))
    return tmp_path, {step: joined(batches[step, 0], batches[step, 1]) for step in (1, 3, 4)}


def test_json_holds_every_step_in_order_against_a_direct_computation(capsys, prime_run):
    directory, batches = prime_run
    code, out = run(capsys, str(directory), "--json")
    assert code == 0 and out.err == ""
    result = json.loads(out.out)
    assert [step["step"] for step in result["steps"]] == [1, 3, 4] and result["files"] == 6
    for step in result["steps"]:
        numbers = expected(batches[step["step"]])
        assert (step["sequences"], step["tokens"]) == (numbers["sequences"], numbers["tokens"])
        assert step["k1"]["value"] == pytest.approx(numbers["k1"], rel=1e-12)
        assert step["k1"]["se"] == pytest.approx(numbers["k1_se"], rel=1e-10)
        assert {"k3", "chi2_token", "chi2_low_variance", "ess_fraction", "tail_shares", "estimators",
                "frameworks"} <= set(step)
        assert [row["threshold"] for row in step["tail_shares"]] == [0.001, 0.01, 0.1, 1.0]
        names = [row["name"] for row in step["estimators"]]
        assert names[:3] == ["on_policy", "naive", "tok_is"]
        gen_kl = next(m for m in step["frameworks"]["NeMo-RL"] if m["name"] == "gen_kl_error")
        assert gen_kl["value"] == pytest.approx(step["k3"]["value"], rel=1e-12)
    assert result["notes"] == []


def test_text_shows_small_numbers_with_significant_digits(capsys, tmp_path):
    batch = toy_batch(40, seed=3)
    tiny = Batch(batch.sampler, [[mu + 1e-4 * np.sin(7 * i) for i, mu in enumerate(row)] for row in batch.sampler],
                 batch.rewards, batch.advantages)
    tiny.trainer = [[min(value, 0.0) for value in row] for row in tiny.trainer]
    for step in (1, 2):
        write_nemo(tmp_path, step, tiny)
    code, out = run(capsys, str(tmp_path))
    assert code == 0
    assert "0.0000" not in out.out and "e-0" in out.out
    assert out.out.count("\n     1 ") + out.out.count("\n     2 ") == 2


def test_a_malformed_step_is_reported_and_the_rest_shown(capsys, tmp_path):
    for step in (1, 2, 3):
        write_nemo(tmp_path, step, toy_batch(5, seed=step))
    (tmp_path / "train_data_step2.jsonl").write_text("{not json\n")
    code, out = run(capsys, str(tmp_path), "--json")
    result = json.loads(out.out)
    assert code == 0 and [("error" in step) for step in result["steps"]] == [False, True, False]
    assert result["steps"][1]["error"].startswith("train_data_step2.jsonl: ")
    assert result["notes"][0].startswith("step 2: not read: train_data_step2.jsonl")
    code, out = run(capsys, str(tmp_path))
    assert "     2  not read: train_data_step2.jsonl" in out.out


def test_a_run_with_no_readable_step_is_one_line_and_exit_2(capsys, tmp_path):
    (tmp_path / "step_1.jsonl").write_text("{not json\n")
    code, out = run(capsys, str(tmp_path))
    assert code == 2 and out.out == ""
    assert out.err.startswith("toylab: error: step_1.jsonl: ") and out.err.count("\n") <= 2
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = run(capsys, str(empty))
    assert code == 2 and "no log files in it" in out.err


def test_one_file_with_an_option_value_is_still_a_single_file(capsys, tmp_path):
    path = write_nemo(tmp_path, 1, toy_batch(4, seed=1))
    code, out = run(capsys, str(path), "--sampler", "nope")
    assert code == 2 and "a NeMo-RL dump is read as written: column options" in out.err


def test_what_the_reader_noticed_in_a_step_is_in_the_text_and_the_json(capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for step, ids in ((1, ["a", "a", "b", "b"]), (2, ["a", "b", "a", "b"])):        # step 2: rows interleaved
        folder = tmp_path / f"step_{step}"
        folder.mkdir()
        pq.write_table(pa.table({"sequence_id": ids, "sampler_logprobs": [-0.1, -0.2, -0.3, -0.4],
                                 "trainer_logprobs": [-0.15, -0.2, -0.3, -0.5]}), folder / "tokens.parquet")
    code, out = run(capsys, str(tmp_path), "--json")
    result = json.loads(out.out)
    assert code == 0 and [step["notices"] for step in result["steps"]][0] == []
    assert "not contiguous (at row 3, sequence 'a'" in result["steps"][1]["notices"][0]
    assert result["notes"] == [f"step 2: {result['steps'][1]['notices'][0]}"]
    code, out = run(capsys, str(tmp_path))
    assert code == 0 and f"Notice: step 2: {result['steps'][1]['notices'][0]}." in out.out.splitlines()
