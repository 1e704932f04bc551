"""Property-based tests (hypothesis, derandomized: the same examples on every run) of the third door user input
comes through, a rollout log: any generated file — random shapes, column names, value types and sizes up to the
bounds — any random bytes, and any gzip of random bytes, under any extension, gives either a finished report whose
every number is finite (an undefined one is None, with a note) or one LogError line naming the file. Nothing else:
no other exception, no RuntimeWarning (pytest turns one into a failure), no "nan" in the text.

The bounds are small here (``SMALL``), so that "up to the bounds" and "just over them" are both reached quickly.
"""

import csv
import gzip
import io
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toylab.cli import inspect
from toylab.your_run.bounds import CLI_BOUNDS, LogError
from toylab.your_run.log import load_log

SMALL = CLI_BOUNDS.but(text_bytes=100_000, line_bytes=4_000, columns=12, tokens=1_000, sequences=100,
                       tokens_per_sequence=80)
PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=120,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FORMATS = ("parquet", "jsonl", "csv", "jsonl.gz", "csv.gz")
EXTENSIONS = ("parquet", "jsonl", "json", "ndjson", "csv", "jsonl.gz", "csv.gz", "parquet.gz", "txt")

log_probs = st.one_of(st.floats(-30, 0), st.integers(-3, 0), st.sampled_from([0.0, -0.0, -1e-300, -5e-324]))
odd_values = st.one_of(st.none(), st.booleans(), st.text(max_size=12), st.integers(-2**70, 2**70),
                       st.floats(allow_nan=True, allow_infinity=True), st.lists(st.floats(), max_size=3),
                       st.sampled_from([-349.0, -351.0, -1e308, -9999.0, 1e308, 2.0]))
extras = {"text": st.text(max_size=30), "integer": st.integers(-2**63, 2**63 - 1), "number": st.floats(-1e6, 1e6),
          "flag": st.booleans(), "nothing": st.none(), "list": st.lists(st.integers(0, 9), max_size=4)}
names = st.one_of(st.sampled_from(["extra", "text", "step", "rank", "prompt"]), st.text(min_size=1, max_size=20))


@st.composite
def logs(draw):
    """(records, format): a row-per-sequence or row-per-token log with extra columns; one in ten has a value broken."""
    per_sequence = draw(st.booleans())
    count = draw(st.integers(1, 70))
    masked, rewarded = draw(st.booleans()), draw(st.booleans())
    columns = {name: extras[draw(st.sampled_from(sorted(extras)))]
               for name in draw(st.lists(names, max_size=3, unique=True))}
    broken = draw(st.integers(0, 9)) == 0
    records = []
    for index in range(count):
        if per_sequence:
            length = draw(st.integers(0, 12))
            record = {"rollout_log_probs": draw(st.lists(log_probs, min_size=length, max_size=length)),
                      "old_log_probs": draw(st.lists(log_probs, min_size=length, max_size=length))}
            if masked:
                record["response_mask"] = draw(st.lists(st.sampled_from([0, 1, 1, 1]), min_size=length,
                                                        max_size=length))
        else:
            record = {"sequence_id": index // 3, "sampler_logprobs": draw(log_probs),
                      "trainer_logprobs": draw(log_probs)}
        if rewarded:
            record["reward"] = draw(st.one_of(st.floats(-10, 10), st.sampled_from([0.0, 1.0, 1e99, -1e300])))
        for column, values in columns.items():
            record.setdefault(column, draw(values))
        records.append(record)
    if broken:
        records[draw(st.integers(0, count - 1))][draw(st.sampled_from(sorted(records[0])))] = draw(odd_values)
    return records, draw(st.sampled_from(FORMATS))


def file_bytes(records, format):
    if format.endswith(".gz"):
        return gzip.compress(file_bytes(records, format[:-3]), mtime=0)
    if format == "jsonl":
        return "".join(json.dumps(record) + "\n" for record in records).encode()
    if format == "csv":
        names = list(dict.fromkeys(name for record in records for name in record))
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(names)
        for record in records:
            cells = [record.get(name) for name in names]
            writer.writerow(["" if cell is None else json.dumps(cell) if isinstance(cell, list) else cell
                             for cell in cells])
        return text.getvalue().encode()
    sink = io.BytesIO()
    try:
        pq.write_table(pa.Table.from_pylist(records), sink)
    except (pa.ArrowException, OverflowError, ValueError):
        return b"PAR1 not really"
    return sink.getvalue()


def outcome(tmp_path, name, content):
    """'refused' (after checking the one line) or 'read' (after checking every number of the report)."""
    path = tmp_path / name
    path.write_bytes(content)
    try:
        load_log(str(path), bounds=SMALL)
    except LogError as error:
        message = str(error)
        assert "\n" not in message and message.startswith(f"{path}: ") and len(message) < 700, message
        return "refused"
    _, arguments = inspect.parse_arguments([str(path)])
    result = inspect.report(arguments)
    assert_finite_or_none(result)
    text = inspect.as_text(result).lower()
    assert " nan" not in text and " inf" not in text, text
    return "read"


def assert_finite_or_none(value):
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for item in value.values():
            assert_finite_or_none(item)
    elif isinstance(value, list | tuple):
        for item in value:
            assert_finite_or_none(item)


@pytest.mark.slow
@PROPERTY
@given(log=logs())
def test_any_generated_log_is_read_to_finite_numbers_or_refused_in_one_line(tmp_path_factory, log):
    records, format = log
    outcome(tmp_path_factory.mktemp("log"), f"log.{format}", file_bytes(records, format))


@PROPERTY
@given(content=st.binary(max_size=3_000), extension=st.sampled_from(EXTENSIONS))
def test_any_bytes_are_refused_in_one_line(tmp_path_factory, content, extension):
    assert outcome(tmp_path_factory.mktemp("bytes"), f"random.{extension}", content) == "refused"


@PROPERTY
@given(content=st.binary(min_size=1, max_size=3_000), extension=st.sampled_from(EXTENSIONS),
       cut=st.integers(0, 40))
def test_any_gzip_of_random_bytes_is_refused_in_one_line(tmp_path_factory, content, extension, cut):
    packed = gzip.compress(content, mtime=0)
    outcome(tmp_path_factory.mktemp("gzip"), f"random.{extension}", packed[:len(packed) - cut])


@pytest.mark.slow
@PROPERTY
@given(rows=st.integers(1, 2_000), per_sequence=st.integers(1, 120), format=st.sampled_from(FORMATS))
def test_logs_around_the_bounds_are_read_within_them_and_refused_beyond(tmp_path_factory, rows, per_sequence, format):
    """A clean row-per-token log: read exactly when its rows, sequences and sequence lengths are within SMALL."""
    records = [{"sequence_id": i // per_sequence, "sampler_logprobs": -0.5, "trainer_logprobs": -0.25 - (i % 3) / 10}
               for i in range(rows)]
    sequences = -(-rows // per_sequence)
    within = rows <= SMALL.tokens and sequences <= SMALL.sequences and min(rows, per_sequence) <= \
        SMALL.tokens_per_sequence
    result = outcome(tmp_path_factory.mktemp("edge"), f"edge.{format}", file_bytes(records, format))
    assert result == ("read" if within else "refused")
