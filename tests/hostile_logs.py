"""Hostile rollout logs, built in memory (not a test module): the file classes of issue 20 and the Arrow type zoo.

Each builder returns ``(file name, bytes)``. The defaults are the sizes the issue tried (what
benchmarks/hostile_upload.py feeds to the command line and the page); the tests pass smaller sizes, or read
with smaller bounds, so that every class stays cheap to build. A gzip bomb is one small gzip member per
repeated block, concatenated: a valid gzip stream (RFC 1952 allows many members) that every reader
decompresses in full, built in milliseconds however far it expands.
"""

import gzip
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

MB = 1_000_000
SAMPLER, TRAINER = "rollout_log_probs", "old_log_probs"
HOST = "http://toylab-test.invalid"      # a host no test may ever reach: a request to it is an injection
MARKUP = {                               # text that becomes an element if it is rendered as Markdown or HTML
    "image": f"![img]({HOST}/image.png)",
    "link": f"[click]({HOST}/link)",
    "html": f'<img src="{HOST}/html.png">',
    "latex": "$\\frac{1}{0}$",
    "bold": "**bold** _it_ `code`",
    "colour": ":red[alarm] :material/warning:",
    "autolink": f"{HOST}/bare www.toylab-test.invalid",
}


def gzip_bomb(head, block, times, tail=b""):
    """gzip of head + block·times + tail, one member per part: len(block)·times bytes once decompressed."""
    member = gzip.compress(block, mtime=0)
    return gzip.compress(head, mtime=0) + member * times + gzip.compress(tail, mtime=0)


def parquet(table, **options):
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def jsonl(records):
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def row(tokens=2, reward=1.0, **extra):
    """A row-per-sequence record with ``tokens`` log-probs in each column."""
    return {SAMPLER: [-0.5] * tokens, TRAINER: [-0.25] * tokens, "reward": reward, **extra}


# -- memory and time -------------------------------------------------------------------------------------------

