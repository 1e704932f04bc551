"""A rollout log, read and checked: the response tokens of B sampled sequences with both log-probabilities.

    log = load_log("run.parquet")              # or load_log(name, data=uploaded_bytes)
    log.sampler_logprobs, log.trainer_logprobs  # (n,) log μ(y_t) and log π(y_t) of every response token
    log.offsets                                 # (B + 1,): sequence b is tokens offsets[b]:offsets[b + 1]
    log.rewards                                 # (B,) or None
    log.advantages                              # (B,) or None: the dump's own advantages, where it has no reward
    log.notices                                 # what the reader noticed but did not refuse
    for batch in log.batches():                 # padded (b, L) arrays, a bounded number of cells each
        batch.sampler_logprobs, batch.trainer_logprobs, batch.mask, batch.rewards

Only response tokens are kept (mask 1, or every token when there is no mask), in sequence order; a
sequence's tokens keep their order (file order, or the position column's). A token's position is its index
among its sequence's response tokens. Sequences without a response token are left out and counted. A reward
given per token (verl's token_level_scores) is summed over the sequence, as verl sums it; an advantage given per
token (prime-rl, SkyRL) is averaged over the sequence's response tokens. In a row-per-token log whose sequences'
rows are interleaved, the tokens are gathered by id and ``notices`` says so.

Checked while reading, chunk by chunk (the first problem found is raised as a one-line ``LogError`` naming
the file, row, column and element): missing or non-numeric values, NaN or ±inf log-probabilities of
response tokens, positive log-probabilities (or, when every value so far is in [0, 1], probabilities given
instead of log-probabilities), log-prob lists of unequal length, a mask of the wrong length or with values
other than 0/1, a missing or non-finite reward, and in a row-per-token log missing ids, repeated positions
and a reward that changes within a sequence; and the bounds (``bounds``): tokens and rows per file, tokens per
sequence, a log-ratio |log π − log μ| of a response token above LOG_RATIO_LIMIT, a reward above REWARD_LIMIT in
size. Values at masked tokens are not checked: padding is often 0 or NaN.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from toylab.text import quoted
from toylab.your_run.bounds import CLI_BOUNDS, LOG_RATIO_LIMIT, REWARD_LIMIT, Bounds
from toylab.your_run.columns import Columns, choose
from toylab.your_run.files import LogError, LogFile, Preview, open_log_file, preview, read_batches

CELLS_PER_BATCH = 1 << 20
RELEASE_EVERY = 8                 # batches between returns of pyarrow's freed blocks to the system (after each
                                  # batch: 12 ns a token of a 43 ns read, its pages faulted in again)


@dataclass(frozen=True)
class Batch:
    """Sequences start … start + b − 1 of a log, padded to the longest of them: (b, L) arrays with
    ``mask`` False (and both log-probs 0) at padding; ``rewards`` (b,) or None."""
    start: int
    sampler_logprobs: NDArray[np.float64]
    trainer_logprobs: NDArray[np.float64]
    mask: NDArray[np.bool_]
    rewards: NDArray[np.float64] | None


@dataclass(frozen=True, eq=False)
class RolloutLog:
    """The response tokens of B sequences, concatenated in sequence order (see the module docstring)."""
    name: str
    columns: Columns                  # which column held what, and the shape
    sampler_logprobs: NDArray[np.float64]      # (n,) log μ(y_t)
    trainer_logprobs: NDArray[np.float64]      # (n,) log π(y_t)
    offsets: NDArray[np.int64]                 # (B + 1,)
    rewards: NDArray[np.float64] | None        # (B,)
    rows: NDArray[np.int64]                    # (B,) each sequence's row in the file, from 1 (row per token: its first response token's)
    dropped: int                      # sequences without a response token, left out
    advantages: NDArray[np.float64] | None = None   # (B,): the log's own advantage of each sequence
    notices: tuple[str, ...] = ()     # what the reader noticed but did not refuse, one sentence each
    entropy_sums: NDArray[np.float64] | None = None  # (B,): Σ of the trainer's entropy over each sequence's tokens (prime-rl)

    @property
    def sequences(self) -> int:
        return len(self.offsets) - 1

    @property
    def tokens(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def lengths(self) -> NDArray[np.int64]:
        """(B,) response tokens per sequence, computed once."""
        return np.diff(self.offsets)

    @cached_property
    def log_ratio(self) -> NDArray[np.float64]:
        """(n,) log ρ_t = log π(y_t) − log μ(y_t), computed once (every statistic of the log reads it)."""
        return self.trainer_logprobs - self.sampler_logprobs

    @cached_property
    def ratio(self) -> NDArray[np.float64]:
        """(n,) ρ_t = π(y_t)/μ(y_t), computed once."""
        return np.exp(self.log_ratio)

    @property
    def positions(self) -> NDArray[np.int64]:
        """(n,) each token's index among its sequence's response tokens."""
        return np.arange(self.tokens) - np.repeat(self.offsets[:-1], self.lengths)

    def nbytes(self) -> int:
        """Bytes held by the log's arrays (log ρ, ρ and the lengths too, once computed)."""
        derived = [self.__dict__[name] for name in ("log_ratio", "ratio", "lengths") if name in self.__dict__]
        return sum(array.nbytes for array in (self.sampler_logprobs, self.trainer_logprobs, self.offsets, self.rows,
                                              *([] if self.rewards is None else [self.rewards]),
                                              *([] if self.advantages is None else [self.advantages]),
                                              *([] if self.entropy_sums is None else [self.entropy_sums]), *derived))

    def sequence_sums(self, per_token: NDArray[np.float64]) -> NDArray[np.float64]:
        """(B,) Σ_t x_t within each sequence, for an (n,) array."""
        return np.add.reduceat(per_token, self.offsets[:-1])

    def batches(self, max_cells: int = CELLS_PER_BATCH) -> Iterator[Batch]:
        """Consecutive sequences padded into (b, L) Batches of at most ``max_cells`` cells (a longer
        sequence gets a Batch of its own)."""
        lengths = self.lengths.tolist()
        start = 0
        while start < self.sequences:
            stop, longest = start + 1, lengths[start]
            while stop < self.sequences and (stop - start + 1) * max(longest, lengths[stop]) <= max_cells:
                longest = max(longest, lengths[stop])
                stop += 1
            yield self._padded(start, stop)
            start = stop

    def padded(self) -> Batch:
        """The whole log as one Batch."""
        return self._padded(0, self.sequences)

    def _padded(self, start, stop):
        """Sequences start … stop − 1 padded: each row's tokens placed in row order by the mask (a boolean assignment,
        not a gather of (b, L) indices: 1.6× faster)."""
        lengths = self.lengths[start:stop]
        mask = np.arange(lengths.max()) < lengths[:, None]
        first, last = self.offsets[start], self.offsets[stop]
        sampler, trainer = np.zeros(mask.shape), np.zeros(mask.shape)
        sampler[mask] = self.sampler_logprobs[first:last]
        trainer[mask] = self.trainer_logprobs[first:last]
        return Batch(start, sampler, trainer, mask, None if self.rewards is None else self.rewards[start:stop])


