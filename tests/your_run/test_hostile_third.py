"""Issue 41's third audit on the command line: files that lie about their size are bounded by what they hold, names
reach the terminal shown and never acted on, a symbolic link out of a run folder is not followed, and a missing-ranks
notice lists only ranks of the run. Memory: tracemalloc where Python allocates, a child's peak resident set (its
rusage) where pyarrow does."""

import io
import json
import os
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hostile_logs import jsonl, row
from hostile_runs import step_log, zipped
from hostile_third import BIDI, ESCAPES, escape_named, lying_parquet, understated_zip
from messages import says

from toylab.cli.main import main
from toylab.your_run import archives
from toylab.your_run.bounds import CLI_BOUNDS, LogError
from toylab.your_run.files import open_log_file, preview
from toylab.your_run.parquet_pages import chunk_pages
from toylab.your_run.run import directory_files, step_logs

ROOT = Path(__file__).resolve().parents[2]


def inspect(capsys, *argv):
    """(exit code, stdout, stderr) of ``python -m toylab inspect ARGV``."""
    try:
        code = main(["inspect", *map(str, argv)])
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code or 0, out, err


def written(tmp_path, built):
    name, content = built
    path = tmp_path / name
    path.write_bytes(content)
    return path


# -- case 1: a Parquet file whose footer understates its list's length ----------------------------------------------

def test_the_lying_parquet_is_what_pyarrow_reads():
    """The builder's file is the lie of case 1, as pyarrow sees it: the footer says 2 values, the page holds 1,000."""
    _, data = lying_parquet(values=1_000, claimed=2)
    parquet = pq.ParquetFile(pa.BufferReader(data))
    assert parquet.metadata.row_group(0).column(0).num_values == 2
    assert len(parquet.read().column("sampler_logprobs")[0]) == 1_000


