"""What a rollout log may be: the bounds every reader checks while it reads, before the work they bound.

    file_bytes            the file as given (an upload, or a file on disk), compressed or not
    text_bytes            a text log after decompression: counted as the decompressor delivers it
    gzip_members          members of a gzip file (RFC 1952 allows many, each with its own header; bgzip writes one
                          per 64 kB of text): counted as each starts (``gunzip``)
    line_bytes            one line of a text log: counted in the same stream, so no line is ever held whole
                          before it is known to fit (a CSV cell may be this long too)
    columns               columns of the file (a CSV header, the keys of the first JSON rows, a Parquet schema)
    footer_bytes          a Parquet file's metadata (its footer: the schema, and a few dozen bytes per column chunk
                          of every row group), checked from the file's last 8 bytes before it is parsed: parsed, a
                          column chunk takes about 800 bytes, so this bounds the chunks and row groups too
    parquet_pages         a Parquet file's pages: their headers are walked before any page is decoded
                          (``parquet_pages``), for what they hold, whatever the footer says
    tokens                tokens of the file, masked ones included, and its rows (a row counts as one token
                          even if it holds none; so does a line of text, blank or not, counted in the stream):
                          counted batch by batch, for Parquet from its metadata and then its pages' headers first
    sequences             sequences of the file, those without a response token included: rows of a row-per-
                          sequence log, distinct ids of a row-per-token log (counted as the ids are met)
    tokens_per_sequence   tokens of one sequence
    steps                 steps of a run read (the first ones, in step order; a notice says how many of how many)
    run_seconds           seconds a run's reading may take: the steps read by then are shown, with that notice

A log within the bounds reads in under 1 GB (the command line) and adds under 300 MB to the page's server
(``benchmarks/hostile_upload.py`` measures both). Units are decimal: 1 MB = 1,000,000 bytes, as in
Streamlit's uploader. A bound exceeded is one ``LogError`` line that names it; a run over its steps or its seconds is
shown as far as it was read, with a notice (``steps.step_summaries``).

Values are bounded too: a log-ratio |log ρ_t| = |log π − log μ| above LOG_RATIO_LIMIT (ρ_t² would not fit in
float64, and the token χ² needs it) and a reward above REWARD_LIMIT in size are refused, with their row.
"""

import io
from dataclasses import dataclass, fields, replace

import numpy as np

MB = 1_000_000
LOG_RATIO_LIMIT = 350.0              # e^(2·350) ≈ 1e304: ρ², and its means (taken scaled), stay finite
REWARD_LIMIT = 1e100                 # squares and sums of millions of rewards stay finite
READ_BUFFER = 1 << 20                # bytes the text readers ask the stream for at a time


class LogError(ValueError):
    """A bad rollout log: the message is one line naming the file and, where it can, the row and column."""


@dataclass(frozen=True)
class Bounds:
    """The largest log a reader accepts (see the module docstring)."""
    file_bytes: int
    text_bytes: int = 1_000 * MB
    gzip_members: int = 100_000
    line_bytes: int = 16 * MB
    columns: int = 1_000
    footer_bytes: int = 4 * MB
    parquet_pages: int = 100_000
    tokens: int = 2_000_000
    sequences: int = 250_000
    tokens_per_sequence: int = 1_000_000
    steps: int = 10_000
    run_seconds: int = 600

    def but(self, **changes):
        return replace(self, **changes)

    def lines(self):
        """Each bound in words: 'tokens per sequence: 1,000,000'."""
        return [f"{SHORT[field.name]}: {self.amount(field.name)}" for field in fields(self)]

    def amount(self, field):
        value = getattr(self, field)
        if field.endswith("bytes"):
            return f"{value / MB:,.0f} MB" if value % MB == 0 else f"{value:,} bytes"
        if field.endswith("seconds"):
            return f"{value:,} s"
        return f"{value:,}"

    def exceeded(self, name, field, what):
        """The LogError '<name>: <what> is over the limit of <bound> <unit>; <advice>'."""
        return LogError(f"{name}: {what} is over the limit of {self.amount(field)} {UNITS[field]}; {ADVICE[field]}")


