"""Hostile files of issue 41's third audit, built in memory (not a test module): files that lie about their size, and
names a terminal or a browser would act on.

- ``lying_parquet``: a Parquet file whose footer says each of its list columns holds ``claimed`` values while its one
  data page holds ``values`` (a run-length encoded row: 10⁸ values in about 250 bytes), written byte by byte here, its Thrift
  structures by a compact-protocol writer of its own (parquet-format's parquet.thrift: PageHeader, FileMetaData);
  pyarrow reads it (``test_the_lying_parquet_is_what_pyarrow_reads``).
- ``understated_zip``: a zip whose end record says it holds ``claimed`` entries while its central directory lists
  ``entries`` (each a 46-byte header and a name of a few bytes; no member data: ``zipfile`` parses the directory
  alone when it opens an archive).
- ``escape_named``, ``BIDI``: names holding terminal escape sequences (clear the screen, set the window's title) and a
  right-to-left override.
"""

import struct
import zipfile

# -- Thrift's compact protocol, as far as a Parquet file needs it --------------------------------------------------

I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def zigzag(value):
    return varint((value << 1) ^ (value >> 63))


def thrift_struct(fields):
    """A struct of (field id, type, value) in id order: I32 and I64 ints, BINARY bytes or str, STRUCT a list of
    fields, LIST (element type, [values])."""
    out, last = bytearray(), 0
    for field, kind, value in fields:
        delta = field - last
        out += bytes([(delta << 4) | kind]) if 0 < delta <= 15 else bytes([kind]) + zigzag(field)
        out += thrift_value(kind, value)
        last = field
    return bytes(out + b"\x00")


def thrift_value(kind, value):
    if kind in (I32, I64):
        return zigzag(value)
    if kind == BINARY:
        data = value.encode() if isinstance(value, str) else value
        return varint(len(data)) + data
    if kind == STRUCT:
        return thrift_struct(value)
    element, items = value
    head = bytes([(len(items) << 4) | element]) if len(items) < 15 else bytes([0xF0 | element]) + varint(len(items))
    return head + b"".join(thrift_value(element, item) for item in items)


# -- a Parquet file whose footer understates its list's length ------------------------------------------------------

DOUBLE, OPTIONAL, REPEATED, LIST_TYPE = 5, 1, 2, 3          # parquet.thrift: Type, FieldRepetitionType, ConvertedType
PLAIN, RLE, RLE_DICTIONARY = 0, 3, 8                         # Encoding
DATA_PAGE, DICTIONARY_PAGE = 0, 2                            # PageType


def rle_run(count, value, width_bytes=1):
    """One run of the RLE/bit-packed hybrid: ``count`` times ``value``."""
    return varint(count << 1) + value.to_bytes(width_bytes, "little")


def with_length(data):
    return struct.pack("<I", len(data)) + data


def lying_parquet(values=10**8, claimed=2, names=("sampler_logprobs", "trainer_logprobs")):
    """(file name, bytes): one row whose list columns ``names`` (list<double>) each hold ``values`` zeros, dictionary
    encoded and run-length encoded, while each column chunk's metadata (and the row group's sizes) say ``claimed``."""
    start, pages, columns = 4, b"", []
    for name in names:
        chunk, column = _lying_chunk(values, claimed, name, start + len(pages))
        pages += chunk
        columns.append([(2, I64, start), (3, STRUCT, column)])
    schema = [[(4, BINARY, "schema"), (5, I32, len(names))]]
    for name in names:
        schema += [[(3, I32, OPTIONAL), (4, BINARY, name), (5, I32, 1), (6, I32, LIST_TYPE)],
                   [(3, I32, REPEATED), (4, BINARY, "list"), (5, I32, 1)],
                   [(1, I32, DOUBLE), (3, I32, OPTIONAL), (4, BINARY, "element")]]
    row_group = [(1, LIST, (STRUCT, columns)), (2, I64, len(pages)), (3, I64, 1)]
    footer = thrift_struct([(1, I32, 1), (2, LIST, (STRUCT, schema)), (3, I64, 1), (4, LIST, (STRUCT, [row_group])),
                            (6, BINARY, "issue 41's hostile file")])
    return "lying.parquet", b"PAR1" + pages + footer + struct.pack("<I", len(footer)) + b"PAR1"


def _lying_chunk(values, claimed, name, offset):
    """(bytes, ColumnMetaData fields) of one column chunk at ``offset``: a dictionary page of one 0.0, then one data
    page of ``values`` levels and indices, each a single run; its metadata says ``claimed`` values."""
    dictionary = struct.pack("<d", 0.0)
    dictionary_header = thrift_struct([(1, I32, DICTIONARY_PAGE), (2, I32, len(dictionary)), (3, I32, len(dictionary)),
                                       (7, STRUCT, [(1, I32, 1), (2, I32, PLAIN)])])
    repetition = with_length(rle_run(1, 0) + (rle_run(values - 1, 1) if values > 1 else b""))    # one row
    definition = with_length(rle_run(values, 3))                                                 # every value there
    indices = bytes([1]) + rle_run(values, 0)                                                    # bit width, then runs
    data = repetition + definition + indices
    data_header = thrift_struct([(1, I32, DATA_PAGE), (2, I32, len(data)), (3, I32, len(data)),
                                 (5, STRUCT, [(1, I32, values), (2, I32, RLE_DICTIONARY), (3, I32, RLE),
                                              (4, I32, RLE)])])
    chunk = dictionary_header + dictionary + data_header + data
    column = [(1, I32, DOUBLE), (2, LIST, (I32, [RLE_DICTIONARY, RLE, PLAIN])),
              (3, LIST, (BINARY, [name, "list", "element"])), (4, I32, 0), (5, I64, claimed),
              (6, I64, len(chunk)), (7, I64, len(chunk)),
              (9, I64, offset + len(dictionary_header) + len(dictionary)), (11, I64, offset)]
    return chunk, column


# -- a zip whose end record understates its entries ----------------------------------------------------------------

def understated_zip(entries=550_175, claimed=1, real=None):
    """(file name, bytes): a central directory of ``entries`` entries (``real``: {name: bytes} stored first, as
    members with their data; the rest named n0, n1, … with none), and an end record that says ``claimed``."""
    local, central = bytearray(), bytearray()
    for name, data in (real or {}).items():
        encoded = name.encode()
        offset = len(local)
        crc = zipfile.crc32(data)
        local += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data),
                             len(encoded), 0) + encoded + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(data), len(data),
                               len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    header = struct.Struct("<4sHHHHHHIIIHHHHHII")
    for index in range(entries - len(real or {})):
        encoded = f"n{index}".encode()
        central += header.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, len(encoded), 0, 0, 0, 0, 0, 0) + encoded
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, claimed, claimed, len(central), len(local), 0)
    return "understated.zip", bytes(local + central + end)


# -- names a terminal or a browser would act on --------------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07"        # clear the screen; set the terminal window's title
BIDI = "\u202e"                            # right-to-left override: the rest of the line reads backwards


def escape_named(step=2):
    """A step file's name holding ESCAPES."""
    return f"step_{step}_{ESCAPES}.jsonl"