def load_log(name: str, data: bytes | None = None, path: str | None = None, bounds: Bounds = CLI_BOUNDS,
             **explicit: str | None) -> RolloutLog:
    """The RolloutLog of a file on disk (``path``, default ``name``) or in memory (``data``), columns
    detected or given by role (sampler=, trainer=, mask=, reward=, sequence_id=, position=); LogError if
    anything is wrong with it or it is over the ``bounds``."""
    file = open_log_file(name, data=data, path=path, bounds=bounds)
    first_rows = preview(file)
    return read_log(file, first_rows, choose(first_rows, file.name, **explicit))


def read_log(file: LogFile, first_rows: Preview, columns: Columns,
             progress: Callable[[float], object] | None = None) -> RolloutLog:
    """The RolloutLog of an opened LogFile with its Preview and chosen Columns. ``progress(share)``, if given,
    is called after every chunk with the share of the file read so far (a page can stop the reading there)."""
    shape = _SequenceRows if columns.shape == "sequence" else _TokenRows
    reader = shape(file.name, columns, file.bounds)
    for count, (first_row, batch, share) in enumerate(read_batches(file, columns.kinds(), first_rows), start=1):
        reader.add(first_row, batch)
        del batch
        if count % RELEASE_EVERY == 0:
            pa.default_memory_pool().release_unused()    # pyarrow's pool keeps freed blocks otherwise
        if progress is not None:
            progress(share)
    return _with_dump_extras(reader.finish(), file)


