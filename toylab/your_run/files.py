"""A rollout log's file: what format it really is, a preview of its first rows, and its columns in chunks.

Formats: Parquet, JSON Lines and CSV, the text ones optionally gzip-compressed. The format comes from the
extension and must agree with the content: gzip is recognised by its magic bytes (1f 8b), Parquet by
"PAR1"; a file whose content contradicts its name is refused with a message saying what it looks like.

Every read is bounded (``bounds``): a text log's bytes go through ``CountedText`` as they are decompressed,
which stops at the first byte past the text or line bound; a Parquet file's columns, rows, values and
decompressed size are checked from its metadata before any of its data is read.

Columns are read in chunks of rows (``read_batches``), each a pyarrow RecordBatch in a canonical form:
a number column is float64, a list column list<float64> (true/false read as 1/0 where allowed), an id
column text. The fast path is pyarrow's own reader, one thread, one block (a line's bound) at a time;
when it rejects the file, the slow Python reader (``text_rows``) takes over from the first row not yet
delivered and names the row and column of the first bad value (or reads on, if pyarrow was merely
stricter than needed). Rows count records from 1; a CSV header is not a row. Every problem is a
``LogError``: one line naming the file, and where possible the row and column (quoted, at most 40
characters each).
"""

import codecs
import io
import mmap
import os
import stat
import struct
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from numpy.typing import NDArray

from toylab.text import quoted
from toylab.your_run.bounds import CLI_BOUNDS, MB, Bounds, CountedText, LogError, buffered
from toylab.your_run.gunzip import Gunzipped
from toylab.your_run.parquet_pages import Malformed, TooManyPages, chunk_pages, file_bytes
from toylab.your_run.text_rows import (
    SHOWN_ITEMS,
    checked,
    csv_header,
    csv_reader,
    csv_record,
    csv_rows,
    decoding,
    first_line,
    json_record,
    loads,
    python_value,
    read_failure,
    shown,
    slow_batches,
)

EXTENSIONS = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
FORMAT_NAMES = {"parquet": "Parquet", "jsonl": "JSON Lines", "csv": "CSV"}
GZIP_MAGIC, PARQUET_MAGIC, ZIP_MAGIC = b"\x1f\x8b", b"PAR1", b"PK\x03\x04"
PREVIEW_ROWS = 100                 # the preview reads at most this many rows …
PREVIEW_BYTES = 1 * MB             # … and stops once it has read this much text (after one row at least)
PREVIEW_NUMBERS = 10_000           # numbers kept per column for the probability check
TOKENS_PER_BATCH = 1 << 18         # Parquet: about this many list values per batch
PARQUET_BUFFER = 1 << 20           # Parquet: bytes read from a column chunk at a time (not the whole chunk)
CHUNK_BYTES = 4 * MB               # text: about this much is parsed at a time (whole lines)
KINDS = ("number", "numbers", "flag", "flags", "key")   # flag(s): numbers where true/false also count
READ_ERRORS = (OSError, EOFError, zlib.error)


@dataclass(frozen=True)
class LogFile:
    """A log file, on disk (``path``) or in memory (``data``, e.g. an upload), with its checked format, its
    size in bytes and the bounds its reading keeps to."""
    name: str
    format: str                  # "parquet" | "jsonl" | "csv"
    compressed: bool             # gzip
    size: int
    bounds: Bounds
    path: str | None = None
    data: bytes | None = None

    def counted(self):
        """The file's bytes as a binary stream, decompressed and counted (``bounds.CountedText``)."""
        raw = open(self.path, "rb") if self.data is None else io.BytesIO(self.data)
        source = Gunzipped(self.name, self.bounds, raw) if self.compressed else raw
        return CountedText(self.name, self.bounds, raw, source, self.size)

    def raw(self):
        return buffered(self.counted())

    def text(self):
        return io.TextIOWrapper(self.raw(), encoding="utf-8-sig", newline="")


