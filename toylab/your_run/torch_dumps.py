"""slime's and Miles' torch.save dumps, read as their writers lay them out: a train dump, or a rollout dump beside it.

A ``.pt`` file is opened only by ``torch.load(weights_only=True)`` (tensors, lists, dicts and numbers; no code) and
only when torch is installed. Its payload is recognised by the first row of ``PAYLOADS`` that fits:

    slime train dump    ``{dump_details}/train_data/{rollout_id}.pt`` (slime/observability/train_data_utils.py,
                        ``save_debug_train_data``, 624b824): ``format_version`` 2, one file per rollout written by the
                        data-parallel source rank of the last pipeline stage, tensor rank 0, context parallelism
                        already gathered; a ``samples`` list in rollout order (each with its ``rollout_position``) and
                        the whole batch's ``raw_reward`` at the top, in rollout order: a sample's reward is
                        ``raw_reward[rollout_position]`` (its own ``local_raw_reward`` where it has no position).
    Miles train dump    ``{dump_details}/train_data/{rollout_id}_{rank}.pt`` (miles/utils/train_dump_utils.py,
                        31f1ca9): every rank writes its ``rollout_data``, a dict of per-sample lists for its
                        data-parallel shard (``sample_indices``: each row's Sample.index). Tensor-parallel peers
                        write the same rows; pipeline stages before the last hold no ``log_probs``; a
                        context-parallel rank holds its zigzag slice of each per-token field. ``raw_reward`` is
                        the whole batch's, in rollout order. The ranks of a step are combined (``combined``) as
                        Miles' own reader does (miles/dashboard/dump_reader.py ``_resolve_per_token_fields``, 31f1ca9):
                        per field, the ranks that hold it; one copy of each sequence; slices reassembled.
    rollout dump        ``{dump_details}/rollout_data/{rollout_id}.pt`` (slime's ``save_debug_rollout_data``,
                        Miles' miles/ray/rollout/debug_data.py): the generated ``samples`` in rollout order, with the
                        sampler's log-probs only. Not a log: it gives Miles' rewards their order (``DumpReader.
                        load_joined`` indexes ``raw_reward`` by a sample's position in it) and is otherwise left out.
"""

import io
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from toylab.text import listed
from toylab.your_run.dump_tables import canonical, ones_like, sequence_means
from toylab.your_run.files import LogError

FIELDS = ("rollout_log_probs", "log_probs", "loss_masks", "advantages")
SHARDED = ("rollout_log_probs", "log_probs", "advantages")        # per token, a context-parallel rank's slice
ROLES = {"rollout_log_probs": "the sampler's log-probs", "log_probs": "the trainer's log-probs"}
NARROW = {"torch.bfloat16": "bfloat16 (8 significant bits)", "torch.float16": "float16 (11 significant bits)"}
NARROW_ERROR = {"torch.bfloat16": "2⁻⁸", "torch.float16": "2⁻¹¹"}


class LeftOut(LogError):
    """A file of a known layout that holds no log (validation data, a rollout dump, a pickle read from its export):
    its step is read without it, and the reason becomes one of the step's notices."""


@dataclass
class Part:
    """What one dump file gives its step: a canonical table (``table``), or a Miles rank's rows (``shard``), or a
    rollout dump's order of samples (``order``); ``notices`` for what was noticed reading it."""
    name: str
    table: pa.Table | None = None
    shard: dict | None = None
    order: list | None = None
    notices: list = field(default_factory=list)
    entropy: np.ndarray | None = None          # per row: Σ of the trainer's entropy over its response tokens


def torch_payload(name, data, path):
    """The object in a .pt file, loaded by torch.load(weights_only=True); LogError if torch is missing or refuses."""
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


def read_payload(name, payload):
    """The Part of a loaded .pt payload: the first row of PAYLOADS that recognises it; LogError if none does."""
    if not isinstance(payload, dict):
        raise LogError(f"{name}: not a slime or Miles dump: the file holds a {type(payload).__name__}, not a dict")
    for recognise, read in PAYLOADS:
        if recognise(payload):
            return read(name, payload)
    raise LogError(f"{name}: not a slime or Miles dump: no 'samples' or 'rollout_data' in {listed(sorted(payload), 6)}")


# -- numbers out of tensors ----------------------------------------------------------------------------------------

def _floats(value, dtypes, key):
    """A tensor's (or list's) values as float64 (a bfloat16 tensor has no numpy twin: widened by torch first), its
    torch dtype noted in ``dtypes[key]``."""
    if type(value).__module__.startswith("torch"):
        dtypes.setdefault(key, set()).add(str(value.dtype))
        value = value.detach().double()
    return np.asarray(value, dtype=float).reshape(-1)


def _lists(name, key, values, dtypes):
    """A list<float64> array of per-sample tensors (or lists)."""
    try:
        return pa.array([None if value is None else _floats(value, dtypes, key) for value in values],
                        type=pa.list_(pa.float64()))
    except (TypeError, ValueError, RuntimeError) as error:
        raise LogError(f"{name}: {key!r} does not hold numbers per sample ({error})") from None


def narrow_notice(dtypes):
    """A notice per log-prob field stored in a half-precision dtype: its rounding is part of every log ρ."""
    return [f"{key} stored in {NARROW[dtype]}: read exactly, but each value is that dtype's rounding of the "
            f"framework's, so each log ρ carries up to {NARROW_ERROR[dtype]} of |log μ| or |log π| from storage alone"
            for key in ROLES for dtype in sorted(dtypes.get(key, ())) if dtype in NARROW]