def _with_dump_extras(log, file):
    """The log with what a framework's dump adds (``dumps.DumpFile``): its reader's notices, and the trainer's
    entropy summed over each sequence's response tokens (per row of the file; a sequence keeps its row's)."""
    notices, entropy = getattr(file, "notices", ()), getattr(file, "entropy", None)
    if not notices and entropy is None:
        return log
    return replace(log, notices=log.notices + tuple(notices),
                   entropy_sums=None if entropy is None else np.asarray(entropy, dtype=float)[log.rows - 1])


# -- checks shared by both shapes ----------------------------------------------------------------------------

class _Range:
    """The smallest and largest response value of a log-prob column so far, for the probability check."""

    def __init__(self):
        self.low, self.high = np.inf, -np.inf

    def update(self, values):
        if values.size:
            self.low, self.high = min(self.low, values.min()), max(self.high, values.max())

    def looks_like_probabilities(self):
        return self.low >= 0 and self.high <= 1


class _Tally:
    """Tokens and rows read so far, against the bounds: every row counts, as one token at least."""

    def __init__(self, name, bounds):
        self.name, self.bounds, self.tokens = name, bounds, 0

    def add(self, tokens_per_row, rows):
        if not len(rows):
            return
        self.tokens += int(np.maximum(tokens_per_row, 1).sum())
        if self.tokens > self.bounds.tokens:
            raise self.bounds.exceeded(self.name, "tokens", f"the file up to row {rows[-1]} ({self.tokens:,} tokens)")

    def check_sequences(self, count, row):
        if count > self.bounds.sequences:
            raise self.bounds.exceeded(self.name, "sequences", f"the file up to row {row} ({count:,} sequences)")

    def check_sequence(self, lengths, describe):
        """LogError if a sequence is longer than the bound; ``describe(i)`` names sequence i."""
        if lengths.size and lengths.max() > self.bounds.tokens_per_sequence:
            i = int(np.argmax(lengths))
            raise self.bounds.exceeded(self.name, "tokens_per_sequence", f"{describe(i)} ({lengths[i]:,} tokens)")


def _check_logprobs(name, column, values, value_range, where):
    """LogError at the first non-finite or positive response value; ``where(i)`` describes value i."""
    finite = np.isfinite(values)
    if not finite.all():
        i = int(np.argmin(finite))
        what = "NaN or missing" if np.isnan(values[i]) else f"{values[i]:+g}"
        raise LogError(f"{name}: {where(i)}: {what} (a response token needs a finite log-probability)")
    value_range.update(values)
    positive = values > 0
    if positive.any():
        i = int(np.argmax(positive))
        if value_range.looks_like_probabilities():
            raise LogError(f"{name}: column {quoted(column)} looks like probabilities, not log-probabilities: every "
                           f"value so far is in [0, 1] ({where(i)}: {values[i]:g}); give log-probabilities in "
                           "nats (the log of these)")
        raise LogError(f"{name}: {where(i)}: {values[i]:g} is positive (a log-probability is ≤ 0)")


def _check_log_ratios(name, sampler, trainer, where):
    """LogError at the first response token with |log π − log μ| > LOG_RATIO_LIMIT."""
    log_ratio = trainer - sampler
    beyond = np.abs(log_ratio) > LOG_RATIO_LIMIT
    if beyond.any():
        i = int(np.argmax(beyond))
        raise LogError(f"{name}: {where(i)}: log π − log μ = {trainer[i]:.6g} − ({sampler[i]:.6g}) = "
                       f"{log_ratio[i]:+.4g}, beyond ±{LOG_RATIO_LIMIT:g}: ρ² = (π/μ)² does not fit in float64 "
                       "(a token this far apart is usually padding left unmasked)")


