"""The hostile files of issue 25 on the command line: each is one line, ``toylab: error: …`` naming the file and what
was wrong (exit 2), or a correct read within bounds with a notice of what was left. Built in memory
(tests/hostile_runs.py), small where the class allows, the bombs streamed through their compressor; memory is
measured with tracemalloc (no timing: speed is benchmarks/hostile_upload.py's).
"""

import gzip
import io
import json
import os
import tracemalloc
import zipfile

import pytest
from hostile_logs import jsonl, parquet, row
from hostile_runs import (
    deep_dump,
    deep_json,
    deflate64_member,
    duplicate_members,
    encrypted_member,
    exotic_step_column,
    exotic_step_names,
    gzip_empty_members,
    gzip_long_name,
    many_steps,
    parquet_many_chunks,
    step_log,
    surrogate_ids,
    zip_bomb,
    zipped,
)
from messages import says

from toylab.cli.main import main
from toylab.your_run import archives
from toylab.your_run.bounds import CLI_BOUNDS, LogError
from toylab.your_run.files import READ_ERRORS, open_log_file
from toylab.your_run.gunzip import FIELD_BYTES, Gunzipped
from toylab.your_run.run import RunFile, load_file, step_logs, zip_files
from toylab.your_run.steps import step_summaries


def inspect(capsys, path, *options):
    """(exit code, stdout, stderr) of ``python -m toylab inspect path``."""
    try:
        code = main(["inspect", str(path), *options])
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code or 0, out, err


def refused(capsys, tmp_path, built, *words):
    """The file is one error line naming it, with ``words`` in it; the line."""
    name, content = built
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = inspect(capsys, path)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("toylab: error: "), err
    assert all(word in err for word in words), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("build", "words"), [
    (encrypted_member, ["step_1.jsonl: encrypted in the archive"]),
    (deflate64_member, ["step_1.jsonl: compressed by Deflate64"]),
    (lambda: zip_bomb(60_000_000), ["step_1.jsonl: cannot be read from the archive", "CRC"]),
    (duplicate_members, ["duplicates.zip: 'step_1.jsonl' is in the archive twice"]),
    (exotic_step_names, ["step_", "digits, over 15"]),
    (exotic_step_column, ["log.jsonl: row 2, column 'step': 1e+300 is not a step number"]),
    (lambda: exotic_step_column("9" * 400), ["log.jsonl: row 2, column 'step'", "is not a step number"]),
    (surrogate_ids, ["surrogate_ids.jsonl: row 1, column 'sequence_id'", "not valid Unicode"]),
    (deep_json, ["deep.jsonl: not JSON Lines"]),
    (deep_dump, ["train_data_step1.jsonl: row 1 cannot be read", "nested too deeply"]),
    (lambda: gzip_empty_members(150_000), ["empty_members.jsonl.gz: gzip member 100,001 is over the limit"]),
    (lambda: gzip_long_name(2 * FIELD_BYTES), ["long_name.jsonl.gz: the file name in gzip member 1's header"]),
])
def test_each_hostile_class_is_one_line_naming_the_file(capsys, tmp_path, build, words):
    refused(capsys, tmp_path, build(), *words)


def test_a_deep_json_line_is_one_line_in_the_preview_too(tmp_path):
    name, content = deep_json()
    content = jsonl([row()])[:-1] + b"\n" + content                 # a good first line, then 100,000 brackets
    with pytest.raises(LogError, match="deep.jsonl: row 2"):
        load_file(RunFile(name, None, None, data=content))


def test_a_parquet_footer_over_its_bound_is_refused_before_it_is_parsed(monkeypatch):
    name, content = parquet_many_chunks(row_groups=2_000)             # 20,000 column chunks: a 1.3 MB footer
    bounds = CLI_BOUNDS.but(footer_bytes=1_000_000)
    monkeypatch.setattr("pyarrow.parquet.ParquetFile", lambda *args, **kwargs: pytest.fail("parsed"))
    with pytest.raises(LogError, match=r"many_chunks.parquet: its metadata \(1,\d{3},\d{3} bytes\) is over the limit "
                                       r"of 1 MB of Parquet metadata"):
        open_log_file(name, data=content, bounds=bounds)


def test_a_parquet_footer_over_its_bound_is_one_line_on_the_command_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("toylab.cli.inspect.CLI_BOUNDS", CLI_BOUNDS.but(footer_bytes=1_000_000))
    monkeypatch.setattr("pyarrow.parquet.ParquetFile", lambda *args, **kwargs: pytest.fail("parsed"))
    refused(capsys, tmp_path, parquet_many_chunks(row_groups=2_000), "many_chunks.parquet: its metadata (1,",
            "over the limit of 1 MB of Parquet metadata")


