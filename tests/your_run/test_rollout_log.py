"""Reading rollout logs: every format and shape gives the same tokens, the slow reader agrees with the fast
one, and every bad input gets a one-line message naming the file, row and column."""

import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rollout_logs import EXAMPLE_FILES, FORMATS, SEQUENCES, TOKENS, log_bytes, write_log
from tiers import fast_then_slow

from examples.make_example_log import generate
from toylab.your_run import files as log_files
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.columns import Columns, choose, detect, looks_like_probabilities
from toylab.your_run.files import LogError, open_log_file, preview
from toylab.your_run.log import load_log, read_log

EXPECTED = {"sampler": [-0.5, -1.0, -2.0, -0.1, -0.3, -0.6, -0.8], "trainer": [-0.7, -0.9, -1.5, -0.2, -0.3, -0.5, -0.9],
            "offsets": [0, 2, 5, 7], "rewards": [1.0, 0.0, 1.0]}


def assert_same_log(log, other):
    for name in ("sampler_logprobs", "trainer_logprobs", "offsets"):
        np.testing.assert_array_equal(getattr(log, name), getattr(other, name), err_msg=name)
    np.testing.assert_array_equal(log.rewards, other.rewards)


def assert_expected(log):
    np.testing.assert_array_equal(log.sampler_logprobs, EXPECTED["sampler"])
    np.testing.assert_array_equal(log.trainer_logprobs, EXPECTED["trainer"])
    np.testing.assert_array_equal(log.offsets, EXPECTED["offsets"])
    np.testing.assert_array_equal(log.rewards, EXPECTED["rewards"])


@pytest.fixture(scope="module")
def generated():
    """The example script's tokens: lengths, sampler and trainer log-probs of the real tokens, rewards."""
    lengths, _, sampler, trainer, rewards = generate()
    real = np.arange(sampler.shape[1]) < lengths[:, None]
    return lengths, sampler[real], trainer[real], rewards


# -- every shape and format ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda path: path.name)
def test_every_example_file_holds_the_generated_tokens(path, generated):
    lengths, sampler, trainer, rewards = generated
    log = load_log(str(path))
    assert log.columns.shape == ("sequence" if "per_sequence" in path.name else "token")
    assert log.sequences == 240 and log.dropped == 0
    np.testing.assert_array_equal(log.lengths, lengths)
    np.testing.assert_array_equal(log.sampler_logprobs, sampler)
    np.testing.assert_array_equal(log.trainer_logprobs, trainer)
    np.testing.assert_array_equal(log.rewards, rewards)


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("records", [SEQUENCES, TOKENS], ids=["per sequence", "per token"])
def test_both_shapes_in_every_format_give_the_response_tokens(tmp_path, records, format):
    log = load_log(str(write_log(tmp_path, "log", records, format)))
    assert_expected(log)
    assert log.columns.shape == ("sequence" if records is SEQUENCES else "token")
    np.testing.assert_array_equal(log.rows, [1, 2, 3] if records is SEQUENCES else [1, 4, 8])
    np.testing.assert_array_equal(log.positions, [0, 1, 0, 1, 2, 0, 1])


def test_an_upload_in_memory_reads_like_the_file(tmp_path):
    path = write_log(tmp_path, "log", SEQUENCES, "jsonl.gz")
    assert_same_log(load_log("upload.jsonl.gz", data=path.read_bytes()), load_log(str(path)))


