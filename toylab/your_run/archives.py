"""A run's zip archive: its members listed and read within bounds, whatever their headers say.

- Its directory: the end record says how many entries and how many bytes the central directory holds. The bytes are
  checked (DIRECTORY_BYTES), then the entries are counted in them, header by header, as ``zipfile`` will parse them
  (ENTRIES; a ZipInfo costs about 500 bytes): the end record's count is the writer's word, and ``zipfile`` parses
  every entry in the directory's bytes whatever it says (an end record saying 1 over 550,175 entries cost 334 MB).
- A name twice (an archive appended to): which member is the step's is not clear, so the archive is refused.
- A member is read only if it is stored or deflated (what zip, shutil, Finder and Explorer write): ``zipfile``
  inflates bzip2 and LZMA in unbounded calls, a few kilobytes into gigabytes; an encrypted member, or another method
  (Deflate64, …), is one line naming it.
- A member is read only if the size it declares is within ``bounds.file_bytes``, and then READ_BYTES at a time:
  ``zipfile`` counts what it inflates against that declared size and stops there, whatever the data holds (a member
  declaring 0 bytes that inflates to 1 GiB reads as 0 bytes and fails its CRC), and inflates at most the bytes asked
  for in one call (``ZipFile.read`` asks for all of it at once: 1 GiB, then cut to the declared 0).
Every problem is a ``LogError``: one line naming the archive or the member.
"""

import struct
import zipfile
import zlib

from toylab.your_run.bounds import LogError

ENTRIES = 100_000                  # entries of an archive's central directory, log files or not
DIRECTORY_BYTES = 32 * 2**20       # bytes of its central directory
READ_BYTES = 1 << 20
ONLY_LOGS = "zip only the run's log files"
END, END64_LOCATOR, END64, CENTRAL = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06", b"PK\x01\x02"
END_SEARCH = 22 + 65_535           # the end record and the longest comment
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "Deflate"}
OTHER_METHODS = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA", 9: "Deflate64", 93: "Zstandard", 95: "xz",
                 98: "PPMd"}
READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error, NotImplementedError,
               RuntimeError, UnicodeDecodeError)          # the last: a name flagged UTF-8 that is not


def open_archive(name, source):
    """The ZipFile of ``source`` (a path or a binary stream), its directory checked first (see the module docstring);
    LogError if it is not a readable zip, over the bounds, or holds a name twice."""
    try:
        stream = open(source, "rb") if isinstance(source, str) else source
        entries, size, start = _directory(stream)
        if entries > ENTRIES or size > DIRECTORY_BYTES:
            raise LogError(f"{name}: the archive's directory lists {entries:,} entries in {size:,} bytes, over the "
                           f"limit of {ENTRIES:,} entries or {DIRECTORY_BYTES // 2**20} MiB; {ONLY_LOGS}")
        if _counted_entries(stream, start, size) > ENTRIES:
            raise LogError(f"{name}: the archive's directory lists more than {ENTRIES:,} entries (its end record says "
                           f"{entries:,}), over the limit of {ENTRIES:,}; {ONLY_LOGS}")
        archive = zipfile.ZipFile(stream)
        infos = archive.infolist()
    except READ_ERRORS as error:
        raise LogError(f"{name}: not a readable zip archive ({_first_line(error)})") from None
    names = [info.filename for info in infos]
    if len(set(names)) < len(names):
        seen = set()
        twice = next(name for name in names if name in seen or seen.add(name))
        raise LogError(f"{name}: {twice!r} is in the archive twice (an archive appended to?): which one holds the "
                       "step is not clear; zip the run's directory afresh")
    return archive


def _directory(stream):
    """(entries, bytes, where it starts) of the central directory, from the end record (or its zip64 form): it ends
    where that record starts, as ``zipfile`` reads it; (0, 0, 0) when there is none (``zipfile`` then says why)."""
    stream.seek(0, 2)
    length = stream.tell()
    stream.seek(max(0, length - END_SEARCH))
    tail = stream.read()
    at = tail.rfind(END)
    if at < 0 or len(tail) - at < 22:
        return 0, 0, 0
    entries, size = struct.unpack("<HI", tail[at + 10:at + 16])
    ends = length - len(tail) + at
    locator = at - 20
    if (entries == 0xFFFF or size == 0xFFFFFFFF) and locator >= 0 and tail[locator:locator + 4] == END64_LOCATOR:
        offset = struct.unpack("<Q", tail[locator + 8:locator + 16])[0]
        stream.seek(offset)
        record = stream.read(56)
        if record[:4] == END64 and len(record) == 56:
            entries, size = struct.unpack("<QQ", record[32:48])
            ends = offset
    return entries, size, max(0, ends - size)


def _counted_entries(stream, start, size):
    """The entries of the directory's ``size`` bytes from ``start``, counted header by header (46 bytes and the
    lengths of its name, extra field and comment) up to ENTRIES + 1; the count stops at the first bytes that are not
    an entry's header (``zipfile`` refuses the archive there)."""
    stream.seek(start)
    directory = stream.read(size)
    at = count = 0
    while count <= ENTRIES and at + 46 <= len(directory) and directory[at:at + 4] == CENTRAL:
        count += 1
        name, extra, comment = struct.unpack_from("<HHH", directory, at + 28)
        at += 46 + name + extra + comment
    return count



def member_bytes(archive, name, bounds):
    """The bytes of the member ``name``, READ_BYTES at a time; LogError if it is encrypted, compressed by a method not
    read here, corrupt (its CRC), or declares over ``bounds.file_bytes``."""
    info = archive.getinfo(name)
    if info.flag_bits & 0x1:
        raise LogError(f"{name}: encrypted in the archive (a password-protected zip); zip the run without a password")
    if info.compress_type not in METHODS:
        method = OTHER_METHODS.get(info.compress_type, f"method {info.compress_type}")
        raise LogError(f"{name}: compressed by {method} in the archive, which is not read here; zip the run with "
                       "Deflate (zip's default)")
    if info.file_size > bounds.file_bytes:
        raise bounds.exceeded(name, "file_bytes", f"the file ({info.file_size:,} bytes uncompressed)")
    chunks = []
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(READ_BYTES):
                chunks.append(chunk)
    except READ_ERRORS as error:
        raise LogError(f"{name}: cannot be read from the archive ({_first_line(error)})") from None
    return b"".join(chunks)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else type(error).__name__
