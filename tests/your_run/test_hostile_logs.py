"""Hostile rollout logs (issue 20's file classes, built by tests/hostile_logs.py): each is read correctly into a
finished report whose every number is finite (or None, with a note), or refused in one line naming the file and,
for a bound, the bound. The bombs are built in memory and read until the bound stops them; where a class would be
slow to build at full size, the test reads it with smaller bounds (the bound is a parameter of every reader)."""

import json
import math

import numpy as np
import pytest
from hostile_logs import (
    MARKUP,
    arrow_zoo,
    bomb_many_rows,
    bomb_one_giant_row,
    bomb_spaces,
    decimal_columns,
    duplicate_names,
    extreme,
    gzip_bomb,
    huge_integers,
    jsonl,
    long_csv_cells,
    long_line,
    long_list,
    many_sequences,
    markup_cell,
    markup_names,
    row,
    tiny,
    wide_csv,
)
from messages import says

from toylab.cli import inspect
from toylab.text import QUOTE_LIMIT, quoted
from toylab.your_run.bounds import CLI_BOUNDS, PAGE_BOUNDS, LogError
from toylab.your_run.log import load_log
from toylab.your_run.statistics import log_statistics

MB = 1_000_000


def write(tmp_path, built):
    name, content = built
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def refused(path, bounds=CLI_BOUNDS, **explicit):
    """The one-line message of the LogError reading ``path`` raises."""
    with pytest.raises(LogError) as error:
        load_log(path, bounds=bounds, **explicit)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message


def report(path, monkeypatch=None, bounds=None):
    """inspect's JSON-ready result and its text, after checking every number in it is finite or None."""
    if bounds is not None:
        monkeypatch.setattr(inspect, "CLI_BOUNDS", bounds)
    _, arguments = inspect.parse_arguments([path, "--json"])
    result = inspect.report(arguments)
    assert_finite(result)
    text = inspect.as_text(result)
    assert not any(word in text.lower().split() for word in ("nan", "inf", "-inf", "±nan")), text
    assert "nan" not in json.dumps(result, allow_nan=False).lower().replace("nanoseconds", "")
    return result, text