def _check_mask(name, values, where):
    good = (values == 0) | (values == 1)
    if not good.all():
        i = int(np.argmin(good))
        what = "missing" if np.isnan(values[i]) else f"{values[i]:g}"
        raise LogError(f"{name}: {where(i)}: {what} (a mask value is 0 or 1)")


def _check_rewards(name, column, rewards, rows, role="reward"):
    good = np.abs(rewards) <= REWARD_LIMIT
    if not good.all():
        i = int(np.argmin(good))
        what = "missing or NaN" if np.isnan(rewards[i]) else f"{rewards[i]:+g}"
        raise LogError(f"{name}: row {rows[i]}, column {quoted(column)}: {what} (a{'n' if role[0] == 'a' else ''} "
                       f"{role} must be a finite number within ±{REWARD_LIMIT:g})")


def _list_lengths(lists):
    """Each list's length, 0 for a missing one: from the list offsets when none is missing (a pyarrow compute call
    costs up to 0.1 ms however short the array: a run of tiny steps makes thousands)."""
    if lists.null_count:
        return pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    return np.diff(lists.offsets.to_numpy())


def _numpy(array):
    return array.to_numpy(zero_copy_only=False).astype(float, copy=False)


# -- a row per sequence ---------------------------------------------------------------------------------------

class _SequenceRows:
    def __init__(self, name, columns, bounds):
        self.name, self.columns = name, columns
        self.tally = _Tally(name, bounds)
        self.ranges = {"sampler": _Range(), "trainer": _Range()}
        self.parts = {"sampler": [], "trainer": [], "lengths": [], "rewards": [], "advantages": [], "rows": []}

    def add(self, first_row, batch):
        name, columns = self.name, self.columns
        rows = first_row + 1 + np.arange(batch.num_rows)
        lists = {role: batch.column(column) for role, column in columns.roles().items()
                 if role in ("sampler", "trainer", "mask")}
        lengths = {role: _list_lengths(array) for role, array in lists.items()}
        self.tally.add(np.max(list(lengths.values()), axis=0), rows)
        self.tally.check_sequences(int(rows[-1]) if len(rows) else 0, int(rows[-1]) if len(rows) else 0)
        self.tally.check_sequence(lengths["sampler"], lambda i: f"row {rows[i]}")
        for role, array in lists.items():
            missing = array.is_null().to_numpy(zero_copy_only=False)
            if missing.any():
                raise LogError(f"{name}: row {rows[np.argmax(missing)]}, column {quoted(getattr(columns, role))}: "
                               "missing")
        unequal = lengths["sampler"] != lengths["trainer"]
        if unequal.any():
            i = int(np.argmax(unequal))
            raise LogError(f"{name}: row {rows[i]}: {quoted(columns.sampler)} has {lengths['sampler'][i]} values but "
                           f"{quoted(columns.trainer)} has {lengths['trainer'][i]} (one per token in both)")
        if "mask" in lists:
            wrong = lengths["mask"] != lengths["sampler"]
            if wrong.any():
                i = int(np.argmax(wrong))
                raise LogError(f"{name}: row {rows[i]}, column {quoted(columns.mask)}: {lengths['mask'][i]} values "
                               f"for {lengths['sampler'][i]} tokens (a mask needs one value per token)")
        offsets = np.concatenate([[0], np.cumsum(lengths["sampler"])])

        def where(column, response_index):
            def describe(i):                        # response_index None: every token is a response token
                element = i if response_index is None else response_index[i]
                row = int(np.searchsorted(offsets, element, side="right")) - 1
                place = f"row {rows[row]}" + ("" if column is None else f", column {quoted(column)}")
                return f"{place}, element {element - offsets[row] + 1}"
            return describe

        response = index = None                     # without a mask: the values as read, nothing copied
        if "mask" in lists:
            mask = _numpy(lists["mask"].flatten())
            _check_mask(name, mask, where(columns.mask, None))
            response = mask == 1
            index = np.flatnonzero(response)
        values = {}
        for role in ("sampler", "trainer"):
            values[role] = _numpy(lists[role].flatten())
            values[role] = values[role] if response is None else values[role][response]
            _check_logprobs(name, getattr(columns, role), values[role], self.ranges[role],
                            where(getattr(columns, role), index))
            self.parts[role].append(values[role])
        _check_log_ratios(name, values["sampler"], values["trainer"], where(None, index))
        if response is None:
            self.parts["lengths"].append(lengths["sampler"])
        else:
            row_of_token = np.repeat(np.arange(batch.num_rows), lengths["sampler"])
            self.parts["lengths"].append(np.bincount(row_of_token[response], minlength=batch.num_rows))
        self.parts["rows"].append(rows)
        for role, part in (("reward", "rewards"), ("advantage", "advantages")):
            column = getattr(columns, role)
            if column is None:
                continue
            if role in columns.per_token:
                values = self._per_sequence(batch.column(column), response, role, rows, lengths["sampler"])
            else:
                values = _numpy(batch.column(column))
            _check_rewards(name, column, values, rows, role)
            self.parts[part].append(values)

    def _per_sequence(self, lists, response, role, rows, lengths):
        """A per-token reward summed over each row's tokens (verl's token_level_scores.sum(-1)), or a per-token
        advantage averaged over each row's response tokens; NaN for a row without any."""
        count = _list_lengths(lists)
        wrong = (count != lengths) & (count > 0)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise LogError(f"{self.name}: row {rows[i]}, column {quoted(getattr(self.columns, role))}: {count[i]} "
                           f"values for {lengths[i]} tokens (a per-token {role} needs one value per token)")
        values = _numpy(lists.flatten())
        row_of = np.repeat(np.arange(len(count)), count)
        if role == "reward":
            return np.bincount(row_of, weights=np.nan_to_num(values), minlength=len(count))
        taken = response[: len(values)] if response is not None and count.sum() == lengths.sum() else \
            np.ones(len(values), bool)
        sums = np.bincount(row_of[taken], weights=values[taken], minlength=len(count))
        tokens = np.bincount(row_of[taken], minlength=len(count))
        return np.where(tokens > 0, sums / np.maximum(tokens, 1), np.nan)

    def finish(self):
        if not self.parts["rows"]:
            raise LogError(f"{self.name}: the file holds no rows")
        lengths = np.concatenate(self.parts["lengths"])
        kept = lengths > 0
        rewards = np.concatenate(self.parts["rewards"])[kept] if self.columns.reward is not None else None
        advantages = np.concatenate(self.parts["advantages"])[kept] if self.columns.advantage is not None else None
        return _assembled(self.name, self.columns, np.concatenate(self.parts["sampler"]),
                          np.concatenate(self.parts["trainer"]), lengths[kept], rewards,
                          np.concatenate(self.parts["rows"])[kept], int((~kept).sum()), advantages)