def test_a_parquet_whose_footer_understates_its_values_stops_at_the_token_bound_unread(capsys, tmp_path, monkeypatch):
    """Case 1: 10⁸ values in a 240-byte file passed the footer's checks and were decoded (3.3 GB, 11.5 s) before
    the token bound. Now the pages' headers are counted first and pyarrow never decodes a page."""
    path = written(tmp_path, lying_parquet(values=10**8, claimed=2))
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", lambda *args, **kwargs: pytest.fail("decoded"))
    code, out, err = inspect(capsys, path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert says(err, "lying.parquet: column 'sampler_logprobs': its pages hold 100,000,000 values (its metadata says 2)",
                "over the limit of 4,000,000 tokens")


@pytest.mark.slow
def test_a_lying_parquet_costs_no_more_memory_than_reading_nothing(tmp_path):
    """The child's peak resident set, inspecting the 10⁸-value file, against the same child inspecting a file of two
    values (its imports): within 50 MB (before: 3.3 GB)."""
    lying = written(tmp_path, lying_parquet(values=10**8, claimed=2))
    honest = written(tmp_path, ("honest.parquet", lying_parquet(values=2, claimed=2)[1]))

    def peak_mb(path):
        child = subprocess.Popen([sys.executable, "-m", "toylab", "inspect", str(path)], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        return usage.ru_maxrss / 1e3
    assert peak_mb(lying) < peak_mb(honest) + 50


@pytest.mark.parametrize("options", [dict(), dict(data_page_version="2.0"), dict(compression="zstd"),
                                     dict(compression="gzip", use_dictionary=False), dict(write_page_index=True),
                                     dict(row_group_size=700, data_page_size=1024),
                                     dict(write_statistics=True, compression="snappy")],
                         ids=["default", "v2 pages", "zstd", "gzip without dictionary", "page index",
                              "many groups and pages", "statistics"])
def test_pyarrow_s_pages_hold_what_its_footer_says(options):
    """On honest files (pyarrow's writer, each of its page layouts) the pages' headers count every column chunk's
    values as its footer does, and the whole file reads."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 40, 3_000)
    table = pa.table({"sampler_logprobs": [list(-rng.random(n)) for n in lengths],
                      "trainer_logprobs": [list(-rng.random(n)) for n in lengths],
                      "reward": rng.random(3_000), "sequence_id": [f"id {i}" for i in range(3_000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    data = sink.getvalue()
    metadata = pq.ParquetFile(pa.BufferReader(data)).metadata
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(column)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            assert chunk_pages(data, start, chunk.total_compressed_size, 10**6).values == chunk.num_values
    file = open_log_file("honest.parquet", data=data)
    assert preview(file).columns == tuple(table.column_names)


def test_a_parquet_with_more_pages_than_the_bound_is_refused_at_the_first_one_past_it():
    table = pa.table({"sampler_logprobs": [[-0.5] * 5] * 5_000, "trainer_logprobs": [[-0.25] * 5] * 5_000})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=100)
    with pytest.raises(LogError, match="page 51 is over the limit of 50 Parquet pages per file"):
        preview(open_log_file("pages.parquet", data=sink.getvalue(), bounds=CLI_BOUNDS.but(parquet_pages=50)))


# -- case 10: a zip whose end record understates its entries --------------------------------------------------------

def test_a_zip_whose_end_record_understates_its_entries_is_refused_by_counting_them(capsys, tmp_path):
    """Case 10: an end record saying 1 entry over a directory of 550,175 passed the 100,000-entry bound: 334 MB in
    the command line. Counted header by header, it stops at the bound, before zipfile parses a ZipInfo."""
    path = written(tmp_path, understated_zip(entries=550_175, claimed=1, real={"step_1.jsonl": step_log()}))
    tracemalloc.start()
    code, out, err = inspect(capsys, path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert says(err, "understated.zip: the archive's directory lists more than 100,000 entries",
                "(its end record says 1), over the limit of 100,000")
    assert peak < 2 * os.path.getsize(path) + 10 * 2**20              # its directory read once, no ZipInfo


def test_a_zip_whose_end_record_understates_fewer_entries_than_the_bound_is_read(capsys, tmp_path):
    path = written(tmp_path, understated_zip(entries=5, claimed=1, real={"step_1.jsonl": step_log(),
                                                                         "step_2.jsonl": step_log()}))
    code, out, err = inspect(capsys, path, "--json")
    assert code == 0 and [step["step"] for step in json.loads(out)["steps"]] == [1, 2]


# -- case 9: names a terminal would act on --------------------------------------------------------------------------

def test_a_run_file_named_with_escape_sequences_is_shown_escaped(capsys, tmp_path):
    """Case 9: a step file named with ESC sequences (clear the screen, set the window's title) was echoed raw in
    the "not read:" line."""
    (tmp_path / "step_1.jsonl").write_bytes(step_log())
    (tmp_path / escape_named(2)).write_bytes(b"not json\n")
    code, out, err = inspect(capsys, tmp_path)
    assert code == 0 and "\x1b" not in out and "\x07" not in out and err == ""
    assert "not read: step_2_\\x1b[2J\\x1b]0;owned\\x07.jsonl" in out


@pytest.mark.parametrize("as_run", [True, False])
def test_an_error_line_naming_such_a_file_is_escaped(capsys, tmp_path, as_run):
    path = tmp_path / escape_named(2)
    path.write_bytes(b"not json\n")
    code, out, err = inspect(capsys, tmp_path if as_run else path)
    assert code == 2 and err.count("\n") == 1 and err.startswith("toylab: error:")
    assert not any(character in err for character in ESCAPES if not character.isprintable())
    assert "\\x1b[2J" in err


def test_a_bidirectional_override_in_a_member_s_name_is_escaped(capsys, tmp_path):
    path = written(tmp_path, ("run.zip", zipped({"step_1.jsonl": step_log(),
                                                 f"step_2_{BIDI}lmth.jsonl": b"not json\n"})))
    code, out, _ = inspect(capsys, path)
    assert code == 0 and BIDI not in out and "step_2_\\u202elmth.jsonl" in out


# -- symbolic links out of a run folder; ranks the run has -----------------------------------------------------------

def test_a_symbolic_link_out_of_the_run_folder_is_not_followed(capsys, tmp_path):
    """A minor case: a symlink to a file outside the run folder was followed and its content quoted."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "step_1.jsonl").write_bytes(step_log())
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(jsonl([row(reward=0.123456)] * 4))
    (run / "step_2.jsonl").symlink_to(secret)
    (run / "step_3.jsonl").symlink_to(run / "step_1.jsonl")            # inside: followed
    code, out, _ = inspect(capsys, run, "--json")
    steps = {step["step"]: step for step in json.loads(out)["steps"]}
    assert code == 0 and set(steps) == {1, 2, 3}
    assert steps[2]["error"] == "step_2.jsonl: a symbolic link to a file outside the run's directory: not followed"
    assert steps[3]["sequences"] == steps[1]["sequences"] == 3
    assert "0.123456" not in out and str(secret) not in out


def test_a_missing_ranks_notice_lists_only_ranks_some_step_has(tmp_path):
    """A minor case: with ranks 0 and 5 in the run, a step holding rank 0 said ranks 1 to 5 were missing."""
    for step, ranks in ((1, (0, 5)), (2, (0,)), (3, (0, 5))):
        for rank in ranks:
            folder = tmp_path / f"step_{step}"
            folder.mkdir(exist_ok=True)
            (folder / f"rank_{rank}.jsonl").write_bytes(step_log())
    notices = {step_log.step: step_log.log.notices for step_log in step_logs(directory_files(str(tmp_path)))}
    assert notices[1] == notices[3] == ()
    assert notices[2] == ("ranks found: 0; rank 5 of the run is missing from this step: its numbers are of the ranks "
                          "found",)


def test_the_entry_count_stops_at_the_first_bytes_that_are_no_entry():
    """zipfile refuses such an archive: the count need go no further."""
    _, data = understated_zip(entries=3, claimed=3)
    broken = data.replace(b"PK\x01\x02", b"XX\x01\x02", 1)
    with pytest.raises(LogError, match="not a readable zip archive"):
        archives.open_archive("broken.zip", io.BytesIO(broken))
    assert zipfile.is_zipfile(io.BytesIO(data))
