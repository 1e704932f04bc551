"""The canonical table every dump becomes, and the Arrow list helpers its readers share.

The canonical table has a row per sequence: the list columns ``sampler_logprobs``, ``trainer_logprobs``, ``mask``
(float 0/1) and, where the dump has them, a scalar ``reward`` and ``advantage``. The ordinary reader
(``log.read_log``) then checks it value by value, rows counted as in the original file.
"""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from toylab.your_run.bounds import MB
from toylab.your_run.files import LogError

CANONICAL = {"sampler": "sampler_logprobs", "trainer": "trainer_logprobs", "mask": "mask", "reward": "reward",
             "advantage": "advantage"}
BLOCK_BYTES = 16 * MB              # pyarrow's JSON reader: a block holds whole lines up to this long


def canonical(sampler, trainer, mask=None, reward=None, advantage=None):
    """The canonical table of list<float64> arrays ``sampler``, ``trainer`` and ``mask``, scalar ``reward`` and
    ``advantage`` (None: absent)."""
    columns = {CANONICAL["sampler"]: sampler, CANONICAL["trainer"]: trainer}
    if mask is not None:
        columns[CANONICAL["mask"]] = mask.cast(pa.list_(pa.float64()))
    if reward is not None:
        columns[CANONICAL["reward"]] = reward
    if advantage is not None:
        columns[CANONICAL["advantage"]] = advantage
    return pa.table(columns)


def sequence_means(name, lists, mask, field):
    """Per row: the mean of a per-token list over the row's response tokens (mask 1); LogError at a missing or
    non-finite value on a response token."""
    sums, counts = sequence_sums(name, lists, mask, field)
    return pa.array(np.where(counts > 0, sums / np.maximum(counts, 1), 0.0))


def sequence_sums(name, lists, mask, field):
    """(Σ, count) per row of a per-token list over the row's response tokens (mask 1); LogError at a missing or
    non-finite value on a response token, or a row whose list and mask differ in length."""
    lengths = list_lengths(lists)
    if (lengths != list_lengths(mask)).any():
        row = int(np.argmax(lengths != list_lengths(mask))) + 1
        raise LogError(f"{name}: row {row}, column {field!r}: {lengths[row - 1]} values for "
                       f"{list_lengths(mask)[row - 1]} tokens")
    values = lists.flatten().to_numpy(zero_copy_only=False).astype(float)
    response = mask.flatten().to_numpy(zero_copy_only=False) == 1
    bad = response & ~np.isfinite(values)
    if bad.any():
        row = int(np.searchsorted(np.cumsum(lengths), np.argmax(bad), side="right")) + 1
        raise LogError(f"{name}: row {row}, column {field!r}: a missing or non-finite value at a response token")
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    sums = np.bincount(row_of[response], weights=values[response], minlength=len(lengths))
    return sums, np.bincount(row_of[response], minlength=len(lengths))


def ones_like(lists):
    lengths = list_lengths(lists)
    return float_lists(np.ones(lengths.sum()), lengths)


def list_lengths(lists):
    """Values per row (0 for a missing list)."""
    return pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def float_lists(values, lengths):
    """A list<float64> array: row i holds the next lengths[i] of ``values``."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.asarray(values, dtype=float)))


def scaled_lists(lists, factors):
    """Each row's list times that row's factor (a missing factor leaves the row as it is)."""
    factor = np.nan_to_num(factors.to_numpy(zero_copy_only=False), nan=1.0)
    lengths = list_lengths(lists)
    return float_lists(lists.flatten().to_numpy(zero_copy_only=False) * np.repeat(factor, lengths), lengths)


def count_words(n):
    return "an empty list" if n == 0 else f"a {n}-element list"


# -- JSON Lines ------------------------------------------------------------------------------------------------

def json_table(name, raw, schema):
    """The JSON Lines ``raw`` read with an explicit ``schema`` (other fields ignored); LogError naming the first
    row that does not fit."""
    try:
        return pa_json.read_json(pa.BufferReader(raw), read_options=pa_json.ReadOptions(block_size=BLOCK_BYTES),
                                 parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                                                    unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise _first_bad_row(name, raw, schema) or LogError(f"{name}: cannot be read ({str(error).splitlines()[0]})") \
            from None


def _first_bad_row(name, raw, schema):
    """A LogError naming the first row whose JSON or field does not fit ``schema`` (None if none is found)."""
    row = 0
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        row += 1
        try:
            record = json.loads(line)
        except ValueError as error:
            return LogError(f"{name}: row {row} is not valid JSON ({error.msg} at character {error.colno})")
        for field in schema:
            value = record.get(field.name)
            problem = _misfit(value, field.type)
            if problem:
                return LogError(f"{name}: row {row}, column {field.name!r}: {problem}")
    return None


def _misfit(value, type):
    """What is wrong with a JSON value for an Arrow type (None if nothing)."""
    if value is None:
        return None
    if pa.types.is_list(type):
        if not isinstance(value, list):
            return f"{json.dumps(value)[:40]} where a list is expected"
        for index, item in enumerate(value):
            problem = _misfit(item, type.value_type)
            if problem:
                return f"element {index + 1}: {problem}"
        return None
    if pa.types.is_boolean(type):
        return None if isinstance(value, bool) else f"{json.dumps(value)[:40]} is not true/false"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{json.dumps(value)[:40]} is not a number"
    return None