def _assembled(name, columns, sampler, trainer, lengths, rewards, rows, dropped, advantages=None, notices=()):
    if len(lengths) == 0:
        raise LogError(f"{name}: no response tokens: every sequence is empty or masked out")
    left_out = (f"{dropped:,} sequence{'s' if dropped > 1 else ''} without a response token (masked out everywhere, "
                f"e.g. NeMo-RL's sample_loss_mask 0) left out",) if dropped else ()
    return RolloutLog(name, columns, sampler, trainer, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                      rewards, rows, dropped, advantages, tuple(columns.notices) + tuple(notices) + left_out)


# -- a row per token ------------------------------------------------------------------------------------------

class _TokenRows:
    """Rows of a row-per-token log, kept column by column until ``finish`` groups them into sequences."""

    def __init__(self, name, columns, bounds):
        self.name, self.columns = name, columns
        self.tally = _Tally(name, bounds)
        self.ranges = {"sampler": _Range(), "trainer": _Range()}
        self.parts = {role: [] for role in ("sampler", "trainer", "codes", "response", "position", "reward",
                                            "advantage", "rows")}
        self.ids = None                                       # every id met so far, numbered by first appearance

    def add(self, first_row, batch):
        name, columns = self.name, self.columns
        rows = first_row + 1 + np.arange(batch.num_rows)
        self.tally.add(np.ones(batch.num_rows), rows)
        ids = batch.column(columns.sequence_id)
        missing = ids.is_null().to_numpy(zero_copy_only=False)
        if missing.any():
            raise LogError(f"{name}: row {rows[np.argmax(missing)]}, column {quoted(columns.sequence_id)}: missing "
                           "sequence id")
        if columns.mask is not None:
            mask = _numpy(batch.column(columns.mask))
            _check_mask(name, mask, lambda i: f"row {rows[i]}, column {quoted(columns.mask)}")
            response = mask == 1
        else:
            response = np.ones(batch.num_rows, dtype=bool)
        kept_rows = rows[response]
        values = {}
        for role in ("sampler", "trainer"):
            column = getattr(columns, role)
            values[role] = _numpy(batch.column(column))[response]
            _check_logprobs(name, column, values[role], self.ranges[role],
                            lambda i, column=column: f"row {kept_rows[i]}, column {quoted(column)}")
            self.parts[role].append(values[role])
        _check_log_ratios(name, values["sampler"], values["trainer"], lambda i: f"row {kept_rows[i]}")
        if columns.position is not None:
            positions = _numpy(batch.column(columns.position))[response]
            whole = np.isfinite(positions) & (positions == np.round(positions))
            if not whole.all():
                i = int(np.argmin(whole))
                what = "missing" if np.isnan(positions[i]) else f"{positions[i]:g}"
                raise LogError(f"{name}: row {kept_rows[i]}, column {quoted(columns.position)}: {what} (a position "
                               "is a whole number)")
            self.parts["position"].append(positions)
        for role in ("reward", "advantage"):
            if getattr(columns, role) is not None:
                self.parts[role].append(_numpy(batch.column(getattr(columns, role)))[response])
        self.parts["codes"].append(self._numbered(ids, rows))
        self.parts["response"].append(response)
        self.parts["rows"].append(kept_rows.astype(np.int32))          # ≤ bounds.tokens + 1 rows: int32 is plenty

    def _numbered(self, ids, rows):
        """Each row's sequence number among every id met so far (new ids numbered on): the sequence bound is checked
        as the ids are met, and each id is held once, in an Arrow array (a Python dict of 250,000 ids is 30 MB)."""
        local = ids.dictionary_encode()
        met = self.ids if self.ids is not None else pa.array([], local.dictionary.type)
        found = pc.index_in(local.dictionary, value_set=met)
        new = found.is_null().to_numpy(zero_copy_only=False)
        number_of = found.to_numpy(zero_copy_only=False).copy() if not new.any() else \
            np.where(new, len(met) + np.cumsum(new) - 1, found.fill_null(0).to_numpy(zero_copy_only=False))
        self.ids = pa.concat_arrays([met, local.dictionary.filter(pa.array(new))]) if new.any() else met
        self.tally.check_sequences(len(self.ids), int(rows[-1]) if len(rows) else 0)
        return number_of.astype(np.int32)[local.indices.to_numpy()]      # ≤ bounds.sequences: int32 is plenty

    def finish(self):
        """The RolloutLog: tokens grouped by sequence (numbered in order of first appearance), each sequence's in
        position order (or file order). Each column is gathered and dropped in turn, to keep the peak low."""
        name, columns, parts = self.name, self.columns, self.parts
        if not parts["rows"]:
            raise LogError(f"{name}: the file holds no rows")
        if not sum(len(rows) for rows in parts["rows"]):
            raise LogError(f"{name}: no response tokens: every sequence is empty or masked out")
        codes = np.concatenate(parts.pop("codes"))[np.concatenate(parts.pop("response"))]
        notices = self._interleaved(codes, parts["rows"])
        counts = np.bincount(codes, minlength=len(self.ids))
        kept = counts > 0                                     # sequences with a response token
        codes = (np.cumsum(kept) - 1).astype(np.int32)[codes]
        numbers = np.flatnonzero(kept)

        def names(i):                                         # the id of sequence i, for a message
            return self.ids[int(numbers[i])].as_py()
        lengths, dropped = counts[kept], int((~kept).sum())
        self.tally.check_sequence(lengths, lambda i: f"sequence {quoted(names(i))}")
        positions = np.concatenate(parts.pop("position")) if columns.position is not None else None
        order = _grouping_order(codes, positions)
        rows = _gathered(np.concatenate(parts.pop("rows")), order)
        if positions is not None:
            self._check_positions(_gathered(codes, order), _gathered(positions, order), rows, names)
        del codes, positions
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        per_sequence = {}
        for role in ("reward", "advantage"):
            if getattr(columns, role) is not None:
                per_sequence[role] = self._sequence_rewards(_gathered(np.concatenate(parts.pop(role)), order), starts,
                                                            rows, lengths, names, role)
        sampler = _gathered(np.concatenate(parts.pop("sampler")), order)
        trainer = _gathered(np.concatenate(parts.pop("trainer")), order)
        return _assembled(name, columns, sampler, trainer, lengths, per_sequence.get("reward"),
                          np.minimum.reduceat(rows, starts), dropped, per_sequence.get("advantage"), notices)

    def _interleaved(self, codes, rows):
        """A notice if some sequence's rows are not contiguous (another sequence's rows come between them)."""
        changes = np.flatnonzero(codes[1:] != codes[:-1]) + 1
        numbers, first = np.unique(codes, return_index=True)
        if len(changes) + 1 == len(numbers):
            return ()
        back = changes[first[np.searchsorted(numbers, codes[changes])] < changes][0]
        row = np.concatenate(rows)[back]
        order = "position" if self.columns.position is not None else "file"
        return (f"the rows of a sequence are not contiguous (at row {row}, sequence "
                f"{quoted(self.ids[int(codes[back])].as_py())} continues after other sequences' rows): each "
                f"sequence's tokens were gathered by its id, in {order} order",)

    def _check_positions(self, codes, positions, rows, names):
        repeated = (codes[1:] == codes[:-1]) & (positions[1:] == positions[:-1])
        if repeated.any():
            i = int(np.argmax(repeated))
            first, second = sorted((rows[i], rows[i + 1]))
            raise LogError(f"{self.name}: rows {first} and {second}: sequence {quoted(names(codes[i]))} has "
                           f"position {positions[i]:g} twice (column {quoted(self.columns.position)})")

    def _sequence_rewards(self, rewards, starts, rows, lengths, names, role="reward"):
        """One reward (or advantage) per sequence: equal on all its rows that give one (others may be empty)."""
        column = getattr(self.columns, role)
        beyond = np.abs(rewards) > REWARD_LIMIT
        if beyond.any():
            i = int(np.argmax(beyond))
            raise LogError(f"{self.name}: row {rows[i]}, column {quoted(column)}: {rewards[i]:+g} (a reward must be a "
                           f"finite number within ±{REWARD_LIMIT:g})")
        low, high = np.fmin.reduceat(rewards, starts), np.fmax.reduceat(rewards, starts)
        if np.isnan(low).any():
            sequence = int(np.argmax(np.isnan(low)))
            raise LogError(f"{self.name}: row {rows[starts[sequence]]}, column {quoted(column)}: sequence "
                           f"{quoted(names(sequence))} has no reward on any of its rows")
        if (low != high).any():
            sequence = int(np.argmax(low != high))
            stop = starts[sequence] + lengths[sequence]
            own, own_rows = rewards[starts[sequence]:stop], rows[starts[sequence]:stop]
            first_low, first_high = own_rows[np.argmax(own == low[sequence])], own_rows[np.argmax(own == high[sequence])]
            raise LogError(f"{self.name}: rows {min(first_low, first_high)} and {max(first_low, first_high)}, column "
                           f"{quoted(column)}: sequence {quoted(names(sequence))} has two rewards "
                           f"({low[sequence]:g} and {high[sequence]:g}); give its reward on every row, or on some "
                           "rows with the others empty")
        return low


def _grouping_order(codes, positions):
    """The permutation that groups the tokens by sequence code, each sequence's in position order (or file order);
    None when they already are (the usual file: a sequence's rows together, in order), so nothing is copied."""
    steps = np.diff(codes)
    grouped = steps >= 0 if positions is None else (steps > 0) | ((steps == 0) & (np.diff(positions) > 0))
    if grouped.all():
        return None
    return np.argsort(codes, kind="stable") if positions is None else np.lexsort((positions, codes))


def _gathered(values, order):
    return values if order is None else values[order]
