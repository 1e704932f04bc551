"""What the frameworks dump, read as written: a registry of layouts, each turned into a log with a row per sequence.

Most training frameworks never write a file with a row per sequence and both log-prob columns; the few that write
both sets of log-probs write them in their own layouts. ``LAYOUTS`` has a row per layout — the framework, the writer
and commit it was read from, how a file is recognised (its name and first bytes) and how it is read — in the order
they are tried. Each was read from the framework's dump code at the commit named, and each reading is checked
against that code run on toy batches (tests/framework_writers/). Reading gives a ``Part``: the canonical table
(``dump_tables``), or, for Miles, one rank's rows, combined with the step's other ranks (``dump_ranks``). A file of
a known layout that holds no log is ``LeftOut`` with its reason, which becomes a notice of its step.

    NeMo-RL validation  ``val_data_step{N}.jsonl`` (``validate()`` in nemo_rl/algorithms/grpo.py 4014–4021, 7ea279a):
                        the validation rollouts' messages and rewards, no log-probs: left out, never merged into
                        the training step N.
    Miles trajectory    ``{dump_details}/trajectory/{rollout_id}.jsonl`` (miles/ray/rollout/debug_data.py
                        ``save_debug_trajectory_data``, 31f1ca9): each sample's conversation, no log-probs: left out.
    NeMo-RL             ``train_data_step{N}.jsonl`` (grpo.py 3629–3653, ``log_batched_dict_as_jsonl`` in
                        nemo_rl/utils/logger.py): every value wrapped in a 1-element list (the batch sliced one
                        sample at a time); generation_logprobs (μ), prev_logprobs (π), token_loss_mask times
                        sample_loss_mask (the mask NeMo's own metrics use), rewards.
    prime-rl            ``token_exports/step_N/rank_R.jsonl`` (src/prime_rl/trainer/rl/token_export.py, 559b447): a
                        record per sequence; inference_logprobs (μ), trainer_logprobs (π), loss_mask (true/false),
                        per-token ``advantages`` but no reward (the advantage: their mean over the loss-mask
                        tokens), the trainer's ``entropy`` per token (for prime-rl's kl_ent_ratio).
    slime, Miles        ``.pt`` files, opened only by ``torch.load(weights_only=True)`` when torch is installed and
                        only from the command line (``allow_torch``); the page refuses them. Their payloads (train
                        dumps, rollout dumps) are told apart by ``torch_dumps.PAYLOADS``.
    SkyRL               ``dumped_data/global_step_{N}_training_input.pkl`` (skyrl/train/trainer.py ``dump_data``,
                        a956457): a pickle of its TrainingInputBatch. Never opened: unpickling runs code. Refused
                        with the command that exports it to Parquet (``SKYRL_EXPORT``, printed whole on a line of
                        its own by the command line); a step that holds the export beside the pickle is read from
                        the export.
"""

import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from toylab.your_run.bounds import CLI_BOUNDS, Bounds
from toylab.your_run.dump_ranks import combined
from toylab.your_run.dump_tables import (
    canonical,
    count_words,
    json_table,
    list_lengths,
    scaled_lists,
    sequence_means,
    sequence_sums,
)
from toylab.your_run.files import LogError, LogFile
from toylab.your_run.text_rows import loads
from toylab.your_run.torch_dumps import LeftOut, Part, read_payload, torch_payload

PICKLE_EXTENSIONS = (".pkl", ".pickle")
TORCH_EXTENSIONS = (".pt", ".pth")
JSON_EXTENSIONS = (".jsonl", ".json", ".ndjson")
SKYRL_EXPORT = ("python -c \"import pickle,sys,pyarrow as pa,pyarrow.parquet as pq; b=pickle.load(open(sys.argv[1],"
                "'rb')); pq.write_table(pa.table({k: b[k].float().tolist() for k in ('rollout_logprobs',"
                "'action_log_probs','loss_mask','advantages')}), sys.argv[1][:-4] + '.parquet')\" FILE.pkl")
NEMO_FIELDS = {"generation_logprobs": "numbers", "prev_logprobs": "numbers", "token_loss_mask": "numbers",
               "sample_loss_mask": "number", "rewards": "number"}
PRIME_FIELDS = ("inference_logprobs", "trainer_logprobs", "loss_mask", "advantages")
NEMO_VALIDATION = re.compile(r"^val_data_step\d+\.jsonl$")


@dataclass(frozen=True)
class DumpFile(LogFile):
    """A dump's canonical table as an in-memory Parquet LogFile, with what reading it noticed and, per row, the
    sum of the trainer's entropy over its response tokens (prime-rl's export; None elsewhere)."""
    notices: tuple[str, ...] = ()
    entropy: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class Layout:
    """A framework's dump layout: a row of ``LAYOUTS``."""
    key: str
    framework: str
    writer: str                        # the function (and commit) that writes it
    recognise: Callable                # (file name, first bytes) → bool
    read: Callable                     # (name, data, path, allow_torch, bounds) → Part; may raise LeftOut


def _extension(name):
    return os.path.splitext(name.lower())[1]