def open_log_file(name: str, data: bytes | None = None, path: str | None = None, bounds: Bounds = CLI_BOUNDS
                  ) -> LogFile:
    """The LogFile for an upload (``name``, ``data``) or a file on disk (``path``, default ``name``); LogError
    if it is empty, over ``bounds.file_bytes``, of an unknown extension, or not what its extension says."""
    if data is None and path is None:
        path = name
    size = len(data) if data is not None else _size(name, path)
    if size > bounds.file_bytes:
        raise bounds.exceeded(name, "file_bytes", f"the file ({size:,} bytes)")
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
    file = LogFile(name, EXTENSIONS[extension], head.startswith(GZIP_MAGIC), size, bounds, path, data)
    if named_gzip and not file.compressed:
        raise LogError(f"{name}: named .gz but not gzip-compressed (it looks like {_looks_like(head)})")
    if file.format == "parquet":
        if file.compressed:
            raise LogError(f"{name}: a gzip-compressed Parquet file; Parquet compresses internally, "
                           "decompress it first")
        if not head.startswith(PARQUET_MAGIC):
            raise LogError(f"{name}: not a Parquet file: it does not start with PAR1 "
                           f"(it looks like {_looks_like(head)})")
        _check_footer(file)
        return file
    _check_text(file)
    return file


def _check_footer(file):
    """A Parquet file's metadata within ``bounds.footer_bytes``, from its last 8 bytes (the footer's length, then
    PAR1), before anything parses it; a file without that tail is left to pyarrow to refuse."""
    tail = file.data[-8:] if file.data is not None else _tail(file.path, 8)
    if len(tail) == 8 and tail.endswith(PARQUET_MAGIC):
        length = struct.unpack("<I", tail[:4])[0]
        if length > file.bounds.footer_bytes:
            raise file.bounds.exceeded(file.name, "footer_bytes", f"its metadata ({length:,} bytes)")


def _tail(path, size):
    with open(path, "rb") as stream:
        stream.seek(max(0, os.path.getsize(path) - size))
        return stream.read(size)


def _size(name, path):
    return regular_file(name, path).st_size


def regular_file(name, path):
    """The os.stat of ``path`` (links followed); LogError if it cannot be read or is not a regular file: a pipe, a
    device or a socket is never opened (reading one may never end)."""
    try:
        status = os.stat(path)
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None
    if not stat.S_ISREG(status.st_mode):
        what = "a directory" if stat.S_ISDIR(status.st_mode) else "a pipe, a device or a socket"
        raise LogError(f"{name}: not a regular file ({what}); only regular files are read")
    return status


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
    except READ_ERRORS as error:
        raise read_failure(file, error) from None
    kind = FORMAT_NAMES[file.format]
    if not head.strip():
        raise LogError(f"{file.name}: the file holds no rows")
    if head.startswith((PARQUET_MAGIC, ZIP_MAGIC, GZIP_MAGIC)) or b"\x00" in head:
        raise LogError(f"{file.name}: not {kind} text: the content is {_looks_like(head)}")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError as error:
        raise LogError(f"{file.name}: not UTF-8 text (byte {error.start} of the content)") from None
    first = head.removeprefix(codecs.BOM_UTF8).lstrip()[:1]
    if file.format == "jsonl" and first != b"{":
        why = "a JSON array; write one JSON object per line" if first == b"[" else \
            f"row 1 does not start with '{{' but with {first.decode(errors='replace')!r}"
        raise LogError(f"{file.name}: not JSON Lines: {why}")


# -- the preview: column names and what kind of values each holds ------------------------------------------

@dataclass(frozen=True)
class Preview:
    """The first rows of a log: its column names in order, the kind of each column's first non-empty value
    ("number", "bool", "list", "bools", "text", or "empty") with that value's row and a short text of it,
    and up to PREVIEW_NUMBERS finite numbers seen in each column."""
    columns: tuple[str, ...]
    kinds: dict[str, str]
    numbers: dict[str, NDArray[np.float64]]
    first: dict[str, tuple[int, str]]    # column → (row, shown value) of its first non-empty value

    def values(self, column: str) -> NDArray[np.float64]:
        return self.numbers.get(column, np.empty(0))


