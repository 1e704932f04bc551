"""A run: the files of many steps (and ranks), each step read as one log.

A run is a directory, a zip archive of one, or several files (uploads). Each file's step comes from its path —
the last of ``step_N``, ``step-N``, ``stepN``, ``global_step_N``, ``train_data_stepN`` in it, or a file name
that is only a number (slime's ``{rollout_id}.pt``, verl's ``{step}.jsonl``) or two (Miles'
``{rollout_id}_{rank}.pt``) — or, for a file whose path names no step, from its ``step`` column (its rows are
split by that column). A step's files (one per rank: ``rank_R``, Miles' second number) are read one by one and
merged into one log: their sequences concatenated, rank by rank (Miles' rank files are first combined as its own
reader does, ``dump_ranks``). A file of a known layout that holds no log (NeMo-RL's validation data, a rollout dump,
a SkyRL pickle whose Parquet export is beside it) is left out of its step with a notice; so is a step whose ranks
are fewer than the run's other steps' (a notice naming the ranks found).

Reading is one step at a time (``step_logs``): while the caller works on one step, the next, if it is large
(AHEAD_BYTES), is read in a thread (reading a large file mostly runs outside Python's lock), and a step's log is
dropped once the caller moves on, so memory holds two steps, whatever the run's length. A step whose file is malformed is reported with the file's one-line
error and the other steps go on; a file that is no log at all (a config, a checkpoint) is not a run file: only
the log and dump extensions are read.
"""

import io
import os
import re
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Self

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from toylab.text import quoted
from toylab.your_run.archives import member_bytes, open_archive
from toylab.your_run.bounds import CLI_BOUNDS, Bounds
from toylab.your_run.columns import Columns, choose
from toylab.your_run.dumps import (
    DUMP_NAMES,
    PICKLE_EXTENSIONS,
    TORCH_EXTENSIONS,
    LeftOut,
    assemble,
    canonical_file,
    dump_kind,
    read_dump,
)
from toylab.your_run.files import (
    EXTENSIONS,
    LogError,
    LogFile,
    Preview,
    open_log_file,
    preview,
    read_batches,
    regular_file,
)
from toylab.your_run.log import RolloutLog, read_log

STEP = re.compile(r"(?:^|[^a-z])(?:global_)?(?:train_data_)?step[_-]?(\d+)", re.IGNORECASE | re.ASCII)
RANK = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)", re.IGNORECASE | re.ASCII)
BARE = re.compile(r"^(\d+)(?:_(\d+))?$", re.ASCII)
STEP_DIGITS = 15                  # a step or rank below 10**15: exact in float64, and on a chart's axis
RUN_EXTENSIONS = (*EXTENSIONS, ".gz", *TORCH_EXTENSIONS, *PICKLE_EXTENSIONS)
STEP_COLUMN = "step"
MAX_FILES = 10_000
AHEAD_BYTES = 1 << 20             # a step this large is read in a thread while the one before is used; a smaller one
                                  # when reached (a tiny step's reading beside another's summary costs more in
                                  # Python's lock than it overlaps: 10,000 tiny steps 36 s that way, 28 s in turn)


@dataclass(frozen=True)
class RunFile:
    """One file of a run: its name within the run, the step and rank its path gives (None: not given), and
    where its bytes are (``path`` on disk, ``data`` in memory, or ``archive``: a zip in memory, read only when the
    file's step is)."""
    name: str
    step: int | None
    rank: int | None
    path: str | None = field(default=None, repr=False)
    data: bytes | None = field(default=None, repr=False)
    archive: zipfile.ZipFile | None = field(default=None, repr=False)     # holding the member ``name``
    archive_path: str | None = field(default=None, repr=False)           # that zip's path, if it is on disk
    refused: str | None = field(default=None, repr=False)                # why it is never read (said with its step)

    def loaded(self, bounds: Bounds) -> Self:
        """This file with its bytes in ``data`` (a zip member is read now, within the bounds: ``archives``); a file on
        disk as it is, if it is a regular file (a pipe named step_1.jsonl would never end); LogError if ``refused``."""
        if self.refused is not None:
            raise LogError(f"{self.name}: {self.refused}")
        if self.path is not None:
            regular_file(self.name, self.path)
        if self.archive is None:
            return self
        return replace(self, data=member_bytes(self.archive, self.name, bounds), archive=None)

    def stored_bytes(self) -> int:
        """Its size as stored: a zip member's as its header declares it, a file's on disk (0 if it cannot be told)."""
        if self.archive is not None:
            return self.archive.getinfo(self.name).file_size
        if self.data is not None:
            return len(self.data)
        if self.path is None or self.refused is not None:
            return 0
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0