def _first_record(head):
    """The first line of a JSON Lines head as a dict (None if it is not one)."""
    try:
        first = loads(head.split(b"\n", 1)[0])
    except ValueError:                                  # not JSON, nested too deeply, or an integer too long
        return None
    return first if isinstance(first, dict) else None


def _is_nemo(name, head):
    if _extension(name) not in JSON_EXTENSIONS:
        return False
    first = _first_record(head)
    return first is not None and all(key in first for key in ("generation_logprobs", "prev_logprobs")) and \
        _wrapped(first["prev_logprobs"])


def _is_prime(name, head):
    first = _first_record(head) if _extension(name) in JSON_EXTENSIONS else None
    return first is not None and "schema_version" in first and all(key in first for key in PRIME_FIELDS)


def _is_miles_trajectory(name, head):
    """Miles' conversation sidecar, ``{dump_details}/trajectory/{rollout_id}.jsonl`` (debug_data.py
    ``save_debug_trajectory_data``): a row per sample with its ``messages``."""
    parts = name.replace("\\", "/").split("/")
    first = _first_record(head) if len(parts) > 1 and parts[-2] == "trajectory" else None
    return first is not None and {"sample_index", "messages"} <= set(first)


def _wrapped(value):
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], list)


# -- reading each layout -----------------------------------------------------------------------------------------

def _nemo_validation(name, data, path, allow_torch, bounds):
    raise LeftOut(f"{name}: NeMo-RL's validation data (validate() writes the validation rollouts' messages and "
                  "rewards, no log-probs): left out, not part of the training step")


def _miles_trajectory(name, data, path, allow_torch, bounds):
    raise LeftOut(f"{name}: Miles' trajectory sidecar (each sample's conversation, no log-probs): left out")


def _nemo(name, data, path, allow_torch, bounds):
    raw = _text(name, data, path, bounds)
    first = loads(raw.split(b"\n", 1)[0])
    present = [field for field in NEMO_FIELDS if field in first]
    schema = pa.schema([(field, pa.list_(pa.list_(pa.float64()) if NEMO_FIELDS[field] == "numbers"
                                         else pa.float64())) for field in present])
    table = json_table(name, raw, schema)
    columns = {}
    for field in present:
        column = table.column(field).combine_chunks()
        lengths = list_lengths(column)
        wrong = lengths != 1
        if wrong.any():
            row = int(np.argmax(wrong)) + 1
            raise LogError(f"{name}: row {row}, column {field!r}: {count_words(lengths[row - 1])} where NeMo-RL "
                           "writes a 1-element list (one sample per row)")
        columns[field] = column.flatten()
    mask = columns.get("token_loss_mask")
    if mask is not None and "sample_loss_mask" in columns:
        mask = scaled_lists(mask, columns["sample_loss_mask"])
    return Part(name, table=canonical(columns["generation_logprobs"], columns["prev_logprobs"], mask,
                                      columns.get("rewards")))


def _prime(name, data, path, allow_torch, bounds):
    raw = _text(name, data, path, bounds)
    schema = pa.schema([("inference_logprobs", pa.list_(pa.float64())), ("trainer_logprobs", pa.list_(pa.float64())),
                        ("loss_mask", pa.list_(pa.bool_())), ("advantages", pa.list_(pa.float64())),
                        ("entropy", pa.list_(pa.float64()))])
    table = json_table(name, raw, schema)
    mask = table.column("loss_mask").combine_chunks().cast(pa.list_(pa.float64()))
    advantages = sequence_means(name, table.column("advantages").combine_chunks(), mask, "advantages")
    entropy, notices = _prime_entropy(name, table.column("entropy").combine_chunks(), mask)
    return Part(name, table=canonical(table.column("inference_logprobs").combine_chunks(),
                                      table.column("trainer_logprobs").combine_chunks(), mask, advantage=advantages),
                notices=notices, entropy=entropy)


def _prime_entropy(name, entropy, mask):
    """(per row Σ of the entropy over its loss-mask tokens, notices); None with a notice where a response token has
    none (the export writes null for a missing or non-finite value)."""
    if entropy.null_count == len(entropy):
        return None, []
    try:
        sums, _ = sequence_sums(name, entropy, mask, "entropy")
    except LogError as missing:
        return None, [f"prime-rl's kl_ent_ratio not computed: {str(missing).removeprefix(name + ': ')}"]
    return sums, []


def _torch(name, data, path, allow_torch, bounds):
    if not allow_torch:
        raise LogError(f"{name}: a torch .pt dump is read only by the command line (python -m toylab inspect, "
                       "with torch installed), never from an upload")
    _check_size(name, data, path, bounds)
    return read_payload(name, torch_payload(name, data, path))


def _pickle(name, data, path, allow_torch, bounds):
    raise LogError(f"{name}: a pickle is never opened here (unpickling can run code); SkyRL's dump exports to "
                   f"Parquet with: {SKYRL_EXPORT}")