SHORT = {"file_bytes": "file size", "text_bytes": "text once decompressed", "gzip_members": "gzip members",
         "line_bytes": "one line of text", "columns": "columns", "footer_bytes": "a Parquet file's metadata (its footer)",
         "parquet_pages": "a Parquet file's pages",
         "tokens": "tokens per file (a row, or a line of text, counts as one at least)",
         "sequences": "sequences per file", "tokens_per_sequence": "tokens per sequence",
         "steps": "steps of a run read (the first ones)", "run_seconds": "reading a run (the steps read by then)"}
UNITS = {"file_bytes": "per file", "text_bytes": "of text once decompressed", "gzip_members": "gzip members per file",
         "line_bytes": "per line of text", "columns": "columns per file", "footer_bytes": "of Parquet metadata",
         "parquet_pages": "Parquet pages per file",
         "tokens": "tokens per file (a row, or a line of text, counts as one at least)",
         "sequences": "sequences per file", "tokens_per_sequence": "tokens per sequence"}
ADVICE = {"file_bytes": "compress it (.gz) or keep fewer sequences",
          "text_bytes": "keep fewer sequences or columns",
          "gzip_members": "recompress it as one member (gzip -dc FILE | gzip)",
          "line_bytes": "a sequence this long fits in Parquet (a list column), or keep fewer columns",
          "columns": "keep the log-prob, mask, reward and id columns",
          "footer_bytes": "write it in fewer row groups (pyarrow's default row_group_size), or keep fewer columns",
          "parquet_pages": "write it in larger pages (pyarrow's default data_page_size) and fewer row groups",
          "tokens": "keep fewer sequences (a random sample estimates the same numbers)",
          "sequences": "keep fewer sequences (a random sample estimates the same numbers)",
          "tokens_per_sequence": "keep shorter sequences"}
PAGE_BOUNDS = Bounds(file_bytes=50 * MB, steps=1_000, run_seconds=30)      # an upload on the page
CLI_BOUNDS = Bounds(file_bytes=200 * MB, tokens=4_000_000)     # python -m toylab inspect, and load_log


class CountedText(io.RawIOBase):
    """A text log's bytes as they are decompressed, counted: LogError (``over``) at the first byte past
    ``bounds.text_bytes`` in all, or past ``bounds.line_bytes`` in one line. ``raw`` is the file's own stream
    (for the share read so far), ``source`` the decompressed one (``raw`` itself when not compressed)."""

    def __init__(self, name, bounds, raw, source, size):
        super().__init__()
        self.name, self.bounds, self.raw, self.source, self.size = name, bounds, raw, source, size
        self.delivered = self.line_length = self.line = 0          # bytes, bytes of the open line, lines ended

    def readable(self):
        return True

    def readinto(self, buffer):
        count = self.source.readinto(buffer)
        if count:
            self._count(np.frombuffer(buffer, np.uint8, count))
        return count

    def share_read(self):
        """The share of the file's own bytes consumed so far."""
        return min(1.0, self.raw.tell() / self.size) if self.size else 1.0

    def _count(self, chunk):
        self.delivered += chunk.size
        if self.delivered > self.bounds.text_bytes:
            raise self.bounds.exceeded(self.name, "text_bytes", "the text")
        ends = np.flatnonzero(chunk == 10)
        if ends.size == 0:
            self.line_length += chunk.size
        else:
            lengths = np.diff(ends, prepend=-1 - self.line_length) - 1      # the lines ended in this chunk
            longest = int(np.argmax(lengths))
            if lengths[longest] > self.bounds.line_bytes:
                self._line_too_long(self.line + longest + 1)
            self.line += ends.size
            self.line_length = chunk.size - ends[-1] - 1
        if self.line_length > self.bounds.line_bytes:
            self._line_too_long(self.line + 1)
        if self.line > self.bounds.tokens + 1:                            # a CSV header is one line more
            raise self.bounds.exceeded(self.name, "tokens", f"line {self.bounds.tokens + 2:,}")

    def _line_too_long(self, line):
        raise self.bounds.exceeded(self.name, "line_bytes", f"line {line}")

    def close(self):
        self.source.close()
        self.raw.close()
        super().close()


def buffered(counted):
    """The counted stream with ``read(n)`` that returns n bytes until the end (pyarrow's readers need full blocks)."""
    return io.BufferedReader(counted, buffer_size=READ_BUFFER)
