"""Reading a framework's dump, row by row: NeMo-RL's masks and malformed rows, prime-rl's advantages, ordinary logs
not taken for dumps, pickles and unsafe .pt files never opened (the frameworks' writers in every layout:
test_framework_writers.py)."""

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from framework_dumps import PROMPT, RECORDED, expected, joined, prime_run, toy_batch, write_nemo
from messages import says

from toylab.your_run.dumps import SKYRL_EXPORT, canonical_file, dump_kind
from toylab.your_run.files import LogError
from toylab.your_run.run import RunFile, load_file
from toylab.your_run.statistics import log_statistics


def read(path, allow_torch=False):
    return load_file(RunFile(path.name, None, None, path=str(path)), allow_torch=allow_torch)[0]


def assert_read_as_drawn(log, batch):
    numbers = expected(batch)
    statistics = log_statistics(log)
    assert (statistics.sequences, statistics.tokens) == (numbers["sequences"], numbers["tokens"])
    assert statistics.k1.value == pytest.approx(numbers["k1"], rel=1e-12)
    assert statistics.k1.se == pytest.approx(numbers["k1_se"], rel=1e-10)
    assert np.array_equal(log.sampler_logprobs, np.concatenate(batch.sampler))
    assert np.array_equal(log.trainer_logprobs, np.concatenate(batch.trainer))


def test_nemo_rl_train_data_is_unwrapped_and_masked_as_nemo_does(tmp_path):
    batch = toy_batch(30, seed=1)
    path = write_nemo(tmp_path, 4, batch)
    assert dump_kind(path.name, path.read_bytes()[:4096]) == "nemo"
    log = read(path)
    assert_read_as_drawn(log, batch)
    assert np.array_equal(log.rewards, batch.rewards)
    assert log.columns.roles() == {"sampler": "sampler_logprobs", "trainer": "trainer_logprobs", "mask": "mask",
                                   "reward": "reward"}


def test_nemo_rl_sample_loss_mask_drops_a_sequence(tmp_path):
    batch = toy_batch(5, seed=2)
    path = write_nemo(tmp_path, 1, batch)
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["sample_loss_mask"] = [0.0]
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    log = read(path)
    assert log.sequences == 4 and log.dropped == 1
    assert len(log.notices) == 1 and says(log.notices[0], "1 sequence without a response token", "left out")
    assert np.array_equal(log.sampler_logprobs, np.concatenate(batch.sampler[:2] + batch.sampler[3:]))


def test_nemo_rl_a_row_that_is_not_one_sample_is_named(tmp_path):
    path = write_nemo(tmp_path, 1, toy_batch(4, seed=3))
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["prev_logprobs"] = record["prev_logprobs"] * 2
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match=r"train_data_step1.jsonl: row 2, column 'prev_logprobs': a 2-element list"):
        read(path)


def test_nemo_rl_a_bad_value_is_named_by_row_and_column(tmp_path):
    path = write_nemo(tmp_path, 1, toy_batch(4, seed=3))
    lines = path.read_text().splitlines()
    record = json.loads(lines[3])
    record["generation_logprobs"][0][PROMPT + 1] = "oops"
    lines[3] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match=r"row 4, column 'generation_logprobs': element 1: element 5: \"oops\" is not"):
        read(path)


def test_prime_rl_export_takes_the_advantages_as_the_advantage(tmp_path):
    batch = prime_run(tmp_path, steps=(2,), ranks=(1,))[2, 1]
    path = tmp_path / "token_exports" / "step_2" / "rank_1.jsonl"
    assert dump_kind(path.name, path.read_bytes()[:65536]) == "prime"
    log = read(path)
    assert_read_as_drawn(log, batch)
    assert log.rewards is None
    table = pq.read_table(pa.BufferReader(canonical_file(path.name, "prime", path=str(path)).data))
    assert np.array_equal(table.column("advantage").to_numpy(), joined(batch).advantages)


def test_ordinary_logs_are_not_taken_for_dumps(tmp_path):
    assert dump_kind("run.jsonl", b'{"rollout_log_probs": [-0.1], "old_log_probs": [-0.2]}\n') is None
    assert dump_kind("run.parquet", b"PAR1") is None
    assert dump_kind("notes.jsonl", b"not json\n") is None


class _Trap:
    """Unpickling this writes a file: proof that a pickle was (or was not) opened."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_skyrl_pickle_is_refused_with_an_export_line_and_never_opened(tmp_path):
    path = RECORDED / "skyrl" / "dumped_data" / "global_step_3_training_input.pkl"
    with pytest.raises(LogError, match="never opened") as refusal:
        read(path)
    assert SKYRL_EXPORT in str(refusal.value) and "\n" not in str(refusal.value)
    trap = tmp_path / "dumped_data" / "global_step_4_training_input.pkl"
    trap.parent.mkdir()
    trap.write_bytes(pickle.dumps(_Trap(str(tmp_path / "opened"))))
    with pytest.raises(LogError):
        read(trap, allow_torch=True)
    assert not (tmp_path / "opened").exists()


def test_a_torch_dump_is_refused_where_torch_is_not_allowed(tmp_path):
    path = tmp_path / "train_data" / "3.pt"
    path.parent.mkdir()
    path.write_bytes(b"PK\x03\x04 not read at all")
    with pytest.raises(LogError, match="read only by the command line"):
        read(path)


def test_a_pt_file_that_needs_unpickling_is_refused_by_the_safe_loader(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is optional: the .pt reader is tested where it is installed")
    path = tmp_path / "train_data" / "9.pt"
    path.parent.mkdir()
    torch.save({"samples": [_Trap(str(tmp_path / "opened"))]}, path)
    with pytest.raises(LogError, match=r"weights_only=True\) cannot read it"):
        read(path, allow_torch=True)
    assert not (tmp_path / "opened").exists()


def test_column_options_do_not_apply_to_a_dump(tmp_path):
    path = write_nemo(tmp_path, 2, toy_batch(3, seed=1))
    with pytest.raises(LogError, match="a NeMo-RL dump is read as written: column options"):
        load_file(RunFile(path.name, None, None, path=str(path)), sampler="generation_logprobs")