def preview(file: LogFile, rows: int = PREVIEW_ROWS) -> Preview:
    """The Preview of the file's first rows (at most ``rows``, and about PREVIEW_BYTES of them); LogError if it
    has none, they cannot be parsed, or they have more columns than the bounds allow."""
    if file.format == "parquet":
        try:
            return _parquet_preview(file, rows)
        except (pa.ArrowException, OSError) as error:
            raise LogError(f"{file.name}: cannot be read as Parquet ({quoted(first_line(error), 80)})") from None
    records = _first_records(file, rows)
    if not records:
        raise LogError(f"{file.name}: the file holds no rows")
    columns = list(dict.fromkeys(name for record in records for name in record))
    if len(columns) > file.bounds.columns:
        raise file.bounds.exceeded(file.name, "columns", f"the first rows ({len(columns):,} keys)")
    kinds, numbers, first = {}, {}, {}
    for column in columns:
        values = [python_value(record.get(column), file.format) for record in records]
        present = [(row, value) for row, value in enumerate(values, start=1) if value is not None]
        kinds[column] = _python_kind(present[0][1]) if present else "empty"
        numbers[column] = _finite_numbers([value for _, value in present])
        first[column] = (present[0][0], shown(present[0][1])) if present else (1, "nothing")
    return Preview(tuple(columns), kinds, numbers, first)


def _first_records(file, rows):
    """The first records as dicts (CSV cells as text): ``rows`` of them, or fewer once PREVIEW_BYTES are read."""
    records, read = [], 0
    with decoding(file), file.text() as text:
        if file.format == "jsonl":
            for line in text:
                read += len(line)
                if line.strip():
                    records.append(json_record(file, len(records) + 1, line))
                if records and (len(records) == rows or read > PREVIEW_BYTES):
                    break
        else:
            reader = csv_reader(file, text)
            header = csv_header(file, reader)
            for row, cells in enumerate(csv_rows(file, reader), start=1):
                records.append(csv_record(file, header, row, cells))
                read += sum(map(len, cells))
                if len(records) == rows or read > PREVIEW_BYTES:
                    break
    return records


