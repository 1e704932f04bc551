"""Estimators applied to a rollout log: every share and weight against a direct numpy computation on the same
file, the batch interface's marks against the exact engine, streaming against one batch, the reward estimates
against the exact J of the process that generated the log, and the CLI and the page showing them."""

import json
import math

import numpy as np
import pytest
from rollout_logs import EXAMPLES, write_log

from toylab import ESTIMATORS, EXACT_IDS, baseline_value, exact_moments, make_toy, resolve_params
from toylab.analysis.montecarlo import draw_tokens
from toylab.cli.main import main
from toylab.engine.coefficients import marks
from toylab.engine.grid import token_grid
from toylab.engine.sequences import GivenSequences
from toylab.your_run.applied import on_log, reward_estimates
from toylab.your_run.log import RolloutLog, load_log

EXAMPLE = EXAMPLES / "rollouts_per_sequence.parquet"


@pytest.fixture(scope="module")
def example():
    return load_log(str(EXAMPLE))


def per_sequence(log):
    """The log as a list of per-sequence log ρ arrays (the obvious way)."""
    log_rho = log.trainer_logprobs - log.sampler_logprobs
    return [log_rho[start:stop] for start, stop in zip(log.offsets[:-1], log.offsets[1:], strict=True)]


def rows(log, selection):
    return {row.name: row for row in on_log(log, selection)}


def test_token_truncation_counts_the_tokens_above_the_cap(example):
    C = 1.5
    row = rows(example, {"tok_tis": {"C": C}})["tok_tis"]
    rho = np.exp(np.concatenate(per_sequence(example)))
    assert row.tokens_affected == pytest.approx(np.mean(rho > C), abs=1e-15)
    assert row.sequences_affected == pytest.approx(np.mean([np.any(np.exp(s) > C) for s in per_sequence(example)]),
                                                   abs=1e-15)
    weights = np.minimum(rho, C)
    assert row.weight_mean == pytest.approx(weights.mean(), rel=1e-12)
    assert row.weight_sd == pytest.approx(weights.std(), rel=1e-9)
    assert (row.weight_min, row.weight_max) == (pytest.approx(weights.min()), pytest.approx(weights.max()))
    assert row.ess_fraction == pytest.approx(weights.sum() ** 2 / (weights.size * np.sum(weights**2)), rel=1e-12)
    change = [np.abs(np.minimum(np.exp(s), C) - 1) for s in per_sequence(example)]    # per sequence, |c − 1|
    sums, lengths = np.array([c.sum() for c in change]), np.array([len(c) for c in change])
    mean, B = sums.sum() / lengths.sum(), len(change)
    assert row.weight_change.value == pytest.approx(np.concatenate(change).mean(), rel=1e-12)
    assert row.weight_change.se == pytest.approx(
        math.sqrt(B / (B - 1) * np.sum((sums - mean * lengths) ** 2)) / lengths.sum(), rel=1e-9)


def test_sequence_masks_and_geometric_rejection_use_each_sequences_own_length(example):
    sequences = per_sequence(example)
    lengths = np.array([len(s) for s in sequences])
    log_W = np.array([s.sum() for s in sequences])
    found = rows(example, {"seq_mis": {"C": 1.1}, "geo_rs": {"lo": 0.85, "hi": 1.0},
                           "verl:decoupled_geo_rs": {"rs_threshold": "0.8_1.1"}})
    masked = np.exp(log_W) > 1.1
    assert 0 < masked.mean() < 1
    assert found["seq_mis"].sequences_affected == pytest.approx(masked.mean(), abs=1e-15)
    assert found["seq_mis"].tokens_affected == pytest.approx(lengths[masked].sum() / lengths.sum(), abs=1e-15)
    geo = np.exp(log_W / lengths)
    rejected = (geo < 0.85) | (geo > 1.0)
    assert 0 < rejected.mean() < 1
    assert found["geo_rs"].sequences_affected == pytest.approx(rejected.mean(), abs=1e-15)
    assert found["geo_rs"].tokens_affected == pytest.approx(lengths[rejected].sum() / lengths.sum(), abs=1e-15)
    # verl's k1 band "lower_upper" bounds −log ρ_geo: it keeps 1/upper ≤ ρ_geo ≤ 1/lower
    # (verl/trainer/ppo/rollout_corr_helper.py, compute_rollout_rejection_mask, verl b178a3c)
    verl_rejected = (geo < 1 / 1.1) | (geo > 1 / 0.8)
    assert found["verl:decoupled_geo_rs"].sequences_affected == pytest.approx(verl_rejected.mean(), abs=1e-15)
    assert not np.array_equal(verl_rejected, (geo < 0.8) | (geo > 1.1))          # the bound reading matters here