@dataclass(frozen=True)
class StepLog:
    """A step's merged log, or (log None) the one-line error that stopped it; step None: a file whose step
    could not be told."""
    step: int | None
    files: tuple[str, ...]
    log: RolloutLog | None = None
    error: str | None = None


def step_and_rank(name: str) -> tuple[int | None, int | None]:
    """(step, rank) from a run file's path; either is None when the path does not say."""
    parts = name.replace("\\", "/").split("/")
    stem = parts[-1].split(".")[0]
    steps = [_number(name, match) for part in parts for match in STEP.findall(part)]
    ranks = [_number(name, match) for part in parts for match in RANK.findall(part)]
    bare = BARE.match(stem)
    if not steps and bare:
        steps = [_number(name, bare.group(1))]
        if bare.group(2) is not None and not ranks:
            ranks = [_number(name, bare.group(2))]
    return (steps[-1] if steps else None), (ranks[-1] if ranks else None)


def _number(name, digits):
    """A step or rank number from a path; LogError naming the file if it has over STEP_DIGITS digits."""
    if len(digits.lstrip("0")) > STEP_DIGITS:
        raise LogError(f"{quoted(name)}: its path names a step or rank of {len(digits):,} digits, over "
                       f"{STEP_DIGITS}; rename the file")
    return int(digits)


def is_run_file(name):
    base = os.path.basename(name)
    return not base.startswith(".") and base.lower().endswith(RUN_EXTENSIONS) and not base.lower().endswith(".zip")


OUTSIDE = "a symbolic link to a file outside the run's directory: not followed"


def directory_files(root: str) -> list[RunFile]:
    """The RunFiles under a directory, in path order. A symbolic link is followed only to a file inside the directory:
    one that leads out of it is a RunFile never read (its step says why), and a link to a directory is not entered
    (``os.walk``)."""
    found, inside = [], os.path.join(os.path.realpath(root), "")
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if is_run_file(relative):
                leaves = os.path.islink(path) and not os.path.realpath(path).startswith(inside)
                found.append(RunFile(relative, *step_and_rank(relative), path=None if leaves else path,
                                     refused=OUTSIDE if leaves else None))
                if len(found) > MAX_FILES:
                    raise LogError(f"{root}: more than {MAX_FILES:,} log files; give a directory of one run")
    if not found:
        raise LogError(f"{root}: no log files in it (Parquet, JSON Lines, CSV, or a framework's dump)")
    return found


def zip_files(name: str, source: bytes | str, bounds: Bounds) -> list[RunFile]:
    """The RunFiles in a zip archive (``source``: its bytes, or its path), each read (and bounded by
    ``bounds.file_bytes``) only when its step is; the members' declared sizes may sum to ``bounds.text_bytes`` at
    most. The archive's directory is checked before it is parsed, and a name in it twice is refused (``archives``)."""
    archive = open_archive(name, io.BytesIO(source) if isinstance(source, bytes) else source)
    members = [member for member in archive.infolist() if not member.is_dir() and is_run_file(member.filename)]
    if len(members) > MAX_FILES:
        raise LogError(f"{name}: more than {MAX_FILES:,} log files")
    total = sum(member.file_size for member in members)
    if total > bounds.text_bytes:
        raise bounds.exceeded(name, "text_bytes", f"the archive's log files ({total:,} bytes uncompressed)")
    on_disk = None if isinstance(source, bytes) else source
    found = [RunFile(member.filename, *step_and_rank(member.filename), archive=archive, archive_path=on_disk)
             for member in sorted(members, key=lambda member: member.filename)]
    if not found:
        raise LogError(f"{name}: the archive holds no log files (Parquet, JSON Lines, CSV, or a framework's dump)")
    return found


def uploaded_files(uploads: Iterable[tuple[str, bytes]]) -> list[RunFile]:
    """The RunFiles of uploads, a list of (name, bytes)."""
    return [RunFile(name, *step_and_rank(name), data=data) for name, data in uploads]


