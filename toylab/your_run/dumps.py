"""What the frameworks dump, read as written: each layout turned into a log with a row per sequence.

Most training frameworks never write a file with a row per sequence and both log-prob columns; the few that
write both sets of log-probs at all write them in their own layout. Each layout below was read from the
framework's dump code at the commit named, and is turned into one canonical table — a row per sequence with
the list columns ``sampler_logprobs``, ``trainer_logprobs``, ``mask`` and, where the dump has them, a scalar
``reward`` and ``advantage`` — which the ordinary reader (``log.read_log``) then checks value by value, rows
counted as in the original file.

    NeMo-RL       ``train_data_step{N}.jsonl`` (nemo_rl/algorithms/grpo.py, ``log_batched_dict_as_jsonl`` in
                  nemo_rl/utils/logger.py, 7ea279a): every value wrapped in a 1-element list (the batch sliced
                  one sample at a time); generation_logprobs (μ), prev_logprobs (π), token_loss_mask times
                  sample_loss_mask (the mask NeMo's own metrics use), rewards.
    prime-rl      ``token_exports/step_N/rank_R.jsonl`` (src/prime_rl/trainer/rl/token_export.py, 559b447): one
                  record per sequence; inference_logprobs (μ), trainer_logprobs (π), loss_mask (true/false), and
                  per-token ``advantages`` but no reward: the advantage is the mean of ``advantages`` over the
                  sequence's loss-mask tokens.
    slime         ``{dump_details}/train_data/{rollout_id}.pt`` (slime/observability/train_data_utils.py,
                  ``_build_dump_payload``, 624b824): format_version 2, a ``samples`` list of dicts holding
                  rollout_log_probs (μ), log_probs (π), loss_masks, advantages per token; ``raw_reward`` for
                  the whole batch at the top.
    Miles         ``{dump_details}/train_data/{rollout_id}_{rank}.pt`` (miles/utils/train_dump_utils.py, 31f1ca9):
                  ``rollout_data``, a dict of per-sample lists with the same names; one file per rank.
    SkyRL         ``dumped_data/global_step_{N}_training_input.pkl`` (skyrl/train/trainer.py ``dump_data``,
                  a956457): a pickle of its TrainingInputBatch. Never opened: unpickling runs code. Refused with
                  a one-line export (``SKYRL_EXPORT``).

A ``.pt`` file is a torch zip archive of pickles: it is opened only by ``torch.load(weights_only=True)``
(tensors, lists, dicts and numbers, no code), only when torch is installed, and only from the command line
(``allow_torch``); the page refuses it. Context-parallel shards (Miles ``cp_size`` > 1) are refused: each
rank holds interleaved pieces of every response.
"""

import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from toylab.your_run.bounds import CLI_BOUNDS, MB
from toylab.your_run.files import LogError, LogFile
from toylab.your_run.text_rows import first_line, loads

CANONICAL = {"sampler": "sampler_logprobs", "trainer": "trainer_logprobs", "mask": "mask", "reward": "reward",
             "advantage": "advantage"}
DUMP_NAMES = {"nemo": "NeMo-RL", "prime": "prime-rl", "torch": "slime or Miles (torch)", "pickle": "pickle"}
PICKLE_EXTENSIONS = (".pkl", ".pickle")
BLOCK_BYTES = 16 * MB              # pyarrow's JSON reader: a block holds whole lines up to this long
TORCH_EXTENSIONS = (".pt", ".pth")
SKYRL_EXPORT = ("python -c \"import pickle,sys,pyarrow as pa,pyarrow.parquet as pq; b=pickle.load(open(sys.argv[1],"
                "'rb')); pq.write_table(pa.table({k: b[k].float().tolist() for k in ('rollout_logprobs',"
                "'action_log_probs','loss_mask','advantages')}), sys.argv[1][:-4] + '.parquet')\" FILE.pkl")
NEMO_FIELDS = {"generation_logprobs": "numbers", "prev_logprobs": "numbers", "token_loss_mask": "numbers",
               "sample_loss_mask": "number", "rewards": "number"}
PRIME_FIELDS = ("inference_logprobs", "trainer_logprobs", "loss_mask", "advantages")


def dump_kind(name, head):
    """Which framework layout a file is ("nemo", "prime", "torch", "pickle"), or None for an ordinary log;
    ``head`` is the file's first bytes (a few kilobytes)."""
    extension = os.path.splitext(name.lower())[1]
    if extension in PICKLE_EXTENSIONS:
        return "pickle"
    if extension in TORCH_EXTENSIONS:
        return "torch"
    if extension not in (".jsonl", ".json", ".ndjson"):
        return None
    line = head.split(b"\n", 1)[0]
    try:
        first = loads(line)
    except ValueError:                                  # not JSON, nested too deeply, or an integer too long
        return None
    if not isinstance(first, dict):
        return None
    if all(key in first for key in ("generation_logprobs", "prev_logprobs")) and _wrapped(first["prev_logprobs"]):
        return "nemo"
    if "schema_version" in first and all(key in first for key in PRIME_FIELDS):
        return "prime"
    return None