def test_a_parquet_footer_within_its_bound_is_read(tmp_path):
    name, content = parquet_many_chunks(row_groups=200)
    log = load_file(RunFile(name, None, None, data=content))[0]
    assert log.lengths.sum() == 200 and len(log.lengths) == 100


def test_ids_that_are_not_utf_8_in_parquet_are_one_line_naming_the_row():
    import pyarrow as pa
    ids = pa.array([b"a", b"a", b"\xed\xa0\x80", b"b"], pa.binary()).view(pa.string())
    content = parquet(pa.table({"sequence_id": ids, "sampler_logprobs": [-0.5] * 4, "trainer_logprobs": [-0.2] * 4}))
    with pytest.raises(LogError, match="ids.parquet: row 3, column 'sequence_id': the id is not valid UTF-8 text"):
        load_file(RunFile("ids.parquet", None, None, data=content))


# -- zip members: bounded whatever their headers say -------------------------------------------------------------

def test_a_zip_bomb_is_read_in_bounded_memory():
    """A member declaring 0 bytes that inflates to 200 MB: read a megabyte at a time and cut to its declared 0, never
    inflated whole (zipfile's read() inflates it all at once: 200 MB)."""
    name, content = zip_bomb(200 * 2**20)
    archive = zipfile.ZipFile(io.BytesIO(content))
    tracemalloc.start()
    try:
        with pytest.raises(LogError, match="step_1.jsonl: cannot be read from the archive .Bad CRC-32"):
            archives.member_bytes(archive, "step_1.jsonl", CLI_BOUNDS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, peak


def test_a_member_declaring_more_than_the_bound_is_refused_unread():
    name, content = zip_bomb(3 * 2**20, declared=3 * 2**20)
    files = zip_files(name, content, CLI_BOUNDS.but(file_bytes=2**20))
    [step] = list(step_logs(files, bounds=CLI_BOUNDS.but(file_bytes=2**20)))
    assert step.error.startswith("step_1.jsonl") and says(step.error, "3,145,728 bytes uncompressed", "limit")


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_bzip2_and_lzma_members_are_refused_unread(method):
    content = zipped({"step_1.jsonl": step_log()}, method)
    [step] = list(step_logs(zip_files("run.zip", content, CLI_BOUNDS)))
    assert step.error.startswith("step_1.jsonl: compressed by ") and "Deflate (zip's default)" in step.error


def test_an_archive_whose_directory_is_over_its_bound_is_refused_before_it_is_parsed(monkeypatch):
    content = zipped({f"notes/{index}.txt": b"" for index in range(300)})
    monkeypatch.setattr(archives, "ENTRIES", 299)
    monkeypatch.setattr(zipfile, "ZipFile", lambda *args, **kwargs: pytest.fail("parsed"))
    with pytest.raises(LogError, match="run.zip: the archive's directory lists 300 entries"):
        zip_files("run.zip", content, CLI_BOUNDS)


def test_a_zip_of_a_run_is_read_from_disk_as_from_memory(capsys, tmp_path):
    name, content = many_steps(4)
    (tmp_path / name).write_bytes(content)
    code, out, _ = inspect(capsys, tmp_path / name, "--json")
    assert code == 0 and [step["step"] for step in json.loads(out)["steps"]] == [1, 2, 3, 4]


# -- a run's steps and seconds -----------------------------------------------------------------------------------

def test_a_run_over_its_steps_is_read_as_far_as_the_bound_with_a_notice(capsys, tmp_path, monkeypatch):
    name, content = many_steps(12)
    (tmp_path / name).write_bytes(content)
    monkeypatch.setattr("toylab.cli.inspect_run.CLI_BOUNDS", CLI_BOUNDS.but(steps=5))
    code, out, err = inspect(capsys, tmp_path / name, "--json")
    result = json.loads(out)
    assert code == 0 and err == "" and [step["step"] for step in result["steps"]] == [1, 2, 3, 4, 5]
    assert says(result["cut_short"], "first 5 steps of 12", "at most 5 steps")
    code, out, _ = inspect(capsys, tmp_path / name)
    assert says(out.rstrip().splitlines()[-1], "Notice:", "first 5 steps of 12")


def test_a_run_over_its_seconds_is_read_as_far_as_the_clock_allows():
    name, content = many_steps(6)
    ticks = iter(range(0, 1000, 10))              # the start at 0 s, then 10 s more before each step
    summaries, cut = step_summaries(step_logs(zip_files(name, content, CLI_BOUNDS)), 6, {}, CLI_BOUNDS.but(
        run_seconds=25), clock=lambda: next(ticks))
    assert [summary["step"] for summary in summaries] == [1, 2]                      # the third would start at 30 s
    assert says(cut, "first 2 steps of 6", "25 s")


def test_a_run_within_its_bounds_has_no_notice():
    name, content = many_steps(6)
    summaries, cut = step_summaries(step_logs(zip_files(name, content, CLI_BOUNDS)), 6, {}, CLI_BOUNDS)
    assert len(summaries) == 6 and cut == ""


# -- only regular files ------------------------------------------------------------------------------------------

def test_a_pipe_named_like_a_step_is_not_opened(capsys, tmp_path):
    (tmp_path / "step_2.jsonl").write_bytes(step_log())
    os.mkfifo(tmp_path / "step_1.jsonl")
    code, out, _ = inspect(capsys, tmp_path, "--json")
    steps = json.loads(out)["steps"]
    assert code == 0 and steps[0]["error"].startswith("step_1.jsonl: ") and says(steps[0]["error"], "not a regular file")
    assert steps[1]["sequences"] == 3
    (tmp_path / "step_2.jsonl").unlink()
    code, _, err = inspect(capsys, tmp_path)
    assert code == 2 and "step_1.jsonl: not a regular file" in err


@pytest.mark.parametrize("name", ["log.jsonl", "run.zip"])
def test_a_pipe_given_as_the_file_is_one_line(capsys, tmp_path, name):
    os.mkfifo(tmp_path / name)
    code, _, err = inspect(capsys, tmp_path / name)
    assert code == 2 and f"{name}: not a regular file" in err and err.count("\n") == 1


# -- gzip, member by member ----------------------------------------------------------------------------------------

def gunzipped(content, bounds=CLI_BOUNDS, size=1 << 20):
    stream, out = Gunzipped("x.gz", bounds, io.BytesIO(content)), b""
    while chunk := stream.read(size):
        out += chunk
    return out


@pytest.mark.parametrize("size", [1, 7, 8192, 1 << 20])
def test_gzip_members_with_padding_and_header_fields_read_as_python_s_gzip_reads_them(size):
    parts = [gzip.compress(b"ab" * 70_000, mtime=0), b"\0\0", gzip.compress(b"", mtime=0),
             gzip.compress(os.urandom(3000), mtime=0), b"\0"]
    header = bytes([0x1F, 0x8B, 8, 0x08 | 0x10 | 0x04 | 0x02, 0, 0, 0, 0, 0, 255])      # name, comment, extra, CRC
    header += (5).to_bytes(2, "little") + b"extra" + b"name\0" + b"comment\0"
    header += (gzip.zlib.crc32(header) & 0xFFFF).to_bytes(2, "little")
    body = gzip.compress(b"fields", mtime=0)
    parts.append(header + body[10:])                                   # the same deflate data and trailer
    content = b"".join(parts)
    assert gunzipped(content, size=size) == gzip.decompress(content)


@pytest.mark.parametrize("content", [
    gzip.compress(b"x" * 1000, mtime=0)[:-5],                         # a truncated trailer
    gzip.compress(b"x" * 1000, mtime=0) + b"garbage",                 # not a gzip member after the first
    gzip.compress(b"x" * 1000, mtime=0)[:-8] + b"\0" * 8,             # a wrong CRC
    b"\x1f\x8b\x07" + gzip.compress(b"x", mtime=0)[3:],                 # an unknown method
], ids=["truncated", "garbage after", "wrong CRC", "unknown method"])
def test_corrupt_gzip_fails_where_python_s_gzip_fails_and_is_one_line(content):
    with pytest.raises(READ_ERRORS):
        gzip.GzipFile(fileobj=io.BytesIO(content)).read()
    with pytest.raises(READ_ERRORS):
        gunzipped(content)
    with pytest.raises(LogError, match=r"^log.jsonl.gz: the gzip data is corrupt or truncated \(.+\)$"):
        load_file(RunFile("log.jsonl.gz", None, None, data=gzip.compress(jsonl([row()] * 5000)) + content))


def test_the_member_bound_counts_members_not_bytes():
    content = gzip_empty_members(members=10)[1]
    assert gunzipped(content, CLI_BOUNDS.but(gzip_members=11)) == jsonl([row(), row()])
    with pytest.raises(LogError, match="gzip member 12 is over the limit of 11 gzip members"):
        gunzipped(gzip_empty_members(members=11)[1], CLI_BOUNDS.but(gzip_members=11))