def _parquet_preview(file, rows):
    parquet = _parquet(file)
    if parquet.metadata.num_rows == 0 or parquet.num_row_groups == 0:
        raise LogError(f"{file.name}: the file holds no rows")
    group = parquet.metadata.row_group(0)
    per_row = group.total_byte_size / max(1, group.num_rows)
    batch = next(parquet.iter_batches(batch_size=int(np.clip(PREVIEW_BYTES // max(per_row, 1), 1, rows)),
                                      use_threads=False))
    kinds, numbers, first = {}, {}, {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        kinds[name] = _arrow_kind(column.type)
        numbers[name] = _arrow_numbers(column, kinds[name])
        row = _first_valid(column)
        first[name] = (row + 1, _arrow_shown(column, row, kinds[name]) if column.is_valid()[row].as_py()
                       else "nothing")
    return Preview(tuple(batch.schema.names), kinds, numbers, first)


def _arrow_kind(type):
    if pa.types.is_dictionary(type):
        return _arrow_kind(type.value_type)
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


def _decoded(array):
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _via_text(array):
    """Decimals (or lists of them) as text, which casts to the nearest float64."""
    type = array.type
    inner = type.value_type if pa.types.is_list(type) or pa.types.is_large_list(type) else None
    if pa.types.is_decimal(type):
        return array.cast(pa.string())
    if inner is not None and pa.types.is_decimal(inner):
        return array.cast(pa.list_(pa.string()))
    return array


def _arrow_numbers(column, kind):
    """Up to PREVIEW_NUMBERS finite numbers of a number or list column, from Arrow without Python objects."""
    if kind not in ("number", "list"):
        return np.empty(0)
    values = _decoded(pc.list_flatten(column) if kind == "list" else column)
    values = _via_text(_decoded(values).slice(0, PREVIEW_NUMBERS)).cast(pa.float64(), safe=False)
    values = values.to_numpy(zero_copy_only=False)
    return values[np.isfinite(values)]


def _arrow_shown(column, row, kind):
    """A short text of one value: a list by its first elements, a nested value by its type."""
    value = _decoded(column.slice(row, 1))
    if kind in ("list", "bools"):
        return shown(_decoded(pc.list_flatten(value)).slice(0, SHOWN_ITEMS + 1).to_pylist())
    if pa.types.is_nested(value.type):
        return f"a {value.type}"[:40]
    if not _valid(value):
        return "text that is not valid UTF-8"
    return shown(value.to_pylist()[0])


def _valid(array):
    """Whether the array's text (if any) is valid UTF-8: Parquet can store any bytes in a string column."""
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


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
            if isinstance(item, int | float) and not isinstance(item, bool) and abs(item) <= 1e308 \
                    and item == item:
                flat.append(float(item))
        if len(flat) >= PREVIEW_NUMBERS:
            break
    return np.asarray(flat[:PREVIEW_NUMBERS], dtype=float)


# -- reading columns in chunks ------------------------------------------------------------------------------

def read_batches(file, kinds, preview):
    """(first row, RecordBatch, share of the file read) chunks of the named columns in their canonical form.

    ``kinds`` maps column → one of KINDS: "number"/"flag" → float64, "numbers"/"flags" → list<float64>,
    "key" → text. ``preview`` tells the JSON reader each column's type (bool or number) up front.
    """
    delivered = 0
    try:
        for batch, share in _fast_batches(file, kinds, preview):
            yield delivered, batch, share
            delivered += batch.num_rows
        return
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeDecodeError) as error:
        if file.format == "parquet":
            raise LogError(f"{file.name}: cannot be read as Parquet ({quoted(first_line(error), 80)})") from None
    except READ_ERRORS as error:
        raise read_failure(file, error) from None
    yield from slow_batches(file, kinds, delivered)


def _fast_batches(file, kinds, preview):
    """(batch, share read) from pyarrow's parsers: Parquet's reader, or the text cut into chunks of whole lines,
    each parsed in one call (no reading ahead, no thread of pyarrow's calling back into Python)."""
    if file.format == "parquet":
        yield from _parquet_batches(file, kinds)
        return
    parse = _json_parser(kinds, preview) if file.format == "jsonl" else _csv_parser(file, kinds, preview)
    counted = file.counted()
    row = 0
    with buffered(counted) as stream:
        for index, chunk in enumerate(_chunks(stream)):
            for batch in parse(chunk, index == 0).to_batches():
                yield _canonical(file, batch, kinds, row), counted.share_read()
                row += batch.num_rows


def _chunks(stream):
    """The text in whole lines, about CHUNK_BYTES at a time (the last chunk may lack its final newline)."""
    rest = b""
    while block := stream.read(CHUNK_BYTES):
        text = rest + block
        end = text.rfind(b"\n") + 1
        rest = text[end:]
        if end:
            yield text[:end]
    if rest.strip():
        yield rest


def _parquet(file):
    """The ParquetFile, its metadata checked against the bounds before any data is read: columns (and no name twice),
    rows, the values of each column (a list column's values are its tokens), and the decompressed size."""
    try:
        parquet = pq.ParquetFile(file.path if file.data is None else pa.BufferReader(file.data),
                                 buffer_size=PARQUET_BUFFER, pre_buffer=False)     # pages read as decoded
        names = parquet.schema_arrow.names
    except (pa.ArrowException, OSError, UnicodeDecodeError) as error:
        raise LogError(f"{file.name}: cannot be read as Parquet ({quoted(first_line(error), 80)})") from None
    bounds, metadata = file.bounds, parquet.metadata
    if len(names) > bounds.columns or metadata.num_columns > bounds.columns:
        raise bounds.exceeded(file.name, "columns", f"the schema ({max(len(names), metadata.num_columns):,} columns)")
    twice = [name for name, count in zip(*np.unique(names, return_counts=True), strict=True) if count > 1]
    if twice:
        raise LogError(f"{file.name}: column {quoted(str(twice[0]))} appears twice in the schema")
    if metadata.num_rows > bounds.tokens:
        raise bounds.exceeded(file.name, "tokens", f"its {metadata.num_rows:,} rows")
    values, expanded = np.zeros(metadata.num_columns, dtype=np.int64), 0
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(column)
            values[column] += chunk.num_values
            expanded += chunk.total_uncompressed_size
    if values.size and values.max() > bounds.tokens:
        raise bounds.exceeded(file.name, "tokens", f"a column of {values.max():,} values")
    if expanded > bounds.text_bytes:
        raise bounds.exceeded(file.name, "text_bytes", f"its data ({expanded:,} bytes decompressed)")
    _check_pages(file, metadata)
    return parquet


def _check_pages(file, metadata):
    """The bounds on what the pages' own headers say (``parquet_pages``), walked before any page is decoded: a
    column's values over its row groups within ``bounds.tokens``, what the pages decode to within
    ``bounds.text_bytes``, their count within ``bounds.parquet_pages``; each stops the walk once passed. (The
    footer's numbers, checked before, may understate them.)"""
    bounds = file.bounds
    data = file.data if file.data is not None else file_bytes(file.path)
    values, decoded, pages = np.zeros(metadata.num_columns, dtype=np.int64), 0, 0
    try:
        for group in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                chunk = metadata.row_group(group).column(column)
                start = chunk.data_page_offset
                if chunk.has_dictionary_page and 0 < (chunk.dictionary_page_offset or 0) < start:
                    start = chunk.dictionary_page_offset
                if not 0 <= start < len(data):
                    raise Malformed(f"a column chunk starts at byte {start:,}, outside the file")
                found = chunk_pages(data, start, chunk.total_compressed_size, bounds.parquet_pages - pages)
                values[column] += found.values
                decoded, pages = decoded + found.decoded_bytes, pages + found.pages
                if values[column] > bounds.tokens:
                    name = chunk.path_in_schema.split(".")[0]
                    raise bounds.exceeded(file.name, "tokens", f"column {quoted(name)}: its pages hold "
                                          f"{values[column]:,} values (its metadata says {chunk.num_values:,})")
                if decoded > bounds.text_bytes:
                    raise bounds.exceeded(file.name, "text_bytes", f"its pages ({decoded:,} bytes decompressed)")
    except TooManyPages:
        raise bounds.exceeded(file.name, "parquet_pages", f"page {bounds.parquet_pages + 1:,}") from None
    except Malformed as error:
        raise LogError(f"{file.name}: cannot be read as Parquet ({error})") from None
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


def _parquet_batches(file, kinds):
    """Batches of about TOKENS_PER_BATCH values of the chosen columns (the file's bounds checked by ``_parquet``)."""
    parquet = _parquet(file)
    metadata = parquet.metadata
    most = max((sum(metadata.row_group(g).column(c).num_values for g in range(metadata.num_row_groups))
                for c in range(metadata.num_columns) if parquet.schema.column(c).path.split(".")[0] in kinds),
               default=0)
    per_row = max(1, most // max(1, metadata.num_rows))
    row = 0
    for batch in parquet.iter_batches(batch_size=max(1, TOKENS_PER_BATCH // per_row), columns=list(kinds),
                                      use_threads=False):
        yield _canonical(file, batch, kinds, row), (row + batch.num_rows) / max(1, metadata.num_rows)
        row += batch.num_rows


def _json_parser(kinds, preview):
    """chunk ↦ Table of the chosen columns with the types the preview suggests (others ignored)."""
    fields = []
    for column, kind in kinds.items():
        boolean = preview.kinds.get(column) in ("bool", "bools") and kind in ("flag", "flags")
        scalar = pa.bool_() if boolean else pa.float64()
        type = {"number": scalar, "flag": scalar, "numbers": pa.list_(scalar), "flags": pa.list_(scalar),
                "key": pa.int64() if preview.kinds.get(column) == "number" else pa.string()}[kind]
        fields.append((column, type))
    options = pa_json.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    return lambda chunk, first: pa_json.read_json(pa.BufferReader(chunk), read_options=_one_block(chunk),
                                                  parse_options=options)


def _csv_parser(file, kinds, preview):
    """chunk ↦ Table of the chosen columns; every chunk is read with the header's names, the first skips it."""
    types = {}
    for column, kind in kinds.items():
        boolean = preview.kinds.get(column) == "bool" and kind == "flag"
        types[column] = pa.string() if kind in ("numbers", "flags", "key") else pa.bool_() if boolean \
            else pa.float64()
    names = list(preview.columns)
    convert = pa_csv.ConvertOptions(column_types=types, include_columns=list(kinds), strings_can_be_null=True)

    def parse(chunk, first):
        options = pa_csv.ReadOptions(use_threads=False, block_size=len(chunk) + 1, column_names=names,
                                     skip_rows=1 if first else 0)
        return pa_csv.read_csv(pa.BufferReader(chunk), read_options=options, convert_options=convert)
    return parse


def _one_block(chunk):
    return pa_json.ReadOptions(use_threads=False, block_size=len(chunk) + 1)


def _canonical(file, batch, kinds, first_row):
    """The batch's columns as float64, list<float64> or text, in ``kinds`` order."""
    arrays = []
    for column, kind in kinds.items():
        array = _decoded(batch.column(column))
        if file.format == "csv" and kind in ("numbers", "flags"):
            array = _parse_list_cells(file, array, column, kind, first_row)
        arrays.append(_cast(file, array, column, kind, first_row))
    return pa.RecordBatch.from_arrays(arrays, names=list(kinds))


def _cast(file, array, column, kind, first_row):
    kind_found = _arrow_kind(array.type)
    if kind == "key":
        if kind_found not in ("number", "text", "empty") or pa.types.is_nested(array.type):
            raise LogError(f"{file.name}: column {quoted(column)} holds {_described(kind_found)}, not sequence ids")
        if not _valid(array):
            row = first_row + _first_invalid(array) + 1
            raise LogError(f"{file.name}: row {row}, column {quoted(column)}: the id is not valid UTF-8 text")
        return _converted(file, array, column, pa.string())
    wanted = {"number": ("number",), "flag": ("number", "bool"), "numbers": ("list",),
              "flags": ("list", "bools")}[kind]
    if kind_found == "empty":
        return pa.nulls(len(array), pa.list_(pa.float64()) if kind in ("numbers", "flags") else pa.float64())
    if kind_found not in wanted:
        row = first_row + _first_valid(array) + 1
        raise LogError(f"{file.name}: row {row}, column {quoted(column)}: {_described(kind_found)} where "
                       f"{'a list of numbers' if kind in ('numbers', 'flags') else 'a number'} is expected")
    return _converted(file, array, column, pa.list_(pa.float64()) if kind in ("numbers", "flags") else pa.float64())


def _converted(file, array, column, type):
    """The array cast to float64 (or list<float64>: rounding allowed) or text; decimals by way of their text, which
    pyarrow rounds correctly (its direct cast gives -0.09999999999999999 for -0.1)."""
    try:
        return _via_text(array).cast(type, safe=type == pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise LogError(f"{file.name}: column {quoted(column)}: its {array.type} values cannot be read as "
                       f"{type} ({quoted(first_line(error), 60)})") from None


def _first_invalid(array):
    """The first element whose text is not valid UTF-8 (the array holds one), by halving: O(len(array))."""
    low, high = 0, len(array)                   # the first invalid element lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _valid(array.slice(low, middle - low)) else (low, middle)
    return low


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
    lines = "".join(f'{{"v":{text}}}\n' if text and text.strip() else '{"v":null}\n' for text in texts).encode()
    schema = pa.schema([("v", pa.list_(pa.float64()))])
    try:
        table = pa_json.read_json(pa.BufferReader(lines),
                                  read_options=_one_block(lines),
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
        value = loads(cell)
    except ValueError:
        value = cell
    return checked(file, value, row, column, kind)

