"""A rollout log's file: what format it really is, a preview of its first rows, and its columns in chunks.

Formats: Parquet, JSON Lines and CSV, the text ones optionally gzip-compressed. The format comes from the
extension and must agree with the content: gzip is recognised by its magic bytes (1f 8b), Parquet by
"PAR1"; a file whose content contradicts its name is refused with a message saying what it looks like.

Columns are read in chunks of rows (``read_batches``), each a pyarrow RecordBatch in a canonical form:
a number column is float64, a list column list<float64> (true/false read as 1/0 where allowed), an id
column text. The fast path is pyarrow's own reader; when it rejects the file, a slow Python reader takes
over from the first row not yet delivered and names the row and column of the first bad value (or reads
on, if pyarrow was merely stricter than needed). Rows count records from 1; a CSV header is not a row.
Every problem is a ``LogError``: one line naming the file, and where possible the row and column.
"""

import codecs
import csv
import gzip
import io
import json
import math
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

EXTENSIONS = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
FORMAT_NAMES = {"parquet": "Parquet", "jsonl": "JSON Lines", "csv": "CSV"}
GZIP_MAGIC, PARQUET_MAGIC, ZIP_MAGIC = b"\x1f\x8b", b"PAR1", b"PK\x03\x04"
PAGE_SIZE_LIMIT_MB = 50           # an upload on the page
CLI_SIZE_LIMIT_MB = 200           # a file given to ``python -m toylab inspect``
PREVIEW_ROWS = 100
BLOCK_BYTES = 4 << 20              # pyarrow's text readers parse this much at a time
TOKENS_PER_BATCH = 1 << 20         # Parquet: about this many list values per batch
SLOW_ROWS_PER_BATCH = 20_000
CSV_NULLS = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "N/A",
             "NA", "NULL", "NaN", "n/a", "nan", "null"}   # pyarrow's CSV null markers
KINDS = ("number", "numbers", "flag", "flags", "key")   # flag(s): numbers where true/false also count


class LogError(ValueError):
    """A bad rollout log: the message is one line naming the file and, where it can, the row and column."""


@dataclass(frozen=True)
class LogFile:
    """A log file, on disk (``path``) or in memory (``data``, e.g. an upload), with its checked format."""
    name: str
    format: str                  # "parquet" | "jsonl" | "csv"
    compressed: bool             # gzip
    path: str | None = None
    data: bytes | None = None

    def raw(self):
        """The file's bytes as a binary stream, decompressed."""
        stream = open(self.path, "rb") if self.data is None else io.BytesIO(self.data)
        return gzip.GzipFile(fileobj=stream) if self.compressed else stream

    def arrow_stream(self):
        """The same as a pyarrow input stream (native decompression)."""
        stream = pa.input_stream(self.path, compression=None) if self.data is None else pa.BufferReader(self.data)
        return pa.CompressedInputStream(stream, "gzip") if self.compressed else stream

    def text(self):
        return io.TextIOWrapper(self.raw(), encoding="utf-8", newline="")


def open_log_file(name, data=None, path=None, max_bytes=None):
    """The LogFile for an upload (``name``, ``data``) or a file on disk (``path``, default ``name``); LogError
    if it is empty, over ``max_bytes``, of an unknown extension, or not what its extension says."""
    if data is None and path is None:
        path = name
    size = len(data) if data is not None else _size(name, path)
    if max_bytes is not None and size > max_bytes:
        raise LogError(f"{name}: {size / 2**20:,.1f} MB, over the size limit of {max_bytes / 2**20:,.0f} MB")
    if size == 0:
        raise LogError(f"{name}: the file is empty")
    stem, extension = os.path.splitext(name.lower())
    named_gzip = extension == ".gz"
    if named_gzip:
        extension = os.path.splitext(stem)[1]
    if extension not in EXTENSIONS:
        accepted = ", ".join(EXTENSIONS)
        raise LogError(f"{name}: unknown extension; a rollout log is {accepted} (or a text one .gz-compressed)")
    head = (data[:8] if data is not None else _head(path))
    file = LogFile(name, EXTENSIONS[extension], head.startswith(GZIP_MAGIC), path, data)
    if named_gzip and not file.compressed:
        raise LogError(f"{name}: named .gz but not gzip-compressed (it looks like {_looks_like(head)})")
    if file.format == "parquet":
        if file.compressed:
            raise LogError(f"{name}: a gzip-compressed Parquet file; Parquet compresses internally, "
                           "decompress it first")
        if not head.startswith(PARQUET_MAGIC):
            raise LogError(f"{name}: not a Parquet file: it does not start with PAR1 "
                           f"(it looks like {_looks_like(head)})")
        return file
    _check_text(file)
    return file


