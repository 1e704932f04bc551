"""``python -m toylab inspect``: the library's numbers as JSON or text, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from framework_dumps import toy_batch, write_nemo
from messages import says
from rollout_logs import EXAMPLES, SEQUENCES, TOKENS, log_bytes

from toylab.cli.main import main
from toylab.presentation.estimates import with_se
from toylab.state.settings import Settings
from toylab.text import significant
from toylab.your_run.bounds import CLI_BOUNDS
from toylab.your_run.log import load_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import match_toy, matched_length, matching_estimate
from toylab.your_run.statistics import log_statistics

EXAMPLE = str(EXAMPLES / "rollouts_per_token.jsonl.gz")


def run(capsys, *argv):
    code = main(["inspect", *argv])
    return code, capsys.readouterr()


@pytest.fixture(scope="module")
def library():
    statistics = log_statistics(load_log(EXAMPLE))
    return statistics, match_toy(matching_estimate(statistics)[1], 6, 4, 0)


def test_json_equals_the_library(capsys, library):
    statistics, match = library
    code, out = run(capsys, EXAMPLE, "--json")
    assert code == 0 and out.err == ""
    result = json.loads(out.out)
    assert (result["sequences"], result["tokens"], result["shape"]) == (240, statistics.tokens, "token")
    for key in ("k1", "k3", "chi2_token", "mean_length"):
        assert result[key] == getattr(statistics, key).as_dict(), key
    assert result["ess_fraction"] == statistics.ess_fraction
    assert result["tail_shares"][3] == {"threshold": 1.0, **statistics.tail_shares[1.0].as_dict()}
    assert [row["threshold"] for row in result["tail_shares"]] == [0.001, 0.01, 0.1, 1.0]
    sizes = magnitudes(load_log(EXAMPLE))
    assert result["chi2_low_variance"] == sizes.chi2_low_variance.as_dict()
    assert result["identity_mean_rho_minus_1"] == sizes.identity.as_dict()
    assert result["abs_log_rho_quantiles"] == sizes.abs_log_rho_quantiles and result["min_rho"] == sizes.min_rho
    assert result["worst_tokens"][0] == sizes.worst_tokens[0] and len(result["worst_sequences"]) == 10
    assert result["matched_toy"]["matched_on"] == "k3"
    assert list(result["frameworks"]) == ["verl", "NeMo-RL", "prime-rl", "slime", "open-instruct", "TRL"]
    gen_kl = next(row for row in result["frameworks"]["NeMo-RL"] if row["name"] == "gen_kl_error")
    assert gen_kl == {"name": "gen_kl_error", **statistics.k3.as_dict()}
    assert [(row["estimator"], row["parameter"]) for row in result["threshold_suggestions"]][:2] == \
        [("tok_tis", "C"), ("tok_mis", "hi")]
    assert result["notices"] == [] and result["advantages"] == "r − mean(r)"
    assert result["log_W"]["quantiles"]["0.5"] == statistics.log_W.quantiles[0.5]
    assert result["mean_reward"] == statistics.mean_reward.as_dict()
    assert {key: result["matched_toy"][key] for key in ("T", "V", "seed", "mismatch", "mismatch_se")} == \
        {"T": 6, "V": 4, "seed": 0, "mismatch": match.mismatch, "mismatch_se": match.mismatch_se}
    assert result["columns"] == {"sampler": "sampler_logprobs", "trainer": "trainer_logprobs", "reward": "reward",
                                 "sequence_id": "sequence_id", "position": "position"}
    assert "clustered by sequence" in result["standard_errors"]
    assert [note.split(":")[0] for note in result["notes"]] == ["on_policy", "the sequence weights' sample ESS fraction is 2.3%"]
    assert [row["name"] for row in result["estimators"]] == list(Settings().estimators)


def test_match_at_the_data_length_and_other_toys(capsys, library):
    statistics, _ = library
    code, out = run(capsys, EXAMPLE, "--T", "data", "--V", "3", "--seed", "5", "--json")
    toy = json.loads(out.out)["matched_toy"]
    T = matched_length(statistics.mean_length.value, 3)
    assert (toy["T"], toy["V"], toy["seed"]) == (T, 3, 5) == (13, 3, 5)
    assert toy["mismatch"] == match_toy(matching_estimate(statistics)[1], T, 3, 5).mismatch


def test_text_report(capsys, library):
    statistics, match = library
    code, out = run(capsys, EXAMPLE)
    lines = out.out.splitlines()
    assert code == 0 and lines[0].startswith(f"{EXAMPLE}: a row per token; sampler 'sampler_logprobs'")
    assert lines[1] == f"240 sequences, {statistics.tokens:,} response tokens, mean length 55.1 ± 1.7"
    assert f"  k1 = mean(log μ − log π)   {with_se(statistics.k1.value, statistics.k1.se)}   per-token KL(μ‖π)" in lines
    assert "  k3 = mean(ρ − 1 − log ρ)   0.169 ± 0.0017   per-token KL(μ‖π), low variance" in lines
    assert "  share |log ρ| > 1         3.89 % ± 0.15 %" in lines
    assert f"Matched toy (exact), on k3: T=6 V=4 seed=0 mismatch={significant(match.mismatch, 4)} ± " \
           f"{significant(match.mismatch_se, 2)}" in lines
    assert any("fair stand-in" in line for line in lines)
    assert "0.0000" not in out.out
    assert "  seq_tis.C (now 2; sequences, above): 16.36 / 3.888 / 0.08125*" in lines      # * : C < 1 is no TIS


def test_columns_can_be_named(capsys, tmp_path):
    path = tmp_path / "renamed.jsonl"
    path.write_bytes(log_bytes([{"mu": row["rollout_log_probs"], "pi": row["old_log_probs"], "keep": row["response_mask"]}
                                for row in SEQUENCES], "jsonl"))
    code, out = run(capsys, str(path), "--sampler", "mu", "--trainer", "pi", "--mask", "keep", "--json")
    result = json.loads(out.out)
    assert code == 0 and result["tokens"] == 7 and result["columns"] == {"sampler": "mu", "trainer": "pi", "mask": "keep"}
    assert result["mean_reward"] is None and any(note.startswith("mean_reward is null") and "no reward" in note
                                                 for note in result["notes"])


def test_null_standard_errors_come_with_a_note(capsys, tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_bytes(log_bytes(SEQUENCES[:1], "jsonl"))
    result = json.loads(run(capsys, str(path), "--json")[1].out)
    assert result["k1"]["se"] is None and result["matched_toy"]["mismatch_se"] is None
    assert any(says(note, "matched_toy.mismatch_se are null", "no standard error") for note in result["notes"]
               if "mismatch_se" in note)


def _bad_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize("make, extra, message", [
    (lambda d: _bad_file(d, "log.csv", log_bytes([{**TOKENS[0], "sampler_logprobs": "abc"}], "csv")), [],
     "row 1, column 'sampler_logprobs': 'abc' is not a log-probability"),
    (lambda d: _bad_file(d, "log.jsonl", log_bytes([{**SEQUENCES[0], "rollout_log_probs": [-0.1, float("nan"), -1]}],
                                                   "jsonl")), [], "row 1, column 'rollout_log_probs', element 2: NaN"),
    (lambda d: _bad_file(d, "log.jsonl", log_bytes([{**SEQUENCES[0], "old_log_probs": [-0.1, 0.5, -1]}], "jsonl")), [],
     "element 2: 0.5 is positive"),
    (lambda d: _bad_file(d, "log.parquet", log_bytes([{**SEQUENCES[0], "old_log_probs": [-0.1]}], "parquet")), [],
     "row 1: 'rollout_log_probs' has 3 values but 'old_log_probs' has 1"),
    (lambda d: _bad_file(d, "log.parquet", log_bytes([{**SEQUENCES[0], "response_mask": [1]}], "parquet")), [],
     "row 1, column 'response_mask': 1 values for 3 tokens"),
    (lambda d: _bad_file(d, "log.csv", b""), [], "the file is empty"),
    (lambda d: _bad_file(d, "log.parquet", b"a,b\n1,2\n"), [], "not a Parquet file"),
    (lambda d: str(d / "missing.jsonl"), [], "missing.jsonl: no such file or directory"),
    (lambda d: str(EXAMPLES / "rollouts_per_token.jsonl"), ["--sampler", "nope"], "no column 'nope'"),
    (lambda d: str(EXAMPLES / "rollouts_per_token.jsonl"), ["--T", "12"], "exact-size limit"),
    (lambda d: str(EXAMPLES / "rollouts_per_token.jsonl"), ["--T", "many"], "--T: 'many' is not a number (or 'data')"),
    (lambda d: str(EXAMPLES / "rollouts_per_token.jsonl"), ["--V", "9"], "--V: '9' is outside 2 to 8"),
    (lambda d: str(EXAMPLES / "rollouts_per_token.jsonl"), ["--seed", "x"], "--seed: 'x' is not a number"),
])
def test_bad_input_prints_one_line_and_exits_2(capsys, tmp_path, make, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", make(tmp_path), *extra])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("toylab: error:") and message in err, err


def test_a_file_over_the_size_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("toylab.cli.inspect.CLI_BOUNDS", CLI_BOUNDS.but(file_bytes=1000))
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", EXAMPLE])
    assert exit_info.value.code == 2 and says(capsys.readouterr().err, "limit", "1,000 bytes per file")


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "toylab", "inspect", EXAMPLE, "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["sequences"] == 240
    done = subprocess.run([sys.executable, "-m", "toylab", "inspect", str(EXAMPLES / "make_example_log.py")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown extension" in done.stderr


def test_a_realistic_log_is_shown_to_its_significant_digits(capsys, tmp_path):
    """A bf16-sized mismatch (|log ρ| ~ 1e-3): every number readable, the small shares and the extremes shown."""
    rng = np.random.default_rng(0)
    sampler = -rng.exponential(1.0, (300, 40))
    trainer = np.minimum(sampler + rng.normal(0, 0.01, sampler.shape), 0.0)
    path = tmp_path / "bf16.parquet"
    pq.write_table(pa.table({"rollout_log_probs": list(sampler), "old_log_probs": list(trainer)}), path)
    code, out = run(capsys, str(path))
    statistics = log_statistics(load_log(str(path)))
    assert code == 0 and "0.0000" not in out.out
    assert f"  k3 = mean(ρ − 1 − log ρ)   {with_se(statistics.k3.value, statistics.k3.se)}" in out.out
    assert "e-05 ±" in out.out and "share |log ρ| > 0.001" in out.out and "p99.9" in out.out
    assert "Matched toy (exact), on k3" in out.out


def test_a_framework_dump_is_read_as_a_single_file(capsys, tmp_path):
    path = write_nemo(tmp_path, 3, toy_batch(12, seed=5))
    code, out = run(capsys, str(path), "--json")
    result = json.loads(out.out)
    assert code == 0 and result["sequences"] == 12 and result["columns"]["sampler"] == "sampler_logprobs"
    assert result["mean_reward"] is not None