def test_the_marks_are_the_exact_engines_shares_on_every_sequence():
    """On all M sequences of a toy, the μ-means of the per-sequence marks are the exact table's shares."""
    toy = make_toy(4, 3, 1.0, 2)
    positions = np.arange(toy.T)
    tokens = token_grid(toy.T, toy.V)
    for baseline in ("none", "logged"):
        sequences = GivenSequences(toy.log_pi[positions, tokens], toy.log_mu[positions, tokens],
                                   advantages=toy.R - baseline_value(toy, baseline))
        for id in EXACT_IDS:
            if ESTIMATORS[id].on_policy:
                continue
            moments = exact_moments(toy, id, None, baseline)
            _, _, affected = marks(id, sequences, resolve_params(id))
            assert toy.p_sampler @ affected.mean(axis=1) == pytest.approx(moments.tokens_affected, abs=1e-12), id
            assert toy.p_sampler @ affected.any(axis=1) == pytest.approx(moments.sequences_affected, abs=1e-12), id


def test_streaming_in_small_batches_gives_the_same_numbers(example, monkeypatch):
    selection = {"tok_tis": {"C": 1.2}, "seq_tis": {"C": 1.1}, "geo_rs": {"lo": 0.85, "hi": 1.0}, "ppo_clip": {}}
    whole = on_log(example, selection)
    batches = RolloutLog.batches
    monkeypatch.setattr(RolloutLog, "batches", lambda log, max_cells=0: batches(log, max_cells=200))
    assert len(list(example.batches())) > 20
    for one, streamed in zip(whole, on_log(example, selection), strict=True):
        for key, value in one.as_dict().items():
            assert streamed.as_dict()[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float | dict)
                                               else value)


def test_advantage_readers_need_rewards_and_use_the_centred_reward(example, tmp_path):
    records = [{"sampler_logprobs": example.sampler_logprobs[start:start + 4].tolist(),
                "trainer_logprobs": example.trainer_logprobs[start:start + 4].tolist()} for start in example.offsets[:5]]
    without = load_log(str(write_log(tmp_path, "no_rewards", records, "jsonl")))
    row = rows(without, {"ppo_clip": {}, "tok_tis": {}})
    assert row["ppo_clip"].tokens_affected is None and row["ppo_clip"].note.startswith("needs rewards")
    assert row["tok_tis"].note == ""
    # with rewards: A = r − mean(r); for A < 0 PPO-clip keeps 1 − ε ≤ ρ ≤ C_dual, for A ≥ 0 it keeps ρ ≤ 1 + ε
    sequences = per_sequence(example)
    advantage = example.rewards - example.rewards.mean()
    clipped = [np.where(a < 0, (np.exp(s) < 0.8) | (np.exp(s) > 3.0), np.exp(s) > 1.2)
               for s, a in zip(sequences, advantage, strict=True)]
    found = rows(example, {"ppo_clip": {}})["ppo_clip"]
    assert found.tokens_affected == pytest.approx(np.concatenate(clipped).mean(), abs=1e-15)
    assert found.sequences_affected == pytest.approx(np.mean([c.any() for c in clipped]), abs=1e-15)


def test_batch_coupled_and_on_policy_estimators_are_left_out_with_the_reason(example):
    found = rows(example, {"on_policy": {}, "grpo": {"weight": "naive"}, "naive": {}})
    assert "samples from π" in found["on_policy"].note and "batch-coupled" in found["grpo"].note
    assert found["naive"].tokens_affected == 0 and found["naive"].ess_fraction == 1