def assert_finite(value, where="result"):
    if isinstance(value, float):
        assert math.isfinite(value), where
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_finite(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            assert_finite(item, f"{where}[{index}]")


# -- memory and time: every bound stops its class, in one line --------------------------------------------------

@pytest.mark.parametrize("build, bound", [
    (bomb_one_giant_row, ("line 2", "16 MB per line")),
    (bomb_spaces, ("line 2", "16 MB per line")),
], ids=["one giant row", "spaces"])
def test_gzip_bombs_stop_at_the_line_bound_at_full_size(tmp_path, build, bound):
    path = write(tmp_path, build())                     # 4.4 GB once decompressed; read until the bound: 16 MB
    assert says(refused(path, PAGE_BOUNDS), *bound)


def test_a_gzip_bomb_of_rows_stops_at_the_token_bound(tmp_path):
    path = write(tmp_path, bomb_many_rows())
    assert says(refused(path, CLI_BOUNDS.but(tokens=50_000)), "line 50,002", "50,000 tokens per file")


def test_a_gzip_bomb_of_blank_lines_stops_at_the_token_bound(tmp_path):
    """Blank lines are no rows, but each line of text counts as a token: a bomb of newlines stops at the bound."""
    path = write(tmp_path, ("newlines.jsonl.gz", gzip_bomb(jsonl([row()]), b"\n" * MB, 4_400)))
    assert says(refused(path), "line 4,000,002", "4,000,000 tokens per file")


def test_a_gzip_bomb_of_long_blank_lines_stops_at_the_decompressed_bound(tmp_path):
    """Lines of 10,000 spaces: few lines, no rows, no tokens; only the count of decompressed bytes stops them."""
    path = write(tmp_path, ("blank.jsonl.gz", gzip_bomb(jsonl([row()]), (b" " * 9_999 + b"\n") * 100, 44_000)))
    message = refused(path, CLI_BOUNDS.but(text_bytes=20 * MB))
    assert says(message, "20 MB", "decompressed")


@pytest.mark.parametrize("per_token", [False, True], ids=["row per sequence", "row per token"])
def test_a_csv_with_100000_columns_is_refused_at_its_header(tmp_path, per_token):
    path = write(tmp_path, wide_csv(100_000, per_token=per_token))
    assert says(refused(path, PAGE_BOUNDS), "header (100,000 columns)", "1,000 columns per file")
    assert load_log(write(tmp_path, wide_csv(1_000, per_token=per_token)), bounds=PAGE_BOUNDS).sequences == 3


@pytest.mark.parametrize("format", ["jsonl", "csv"])
def test_one_sequence_of_millions_of_tokens_in_text_stops_at_the_line_bound(tmp_path, format):
    path = write(tmp_path, long_list(format, tokens=3_000_000))       # an 18 MB line
    assert says(refused(path), "16 MB per line", "Parquet")


def test_one_sequence_of_millions_of_tokens_in_parquet_stops_at_the_sequence_bound(tmp_path):
    path = write(tmp_path, long_list("parquet", tokens=1_500_000))
    assert says(refused(path), "row 1 (1,500,000 tokens)", "1,000,000 tokens per sequence")
    path = write(tmp_path, long_list("parquet", tokens=5_000_000))    # refused from the metadata, before reading
    assert says(refused(path), "5,000,000 values", "4,000,000 tokens per file")


def test_a_200_mb_json_line_stops_at_the_line_bound(tmp_path):
    path = write(tmp_path, long_line(17 * MB))
    assert says(refused(path), "line 1", "16 MB per line")


def test_many_sequences_stop_at_the_sequence_bound_or_the_parquet_metadata(tmp_path):
    path = write(tmp_path, many_sequences(rows=3_000))
    message = refused(path, CLI_BOUNDS.but(sequences=1_000))                 # counted batch by batch
    assert says(message, "row 3000 (3,000 sequences)", "1,000 sequences per file")
    assert says(refused(path, CLI_BOUNDS.but(tokens=2_000)), "3,000 rows", "2,000 tokens")
    assert load_log(path, bounds=CLI_BOUNDS).sequences == 3_000


def test_every_bound_is_stated_in_the_help(capsys):
    with pytest.raises(SystemExit):
        inspect.parse_arguments(["--help"])
    help = capsys.readouterr().out
    for line in CLI_BOUNDS.lines():
        assert line in help
    assert says(help, "tokens per file", "4,000,000", "|reward|: 1e+100")


# -- tracebacks before: read correctly, or one line ----------------------------------------------------------

def test_a_parquet_decimal_column_is_read_as_numbers(tmp_path):
    log = load_log(write(tmp_path, decimal_columns()))
    np.testing.assert_array_equal(log.sampler_logprobs, [-0.5, -0.1, -1.25])
    np.testing.assert_array_equal(log.rewards, [1.5, 0.5])


def test_duplicate_parquet_names_are_refused(tmp_path):
    assert says(refused(write(tmp_path, duplicate_names())), "'old_log_probs'", "twice")


LINE = '{"rollout_log_probs": [-1], "old_log_probs": [OLD], "reward": REWARD}\n'


@pytest.mark.parametrize("old, reward, message", [
    ("-2", str(2**70), None),
    (f"-{10**400}", "1", ("row 1, column 'old_log_probs', element 1", "-inf", "finite")),   # pyarrow reads -inf
    ("-2", "9" * 5000, ("row 1", "4,300 digits")),
    ("-2", "[" * 100_000 + "]" * 100_000, ("row 1", "nested too deeply")),
], ids=["2**70", "401 digits", "5000 digits", "nested 100,000 deep"])
def test_integers_past_int64_or_float64(tmp_path, old, reward, message):
    path = write(tmp_path, ("integers.jsonl", LINE.replace("OLD", old).replace("REWARD", reward).encode()))
    if message is None:
        assert load_log(path).rewards[0] == float(2**70)
    else:
        assert says(refused(path), *message)


def test_the_combined_integer_file_of_the_issue(tmp_path):
    assert says(refused(write(tmp_path, huge_integers())), "row 3", "4,300 digits")
    records = [row(), row() | {"old_log_probs": [10**400, -1]}]            # Python's reader: too large for a float
    message = refused(write(tmp_path, ("python.jsonl", jsonl(records)[:-1] + b"\n")))
    assert "row 2, column 'old_log_probs', element 1: " in message


def test_long_csv_cells_are_read(tmp_path):
    path = write(tmp_path, long_csv_cells(tokens=12_000))            # cells of ~190,000 characters
    log = load_log(path)
    assert log.sequences == 3 and log.tokens == 36_000 and not log.log_ratio.any()


@pytest.mark.parametrize("case", list(arrow_zoo()))
def test_the_arrow_type_zoo_is_read_or_refused_in_one_line(tmp_path, case):
    path = write(tmp_path, (f"zoo_{case.replace(' ', '_')}.parquet", arrow_zoo()[case]))
    readable = {"large_list", "float16", "float32", "integers", "dictionary", "dictionary list", "fixed_size_list",
                "struct extra", "map", "large_string ids", "dictionary ids", "uint64 ids", "decimal"}
    if case in readable:
        log = load_log(path)
        assert log.tokens >= 2 and np.isfinite(log.log_ratio).all()
        report(path)
    else:
        refused(path)


# -- no NaN: finite numbers or an explained None -----------------------------------------------------------------

@pytest.mark.parametrize("case", ["single sequence", "single token", "some empty lists", "extra columns"])
def test_small_or_odd_logs_give_finite_numbers_or_explained_dashes(tmp_path, case):
    result, text = report(write(tmp_path, tiny(case)))
    if result["sequences"] < 2:
        assert result["k1"]["se"] is None and result["log_W"]["sd"] is None
        assert any("no standard error" in note for note in result["notes"])
        assert "± —" in text and "Notes (why a value is —):" in text
        assert any("no standard error" in line for line in
                   result["matched_toy"]["summary"])
    else:
        assert result["k1"]["se"] is not None


def test_a_nul_byte_in_a_csv_header_is_refused_and_an_escaped_one_in_json_is_read(tmp_path):
    assert says(refused(write(tmp_path, tiny("NUL in a column name"))), "not CSV", "binary")
    records = [row() | {"a\u0000b\u001b[2J": "x\u0000"}, row()]
    result, text = report(write(tmp_path, ("nul.jsonl", jsonl(records))))
    assert result["sequences"] == 2 and "\x00" not in text and "\x1b" not in text


def test_a_sequence_weight_between_e355_and_e709_stays_finite(tmp_path):
    result, _ = report(write(tmp_path, extreme("log W 355 to 709")))
    assert result["log_W"]["max"] == pytest.approx(500.0)
    assert result["reward_estimates"]["seq_is"]["value"] == pytest.approx(math.exp(500) / 2, rel=1e-9)
    seq_is = next(row for row in result["estimators"] if row["name"] == "seq_is")
    assert seq_is["weight_max"] == pytest.approx(math.exp(500), rel=1e-9) and 0 < seq_is["ess_fraction"] <= 1


def test_weights_beyond_float64_keep_their_shares_and_say_why(tmp_path):
    records = [row(3) | {"rollout_log_probs": [-300.0] * 3, "old_log_probs": [-0.1] * 3}, row(3)]
    result, text = report(write(tmp_path, ("huge_W.jsonl", jsonl(records))))
    seq_is = next(row for row in result["estimators"] if row["name"] == "seq_is")
    assert seq_is["weight_mean"] is None and seq_is["tokens_affected"] == 0 and "overflow float64" in seq_is["note"]
    assert result["reward_estimates"]["seq_is"] is None and result["reward_estimates"]["snis"]["value"] == 1.0
    assert any("seq_is is null" in note for note in result["notes"])
    tok_tis = next(row for row in result["estimators"] if row["name"] == "tok_tis")
    assert tok_tis["weight_max"] == 2.0 and tok_tis["tokens_affected"] == 0.5


def test_chi2_of_ratios_up_to_e350_is_finite(tmp_path):
    records = [row(2) | {"rollout_log_probs": [-349.0, -0.5], "old_log_probs": [-0.01, -0.5]}, row(2)]
    result, _ = report(write(tmp_path, ("big_rho.jsonl", jsonl(records))))
    rho_squared = [math.exp(2 * 348.99), 1.0, math.exp(0.5), math.exp(0.5)]    # log ρ: 348.99, 0, 0.25, 0.25
    assert result["chi2_token"]["value"] == pytest.approx(sum(rho_squared) / 4 - 1, rel=1e-9)
    assert math.isfinite(result["chi2_token"]["se"]) and result["chi2_token"]["se"] > 1e300


def test_log_probabilities_of_minus_1e308_are_read(tmp_path):
    result, _ = report(write(tmp_path, extreme("log-probs -1e308")))
    assert result["tokens"] == 4 and result["k1"]["value"] == pytest.approx(-0.1875)   # log ρ: 0, ¼, ¼, ¼


@pytest.mark.parametrize("case, message", [
    ("|log rho| over 709", "row 1, element 1: log π − log μ = -0.25 − (-800) = +799.8, beyond ±350"),
    ("rewards 1e308", "row 1, column 'reward': +1e+308 (a reward must be a finite number within ±1e+100)"),
])
def test_extreme_values_are_refused_in_one_line(tmp_path, case, message):
    assert message in refused(write(tmp_path, extreme(case)))


# -- markup from a file: quoted, at most 40 characters, on the command line too ---------------------------------

@pytest.mark.parametrize("kind", list(MARKUP))
def test_markup_in_names_and_cells_is_quoted_short(tmp_path, kind):
    text = MARKUP[kind]
    message = refused(write(tmp_path, markup_cell(kind)))
    assert says(message, "row 2, column 'reward'", quoted(text), "not a number")
    message = refused(write(tmp_path, markup_names(kind)))
    assert says(message, "sampler's log-probabilities")
    long_name = text * 20
    records = [{long_name: [-0.5], "old_log_probs": [-0.4]}]
    message = refused(write(tmp_path, ("long.jsonl", jsonl(records))), sampler="nope")
    assert long_name[:QUOTE_LIMIT + 1] not in message and f"({len(long_name):,} characters)" in message


def test_statistics_of_an_accepted_hostile_log_are_those_of_its_numbers(tmp_path):
    """The type zoo's decimal file against the plain numbers it holds: the same statistics."""
    decimal = load_log(write(tmp_path, decimal_columns()))
    plain = load_log(write(tmp_path, ("plain.jsonl", jsonl([
        {"rollout_log_probs": [-0.5, -0.1], "old_log_probs": [-0.5, -0.1], "reward": 1.5},
        {"rollout_log_probs": [-1.25], "old_log_probs": [-1.25], "reward": 0.5}]))))
    assert log_statistics(decimal) == log_statistics(plain)
