"""A step of Miles' train dumps, one file per rank, combined into one log as Miles' own reader combines them.

miles/dashboard/dump_reader.py (radixark/miles 31f1ca9), ``load_joined`` and ``_resolve_per_token_fields``: the
rows of every rank's file are matched by ``sample_indices``; each per-token field is taken from the ranks that hold
it — pipeline stages before the last hold no ``log_probs`` or ``advantages`` — one copy per context-parallel rank
(tensor-parallel peers write the same values), and a context-parallel rank's slices are put back in place by the
offsets its split used (``get_logits_and_tokens_offset_with_cp`` and ``assemble_log_prob_from_cp``,
miles/backends/training_utils/cp_utils.py 19–67 and 440–472, format thd). ``raw_reward`` is the whole batch's, in
rollout order, so a sequence's reward is ``raw_reward[its position in the rollout dump]``: with no rollout dump in
the step, no reward is read and a notice says why. Every copy counted once, stage skipped, slice reassembled or
sequence missing is a notice.
"""

import numpy as np
import pyarrow as pa

from toylab.your_run.files import LogError
from toylab.your_run.torch_dumps import FIELDS, SHARDED, Part, table_of

ROLLOUT_DUMP = "rollout_data/{rollout_id}.pt"


def combined(shards, orders):
    """The Part of a step's Miles rank Parts (``shards``) and rollout dump Parts (``orders``): one row per sequence,
    in rollout order when the rollout dump is there (else by sample index)."""
    order = orders[0].order if orders else None
    locations = _locations(shards)
    indices = _sample_order(shards, orders, locations)
    rows = {index: _row(shards, index, locations[index]) for index in indices}
    readable = _readable(shards, indices, rows)
    name = shards[0].name
    notices = _layout_notices(shards, rows) + _missing_notices(shards, indices, readable, order)
    rewards, why = _rewards(shards, readable, order)
    columns = {key: pa.array([rows[index][key] for index in readable], pa.list_(pa.float64())) for key in FIELDS
               if all(rows[index][key] is not None for index in readable)}
    table = table_of(name, columns, rewards, columns.pop("advantages", None))
    return Part(name, table=table, notices=notices + why + [note for shard in shards for note in shard.notices])


def _sample_order(shards, orders, locations):
    """The step's sample indices in rollout order (``orders``' first Part), else sorted; a sample the rollout dump
    does not hold is a LogError (the dumps are of different rollouts)."""
    order = orders[0].order if orders else None
    if order is None:
        return sorted(locations)
    if not set(locations) <= set(order):
        stray = sorted(set(locations) - set(order))
        raise LogError(f"{shards[0].name}: sample {stray[0]} is not in the rollout dump {orders[0].name} "
                       f"({len(stray)} such): the train and rollout dumps are of different rollouts")
    return [index for index in order if index in locations]


def _readable(shards, indices, rows):
    """The samples some rank holds both log-probs of; a LogError if none (only the last pipeline stage has them)."""
    readable = [index for index in indices if rows[index]["log_probs"] is not None
                and rows[index]["rollout_log_probs"] is not None]
    if not readable:
        raise LogError(f"{shards[0].name}: no rank of this step holds the trainer's log-probs ('log_probs') of any "
                       f"sequence (ranks found: {_ranks(shard.shard['rank'] for shard in shards)}; only the last "
                       "pipeline stage computes them)")
    return readable


def _locations(shards):
    """{sample index: [(shard number, row)]}, shards in rank order."""
    locations = {}
    for number, part in enumerate(shards):
        for row, index in enumerate(part.shard["indices"]):
            locations.setdefault(index, []).append((number, row))
    return locations


def _row(shards, index, where):
    """One sequence's fields at full response length (None: no rank holds a whole one), with its copies' count and
    their largest difference."""
    lengths = {shards[s].shard["response_lengths"][r] for s, r in where if shards[s].shard["response_lengths"]}
    if len(lengths) > 1:
        raise LogError(f"{shards[where[0][0]].name}: the ranks disagree on sample {index}'s response length "
                       f"({sorted(lengths)}): mixed or corrupt dumps")
    row = {"copies": 1, "difference": 0.0, "sliced": False}
    for key in FIELDS:
        holders = [(s, r) for s, r in where if key in shards[s].shard["fields"]]
        row[key] = _field(shards, key, holders, row) if holders else None
    return row


def _field(shards, key, holders, row):
    """The field's values from its holders: one copy per context-parallel rank, the slices reassembled."""
    by_cp = {}
    for s, r in holders:
        by_cp.setdefault(shards[s].shard["cp_rank"], []).append(shards[s].shard["fields"][key][r])
    first = shards[holders[0][0]].shard
    for copies in by_cp.values():
        if key == "log_probs":                  # every stage holds the sampler's; the trainer's, only the last
            row["copies"] = max(row["copies"], len(copies))
        row["difference"] = max([row["difference"]] + [_gap(copies[0], copy) for copy in copies[1:]])
    if first["cp_size"] == 1 or key not in SHARDED:
        return by_cp[min(by_cp)][0]
    if len(by_cp) != first["cp_size"]:
        return None
    row["sliced"] = True
    s, r = holders[0]
    return assembled({cp: copies[0] for cp, copies in by_cp.items()}, first["total_lengths"][r],
                     first["response_lengths"][r], first["cp_size"])


