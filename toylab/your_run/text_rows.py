"""The slow reader of a text log: Python's json and csv, one row at a time, every value checked.

It takes over where pyarrow's readers refuse a file, from the first row they did not deliver, and names the
row and column (and list element) of the first bad value; rows before that are skipped unparsed where the
format allows (JSON Lines) . The same row parsing serves the preview of a file's first rows. Values come out
in canonical Python form: float, list of float, str (ids) or None. Every problem is a one-line ``LogError``;
a value shown in one is quoted and cut to 40 characters (``text.quoted``).
"""

import csv
import io
import json
import math
import zlib

import pyarrow as pa

from toylab.text import quoted
from toylab.your_run.bounds import LogError, buffered

ROWS_PER_BATCH = 20_000
CSV_NULLS = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "N/A",
             "NA", "NULL", "NaN", "n/a", "nan", "null"}   # pyarrow's CSV null markers
SHOWN_ITEMS = 8                    # list elements kept when a list is shown in a message


def slow_batches(file, kinds, skip):
    """(first row, RecordBatch, share of the file read) from row ``skip`` + 1 on, every value checked; LogError
    at the first bad one."""
    columns = {column: [] for column in kinds}
    first = skip
    counted = file.counted()
    with decoding(file), io.TextIOWrapper(buffered(counted), encoding="utf-8-sig", newline="") as text:
        for row, record in records(file, text, skip):
            for column, kind in kinds.items():
                value = record.get(column)
                if kind != "key":
                    value = python_value(value, file.format)
                elif value == "":
                    value = None
                columns[column].append(checked(file, value, row, column, kind))
            if len(columns[next(iter(kinds))]) == ROWS_PER_BATCH:
                yield first, _batch(columns, kinds), counted.share_read()
                first += ROWS_PER_BATCH
                columns = {column: [] for column in kinds}
    if columns[next(iter(kinds))]:
        yield first, _batch(columns, kinds), 1.0


def records(file, text, skip=0):
    """(row, record as a dict) of the rows after the first ``skip``; CSV cells are text."""
    if file.format == "jsonl":
        for row, line in enumerate(json_lines(text), start=1):
            if row > skip:
                yield row, json_record(file, row, line)
        return
    reader = csv_reader(file, text)
    header = csv_header(file, reader)
    for row, cells in enumerate(csv_rows(file, reader), start=1):
        if row > skip:
            yield row, csv_record(file, header, row, cells)


def _batch(columns, kinds):
    types = {"number": pa.float64(), "flag": pa.float64(), "numbers": pa.list_(pa.float64()),
             "flags": pa.list_(pa.float64()), "key": pa.string()}
    return pa.RecordBatch.from_arrays([pa.array(columns[column], type=types[kind]) for column, kind in kinds.items()],
                                      names=list(kinds))


# -- one value ------------------------------------------------------------------------------------------------

def python_value(value, format):
    """A JSON value as is; a CSV cell parsed as pyarrow's reader does: a null marker ('', 'NA', 'nan', …) →
    None, a number, true/false, a JSON list, else the text."""
    if format == "jsonl" or not isinstance(value, str):
        return value
    cell = value.strip()
    if cell in CSV_NULLS:
        return None
    if cell.startswith("["):
        try:
            return loads(cell)
        except ValueError:
            return value
    if cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    try:
        return float(cell)
    except ValueError:
        return value


def checked(file, value, row, column, kind):
    """The value in canonical Python form (float, list of float, str, or None); LogError if of the wrong kind."""
    if value is None:
        return None
    where = f"{file.name}: row {row}, column {quoted(column)}"
    if kind == "key":
        if isinstance(value, str | int) and not isinstance(value, bool):
            return unicode(str(value), f"{where}: the id")
        raise LogError(f"{where}: {shown(value)} is not a sequence id (text or an integer)")
    if kind in ("number", "flag"):
        return number(value, kind == "flag", where)
    if not isinstance(value, list):
        raise LogError(f"{where}: {shown(value)} where a list of numbers is expected")
    return [number(item, kind == "flags", f"{where}, element {index + 1}") for index, item in enumerate(value)]