def _size(name, path):
    try:
        return os.path.getsize(path)
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None


def _head(path, size=8):
    with open(path, "rb") as stream:
        return stream.read(size)


def _looks_like(head):
    if head.startswith(PARQUET_MAGIC):
        return "a Parquet file"
    if head.startswith(GZIP_MAGIC):
        return "gzip-compressed data"
    if head.startswith(ZIP_MAGIC):
        return "a zip archive"
    if b"\x00" in head:
        return "binary data"
    return "text"


def _check_text(file):
    """A JSON Lines or CSV file (after decompression) must start as UTF-8 text of that kind."""
    try:
        with file.raw() as stream:
            head = stream.read(4096)
    except (OSError, EOFError) as error:
        raise _read_failure(file, error) from None
    kind = FORMAT_NAMES[file.format]
    if not head.strip():
        raise LogError(f"{file.name}: the file holds no rows")
    if head.startswith((PARQUET_MAGIC, ZIP_MAGIC, GZIP_MAGIC)) or b"\x00" in head:
        raise LogError(f"{file.name}: not {kind} text: the content is {_looks_like(head)}")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError as error:
        raise LogError(f"{file.name}: not UTF-8 text (byte {error.start} of the content)") from None
    first = head.lstrip()[:1]
    if file.format == "jsonl" and first != b"{":
        why = "a JSON array; write one JSON object per line" if first == b"[" else \
            f"row 1 does not start with '{{' but with {first.decode(errors='replace')!r}"
        raise LogError(f"{file.name}: not JSON Lines: {why}")


# -- the preview: column names and what kind of values each holds ------------------------------------------

@dataclass(frozen=True)
class Preview:
    """The first rows of a log: its column names in order, the kind of each column's first non-empty value
    ("number", "bool", "list", "bools", "text", or "empty") with that value's row and a short text of it,
    and the finite numbers seen in each column."""
    columns: tuple
    kinds: dict
    numbers: dict
    first: dict              # column → (row, shown value) of its first non-empty value

    def values(self, column):
        return self.numbers.get(column, np.empty(0))


def preview(file, rows=PREVIEW_ROWS):
    """The Preview of the file's first ``rows`` rows; LogError if it has none or they cannot be parsed."""
    if file.format == "parquet":
        return _parquet_preview(file, rows)
    records = _first_records(file, rows)
    if not records:
        raise LogError(f"{file.name}: the file holds no rows")
    columns = list(dict.fromkeys(name for record in records for name in record))
    kinds, numbers, first = {}, {}, {}
    for column in columns:
        values = [_python_value(record.get(column), file.format) for record in records]
        present = [(row, value) for row, value in enumerate(values, start=1) if value is not None]
        kinds[column] = _python_kind(present[0][1]) if present else "empty"
        numbers[column] = _finite_numbers([value for _, value in present])
        first[column] = (present[0][0], _shown(present[0][1])) if present else (1, "nothing")
    return Preview(tuple(columns), kinds, numbers, first)


def _first_records(file, rows):
    """The first ``rows`` records as dicts (CSV cells as text), parse errors as LogError."""
    records = []
    with _decoding(file), file.text() as text:
        if file.format == "jsonl":
            for row, line in enumerate(_json_lines(text), start=1):
                records.append(_json_record(file, row, line))
                if len(records) == rows:
                    break
        else:
            reader = csv.reader(text)
            header = _csv_header(file, reader)
            for row, cells in enumerate(_csv_rows(reader), start=1):
                records.append(_csv_record(file, header, row, cells))
                if len(records) == rows:
                    break
    return records