def table_of(name, columns, rewards=None, advantages=None):
    """The canonical table of per-sample lists ``columns`` (FIELDS, None where absent), a reward per sample and the
    per-token advantages (averaged over each sample's response tokens)."""
    for key in ("rollout_log_probs", "log_probs"):
        if columns.get(key) is None or columns[key].null_count:
            raise LogError(f"{name}: the dump has no {key!r} for every sample ({ROLES[key]})")
    mask = columns.get("loss_masks")
    advantage = None if advantages is None else sequence_means(
        name, advantages, mask if mask is not None else ones_like(columns["log_probs"]), "advantages")
    reward = None if rewards is None else pa.array([_reward(name, value) for value in rewards], pa.float64())
    return canonical(columns["rollout_log_probs"], columns["log_probs"], mask, reward, advantage)


def _reward(name, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise LogError(f"{name}: raw_reward holds {type(value).__name__} values, not numbers (a reward_key picks one "
                       "of a dict's rewards; dump the number)") from None


# -- slime: one file per rollout -------------------------------------------------------------------------------

def _slime_part(name, payload):
    samples = payload["samples"]
    if not isinstance(samples, list) or not all(isinstance(sample, dict) for sample in samples):
        raise LogError(f"{name}: slime's 'samples' is not a list of dicts")
    dtypes = {}
    columns = {key: _lists(name, key, [sample.get(key) for sample in samples], dtypes) for key in FIELDS
               if any(sample.get(key) is not None for sample in samples)}
    rewards, notices = _slime_rewards(name, samples, payload.get("raw_reward"))
    table = table_of(name, columns, rewards, columns.pop("advantages", None))
    return Part(name, table=table, notices=notices + narrow_notice(dtypes))


def _slime_rewards(name, samples, raw):
    """(a reward per sample or None, notices): ``raw_reward`` is the whole batch's in rollout order (rollout.py
    ``_split_train_data_by_dp`` ships it whole); a sample's place in it is its ``rollout_position``."""
    positions = [sample.get("rollout_position") for sample in samples]
    if isinstance(raw, list | tuple) and all(isinstance(p, int) and 0 <= p < len(raw) for p in positions):
        return [raw[p] for p in positions], []
    local = [sample.get("local_raw_reward") for sample in samples]
    if all(value is not None for value in local):
        return local, []
    if raw is None:
        return None, []
    return None, ["no reward read: slime's raw_reward is the whole batch's, in rollout order, and these samples "
                  "carry no rollout_position (nor local_raw_reward) to find theirs"]


# -- Miles: one file per rank, combined per step -------------------------------------------------------------

def _miles_part(name, payload):
    """A Miles rank's rollout_data as a shard of its step (``combined`` joins the shards by sample index)."""
    data = payload["rollout_data"]
    if not isinstance(data, dict):
        raise LogError(f"{name}: Miles' 'rollout_data' is not a dict")
    indices = data.get("sample_indices")
    if indices is None:
        raise LogError(f"{name}: Miles' rollout_data has no 'sample_indices' (each row's sample): the ranks of a "
                       "step cannot be matched")
    dtypes = {}
    shard = _miles_shard(name, payload, data, indices, dtypes)
    _check_miles_shard(name, shard, len(indices))
    return Part(name, shard=shard, notices=narrow_notice(dtypes))


def _miles_shard(name, payload, data, indices, dtypes):
    """The rank, its context-parallel place, the sample indices, rewards, lengths and per-token fields, as numbers
    (the narrowed dtypes of the fields recorded in ``dtypes``)."""
    try:
        fields = {key: [_floats(value, dtypes, key) for value in data[key]] for key in FIELDS if data.get(key) is not None}
        return {"rank": payload.get("rank"), "cp_rank": int(payload.get("cp_rank") or 0),
                "cp_size": int(payload.get("cp_size") or 1), "qkv_format": payload.get("qkv_format", "thd"),
                "indices": [int(index) for index in indices], "raw_reward": data.get("raw_reward"),
                "response_lengths": [int(n) for n in data.get("response_lengths") or []],
                "total_lengths": [int(n) for n in data.get("total_lengths") or []], "fields": fields}
    except (TypeError, ValueError, RuntimeError) as error:
        raise LogError(f"{name}: Miles' rollout_data does not hold numbers where its writer puts them ({error})") \
            from None


def _check_miles_shard(name, shard, samples):
    """Every field and length a value per sample; a context-parallel shard only in qkv_format thd."""
    for key, values in [*shard["fields"].items(), *((key, shard[key]) for key in ("response_lengths", "total_lengths"))]:
        if len(values) != samples:
            raise LogError(f"{name}: {key!r} has {len(values)} samples, 'sample_indices' {samples}")
    if shard["cp_size"] > 1 and shard["qkv_format"] != "thd":
        raise LogError(f"{name}: a context-parallel shard in qkv_format {shard['qkv_format']!r}: its slices depend on "
                       "the padded length of its micro-batch, which the dump does not hold; dump with qkv_format thd")


def _rollout_part(name, payload):
    indices = [sample.get("index") if isinstance(sample, dict) else None for sample in payload["samples"]]
    if any(not isinstance(index, int) for index in indices):
        raise LeftOut(f"{name}: a rollout dump (the generated samples, the sampler's log-probs only) without sample "
                      "indices: left out")
    return Part(name, order=indices)


PAYLOADS = (
    (lambda payload: "samples" in payload and "format_version" in payload, _slime_part),
    (lambda payload: "rollout_data" in payload, _miles_part),
    (lambda payload: isinstance(payload.get("samples"), list), _rollout_part),
)
