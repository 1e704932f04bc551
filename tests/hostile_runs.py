"""Hostile files of issue 25, built in memory (not a test module): archives, gzip structure, Parquet footers, runs.

Each builder returns ``(file name, bytes)``. The defaults are the sizes the issue tried (what
benchmarks/hostile_upload.py feeds to the command line); the tests pass smaller sizes, or read with smaller bounds.
A bomb is built by streaming its content through a compressor, never held at its expanded size: a zip member of
1 GiB of zeros compresses to about 1 MB in about a second.
"""

import gzip
import io
import json
import struct
import zipfile
import zlib

import numpy as np
import pyarrow as pa
from hostile_logs import jsonl, parquet, row

MB = 1_000_000
GiB = 2**30
LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"


def zipped(members, compression=zipfile.ZIP_DEFLATED):
    """A zip of {name: bytes} (or a list of (name, bytes), names repeated as given)."""
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", compression) as archive:
        for name, data in (members.items() if isinstance(members, dict) else members):
            archive.writestr(name, data)
    return sink.getvalue()


def _patched(data, local_field, central_field, value, format):
    """The zip with one field of every local and central header set to ``value`` (offsets from each signature)."""
    data = bytearray(data)
    for signature, offset in ((LOCAL, local_field), (CENTRAL, central_field)):
        start = data.find(signature)
        while start >= 0:
            struct.pack_into(format, data, start + offset, value)
            start = data.find(signature, start + 4)
    return bytes(data)


def step_log(sequences=3, tokens=2):
    return jsonl([row(tokens) for _ in range(sequences)])


def encrypted_member():
    """A run zip whose member says it is encrypted (general-purpose flag bit 0): zipfile asks for a password."""
    data = zipped({"step_1.jsonl": step_log(), "step_2.jsonl": step_log()}, zipfile.ZIP_STORED)
    return "encrypted.zip", _patched(data, 6, 8, 1, "<H")


def deflate64_member():
    """A run zip whose members say they are Deflate64 (method 9), which zipfile cannot inflate."""
    data = zipped({"step_1.jsonl": step_log(), "step_2.jsonl": step_log()})
    return "deflate64.zip", _patched(data, 8, 10, 9, "<H")


def zip_bomb(expanded=GiB, declared=0):
    """A run zip of one step whose member declares ``declared`` bytes and inflates to ``expanded`` (a valid JSON line,
    then spaces); built by streaming zeros of the line's tail through deflate, never held at its size."""
    head = json.dumps(row()).encode() + b"\n"
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunks, crc, block = [compressor.compress(head)], zlib.crc32(head), b" " * MB
    for _ in range((expanded - len(head)) // MB):
        chunks.append(compressor.compress(block))
        crc = zlib.crc32(block, crc)
    chunks.append(compressor.flush())
    body = b"".join(chunks)
    name = b"step_1.jsonl"
    local = struct.pack("<4sHHHHHIIIHH", LOCAL, 20, 0, 8, 0, 0, crc, len(body), declared, len(name), 0) + name
    central = struct.pack("<4sHHHHHHIIIHHHHHII", CENTRAL, 20, 20, 0, 8, 0, 0, crc, len(body), declared, len(name),
                          0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(body), 0)
    return "zip_bomb.zip", local + body + central + end


def duplicate_members(first=6, second=10):
    """A run zip holding step_1.jsonl twice: a step of ``first`` sequences, then one of ``second``."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)              # zipfile warns: "Duplicate name"
        return "duplicates.zip", zipped([("step_1.jsonl", step_log(first)), ("step_1.jsonl", step_log(second)),
                                         ("step_2.jsonl", step_log(4))])


def many_steps(steps=10_000):
    """A zip of ``steps`` steps of one tiny log each."""
    log = step_log(2)
    return "many_steps.zip", zipped({f"run/step_{step}.jsonl": log for step in range(1, steps + 1)})


def exotic_step_names(digits=5_000):
    """A run zip whose files name steps of ``digits`` digits and one past int64, beside an ordinary step."""
    return "exotic_steps.zip", zipped({f"step_{'9' * digits}.jsonl": step_log(), "step_18446744073709551617.jsonl":
                                       step_log(), "step_1.jsonl": step_log()})


def exotic_step_column(step="1e300"):
    """A run zip of one log without a step in its name, whose ``step`` column holds ``step`` (1e300, or a whole
    number of 400 digits) beside an ordinary step."""
    lines = [json.dumps(row() | {"step": 1}), json.dumps(row())[:-1] + f', "step": {step}}}']
    return "exotic_step_column.zip", zipped({"log.jsonl": ("\n".join(lines) + "\n").encode()})


def surrogate_ids():
    """A row-per-token JSON log whose sequence ids are lone surrogates (escaped: the file is valid UTF-8, the ids are
    not valid Unicode)."""
    lines = [f'{{"sequence_id": "\\ud800{i % 2}", "sampler_logprobs": -0.5, "trainer_logprobs": -0.25}}'
             for i in range(6)]
    return "surrogate_ids.jsonl", ("\n".join(lines) + "\n").encode()


def deep_json(depth=100_000):
    """A JSON Lines file whose first line opens ``depth`` brackets."""
    return "deep.jsonl", b"[" * depth + b"\n" + jsonl([row()])


def deep_dump(depth=100_000):
    """A NeMo-RL-named dump whose first line opens ``depth`` brackets."""
    return "train_data_step1.jsonl", b'{"generation_logprobs": ' + b"[" * depth + b"\n"


def gzip_empty_members(members=2_200_000, head=None):
    """A JSON log, gzip-compressed, followed by ``members`` empty gzip members (20 bytes each)."""
    empty = gzip.compress(b"", mtime=0)
    return "empty_members.jsonl.gz", gzip.compress(head or jsonl([row(), row()]), mtime=0) + empty * members


def gzip_long_name(length=45 * MB):
    """A gzip member whose header's file-name field (FNAME) is ``length`` bytes long."""
    body = jsonl([row(), row()])
    header = struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, 0x08, 0, 0, 255) + b"n" * length + b"\0"
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = compressor.compress(body) + compressor.flush()
    return "long_name.jsonl.gz", header + deflated + struct.pack("<II", zlib.crc32(body), len(body))


def parquet_many_chunks(row_groups=86_000, columns=10):
    """A Parquet log of one row per row group: row_groups × columns column chunks in its footer."""
    values = np.full(row_groups, -0.5)
    table = pa.table({"sampler_logprobs": values, "trainer_logprobs": values - 0.1, "sequence_id": np.arange(
        row_groups) // 2, **{f"c{i}": values for i in range(columns - 3)}})
    return "many_chunks.parquet", parquet(table, row_group_size=1, write_statistics=False)