def load_file(file: RunFile, bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False, layouts: dict[str, tuple[Preview, Columns]] | None = None,
              **explicit: str | None) -> tuple[RolloutLog, LogFile, Preview]:
    """(RolloutLog, LogFile, Preview) of one run file (an ordinary log or a framework's dump, read alone), columns
    detected or ``explicit``. ``layouts`` ({Parquet schema: (Preview, Columns)}, filled as files are read) lets the
    files of a run that share a Parquet schema share the first one's column choice instead of each previewing its
    rows."""
    file = file.loaded(bounds)
    kind = _dump_kind(file, explicit)
    log_file: LogFile
    if kind is not None:
        log_file = canonical_file(file.name, kind, data=file.data, path=file.path, allow_torch=allow_torch,
                                  bounds=bounds)
    else:
        log_file = open_log_file(file.name, data=file.data, path=file.path, bounds=bounds)
    return read_file(log_file, layouts, **explicit)


def read_file(log_file: LogFile, layouts: dict[str, tuple[Preview, Columns]] | None = None, **explicit: str | None
              ) -> tuple[RolloutLog, LogFile, Preview]:
    """(RolloutLog, LogFile, Preview) of an opened LogFile (see ``load_file``)."""
    schema = _parquet_schema(log_file) if layouts is not None and log_file.format == "parquet" else None
    if layouts is not None and schema in layouts:
        first_rows, columns = layouts[schema]
    else:
        first_rows = preview(log_file)
        columns = choose(first_rows, log_file.name, **explicit)
        if layouts is not None and schema is not None:
            layouts[schema] = first_rows, columns
    return read_log(log_file, first_rows, columns), log_file, first_rows


def _dump_kind(file, explicit):
    """The file's dump layout (None: an ordinary log); LogError if column options were given for a dump."""
    kind = dump_kind(file.name, _head(file))
    if kind is not None and any(explicit.values()):
        raise LogError(f"{file.name}: a {DUMP_NAMES[kind]} dump is read as written: column options (--sampler, "
                       "--trainer, …) do not apply to it")
    return kind


def _parquet_schema(log_file):
    """The file's Arrow schema as text (None if its footer cannot be read: the reader will say why)."""
    try:
        source = log_file.path if log_file.data is None else pa.BufferReader(log_file.data)
        return str(pq.read_schema(source))
    except (pa.ArrowInvalid, OSError):
        return None


def _head(file, size=1 << 16):
    if file.data is not None:
        return file.data[:size]
    try:
        with open(file.path, "rb") as stream:
            return stream.read(size)
    except OSError as error:
        raise LogError(f"{file.name}: cannot read the file ({error.strerror or error})") from None


@dataclass
class RunPlan:
    """A run's steps before any is read: each step's files, the logs of files without a step in their path split by
    their ``step`` column (read already), the one-line errors of those that could not be, and the ranks the run's
    paths name."""
    by_step: dict[int, list[RunFile]]
    split: dict[int, list[tuple[RunFile, RolloutLog]]]
    errors: list[tuple[str, str]]
    ranks: tuple[int, ...]

    @property
    def steps(self) -> list[int]:
        return sorted(set(self.by_step) | set(self.split))

    def stored_bytes(self, step: int) -> int:
        return sum(file.stored_bytes() for file in self.by_step.get(step, []))


def plan_run(files: Sequence[RunFile], bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False,
             **explicit: str | None) -> RunPlan:
    """The RunPlan of a run's files (files without a step in their path are read now, to split them by their
    ``step`` column); LogError if there is no step to read."""
    by_step: dict[int, list[RunFile]] = {}
    errors: list[tuple[str, str]] = []
    for file in files:
        if file.step is not None:
            by_step.setdefault(file.step, []).append(file)
    split: dict[int, list[tuple[RunFile, RolloutLog]]] = {}
    for file in (file for file in files if file.step is None):
        try:
            for step, log in _split_by_step_column(file, bounds, allow_torch, **explicit):
                split.setdefault(step, []).append((file, log))
        except LogError as error:
            errors.append((file.name, str(error)))
    if errors and not by_step and not split:
        raise LogError(errors[0][1])
    return RunPlan(by_step, split, errors, _run_ranks(by_step))