LAYOUTS = (
    Layout("nemo_validation", "NeMo-RL", "validate(), nemo_rl/algorithms/grpo.py 4014–4021 (7ea279a)",
           lambda name, head: bool(NEMO_VALIDATION.match(os.path.basename(name.replace("\\", "/")))),
           _nemo_validation),
    Layout("miles_trajectory", "Miles", "save_debug_trajectory_data, miles/ray/rollout/debug_data.py (31f1ca9)",
           _is_miles_trajectory, _miles_trajectory),
    Layout("nemo", "NeMo-RL", "Logger.log_batched_dict_as_jsonl, nemo_rl/utils/logger.py (7ea279a)", _is_nemo, _nemo),
    Layout("prime", "prime-rl", "TokenExporter.export, src/prime_rl/trainer/rl/token_export.py (559b447)", _is_prime,
           _prime),
    Layout("torch", "slime or Miles (torch)", "save_debug_train_data: slime/observability/train_data_utils.py "
           "(624b824), miles/utils/train_dump_utils.py (31f1ca9)",
           lambda name, head: _extension(name) in TORCH_EXTENSIONS, _torch),
    Layout("pickle", "SkyRL (pickle)", "RayPPOTrainer.dump_data, skyrl/train/trainer.py (a956457)",
           lambda name, head: _extension(name) in PICKLE_EXTENSIONS, _pickle),
)
BY_KEY = {layout.key: layout for layout in LAYOUTS}
COMMANDS = (SKYRL_EXPORT,)             # the commands a refusal gives, printed whole by the command line
DUMP_NAMES = {layout.key: layout.framework for layout in LAYOUTS}


def with_commands_apart(message):
    """(the message without the commands it gives, those commands): a command line prints each command whole on a
    line of its own, since its one-line error is cut at a few hundred characters."""
    commands = [command for command in COMMANDS if command in message]
    for command in commands:
        message = message.replace(f" with: {command}", " with the command printed above")
    return message, commands


def dump_kind(name: str, head: bytes) -> str | None:
    """The key of the first layout in LAYOUTS that recognises a file (None: an ordinary log); ``head`` is the
    file's first bytes (a few kilobytes)."""
    return next((layout.key for layout in LAYOUTS if layout.recognise(name, head)), None)


def read_dump(name, kind, data=None, path=None, allow_torch=False, bounds=CLI_BOUNDS):
    """The Part of a dump file of layout ``kind``; LeftOut if it holds no log, LogError if it cannot be read."""
    return BY_KEY[kind].read(name, data, path, allow_torch, bounds)


def assemble(parts, bounds=CLI_BOUNDS):
    """(DumpFiles, notices) of a step's Parts: tables as they are, Miles' rank files combined with the step's
    rollout dump, a rollout dump with no Miles rank beside it left out with a notice."""
    shards = [part for part in parts if part.shard is not None]
    orders = [part for part in parts if part.order is not None]
    tables = [part for part in parts if part.table is not None]
    notices = []
    if shards:
        tables.append(combined(shards, orders))
    else:
        notices += [f"{part.name}: a rollout dump (the generated samples, with the sampler's log-probs only): left "
                    "out" for part in orders]
    return [dump_file(part, bounds) for part in tables], notices


def dump_file(part, bounds=CLI_BOUNDS):
    """The DumpFile of a Part holding a table."""
    sink = io.BytesIO()
    pq.write_table(part.table, sink)
    return DumpFile(part.name, "parquet", False, sink.tell(), bounds, data=sink.getvalue(),
                    notices=tuple(part.notices), entropy=part.entropy)


def canonical_file(name: str, kind: str, data: bytes | None = None, path: str | None = None, allow_torch: bool = False,
                   bounds: Bounds = CLI_BOUNDS) -> DumpFile:
    """The DumpFile of one dump file read alone (a Miles rank file: without its step's other ranks); LogError if it
    cannot be read or holds no log, or is over the ``bounds`` (its size and lines here; its tokens and sequences as
    the canonical table is read)."""
    files, notices = assemble([read_dump(name, kind, data, path, allow_torch, bounds)], bounds)
    if not files:
        raise LeftOut("; ".join(notices))
    return files[0]


def _text(name, data, path, bounds):
    """A JSON Lines dump's bytes, its size and longest line checked against the bounds (it is read whole)."""
    _check_size(name, data, path, bounds)
    raw = data if data is not None else _read(name, path)
    ends = np.flatnonzero(np.frombuffer(raw, np.uint8) == 10)
    lengths = np.diff(ends, prepend=-1, append=len(raw)) - 1
    if lengths.size and lengths.max() > bounds.line_bytes:
        raise bounds.exceeded(name, "line_bytes", f"line {int(np.argmax(lengths)) + 1}")
    return raw


def _check_size(name, data, path, bounds):
    size = len(data) if data is not None else _stat(name, path)
    if size > bounds.file_bytes:
        raise bounds.exceeded(name, "file_bytes", f"the file ({size:,} bytes)")


def _stat(name, path):
    try:
        return os.path.getsize(path)
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None


def _read(name, path):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise LogError(f"{name}: cannot read the file ({error.strerror or error})") from None