def _wrapped(value):
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], list)


def canonical_file(name, kind, data=None, path=None, allow_torch=False, bounds=CLI_BOUNDS):
    """The LogFile (in-memory Parquet, named ``name``) of a dump of this ``kind``; LogError if it cannot be read or
    is over the ``bounds`` (its size and lines here; its tokens and sequences as the canonical table is read)."""
    if kind == "pickle":
        raise LogError(f"{name}: a pickle is never opened here (unpickling can run code); SkyRL's dump exports to "
                       f"Parquet with: {SKYRL_EXPORT}")
    if kind == "torch":
        if not allow_torch:
            raise LogError(f"{name}: a torch .pt dump is read only by the command line (python -m toylab inspect, "
                           "with torch installed), never from an upload")
        _check_size(name, data, path, bounds)
        table = _torch_table(name, _torch_payload(name, data, path))
    else:
        _check_size(name, data, path, bounds)
        raw = data if data is not None else _read(name, path)
        _check_lines(name, raw, bounds)
        table = _nemo_table(name, raw) if kind == "nemo" else _prime_table(name, raw)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return LogFile(name, "parquet", False, sink.tell(), bounds, data=sink.getvalue())


def _check_size(name, data, path, bounds):
    size = len(data) if data is not None else _stat(name, path)
    if size > bounds.file_bytes:
        raise bounds.exceeded(name, "file_bytes", f"the file ({size:,} bytes)")


def _stat(name, path):
    try:
        return os.path.getsize(path)
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None


def _check_lines(name, raw, bounds):
    """The longest line against ``bounds.line_bytes`` (a dump is read whole: its size is already bounded)."""
    ends = np.flatnonzero(np.frombuffer(raw, np.uint8) == 10)
    lengths = np.diff(ends, prepend=-1, append=len(raw)) - 1
    if lengths.size and lengths.max() > bounds.line_bytes:
        raise bounds.exceeded(name, "line_bytes", f"line {int(np.argmax(lengths)) + 1}")


def _read(name, path):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None


# -- NeMo-RL: unwrap the 1-element lists ---------------------------------------------------------------------

def _nemo_table(name, raw):
    first = loads(raw.split(b"\n", 1)[0])
    present = [field for field in NEMO_FIELDS if field in first]
    schema = pa.schema([(field, pa.list_(pa.list_(pa.float64()) if NEMO_FIELDS[field] == "numbers"
                                         else pa.float64())) for field in present])
    table = _json_table(name, raw, schema)
    columns = {}
    for field in present:
        column = table.column(field).combine_chunks()
        lengths = _list_lengths(column)
        wrong = lengths != 1
        if wrong.any():
            row = int(np.argmax(wrong)) + 1
            raise LogError(f"{name}: row {row}, column {field!r}: {_count(lengths[row - 1])} where NeMo-RL writes "
                           "a 1-element list (one sample per row)")
        columns[field] = column.flatten()
    mask = columns["token_loss_mask"] if "token_loss_mask" in columns else None
    if mask is not None and "sample_loss_mask" in columns:
        mask = _scaled_lists(mask, columns["sample_loss_mask"])
    return _canonical(columns["generation_logprobs"], columns["prev_logprobs"], mask, columns.get("rewards"))


def _scaled_lists(lists, factors):
    """Each row's list times that row's factor (a missing factor leaves the row as it is)."""
    factor = np.nan_to_num(factors.to_numpy(zero_copy_only=False), nan=1.0)
    lengths = _list_lengths(lists)
    return _lists(lists.flatten().to_numpy(zero_copy_only=False) * np.repeat(factor, lengths), lengths)


# -- prime-rl: the advantage from the per-token advantages ------------------------------------------------

def _prime_table(name, raw):
    schema = pa.schema([("inference_logprobs", pa.list_(pa.float64())), ("trainer_logprobs", pa.list_(pa.float64())),
                        ("loss_mask", pa.list_(pa.bool_())), ("advantages", pa.list_(pa.float64()))])
    table = _json_table(name, raw, schema)
    mask = table.column("loss_mask").combine_chunks().cast(pa.list_(pa.float64()))
    advantages = _sequence_means(name, table.column("advantages").combine_chunks(), mask, "advantages")
    return _canonical(table.column("inference_logprobs").combine_chunks(),
                      table.column("trainer_logprobs").combine_chunks(), mask, advantage=advantages)


