"""A Parquet file's pages counted from their own headers, before any page is decoded: what a reader will really decode.

The footer's numbers are the writer's word: a column chunk's ``num_values`` may say 2 while its one data page holds 10⁸
(run-length encoded, a few hundred bytes), and pyarrow decodes what the page's header says, not what the footer says.
So each column chunk's byte range (from its dictionary page, or its first data page, for ``total_compressed_size``
bytes: the range pyarrow reads) is walked page header by page header, never reading the pages' data:

    values         Σ num_values of its data pages (v1 and v2): the levels a reader decodes, one per value or empty list
    decoded_bytes  Σ uncompressed_page_size of its pages: what decompression writes
    pages          the headers walked, in the whole file

A page header is a Thrift struct (parquet-format's parquet.thrift, ``PageHeader``) in the compact protocol: its fields
are read as far as they are needed, the others skipped by their type. Anything that cannot be a page header (a field of
an unknown type, a struct nested deeper than NESTING, a size below 0, a header running past the chunk) is ``Malformed``.
"""

import mmap
from dataclasses import dataclass

NESTING = 16                        # structs within structs in a page header (its statistics: 2)
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = range(4)     # PageType
VALUES_OF = {DATA_PAGE: 5, DATA_PAGE_V2: 8}                          # the field holding each data page's header


class Malformed(ValueError):
    """Bytes that are not a Parquet page header where one should be."""


class TooManyPages(ValueError):
    """More page headers than the caller's bound."""


@dataclass(frozen=True)
class ChunkPages:
    """What a column chunk's page headers say it holds (see the module docstring)."""
    values: int
    decoded_bytes: int
    pages: int


def chunk_pages(data, start, length, most_pages):
    """The ChunkPages of the ``length`` bytes of ``data`` (bytes, or a file's mmap) from ``start``; Malformed as
    above; TooManyPages once more than ``most_pages`` headers are walked."""
    end = min(start + length, len(data))
    at, values, decoded, pages = start, 0, 0, 0
    while at < end:
        pages += 1
        if pages > most_pages:
            raise TooManyPages()
        header, at = _struct(data, at, end, 0)
        size, kind = header.get(3), header.get(1)
        if not isinstance(size, int) or size < 0 or not isinstance(header.get(2), int) or header[2] < 0:
            raise Malformed(f"a page header at byte {at:,} without its sizes")
        decoded += header[2]
        if kind in VALUES_OF:
            page = header.get(VALUES_OF[kind])
            count = page.get(1) if isinstance(page, dict) else None
            if not isinstance(count, int) or count < 0:
                raise Malformed(f"a data page at byte {at:,} without its count of values")
            values += count
        at += size
    return ChunkPages(values, decoded, pages)


def file_bytes(path):
    """The bytes of the file at ``path`` as an mmap (read only where it is indexed), or b"" for an empty file."""
    with open(path, "rb") as stream:
        try:
            return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:                                  # an empty file cannot be mapped
            return b""


# -- Thrift's compact protocol, read -------------------------------------------------------------------------------

def _byte(data, at, end):
    if at >= end:
        raise Malformed("a page header runs past its column chunk")
    return data[at]


def _varint(data, at, end):
    value, shift = 0, 0
    while True:
        byte = _byte(data, at, end)
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at
        if shift > 63:
            raise Malformed("a number of over 64 bits in a page header")


def _zigzag(data, at, end):
    value, at = _varint(data, at, end)
    return (value >> 1) ^ -(value & 1), at


def _struct(data, at, end, depth):
    """({field id: int, or dict of a nested struct}, position after it); other fields are skipped."""
    if depth > NESTING:
        raise Malformed(f"structs nested over {NESTING} deep in a page header")
    fields, field = {}, 0
    while True:
        head = _byte(data, at, end)
        at += 1
        if head == 0:
            return fields, at
        kind, delta = head & 0x0F, head >> 4
        if delta:
            field += delta
        else:
            field, at = _zigzag(data, at, end)
        if kind in (I16, I32, I64):
            fields[field], at = _zigzag(data, at, end)
        elif kind == STRUCT:
            fields[field], at = _struct(data, at, end, depth + 1)
        else:
            at = _skip(data, at, end, kind, depth)


def _skip(data, at, end, kind, depth):
    """The position after a value of ``kind`` (a struct field's: a boolean's value is in its type)."""
    if kind in (BOOL_TRUE, BOOL_FALSE):
        return at
    if kind == BYTE:
        return at + 1
    if kind in (I16, I32, I64):
        return _varint(data, at, end)[1]
    if kind == DOUBLE:
        return at + 8
    if kind == BINARY:
        length, at = _varint(data, at, end)
        return at + length
    if kind == STRUCT:
        return _struct(data, at, end, depth + 1)[1]
    if kind in (LIST, SET):
        head = _byte(data, at, end)
        count, at = head >> 4, at + 1
        if count == 15:
            count, at = _varint(data, at, end)
        return _skip_items(data, at, end, (head & 0x0F,), count, depth)
    if kind == MAP:
        count, at = _varint(data, at, end)
        if count == 0:
            return at
        types = _byte(data, at, end)
        return _skip_items(data, at + 1, end, (types >> 4, types & 0x0F), count, depth)
    raise Malformed(f"a field of unknown type {kind} in a page header")


def _skip_items(data, at, end, kinds, count, depth):
    """The position after ``count`` items of a list, set or map, each of ``kinds`` in turn (a list's boolean takes a
    byte); every item takes a byte at least, so a count past the chunk's end stops there."""
    for _ in range(count):
        for kind in kinds:
            at = at + 1 if kind in (BOOL_TRUE, BOOL_FALSE) else _skip(data, at, end, kind, depth)
        if at > end:
            raise Malformed("a page header runs past its column chunk")
    return at