def read_step(plan: RunPlan, step: int, bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False,
              layouts: dict[str, tuple[Preview, Columns]] | None = None, **explicit: str | None) -> StepLog:
    """The StepLog of one step of a plan: its files read one by one (rank order) and merged, or the one-line error
    that stopped it. ``layouts`` is shared by the steps one process reads (``read_file``)."""
    step_files = sorted(plan.by_step.get(step, []), key=lambda file: (file.rank is None, file.rank, file.name))
    parts = plan.split.get(step, [])
    names = tuple(file.name for file in step_files) + tuple(file.name for file, _ in parts)
    try:
        logs, notices = _step_files(step_files, bounds, allow_torch, {} if layouts is None else layouts, explicit)
        logs += [log for _, log in parts]
        if not logs:
            raise LogError("; ".join(notices))
        return StepLog(step, names, merged(f"step {step}", logs, _rank_notices(step_files, plan.ranks) + notices))
    except LogError as error:
        return StepLog(step, names, error=str(error))


def step_logs(files: Sequence[RunFile], bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False,
              **explicit: str | None) -> Iterator[StepLog]:
    """StepLog per step, in step order, each read only when reached (files without a step in their path are
    read first, to split them by their ``step`` column)."""
    yield from step_logs_of(plan_run(files, bounds, allow_torch, **explicit), bounds, allow_torch, **explicit)


def step_logs_of(plan: RunPlan, bounds: Bounds = CLI_BOUNDS, allow_torch: bool = False,
                 **explicit: str | None) -> Iterator[StepLog]:
    """``step_logs`` of a RunPlan: a large next step read in a thread while this one is used, then a StepLog per
    error of the plan's files that could not be split."""
    layouts: dict[str, tuple[Preview, Columns]] = {}

    def read(step):
        step_log = read_step(plan, step, bounds, allow_torch, layouts, **explicit)
        plan.split.pop(step, None)                  # a split step's logs are dropped once read
        return step_log

    def ahead(reader, step):
        """The step's StepLog to come: read now in the reader thread if its files hold AHEAD_BYTES or more, else read
        when it is asked for."""
        if plan.stored_bytes(step) >= AHEAD_BYTES:
            return reader.submit(read, step).result
        return lambda: read(step)

    with ThreadPoolExecutor(max_workers=1) as reader:          # a large next step is read while this one is used
        steps = plan.steps
        if steps:
            coming = ahead(reader, steps[0])
            for following in steps[1:]:
                current, coming = coming(), ahead(reader, following)
                yield current
            yield coming()
    for name, message in plan.errors:
        yield StepLog(None, (name,), error=message)


def _step_files(step_files, bounds, allow_torch, layouts, explicit):
    """(RolloutLogs, notices) of a step's files: ordinary logs read one by one, dumps read into Parts and assembled
    (Miles' ranks combined), files that hold no log left out with a notice."""
    logs, parts, notices = [], [], []
    exported = _exported_pickles(step_files)
    for file in step_files:
        if file.name in exported:
            notices.append(f"{file.name}: a pickle, never opened: read from its export {exported[file.name]}")
            continue
        file = file.loaded(bounds)
        kind = _dump_kind(file, explicit)
        try:
            if kind is None:
                logs.append(read_file(open_log_file(file.name, data=file.data, path=file.path, bounds=bounds),
                                      layouts, **explicit)[0])
            else:
                parts.append(read_dump(file.name, kind, file.data, file.path, allow_torch, bounds))
        except LeftOut as left:
            notices.append(str(left))
    dump_files, assembled = assemble(parts, bounds)
    logs += [read_file(dump_file)[0] for dump_file in dump_files]
    return logs, notices + assembled


def _exported_pickles(step_files):
    """{pickle's name: its export's name} for the step's pickles with a Parquet file of the same name beside them
    (SkyRL's export command writes FILE.parquet next to FILE.pkl)."""
    names = {file.name for file in step_files}
    exports = {}
    for name in names:
        stem, extension = os.path.splitext(name)
        if extension.lower() in PICKLE_EXTENSIONS and stem + ".parquet" in names:
            exports[name] = stem + ".parquet"
    return exports


