"""gzip (RFC 1952), member after member, each inflated by zlib in C, its header and the number of members bounded.

Python's ``gzip.GzipFile`` reads a header's file name and comment one byte at a time, and starts every member in
Python: a 45 MB file-name field, or millions of empty members (20 bytes each), took it a minute for a 44 MB file.
Here a member's header is checked with ``bytes.find`` (its name and comment at most FIELD_BYTES each; its extra field
is at most 64 KB by the format) and then handed, header and all, to ``zlib.decompressobj`` (which checks each
member's CRC-32 and length, as GzipFile does); zero bytes between members are padding, as GzipFile allows; members are
counted against ``bounds.gzip_members``. Errors are GzipFile's kinds (OSError, EOFError, zlib.error), with the same
words where they say the same thing, except a bound exceeded: a ``LogError`` naming it.
"""

import io
import re
import zlib

from toylab.your_run.bounds import LogError

MAGIC = b"\x1f\x8b"
DEFLATE = 8
FEXTRA, FNAME, FCOMMENT, FHCRC = 4, 8, 16, 2
FIELD_BYTES = 1 << 16              # a header's file name or comment, with its terminating zero byte
READ_BYTES = 1 << 20               # compressed bytes read from the file at a time
FEED_BYTES = 1 << 14               # compressed bytes given to zlib at a time
NOT_ZERO = re.compile(rb"[^\0]")
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"
GZIP_WINDOW = 16 + zlib.MAX_WBITS  # zlib: a gzip header and trailer around the deflate data


class Gunzipped(io.RawIOBase):
    """The decompressed bytes of ``raw``, a binary stream of gzip members; ``name`` and ``bounds`` for the errors.

    Compressed bytes wait in ``buffer`` from ``position`` on, and go to zlib at most FEED_BYTES at a time, so that
    what zlib hands back unread (a copy) stays small however many members a read of the file holds."""

    def __init__(self, name, bounds, raw):
        super().__init__()
        self.name, self.bounds, self.raw = name, bounds, raw
        self.buffer, self.position = b"", 0
        self.inflater = None             # the member's decompressor (a finished one until the next member starts)
        self.members = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        """Up to len(buffer) decompressed bytes (at least one unless the stream has ended)."""
        while True:
            if (self.inflater is None or self.inflater.eof) and not self._next_member():
                return 0
            piece = memoryview(self.buffer)[self.position:self.position + FEED_BYTES]
            data = self.inflater.decompress(piece, len(buffer))
            left = self.inflater.unused_data if self.inflater.eof else self.inflater.unconsumed_tail   # at the end
            self.position += len(piece) - len(left)                # of a member both hold what follows it
            if data:
                buffer[:len(data)] = data
                return len(data)
            if not self.inflater.eof and self.position == len(self.buffer) and not self._read_more():
                raise EOFError(TRUNCATED)

    def _read_more(self):
        """Append the file's next bytes to what is left of the buffer; False at the end of the file."""
        more = self.raw.read(READ_BYTES)
        self.buffer, self.position = self.buffer[self.position:] + more, 0
        return bool(more)

    def _next_member(self):
        """Start the next member (True), or find the end of the stream (False); its header is checked first."""
        while (data := NOT_ZERO.search(self.buffer, self.position)) is None:       # zero bytes between members: padding
            self.position = len(self.buffer)
            if not self._read_more():
                return False
        self.position = data.start()
        if self.members == self.bounds.gzip_members:
            raise self.bounds.exceeded(self.name, "gzip_members", f"gzip member {self.members + 1:,}")
        self._check_header()
        self.members += 1
        self.inflater = zlib.decompressobj(GZIP_WINDOW)
        return True

    def _check_header(self):
        """Check the member's header and have all of it in the buffer (zlib then reads it, in C)."""
        self._need(10)
        header = self.buffer[self.position:self.position + 10]
        if header[:2] != MAGIC:
            raise OSError(f"Not a gzipped file ({header[:2]!r})")
        if header[2] != DEFLATE:
            raise OSError("Unknown compression method")
        flags, end = header[3], 10
        if flags & FEXTRA:
            self._need(end + 2)
            end += 2 + int.from_bytes(self.buffer[self.position + end:self.position + end + 2], "little")
        for flag, field in ((FNAME, "file name"), (FCOMMENT, "comment")):
            if flags & flag:
                end = self._field_end(end, field)
        self._need(end + (2 if flags & FHCRC else 0))

    def _field_end(self, start, field):
        """The header offset after a zero-terminated field starting at ``start``, at most FIELD_BYTES long."""
        while (zero := self.buffer.find(b"\0", self.position + start, self.position + start + FIELD_BYTES)) < 0:
            if len(self.buffer) >= self.position + start + FIELD_BYTES:
                raise LogError(f"{self.name}: the {field} in gzip member {self.members + 1:,}'s header is over "
                               f"{FIELD_BYTES:,} bytes; recompress the file")
            if not self._read_more():
                raise EOFError(TRUNCATED)
        return zero + 1 - self.position

    def _need(self, size):
        """Have ``size`` bytes of the member's header in the buffer."""
        while len(self.buffer) - self.position < size:
            if not self._read_more():
                raise EOFError(TRUNCATED)

    def close(self):
        self.raw.close()
        super().close()