def _parquet_preview(file, rows):
    parquet = _parquet(file)
    if parquet.metadata.num_rows == 0:
        raise LogError(f"{file.name}: the file holds no rows")
    batch = next(parquet.iter_batches(batch_size=rows))
    kinds, numbers, first = {}, {}, {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        kinds[name] = _arrow_kind(column.type)
        values = column.to_pylist()
        numbers[name] = _finite_numbers(values) if kinds[name] in ("number", "list") else np.empty(0)
        row = _first_valid(column)
        first[name] = (row + 1, _shown(values[row]) if values[row] is not None else "nothing")
    return Preview(tuple(batch.schema.names), kinds, numbers, first)


def _arrow_kind(type):
    if pa.types.is_list(type) or pa.types.is_large_list(type) or pa.types.is_fixed_size_list(type):
        inner = _arrow_kind(type.value_type)
        return {"number": "list", "bool": "bools", "empty": "list"}.get(inner, "text")
    if pa.types.is_boolean(type):
        return "bool"
    if pa.types.is_integer(type) or pa.types.is_floating(type) or pa.types.is_decimal(type):
        return "number"
    if pa.types.is_null(type):
        return "empty"
    return "text"


def _python_value(value, format):
    """A JSON value as is; a CSV cell parsed as pyarrow's reader does: a null marker ('', 'NA', 'nan', …) →
    None, a number, true/false, a JSON list, else the text."""
    if format == "jsonl" or not isinstance(value, str):
        return value
    cell = value.strip()
    if cell in CSV_NULLS:
        return None
    if cell.startswith("["):
        try:
            return json.loads(cell)
        except ValueError:
            return value
    if cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    try:
        return float(cell)
    except ValueError:
        return value


def _python_kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        present = [item for item in value if item is not None]
        if all(isinstance(item, bool) for item in present) and present:
            return "bools"
        if all(isinstance(item, int | float) and not isinstance(item, bool) for item in present):
            return "list"
    return "text"


def _finite_numbers(values):
    flat = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item):
                flat.append(float(item))
    return np.asarray(flat, dtype=float)


# -- reading columns in chunks ------------------------------------------------------------------------------

def read_batches(file, kinds, preview):
    """(first row, RecordBatch) chunks of the named columns in their canonical form.

    ``kinds`` maps column → one of KINDS: "number"/"flag" → float64, "numbers"/"flags" → list<float64>,
    "key" → text. ``preview`` tells the JSON reader each column's type (bool or number) up front.
    """
    delivered = 0
    try:
        for batch in _fast_batches(file, kinds, preview):
            yield delivered, batch
            delivered += batch.num_rows
        return
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeDecodeError) as error:
        if file.format == "parquet":
            raise LogError(f"{file.name}: cannot be read as Parquet ({_first_line(error)})") from None
    except (OSError, EOFError) as error:
        raise _read_failure(file, error) from None
    yield from _slow_batches(file, kinds, delivered)


def _fast_batches(file, kinds, preview):
    if file.format == "parquet":
        yield from _parquet_batches(file, kinds)
        return
    reader = _json_reader(file, kinds, preview) if file.format == "jsonl" else _csv_reader(file, kinds, preview)
    row = 0
    for batch in reader:
        yield _canonical(file, batch, kinds, row)
        row += batch.num_rows


def _parquet(file):
    try:
        return pq.ParquetFile(file.path if file.data is None else pa.BufferReader(file.data))
    except (pa.ArrowInvalid, OSError) as error:
        raise LogError(f"{file.name}: cannot be read as Parquet ({_first_line(error)})") from None