def _sequence_means(name, lists, mask, field):
    """Per row: the mean of a per-token list over the row's response tokens (mask 1); LogError at a missing or
    non-finite value on a response token."""
    lengths = _list_lengths(lists)
    if (lengths != _list_lengths(mask)).any():
        row = int(np.argmax(lengths != _list_lengths(mask))) + 1
        raise LogError(f"{name}: row {row}, column {field!r}: {lengths[row - 1]} values for "
                       f"{_list_lengths(mask)[row - 1]} tokens")
    values = lists.flatten().to_numpy(zero_copy_only=False).astype(float)
    response = mask.flatten().to_numpy(zero_copy_only=False) == 1
    bad = response & ~np.isfinite(values)
    if bad.any():
        row = int(np.searchsorted(np.cumsum(lengths), np.argmax(bad), side="right")) + 1
        raise LogError(f"{name}: row {row}, column {field!r}: a missing or non-finite value at a response token")
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    sums = np.bincount(row_of[response], weights=values[response], minlength=len(lengths))
    counts = np.bincount(row_of[response], minlength=len(lengths))
    return pa.array(np.where(counts > 0, sums / np.maximum(counts, 1), 0.0))


# -- slime and Miles: torch.save payloads, read by torch.load(weights_only=True) ------------------------------

def _torch_payload(name, data, path):
    try:
        import torch
    except ImportError:
        raise LogError(f"{name}: reading a torch .pt dump needs torch installed (pip install torch); toylab itself "
                       "does not") from None
    try:
        source = io.BytesIO(data) if data is not None else path
        return torch.load(source, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 — torch raises many kinds for a file it cannot read safely
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise LogError(f"{name}: torch.load(weights_only=True) cannot read it ({first[:160]})") from None


def _torch_table(name, payload):
    """The canonical table of a slime (``samples``) or Miles (``rollout_data``) payload."""
    if not isinstance(payload, dict):
        raise LogError(f"{name}: not a slime or Miles dump: the file holds a {type(payload).__name__}, not a dict")
    if "samples" in payload:
        samples = payload["samples"]
        columns = {key: [sample.get(key) for sample in samples] for key in
                   ("rollout_log_probs", "log_probs", "loss_masks", "advantages")}
        raw = payload.get("raw_reward")
        rewards = raw if isinstance(raw, list | tuple) and len(raw) == len(samples) else None
    elif "rollout_data" in payload:
        if payload.get("cp_size", 1) != 1:
            raise LogError(f"{name}: a context-parallel shard (cp_size {payload['cp_size']}): each rank holds "
                           "interleaved pieces of every response; dump with context parallelism 1")
        data = payload["rollout_data"]
        columns = {key: data.get(key) for key in ("rollout_log_probs", "log_probs", "loss_masks", "advantages")}
        raw = data.get("raw_reward")
        rewards = raw if isinstance(raw, list | tuple) and len(raw) == len(data.get("log_probs") or ()) else None
    else:
        raise LogError(f"{name}: not a slime or Miles dump: no 'samples' or 'rollout_data' in {sorted(payload)[:6]}")
    for key in ("rollout_log_probs", "log_probs"):
        if not columns[key] or any(value is None for value in columns[key]):
            raise LogError(f"{name}: the dump has no {key!r} for every sample ({'the sampler' if key[0] == 'r' else 'the trainer'}'s log-probs)")
    lists = {key: _tensor_lists(name, key, value) for key, value in columns.items() if value}
    mask = lists.get("loss_masks")
    advantage = _sequence_means(name, lists["advantages"], mask if mask is not None else _ones_like(lists["log_probs"]),
                                "advantages") if "advantages" in lists else None
    reward = None if rewards is None else pa.array([float(value) for value in rewards], pa.float64())
    return _canonical(lists["rollout_log_probs"], lists["log_probs"], mask, reward, advantage)


def _tensor_lists(name, key, values):
    """A list<float64> array of per-sample tensors (or lists)."""
    try:
        return pa.array([None if value is None else np.asarray(value, dtype=float).reshape(-1) for value in values],
                        type=pa.list_(pa.float64()))
    except (TypeError, ValueError) as error:
        raise LogError(f"{name}: {key!r} does not hold numbers per sample ({error})") from None


def _ones_like(lists):
    lengths = _list_lengths(lists)
    return _lists(np.ones(lengths.sum()), lengths)


# -- shared ----------------------------------------------------------------------------------------------------

def _json_table(name, raw, schema):
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
            record = loads(line)
        except json.JSONDecodeError as error:
            return LogError(f"{name}: row {row} is not valid JSON ({error.msg} at character {error.colno})")
        except ValueError as error:                     # nested too deeply, or an integer of over 4,300 digits
            return LogError(f"{name}: row {row} cannot be read ({first_line(error)})")
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


def _list_lengths(lists):
    """Values per row (0 for a missing list)."""
    return pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _lists(values, lengths):
    """A list<float64> array: row i holds the next lengths[i] of ``values``."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.asarray(values, dtype=float)))


def _count(n):
    return "an empty list" if n == 0 else f"a {n}-element list"


def _canonical(sampler, trainer, mask=None, reward=None, advantage=None):
    columns = {CANONICAL["sampler"]: sampler, CANONICAL["trainer"]: trainer}
    if mask is not None:
        columns[CANONICAL["mask"]] = mask.cast(pa.list_(pa.float64()))
    if reward is not None:
        columns[CANONICAL["reward"]] = reward
    if advantage is not None:
        columns[CANONICAL["advantage"]] = advantage
    return pa.table(columns)