def _run_ranks(by_step):
    """The ranks the run's steps name (their union), or () when no file names one."""
    return tuple(sorted({file.rank for files in by_step.values() for file in files if file.rank is not None}))


def _rank_notices(step_files, ranks):
    """A notice when the step's files name fewer ranks than the run's other steps name: its batch may be partial. The
    ranks missing are those some step of the run has (a rank no step has is not a rank of the run)."""
    found = sorted({file.rank for file in step_files if file.rank is not None})
    missing = sorted(set(ranks) - set(found))
    if not found or not missing:
        return []
    return [f"ranks found: {', '.join(map(str, found))}; rank{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))} of the run {'are' if len(missing) > 1 else 'is'} missing from this "
            "step: its numbers are of the ranks found"]


def _split_by_step_column(file, bounds, allow_torch, **explicit):
    """(step, RolloutLog) for each value of the file's ``step`` column; LogError if its path names no step and
    it has no such column."""
    log, log_file, first_rows = load_file(file, bounds, allow_torch, **explicit)
    column = next((name for name in first_rows.columns if name.lower() == STEP_COLUMN), None)
    if column is None or first_rows.kinds[column] != "number":
        raise LogError(f"{file.name}: which step is it? Its path names none (step_N, global_step_N, "
                       f"train_data_stepN, …) and it has no numeric {STEP_COLUMN!r} column (an upload keeps only "
                       "its file name: upload a zip of the run's directory)")
    steps = np.concatenate([batch.column(0).to_numpy(zero_copy_only=False)
                            for _, batch, _ in read_batches(log_file, {column: "number"}, first_rows)])
    of_sequence = steps[log.rows - 1]
    whole = np.isfinite(of_sequence) & (of_sequence == np.round(of_sequence)) & (np.abs(of_sequence) < 10**STEP_DIGITS)
    if not np.all(whole):
        bad = int(np.argmax(~whole))
        raise LogError(f"{file.name}: row {log.rows[bad]}, column {column!r}: {of_sequence[bad]:g} is not a step "
                       f"number (a whole number of at most {STEP_DIGITS} digits)")
    for step in np.unique(of_sequence):
        yield int(step), subset(log, np.flatnonzero(of_sequence == step))


def subset(log, sequences):
    """The RolloutLog of some of a log's sequences (indices, in order)."""
    lengths = log.lengths[sequences]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    tokens = np.repeat(log.offsets[sequences] - starts, lengths) + np.arange(lengths.sum())
    return RolloutLog(log.name, log.columns, log.sampler_logprobs[tokens], log.trainer_logprobs[tokens],
                      np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                      None if log.rewards is None else log.rewards[sequences], log.rows[sequences], 0,
                      None if log.advantages is None else log.advantages[sequences], log.notices,
                      None if log.entropy_sums is None else log.entropy_sums[sequences])


def merged(name, logs, notices=()):
    """One RolloutLog of several (ranks of one step): sequences concatenated; rewards, advantages and entropies kept
    only if every log has them; the logs' notices and ``notices``, each once."""
    dropped = [field for field in ("rewards", "advantages") if 0 < sum(getattr(log, field) is None for log in logs)
               < len(logs)]
    partial = [f"{field} left out: {', '.join(log.name for log in logs if getattr(log, field) is None)} "
               f"{'has' if sum(getattr(log, field) is None for log in logs) == 1 else 'have'} none, and a step's "
               f"{field} are kept only when every file has them" for field in dropped]
    noticed = tuple(dict.fromkeys([*notices, *(notice for log in logs for notice in log.notices), *partial]))
    if len(logs) == 1:
        return replace(logs[0], notices=noticed)
    lengths = np.concatenate([log.lengths for log in logs])
    return RolloutLog(name, logs[0].columns, np.concatenate([log.sampler_logprobs for log in logs]),
                      np.concatenate([log.trainer_logprobs for log in logs]),
                      np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), _joined(logs, "rewards"),
                      np.concatenate([log.rows for log in logs]), sum(log.dropped for log in logs),
                      _joined(logs, "advantages"), noticed, _joined(logs, "entropy_sums"))


def _joined(logs, field):
    """The logs' per-sequence ``field`` concatenated, None unless every log has it."""
    values = [getattr(log, field) for log in logs]
    return None if any(value is None for value in values) else np.concatenate(values)