def test_reward_estimates_are_the_formulas(example):
    estimates = reward_estimates(example)
    W = np.exp([s.sum() for s in per_sequence(example)])
    r = example.rewards
    B = len(r)
    assert estimates.logged.value == pytest.approx(r.mean()) and estimates.logged.se == pytest.approx(
        r.std(ddof=1) / math.sqrt(B))
    assert estimates.seq_is.value == pytest.approx(np.mean(W * r), rel=1e-12)
    assert estimates.seq_is.se == pytest.approx(np.std(W * r, ddof=1) / math.sqrt(B), rel=1e-12)
    snis = np.sum(W * r) / np.sum(W)
    assert estimates.snis.value == pytest.approx(snis, rel=1e-12)
    assert estimates.snis.se == pytest.approx(math.sqrt(np.sum(W**2 * (r - snis) ** 2)) / np.sum(W), rel=1e-12)
    assert estimates.correction.value == pytest.approx(np.mean(W * r) - r.mean(), rel=1e-9)      # seq_is − logged
    assert estimates.correction.se == pytest.approx(np.std((W - 1) * r, ddof=1) / math.sqrt(B), rel=1e-12)


def test_on_short_sequences_both_importance_estimates_find_the_exact_J(tmp_path):
    """A log drawn from μ of the default toy itself (6 tokens, the toy's reward): seq_is is unbiased for J and
    SNIS consistent; both come within 4 standard errors of the exact J on 4,000 sequences."""
    toy = make_toy()
    tokens = draw_tokens(np.random.default_rng(11), toy.mu, (4000,))
    positions = np.arange(toy.T)
    records = [{"sampler_logprobs": toy.log_mu[positions, y].tolist(), "trainer_logprobs": toy.log_pi[positions, y].tolist(),
                "reward": float(2 * np.sum(y == 0) >= toy.T)} for y in tokens]
    estimates = reward_estimates(load_log(str(write_log(tmp_path, "toy", records, "parquet"))))
    assert abs(estimates.logged.value - toy.logged_reward) < 4 * estimates.logged.se
    assert abs(estimates.seq_is.value - toy.J) < 4 * estimates.seq_is.se
    assert abs(estimates.snis.value - toy.J) < 4 * estimates.snis.se


def test_on_the_long_example_the_sample_ess_warns_that_is_fails(example):
    """The example's sequences are 12–96 tokens: a handful of weights dominate (sample ESS 2 %), and seq_is is
    far below the exact J = E_π[r] of the process that generated it — the page and the CLI say so."""
    toy = make_toy(6, 4, 0.5, 0)
    q = toy.pi[:, 0]

    def p_reward(length):                      # P_π(at least a fifth of the tokens are 0), positions t mod 6
        counts = np.zeros(length + 1)
        counts[0] = 1.0
        for t in range(length):
            counts[1:] = counts[1:] * (1 - q[t % 6]) + counts[:-1] * q[t % 6]
            counts[0] *= 1 - q[t % 6]
        return counts[math.ceil(0.2 * length - 1e-12):].sum()

    J = np.mean([p_reward(int(length)) for length in example.lengths])
    estimates = reward_estimates(example)
    assert abs(estimates.seq_is.value - J) > 10 * estimates.seq_is.se          # its standard error misleads


def test_cli_json_lists_the_selected_estimators_and_set_works(capsys):
    code = main(["inspect", str(EXAMPLE), "--estimators", "naive,tok_tis,grpo,verl:decoupled_geo_rs",
                 "--set", "tok_tis.C=1.5", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and [row["name"] for row in result["estimators"]] == ["naive", "tok_tis", "grpo",
                                                                          "verl:decoupled_geo_rs"]
    expected = rows(load_log(str(EXAMPLE)), {"tok_tis": {"C": 1.5}})["tok_tis"]
    assert result["estimators"][1]["tokens_affected"] == expected.tokens_affected
    assert result["estimators"][2]["tokens_affected"] is None and any(n.startswith("grpo:") for n in result["notes"])
    assert result["reward_estimates"]["snis"]["value"] == reward_estimates(load_log(str(EXAMPLE))).snis.value
    assert any("ESS fraction" in note for note in result["notes"])


@pytest.mark.parametrize("argv, message", [
    (["--set", "tok_tis.C=0.5"], "outside"), (["--set", "seq_tis.C=3"], "not among the estimators"),
    (["--estimators", "naive,bogus"], "unknown estimator"), (["--set", "tok_tis"], "ID.PARAM=VALUE"),
])
def test_cli_bad_estimator_arguments_are_one_line_and_exit_2(capsys, argv, message):
    chosen = [] if "--estimators" in argv else ["--estimators", "naive,tok_tis"]
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(EXAMPLE), *chosen, *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err