def bomb_one_giant_row(expanded=4_400 * MB):
    """A CSV whose second line is one list cell that never ends before the bomb does."""
    block = b"-0.1, " * (MB // 6)
    return "bomb_row.csv.gz", gzip_bomb(f'{SAMPLER},{TRAINER}\n"['.encode(), block, expanded // len(block),
                                        b'-0.1]","[-0.1]"\n')


def bomb_spaces(expanded=4_400 * MB):
    """A valid JSON line, then gigabytes of spaces on one line."""
    return "bomb_spaces.jsonl.gz", gzip_bomb(jsonl([row()]), b" " * MB, expanded // MB)


def bomb_many_rows(expanded=4_400 * MB):
    """Valid row-per-token lines, repeated: tens of millions of tokens."""
    line = json.dumps({"sequence_id": 7, "sampler_logprobs": -0.5, "trainer_logprobs": -0.25}).encode() + b"\n"
    block = line * (MB // len(line))
    return "bomb_rows.jsonl.gz", gzip_bomb(b"", block, expanded // len(block))


def wide_csv(columns=100_000, rows=3, per_token=False):
    """A CSV with ``columns`` columns (the log's own among them) and a few rows."""
    if per_token:
        names = ["sequence_id", "sampler_logprobs", "trainer_logprobs"]
        cells = ["{i}", "-0.5", "-0.25"]
    else:
        names, cells = [SAMPLER, TRAINER], ['"[-0.5, -0.1]"', '"[-0.25, -0.2]"']
    names += [f"c{i}" for i in range(columns - len(names))]
    line = ",".join(cells + ["0"] * (columns - len(cells)))
    body = "".join(line.replace("{i}", str(i)) + "\n" for i in range(rows))
    return f"wide_{'tokens' if per_token else 'sequences'}.csv", (",".join(names) + "\n" + body).encode()


def long_list(format, tokens=10_000_000):
    """One sequence of ``tokens`` log-probs: one JSON line or CSV cell of ~6·tokens bytes, or one Parquet row."""
    if format == "parquet":
        values = np.round(np.random.default_rng(0).uniform(-3, 0, tokens), 2)
        table = pa.table({SAMPLER: pa.ListArray.from_arrays([0, tokens], values),
                          TRAINER: pa.ListArray.from_arrays([0, tokens], values - 0.01)})
        return "long_list.parquet", parquet(table)
    cell = b"[" + b"-0.5, " * (tokens - 1) + b"-0.5]"
    if format == "jsonl":
        return "long_list.jsonl", b'{"%s": %s, "%s": %s}\n' % (SAMPLER.encode(), cell, TRAINER.encode(), cell)
    return "long_list.csv", b'%s,%s\n"%s","%s"\n' % (SAMPLER.encode(), TRAINER.encode(), cell, cell)


def long_line(length=200 * MB):
    """A valid row with a text column of ``length`` characters: one line of that length."""
    head = json.dumps(row())[:-1].encode()
    return "long_line.jsonl", head + b', "text": "' + b"a" * length + b'"}\n'


def many_sequences(rows=5_000_000):
    """A row per token, every token its own sequence (text ids): as many sequences as rows."""
    ids = pa.array(np.char.add("s", np.arange(rows).astype(str)))
    values = np.round(np.random.default_rng(0).uniform(-3, 0, rows), 3)
    table = pa.table({"sequence_id": ids, "sampler_logprobs": values, "trainer_logprobs": values - 0.01})
    return "many_sequences.parquet", parquet(table)


# -- unusual types -----------------------------------------------------------------------------------------------

def decimal_columns():
    """Log-probs and reward as Parquet decimals (a list of decimals and a decimal scalar)."""
    from decimal import Decimal
    values = [[Decimal("-0.500000"), Decimal("-0.100000")], [Decimal("-1.250000")]]
    type = pa.list_(pa.decimal128(12, 6))
    table = pa.table({SAMPLER: pa.array(values, type), TRAINER: pa.array(values, type),
                      "reward": pa.array([Decimal("1.5"), Decimal("0.5")], pa.decimal128(4, 2))})
    return "decimal.parquet", parquet(table)


def duplicate_names():
    table = pa.Table.from_arrays([pa.array([[-0.5]]), pa.array([[-0.25]]), pa.array([[-0.3]])],
                                 names=[SAMPLER, TRAINER, TRAINER])
    return "duplicate.parquet", parquet(table)


def huge_integers():
    """Integers past int64 (and past float64, and past Python's 4,300-digit limit) in a JSON log."""
    lines = [f'{{"{SAMPLER}": [-1], "{TRAINER}": [-2], "reward": {2**70}}}',
             f'{{"{SAMPLER}": [-1], "{TRAINER}": [-{10**400}], "reward": 1}}',
             f'{{"{SAMPLER}": [-1], "{TRAINER}": [-2], "reward": {"9" * 5000}}}']
    return "integers.jsonl", ("\n".join(lines) + "\n").encode()


def arrow_zoo():
    """{case: (file name, bytes)}: Parquet logs whose columns have unusual Arrow types."""
    lists = [[-0.5, -0.1], [-1.25]]
    trainer = pa.array([[-0.4, -0.2], [-1.0]])

    def log(sampler, **more):
        return parquet(pa.table({SAMPLER: sampler, TRAINER: trainer, **more}))

    return {
        "large_list": log(pa.array(lists, pa.large_list(pa.float64()))),
        "float16": log(pa.array([np.array(v, np.float16) for v in lists], pa.list_(pa.float16()))),
        "float32": log(pa.array(lists, pa.list_(pa.float32()))),
        "integers": log(pa.array([[-1, -2], [-3]], pa.list_(pa.int8()))),
        "dictionary": log(pa.array(lists), reward=pa.array([1.0, 0.0]).dictionary_encode()),
        "dictionary list": log(pa.ListArray.from_arrays([0, 2, 3], pa.array([-0.5, -0.1, -1.25]).dictionary_encode())),
        "fixed_size_list": parquet(pa.table({SAMPLER: pa.array([[-0.5, -0.1], [-1.2, -0.3]], pa.list_(pa.float64(), 2)),
                                             TRAINER: pa.array([[-0.4, -0.2], [-1.0, -0.3]])})),
        "struct": log(pa.array([{"a": -0.5}, {"a": -0.1}])),
        "struct extra": log(pa.array(lists), meta=pa.array([{"a": {"b": [1, 2]}}, {"a": None}])),
        "list of lists": log(pa.array([[[-0.5]], [[-0.1]]])),
        "list of structs": log(pa.array([[{"v": -0.5}], [{"v": -0.1}]])),
        "map": log(pa.array(lists), tags=pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64()))),
        "timestamp reward": log(pa.array(lists), reward=pa.array([0, 1], pa.timestamp("s"))),
        "binary": log(pa.array([b"\x00\x01", b"x"])),
        "null column": log(pa.array(lists), reward=pa.nulls(2)),
        "large_string ids": parquet(pa.table({"sequence_id": pa.array(["a", "a"], pa.large_string()),
                                              "sampler_logprobs": [-0.5, -0.1], "trainer_logprobs": [-0.4, -0.2]})),
        "dictionary ids": parquet(pa.table({"sequence_id": pa.array(["a", "b"]).dictionary_encode(),
                                            "sampler_logprobs": [-0.5, -0.1], "trainer_logprobs": [-0.4, -0.2]})),
        "uint64 ids": parquet(pa.table({"sequence_id": pa.array([2**64 - 1, 1], pa.uint64()),
                                        "sampler_logprobs": [-0.5, -0.1], "trainer_logprobs": [-0.4, -0.2]})),
        "decimal": decimal_columns()[1],
        "duplicate names": duplicate_names()[1],
    }


# -- numbers that are finite but extreme, and tiny logs --------------------------------------------------------

def extreme(case):
    """(file name, bytes) of a JSON log whose numbers are finite but extreme."""
    rows = {
        "log W 355 to 709": [row(10) | {SAMPLER: [-60.0] * 10, TRAINER: [-10.0] * 10}, row()],
        "log-probs -1e308": [row() | {SAMPLER: [-1e308, -0.5], TRAINER: [-1e308, -0.25]}, row()],
        "|log rho| over 709": [row() | {SAMPLER: [-800.0, -0.5]}, row()],
        "rewards 1e308": [row(reward=1e308), row(reward=-1e308), row(reward=1e308)],
    }[case]
    return f"extreme_{case.split()[0]}.jsonl", jsonl(rows)


def tiny(case):
    """(file name, bytes) of a log too small or too odd for some numbers: each needs an explained "—"."""
    logs = {
        "single sequence": jsonl([row(3)]),
        "single token": jsonl([row(1)]),
        "some empty lists": jsonl([row(2), row(0), row(3), row(0)]),
        "NUL in a column name": b'sequence_id,sampler_logprobs,trainer_logprobs,a\x00b\n1,-0.5,-0.2,x\n1,-0.1,-0.3,y\n',
        "extra columns": jsonl([row(2, text="hi", ids=[1, 2], nested={"a": [1]}), row(3, text=None, ids=None)]),
    }
    return f"tiny_{case.split()[0]}.{'csv' if 'NUL' in case else 'jsonl'}", logs[case]


def long_csv_cells(tokens=12_000, sequences=3):
    """A row-per-sequence CSV whose list cells are longer than Python csv's default limit of 131,072 characters."""
    rng = np.random.default_rng(1)
    rows = [{SAMPLER: np.round(rng.uniform(-3, 0, tokens), 9).tolist()} for _ in range(sequences)]
    text = io.StringIO()
    text.write(f"{SAMPLER},{TRAINER},reward\n")
    for record in rows:
        cell = json.dumps(record[SAMPLER])
        text.write(f'"{cell}","{cell}",1\n')
    return "long_cells.csv", text.getvalue().encode()


def markup_names(kind="image"):
    """A JSON log whose log-prob columns are named with markup, and whose reward cell holds it."""
    text = MARKUP[kind]
    return "markup.jsonl", jsonl([{f"{text} mu": [-0.5], f"{text} pi": [-0.25], "reward": text}])


def markup_cell(kind="image"):
    """A recognised log whose reward cell holds markup: the error message quotes the cell."""
    return "markup_cell.jsonl", jsonl([row(), row(reward=MARKUP[kind])])