def _parquet_batches(file, kinds):
    parquet = _parquet(file)
    values = sum(parquet.metadata.row_group(g).column(c).num_values for g in range(parquet.num_row_groups)
                 for c in range(parquet.metadata.num_columns)
                 if parquet.schema.column(c).path.split(".")[0] in kinds)
    per_row = max(1, values // max(1, parquet.metadata.num_rows))
    row = 0
    for batch in parquet.iter_batches(batch_size=max(1, TOKENS_PER_BATCH // per_row), columns=list(kinds)):
        yield _canonical(file, batch, kinds, row)
        row += batch.num_rows


def _json_reader(file, kinds, preview):
    fields = []
    for column, kind in kinds.items():
        boolean = preview.kinds.get(column) in ("bool", "bools") and kind in ("flag", "flags")
        scalar = pa.bool_() if boolean else pa.float64()
        type = {"number": scalar, "flag": scalar, "numbers": pa.list_(scalar), "flags": pa.list_(scalar),
                "key": pa.int64() if preview.kinds.get(column) == "number" else pa.string()}[kind]
        fields.append((column, type))
    return pa_json.open_json(file.arrow_stream(), read_options=pa_json.ReadOptions(block_size=BLOCK_BYTES),
                             parse_options=pa_json.ParseOptions(explicit_schema=pa.schema(fields),
                                                                unexpected_field_behavior="ignore"))


def _csv_reader(file, kinds, preview):
    types = {}
    for column, kind in kinds.items():
        boolean = preview.kinds.get(column) == "bool" and kind == "flag"
        types[column] = pa.string() if kind in ("numbers", "flags", "key") else pa.bool_() if boolean \
            else pa.float64()
    return pa_csv.open_csv(file.arrow_stream(), read_options=pa_csv.ReadOptions(block_size=BLOCK_BYTES),
                           convert_options=pa_csv.ConvertOptions(column_types=types, include_columns=list(kinds),
                                                                 strings_can_be_null=True))


def _canonical(file, batch, kinds, first_row):
    """The batch's columns as float64, list<float64> or text, in ``kinds`` order."""
    arrays = []
    for column, kind in kinds.items():
        array = batch.column(column)
        if file.format == "csv" and kind in ("numbers", "flags"):
            array = _parse_list_cells(file, array, column, kind, first_row)
        arrays.append(_cast(file, array, column, kind, first_row))
    return pa.RecordBatch.from_arrays(arrays, names=list(kinds))


def _cast(file, array, column, kind, first_row):
    kind_found = _arrow_kind(array.type)
    if kind == "key":
        if kind_found not in ("number", "text", "empty"):
            raise LogError(f"{file.name}: column {column!r} holds {_described(kind_found)}, not sequence ids")
        return array.cast(pa.string())
    wanted = {"number": ("number",), "flag": ("number", "bool"), "numbers": ("list",),
              "flags": ("list", "bools")}[kind]
    if kind_found == "empty":
        return pa.nulls(len(array), pa.list_(pa.float64()) if kind in ("numbers", "flags") else pa.float64())
    if kind_found not in wanted:
        row = first_row + _first_valid(array) + 1
        raise LogError(f"{file.name}: row {row}, column {column!r}: {_described(kind_found)} where "
                       f"{'a list of numbers' if kind in ('numbers', 'flags') else 'a number'} is expected")
    return array.cast(pa.list_(pa.float64()) if kind in ("numbers", "flags") else pa.float64())


def _first_valid(array):
    valid = np.flatnonzero(array.is_valid().to_numpy(zero_copy_only=False))
    return int(valid[0]) if len(valid) else 0


def _described(kind):
    return {"number": "a number", "bool": "true/false values", "list": "lists of numbers",
            "bools": "lists of true/false", "text": "text", "empty": "nothing"}[kind]


def _parse_list_cells(file, cells, column, kind, first_row):
    """CSV cells that hold JSON lists ("[-0.1, -2.3]") as a list<float64> array: parsed by pyarrow's JSON
    reader, or cell by cell in Python (which names the first bad cell) when that fails."""
    texts = cells.to_pylist()
    lines = "".join(f'{{"v":{text}}}\n' if text and text.strip() else '{"v":null}\n' for text in texts)
    schema = pa.schema([("v", pa.list_(pa.float64()))])
    try:
        table = pa_json.read_json(pa.BufferReader(lines.encode()),
                                  parse_options=pa_json.ParseOptions(explicit_schema=schema))
        if table.num_rows == len(texts):
            return table.column("v").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    lists = [_list_cell(file, text, first_row + i + 1, column, kind) for i, text in enumerate(texts)]
    return pa.array(lists, type=pa.list_(pa.float64()))


def _list_cell(file, cell, row, column, kind):
    if cell is None or not cell.strip():
        return None
    try:
        value = json.loads(cell)
    except ValueError:
        value = cell
    return _checked(file, value, row, column, kind)


# -- the slow path: Python's json and csv, one row at a time ----------------------------------------------

def _slow_batches(file, kinds, skip):
    """Rows from ``skip`` on, parsed in Python with every value checked; LogError at the first bad one."""
    columns = {column: [] for column in kinds}
    first = skip
    with _decoding(file), file.text() as text:
        for row, record in _slow_records(file, text):
            if row <= skip:
                continue
            for column, kind in kinds.items():
                value = record.get(column)
                if kind != "key":
                    value = _python_value(value, file.format)
                elif value == "":
                    value = None
                columns[column].append(_checked(file, value, row, column, kind))
            if len(columns[next(iter(kinds))]) == SLOW_ROWS_PER_BATCH:
                yield first, _slow_batch(columns, kinds)
                first += SLOW_ROWS_PER_BATCH
                columns = {column: [] for column in kinds}
    if columns[next(iter(kinds))]:
        yield first, _slow_batch(columns, kinds)


def _slow_records(file, text):
    if file.format == "jsonl":
        for row, line in enumerate(_json_lines(text), start=1):
            yield row, _json_record(file, row, line)
    else:
        reader = csv.reader(text)
        header = _csv_header(file, reader)
        for row, cells in enumerate(_csv_rows(reader), start=1):
            yield row, _csv_record(file, header, row, cells)


def _slow_batch(columns, kinds):
    types = {"number": pa.float64(), "flag": pa.float64(), "numbers": pa.list_(pa.float64()),
             "flags": pa.list_(pa.float64()), "key": pa.string()}
    return pa.RecordBatch.from_arrays([pa.array(columns[column], type=types[kind]) for column, kind in kinds.items()],
                                      names=list(kinds))


def _checked(file, value, row, column, kind):
    """The value in canonical Python form (float, list of float, str, or None); LogError if of the wrong kind."""
    if value is None:
        return None
    where = f"{file.name}: row {row}, column {column!r}"
    if kind == "key":
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
        raise LogError(f"{where}: {_shown(value)} is not a sequence id (text or an integer)")
    if kind in ("number", "flag"):
        return _number(value, kind == "flag", where)
    if not isinstance(value, list):
        raise LogError(f"{where}: {_shown(value)} where a list of numbers is expected")
    return [_number(item, kind == "flags", f"{where}, element {index + 1}") for index, item in enumerate(value)]


def _number(value, boolean_allowed, where):
    if value is None:
        return None
    if isinstance(value, bool) and boolean_allowed:
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise LogError(f"{where}: {_shown(value)} is not a number")


def _shown(value):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


# -- text parsing shared by the preview and the slow path ---------------------------------------------------

class _decoding:
    """Turn a decoding or decompression failure inside the block into a LogError."""

    def __init__(self, file):
        self.file = file

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, UnicodeDecodeError):
            raise LogError(f"{self.file.name}: not UTF-8 text") from None
        if isinstance(error, EOFError | OSError):
            raise _read_failure(self.file, error) from None
        return False


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _read_failure(file, error):
    what = "the gzip data is corrupt or truncated" if file.compressed else "cannot read the file"
    return LogError(f"{file.name}: {what} ({_first_line(error)})")


def _json_lines(text):
    """Non-blank lines (blank lines are not rows, as in pyarrow's reader)."""
    for line in text:
        if line.strip():
            yield line


def _json_record(file, row, line):
    try:
        record = json.loads(line)
    except ValueError as error:
        raise LogError(f"{file.name}: row {row} is not valid JSON ({error.msg} at character {error.colno})") \
            from None
    if not isinstance(record, dict):
        raise LogError(f"{file.name}: row {row} is not a JSON object but {_shown(record)}")
    return record


def _csv_header(file, reader):
    header = next(reader, None)
    if not header or not any(cell.strip() for cell in header):
        raise LogError(f"{file.name}: no header row (a CSV log starts with its column names)")
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise LogError(f"{file.name}: column {duplicated[0]!r} appears twice in the header")
    return header


def _csv_rows(reader):
    for cells in reader:
        if cells:
            yield cells


def _csv_record(file, header, row, cells):
    if len(cells) != len(header):
        raise LogError(f"{file.name}: row {row} has {len(cells)} fields but the header has {len(header)} "
                       "(a list in a cell must be quoted: \"[-0.1, -2.3]\")")
    return dict(zip(header, cells, strict=True))