def unicode(text, what):
    """The text, if it is valid Unicode; else LogError '<what> … is not valid Unicode' (JSON's escapes can write a
    lone surrogate, \\ud800 to \\udfff, which no UTF-8 text holds)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LogError(f"{what} {quoted(text)} is not valid Unicode (it holds a lone surrogate, \\ud800 to "
                       "\\udfff)") from None
    return text


def number(value, boolean_allowed, where):
    if value is None:
        return None
    if isinstance(value, bool) and boolean_allowed:
        return float(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            digits = int(value.bit_length() * math.log10(2)) + 1
            raise LogError(f"{where}: an integer of about {digits:,} digits, too large for a number") from None
    if isinstance(value, float):
        return value
    raise LogError(f"{where}: {shown(value)} is not a number")


def shown(value):
    """A value as a message shows it: text quoted, anything else as JSON, at most 40 characters."""
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, list) and len(value) > SHOWN_ITEMS:
        value = value[:SHOWN_ITEMS]
    try:
        text = json.dumps(value, default=str)
    except ValueError:                                   # an integer of over 4,300 digits
        text = "an integer of over 4,300 digits"
    return text if len(text) <= 40 else text[:37] + "…"


def loads(text):
    """json.loads, with nesting too deep for Python (RecursionError) as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


# -- lines, records and failures -------------------------------------------------------------------------------

class decoding:
    """Turn a decoding or decompression failure inside the block into a LogError."""

    def __init__(self, file):
        self.file = file

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, UnicodeDecodeError):
            raise LogError(f"{self.file.name}: not UTF-8 text") from None
        if isinstance(error, EOFError | OSError | zlib.error):
            raise read_failure(self.file, error) from None
        return False


def first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def read_failure(file, error):
    what = "the gzip data is corrupt or truncated" if file.compressed else "cannot read the file"
    return LogError(f"{file.name}: {what} ({quoted(first_line(error), 80)})")


def json_lines(text):
    """Non-blank lines (blank lines are not rows, as in pyarrow's reader)."""
    for line in text:
        if line.strip():
            yield line


def json_record(file, row, line):
    try:
        record = loads(line)
    except json.JSONDecodeError as error:
        raise LogError(f"{file.name}: row {row} is not valid JSON ({error.msg} at character {error.colno})") \
            from None
    except ValueError as error:                     # too deep, or an integer of over 4,300 digits
        why = "an integer of over 4,300 digits" if "digits" in str(error) else first_line(error)
        raise LogError(f"{file.name}: row {row} cannot be read: {why}") from None
    if not isinstance(record, dict):
        raise LogError(f"{file.name}: row {row} is not a JSON object but {shown(record)}")
    if len(record) > file.bounds.columns:
        raise file.bounds.exceeded(file.name, "columns", f"row {row} ({len(record):,} keys)")
    for key in record:
        unicode(key, f"{file.name}: row {row}: the column name")
    return record


def csv_reader(file, text):
    """csv.reader that takes a cell as long as a line may be (Python's default stops at 131,072 characters)."""
    csv.field_size_limit(max(csv.field_size_limit(), file.bounds.line_bytes))
    return csv.reader(text)


def csv_header(file, reader):
    header = next(csv_rows(file, reader), None)
    if not header or not any(cell.strip() for cell in header):
        raise LogError(f"{file.name}: no header row (a CSV log starts with its column names)")
    if len(header) > file.bounds.columns:
        raise file.bounds.exceeded(file.name, "columns", f"the header ({len(header):,} columns)")
    seen = set()
    for name in header:
        if name in seen:
            raise LogError(f"{file.name}: column {quoted(name)} appears twice in the header")
        seen.add(name)
    return header


def csv_rows(file, reader):
    """The reader's non-empty rows; a CSV syntax error as a LogError naming its line."""
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise LogError(f"{file.name}: line {reader.line_num} is not valid CSV ({first_line(error)})") from None
        if cells:
            yield cells


def csv_record(file, header, row, cells):
    if len(cells) != len(header):
        raise LogError(f"{file.name}: row {row} has {len(cells)} fields but the header has {len(header)} "
                       "(a list in a cell must be quoted: \"[-0.1, -2.3]\")")
    return dict(zip(header, cells, strict=True))