def test_gzip_is_recognised_by_its_magic_bytes_not_the_name(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(gzip.compress(log_bytes(TOKENS, "csv")))
    assert_expected(load_log(str(path)))


def test_row_per_token_order_comes_from_the_position_column(tmp_path):
    shuffled = [TOKENS[i] for i in (2, 0, 1, 5, 3, 8, 4, 6, 7)]      # sequences first appear in order
    assert_expected(load_log(str(write_log(tmp_path, "log", shuffled, "csv"))))
    without_position = [{key: value for key, value in row.items() if key != "position"} for row in TOKENS]
    assert_expected(load_log(str(write_log(tmp_path, "ordered", without_position, "jsonl"))))


def test_ragged_lists_without_a_mask(tmp_path):
    records = [{"sampler_logprobs": [-0.1, -0.2, -0.3], "trainer_logprobs": [-0.2, -0.2, -0.1]},
               {"sampler_logprobs": [-1.0], "trainer_logprobs": [-0.5]},
               {"sampler_logprobs": [], "trainer_logprobs": []}]
    for format in FORMATS:
        log = load_log(str(write_log(tmp_path, "ragged", records, format)))
        np.testing.assert_array_equal(log.lengths, [3, 1])
        assert log.dropped == 1 and log.rewards is None
        np.testing.assert_allclose(log.log_ratio, [-0.1, 0.0, 0.2, 0.5])


def test_masked_tokens_may_hold_anything_numeric(tmp_path):
    records = [{"rollout_log_probs": [-0.5, float("nan"), 3.0], "old_log_probs": [-0.4, 0.0, float("inf")],
                "loss_mask": [1, 0, 0]}, {"rollout_log_probs": [-0.5], "old_log_probs": [-0.5], "loss_mask": [0]}]
    log = load_log(str(write_log(tmp_path, "padded", records, "jsonl")))
    assert log.tokens == 1 and log.sequences == 1 and log.dropped == 1 and log.columns.mask == "loss_mask"


def test_a_mask_of_true_and_false(tmp_path):
    records = [{**row, "response_mask": [bool(m) for m in row["response_mask"]]} for row in SEQUENCES]
    for format in ("parquet", "jsonl", "csv"):
        assert_expected(load_log(str(write_log(tmp_path, "bool", records, format))))


def test_the_slow_reader_agrees_with_the_fast_one(tmp_path, monkeypatch):
    """Force the Python reader from the first row: the same log as pyarrow's, for every text example."""
    def refuse(*arguments):
        raise pa.ArrowInvalid("forced")
        yield

    for path in EXAMPLE_FILES:
        if path.suffix == ".parquet":
            continue
        fast = load_log(str(path))
        with monkeypatch.context() as patch:
            patch.setattr(log_files, "_fast_batches", refuse)
            assert_same_log(load_log(str(path)), fast)


def test_the_slow_reader_resumes_where_the_fast_one_stopped(tmp_path, monkeypatch):
    """Integer ids, then a text id far down the file: pyarrow stops there, Python reads on from that row."""
    rows = [{"seq_id": i // 10, "sampler_logprobs": -0.01 * (i % 7), "trainer_logprobs": -0.02 * (i % 5)}
            for i in range(3000)]
    rows[2500]["seq_id"] = "250"
    skipped = []
    slow = log_files.slow_batches
    monkeypatch.setattr(log_files, "slow_batches", lambda file, kinds, skip: (skipped.append(skip), slow(file, kinds, skip))[1])
    monkeypatch.setattr(log_files, "CHUNK_BYTES", 4096)
    log = load_log(str(write_log(tmp_path, "mixed", rows, "jsonl")))
    assert skipped and 0 < skipped[0] <= 2500
    assert log.sequences == 300 and log.tokens == 3000
    np.testing.assert_array_equal(log.sampler_logprobs, [row["sampler_logprobs"] for row in rows])


def test_padded_batches_hold_the_tokens_within_the_cell_budget():
    log = load_log(str(EXAMPLE_FILES[0]))
    batches = list(log.batches(max_cells=1000))
    assert sum(len(batch.mask) for batch in batches) == log.sequences
    for batch in batches:
        assert batch.mask.size <= 1000 or len(batch.mask) == 1
        lengths = log.lengths[batch.start:batch.start + len(batch.mask)]
        np.testing.assert_array_equal(batch.mask.sum(axis=1), lengths)
        assert (batch.sampler_logprobs[~batch.mask] == 0).all() and (batch.trainer_logprobs[~batch.mask] == 0).all()
        np.testing.assert_array_equal(batch.rewards, log.rewards[batch.start:batch.start + len(batch.mask)])
    np.testing.assert_array_equal(np.concatenate([b.sampler_logprobs[b.mask] for b in batches]), log.sampler_logprobs)
    whole = log.padded()
    np.testing.assert_array_equal(whole.trainer_logprobs[whole.mask], log.trainer_logprobs)


# -- which column is which ----------------------------------------------------------------------------------

def test_columns_are_recognised_by_name_and_can_be_chosen(tmp_path):
    file = open_log_file(str(write_log(tmp_path, "log", SEQUENCES, "parquet")))
    first = preview(file)
    assert choose(first, file.name) == Columns("rollout_log_probs", "old_log_probs", "sequence",
                                               mask="response_mask", reward="reward")
    swapped = choose(first, file.name, sampler="old_log_probs", trainer="rollout_log_probs", mask=None)
    assert (swapped.sampler, swapped.trainer, swapped.mask) == ("old_log_probs", "rollout_log_probs", "response_mask")
    assert not detect(first).unsure


def test_probability_columns_are_flagged_not_picked(tmp_path):
    records = [{"rollout_log_probs": [0.5, 0.9], "old_log_probs": [-0.6, -0.1], "p": [-0.7, -0.2]}]
    first = preview(open_log_file(str(write_log(tmp_path, "log", records, "jsonl"))))
    detection = detect(first)
    assert detection.probability_like == ("rollout_log_probs",) and detection.guess["sampler"] is None
    assert detection.unsure and "looks like probabilities" in detection.doubts[0]
    assert looks_like_probabilities([0.0, 0.3, 1.0]) and not looks_like_probabilities([0.0, -0.3])
    assert not looks_like_probabilities([0.0, 0.0]) and not looks_like_probabilities([0.5, 1.5])


def test_probabilities_found_while_reading_are_refused(tmp_path):
    """Log-probs in the first rows, probabilities further down (or a probability column chosen by hand)."""
    rows = [{"sequence_id": i // 4, "sampler_logprobs": -0.5, "trainer_logprobs": -0.25} for i in range(400)]
    for row in rows[200:]:
        row["trainer_logprobs"] = 0.25
    with pytest.raises(LogError, match="row 201, column 'trainer_logprobs': 0.25 is positive"):
        load_log(str(write_log(tmp_path, "log", rows, "csv")))
    probabilities = [{**row, "p": 0.5} for row in rows[:200]]
    with pytest.raises(LogError, match="column 'p' looks like probabilities, not log-probabilities: every value so "
                                       "far is in \\[0, 1\\] \\(row 1, column 'p': 0.5\\)"):
        load_log(str(write_log(tmp_path, "log", probabilities, "parquet")), sampler="p")


def test_two_candidates_for_a_role_are_a_doubt(tmp_path):
    records = [{"rollout_log_probs": [-0.5], "sampler_logprobs": [-0.4], "old_log_probs": [-0.6]}]
    detection = detect(preview(open_log_file(str(write_log(tmp_path, "log", records, "jsonl")))))
    assert detection.guess["sampler"] == "rollout_log_probs" and "could each be" in detection.doubts[0]


# -- bad input: one line naming the file, row and column ----------------------------------------------------

def _sequences(row, **change):
    records = [dict(record) for record in SEQUENCES]
    records[row - 1].update(change)
    return records


def _tokens(row, **change):
    records = [dict(record) for record in TOKENS]
    records[row - 1].update(change)
    return records


BAD = [  # (case, records, formats, the message after "log.<format>: ")
    ("text in a number column", _tokens(2, sampler_logprobs="abc"), ("jsonl", "csv", "csv.gz"),
     "row 2, column 'sampler_logprobs': 'abc' is not a number"),
    ("text in a list", _sequences(2, old_log_probs=[-1.5, "x", -0.3]), ("jsonl", "csv"),
     "row 2, column 'old_log_probs', element 2: 'x' is not a number"),
    ("NaN log-prob", _sequences(3, rollout_log_probs=[-0.4, float("nan"), -0.8]), ("parquet", "jsonl", "csv"),
     "row 3, column 'rollout_log_probs', element 2: NaN or missing"),
    ("missing log-prob", _tokens(5, trainer_logprobs=None), ("parquet", "jsonl", "csv"),
     "row 5, column 'trainer_logprobs': NaN or missing"),
    ("infinite log-prob", _tokens(4, sampler_logprobs=float("-inf")), ("parquet", "jsonl", "csv"),
     "row 4, column 'sampler_logprobs': -inf (a response token needs a finite log-probability)"),
    ("positive log-prob", _sequences(2, old_log_probs=[-1.5, 0.25, -0.3]), FORMATS,
     "row 2, column 'old_log_probs', element 2: 0.25 is positive"),
    ("probabilities", [{**row, "sampler_logprobs": 0.3 + 0.05 * i} for i, row in enumerate(TOKENS)], ("parquet", "csv"),
     "column 'sampler_logprobs' looks like probabilities, not log-probabilities"),
    ("unequal lists", _sequences(3, old_log_probs=[-0.4, -0.5]), FORMATS,
     "row 3: 'rollout_log_probs' has 3 values but 'old_log_probs' has 2"),
    ("mask of the wrong length", _sequences(2, response_mask=[1, 1]), ("parquet", "jsonl", "csv"),
     "row 2, column 'response_mask': 2 values for 3 tokens"),
    ("mask value not 0 or 1", _sequences(1, response_mask=[1, 2, 0]), ("parquet", "jsonl"),
     "row 1, column 'response_mask', element 2: 2 (a mask value is 0 or 1)"),
    ("missing list", _sequences(2, rollout_log_probs=None), ("parquet", "jsonl", "csv"),
     "row 2, column 'rollout_log_probs': missing"),
    ("NaN reward", _sequences(2, reward=float("nan")), ("parquet", "jsonl", "csv"),
     "row 2, column 'reward': missing or NaN (a reward must be a finite number within ±1e+100)"),
    ("missing sequence id", _tokens(6, sequence_id=None), ("parquet", "jsonl", "csv"),
     "row 6, column 'sequence_id': missing sequence id"),
    ("repeated position", _tokens(3, position=1, mask=1), ("parquet", "jsonl", "csv"),
     "rows 2 and 3: sequence 'a' has position 1 twice"),
    ("reward changes", _tokens(2, reward=0.0), ("parquet", "jsonl", "csv"),
     "rows 1 and 2, column 'reward': sequence 'a' has two rewards (0 and 1)"),
    ("every token masked", [{**row, "mask": 0} for row in TOKENS], ("parquet", "csv"),
     "no response tokens: every sequence is empty or masked out"),
    ("every list empty", [{"sampler_logprobs": [], "trainer_logprobs": []}] * 2, ("parquet", "jsonl"),
     "no response tokens: every sequence is empty or masked out"),
    ("no sequence id", [{key: row[key] for key in ("sampler_logprobs", "trainer_logprobs")} for row in TOKENS],
     ("parquet", "csv"), "a row is a token and a column saying which sequence it belongs to is needed"),
    ("lists and numbers", [{"rollout_log_probs": [-0.1], "old_log_probs": -0.2}], ("jsonl",),
     "'rollout_log_probs' holds lists of numbers but 'old_log_probs' holds numbers"),
    ("no log-prob column", [{"a": -0.1, "b": -0.2}], ("csv",),
     "which column holds the sampler's log-probabilities (log μ)? None is named"),
]


@pytest.mark.parametrize("case, records, formats, message", BAD, ids=[case[0] for case in BAD])
def test_bad_values_name_the_file_row_and_column(tmp_path, case, records, formats, message):
    for format in formats:
        path = write_log(tmp_path, "log", records, format)
        with pytest.raises(LogError) as error:
            load_log(str(path))
        assert str(error.value).startswith(f"{path}: ") and message in str(error.value), (format, str(error.value))
        assert "\n" not in str(error.value)


@pytest.mark.parametrize("name, content, message", [
    ("empty.jsonl", b"", "the file is empty"),
    ("blank.jsonl", b"\n \n", "the file holds no rows"),
    ("header.csv", b"sampler_logprobs,trainer_logprobs\n", "the file holds no rows"),
    ("log.parquet", log_bytes(TOKENS, "csv"), "not a Parquet file: it does not start with PAR1 (it looks like text)"),
    ("log.csv", log_bytes(TOKENS, "parquet"), "not CSV text: the content is a Parquet file"),
    ("log.jsonl", log_bytes(TOKENS, "csv"), "not JSON Lines: row 1 does not start with '{'"),
    ("log.jsonl", b'[{"a": 1}]\n', "a JSON array; write one JSON object per line"),
    ("log.csv.gz", log_bytes(TOKENS, "csv"), "named .gz but not gzip-compressed (it looks like text)"),
    ("log.parquet.gz", gzip.compress(log_bytes(TOKENS, "parquet"), mtime=0), "a gzip-compressed Parquet file"),
    ("log.csv", b"\x00\x01\x02binary", "not CSV text: the content is binary data"),
    ("log.csv", "é,x\n".encode("latin-1"), "not UTF-8 text"),
    ("log.csv.gz", gzip.compress(log_bytes(TOKENS, "csv") * 50, mtime=0)[:-30], "the gzip data is corrupt or truncated"),
    ("log.txt", b"a,b\n", "unknown extension"),
    ("log.jsonl", b'{"sampler_logprobs": -0.1}\n{"sampler_logprobs": -0.1,,}\n', "row 2 is not valid JSON"),
    ("log.jsonl", b'{"sampler_logprobs": -0.1}\n[1]\n', "row 2 is not a JSON object"),
    ("log.csv", b"sampler_logprobs,trainer_logprobs\n-0.1,-0.2\n-0.1,-0.2,-0.3\n", "row 2 has 3 fields but the header has 2"),
    ("log.csv", b"a,a\n-0.1,-0.2\n", "column 'a' appears twice in the header"),
])
def test_bad_files_name_the_problem(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(LogError) as error:
        load_log(str(path))
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value), str(error.value)
    assert "\n" not in str(error.value)


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path):
    path = write_log(tmp_path, "log", TOKENS, "jsonl")
    size = path.stat().st_size
    with pytest.raises(LogError, match=rf"log.jsonl: the file \({size:,} bytes\) is over the limit of 100 bytes per file"):
        load_log(str(path), bounds=CLI_BOUNDS.but(file_bytes=100))
    with pytest.raises(LogError, match=f"is over the limit of {size - 1:,} bytes per file"):
        load_log("upload.jsonl", data=path.read_bytes(), bounds=CLI_BOUNDS.but(file_bytes=size - 1))
    assert load_log(str(path), bounds=CLI_BOUNDS.but(file_bytes=size)).tokens == 7


def test_a_column_that_does_not_exist_or_does_not_fit(tmp_path):
    path = write_log(tmp_path, "log", SEQUENCES, "jsonl")
    with pytest.raises(LogError, match="no column 'zzz' for the sampler's log-probabilities"):
        load_log(str(path), sampler="zzz")
    with pytest.raises(LogError, match="row 1, column 'uid': 'a' is not a log-probability \\(the column holds text"):
        load_log(str(path), trainer="uid")
    with pytest.raises(LogError, match="cannot hold both"):
        load_log(str(path), trainer="rollout_log_probs")
    with pytest.raises(LogError, match="row 1, column 'reward' \\(the response mask\\): 1.0; in a log with a row per "
                                       "sequence it should hold lists of numbers"):
        load_log(str(path), mask="reward")


def test_bad_values_beyond_the_first_chunk_keep_their_row_numbers(tmp_path, monkeypatch):
    rows = [{"sequence_id": i // 4, "sampler_logprobs": -0.5, "trainer_logprobs": -0.25} for i in range(4000)]
    rows[3210]["trainer_logprobs"] = 0.5
    monkeypatch.setattr(log_files, "TOKENS_PER_BATCH", 256)
    monkeypatch.setattr(log_files, "CHUNK_BYTES", 4096)
    for format in ("csv", "jsonl", "parquet"):
        path = write_log(tmp_path, "long", rows, format)
        if format == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=500)
        with pytest.raises(LogError, match="row 3211, column 'trainer_logprobs': 0.5 is positive"):
            load_log(str(path))
    rows[3210]["trainer_logprobs"] = "oops"
    with pytest.raises(LogError, match="row 3211, column 'trainer_logprobs': 'oops' is not a number"):
        load_log(str(write_log(tmp_path, "long", rows, "csv")))


def test_read_log_uses_the_columns_it_is_given(tmp_path):
    file = open_log_file(str(write_log(tmp_path, "log", SEQUENCES, "parquet")))
    first = preview(file)
    log = read_log(file, first, choose(first, file.name, mask=None))
    assert log.tokens == 7 and log.columns.mask == "response_mask"


@pytest.mark.parametrize("format, key", fast_then_slow([(format, key) for key in ("text", "number")
                                                        for format in ("csv", "jsonl", "parquet")],
                                                       [("csv", "text"), ("parquet", "number")]),
                         ids=[f"{key}-{format}" for key in ("text", "number") for format in ("csv", "jsonl", "parquet")])
def test_sequence_ids_met_across_many_batches_group_like_one_batch(tmp_path, monkeypatch, format, key):
    """Ids are numbered batch by batch (new ones on): a sequence whose rows are spread over batches, in order or not,
    gathers all its tokens; an ordered file and a shuffled one give the same log, both equal to a per-id sum."""
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 300, 3000)
    rows = [{"sequence_id": f"s{i}" if key == "text" else int(i), "position": position,
             "sampler_logprobs": -float(rng.uniform(0.1, 2)), "trainer_logprobs": -float(rng.uniform(0.1, 2)),
             "reward": float(i % 2)} for position, i in enumerate(ids)]
    monkeypatch.setattr(log_files, "TOKENS_PER_BATCH", 256)
    monkeypatch.setattr(log_files, "CHUNK_BYTES", 4096)
    shuffled = load_log(str(write_log(tmp_path, "shuffled", rows, format)))
    ordered_rows = sorted(rows, key=lambda row: (list(dict.fromkeys(ids)).index(int(str(row["sequence_id"])
                                                                                     .lstrip("s"))), row["position"]))
    ordered = load_log(str(write_log(tmp_path, "ordered", ordered_rows, format)))
    assert_same_log(shuffled, ordered)
    first_seen = list(dict.fromkeys(ids))
    np.testing.assert_array_equal(ordered.lengths, [np.sum(ids == i) for i in first_seen])
    np.testing.assert_allclose(ordered.sequence_sums(ordered.log_ratio),
                               [sum(row["trainer_logprobs"] - row["sampler_logprobs"] for row in rows
                                    if str(row["sequence_id"]).lstrip("s") == str(i)) for i in first_seen])
    np.testing.assert_array_equal(ordered.rewards, [i % 2 for i in first_seen])