def _gap(a, b):
    return float("inf") if len(a) != len(b) else float(np.max(np.abs(a - b), initial=0.0))


def _layout_notices(shards, rows):
    """What combining did: stages without the trainer's log-probs skipped, copies counted once, slices joined."""
    notices = []
    without = [shard.shard["rank"] for shard in shards if "log_probs" not in shard.shard["fields"]]
    if without:
        holders = [shard.shard["rank"] for shard in shards if "log_probs" in shard.shard["fields"]]
        notices.append(f"ranks {_ranks(without)} hold no trainer log-probs (pipeline stages before the last): their "
                       f"sequences are read from ranks {_ranks(holders)}")
    copies = max(row["copies"] for row in rows.values())
    if copies > 1:
        difference = max(row["difference"] for row in rows.values())
        notices.append(f"each sequence is written by {copies} ranks (tensor-parallel copies"
                       + (", equal value for value): counted once" if difference == 0 else
                          f"): counted once; the copies differ by up to {difference:.3g}, the lowest rank's is read"))
    if any(row["sliced"] for row in rows.values()):
        notices.append(f"context parallelism {shards[0].shard['cp_size']}: each sequence's per-token values were "
                       "split across its ranks; reassembled as Miles' split made them (cp_utils.py)")
    return notices


def _missing_notices(shards, indices, readable, order):
    """Sequences the step's files do not give whole, and a batch larger than the sequences found."""
    notices = []
    if len(readable) < len(indices):
        notices.append(f"{len(indices) - len(readable)} of {len(indices)} sequences have no trainer log-probs (or "
                       "not every context-parallel slice) in this step's files: left out")
    raw = next((shard.shard["raw_reward"] for shard in shards if shard.shard["raw_reward"] is not None), None)
    batch = len(order) if order is not None else None if raw is None else len(raw)
    if batch is not None and len(indices) < batch:
        notices.append(f"{len(indices)} of the batch's {batch} sequences found (ranks found: "
                       f"{_ranks(shard.shard['rank'] for shard in shards)}): a data-parallel rank's files are missing")
    return notices


def _rewards(shards, readable, order):
    """(rewards or None, notices): raw_reward indexed by each sequence's position in the rollout dump."""
    raw = next((shard.shard["raw_reward"] for shard in shards if shard.shard["raw_reward"] is not None), None)
    if raw is None:
        return None, []
    if order is None:
        return None, [f"no reward read: Miles stores raw_reward for the whole batch in rollout order, and a rank's "
                      f"rows are its data-parallel shard in schedule order; the pairing needs the rollout dump "
                      f"({ROLLOUT_DUMP}, written beside train_data/ by --dump-details): inspect the dump_details "
                      "directory"]
    if len(raw) != len(order):
        return None, [f"no reward read: raw_reward holds {len(raw)} values but the rollout dump {len(order)} "
                      "samples"]
    position = {index: place for place, index in enumerate(order)}
    return [raw[position[index]] for index in readable], []


def _ranks(ranks):
    """Ranks as text: runs of consecutive ranks as a–b."""
    values = sorted({rank for rank in ranks if rank is not None})
    runs, start = [], None
    for i, value in enumerate(values):
        start = value if start is None else start
        if i + 1 == len(values) or values[i + 1] != value + 1:
            runs.append(str(start) if start == value else f"{start}–{value}")
            start = None
    return ", ".join(runs) or "none named"


# -- context parallelism, format thd (miles/backends/training_utils/cp_utils.py) ---------------------------------

def assembled(chunks, total_length, response_length, cp_size):
    """A response's values from each context-parallel rank's slice ({cp_rank: values}): assemble_log_prob_from_cp
    (cp_utils.py 440–472), the offsets of get_logits_and_tokens_offset_with_cp (19–67) for qkv_format thd."""
    prompt_length = total_length - response_length
    out = np.zeros(response_length)
    for cp_rank, chunk in chunks.items():
        taken = 0
        for low, high in _logits_offsets(total_length, prompt_length, cp_rank, cp_size):
            start, stop = low - (prompt_length - 1), high - (prompt_length - 1)
            if stop - start <= 0:
                continue
            out[start:stop] = chunk[taken:taken + stop - start]
            taken += stop - start
        if taken != len(chunk):
            raise LogError(f"context-parallel rank {cp_rank}: its slice holds {len(chunk)} values where the split "
                           f"of a {total_length}-token sequence gives it {taken}")
    return out


def _logits_offsets(total_length, prompt_length, cp_rank, cp_size):
    """The two logit ranges a context-parallel rank computes: its chunk and the mirrored one (zigzag)."""
    chunk_size = (total_length + 2 * cp_size - 1) // (2 * cp_size)
    chunks = ((cp_rank * chunk_size, (cp_rank + 1) * chunk_size),
              ((2 * cp_size - cp_rank - 1) * chunk_size, (2 * cp_size - cp_rank) * chunk_size))
    offsets = []
    for low, high in chunks:
        low, high = max(low, prompt_length - 1), min(high, total_length - 1)
        offsets.append((low, high) if low < high else (0, 0))
    return offsets
