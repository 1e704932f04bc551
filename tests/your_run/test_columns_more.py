"""The frameworks' own column names, per-token rewards and advantages, and what the reader notices but does not
refuse: a column that may be the reward, a position-like column left unused, interleaved sequences."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from framework_dumps import expected, toy_batch
from messages import says

from toylab.engine.coefficients import coefficients
from toylab.your_run.applied import advantages_of, on_log
from toylab.your_run.log import load_log
from toylab.your_run.statistics import log_statistics


def write(tmp_path, name, columns):
    path = tmp_path / name
    pq.write_table(pa.table(columns), path)
    return str(path)


@pytest.mark.parametrize("sampler, trainer, mask", [
    ("generation_logprobs", "prev_logprobs", "token_loss_mask"),       # NeMo-RL
    ("rollout_log_probs", "log_probs", "loss_masks"),                  # slime, Miles
    ("rollout_logprobs", "action_log_probs", "loss_mask"),             # SkyRL
    ("inference_logprobs", "trainer_logprobs", "loss_mask"),           # prime-rl
    ("sampling_per_token_logps", "old_per_token_logps", "completion_mask"),   # TRL
])
def test_the_frameworks_names_are_recognised_and_boolean_masks_read(tmp_path, sampler, trainer, mask):
    batch = toy_batch(8, seed=1)
    width = max(map(len, batch.sampler))

    def padded(rows):
        return [row + [0.0] * (width - len(row)) for row in rows]

    masks = [[True] * len(row) + [False] * (width - len(row)) for row in batch.sampler]
    log = load_log(write(tmp_path, "log.parquet", {sampler: padded(batch.sampler), trainer: padded(batch.trainer),
                                                   mask: masks}))
    assert (log.columns.sampler, log.columns.trainer, log.columns.mask) == (sampler, trainer, mask)
    assert log_statistics(log).k1.value == pytest.approx(expected(batch)["k1"], rel=1e-12)


def test_a_per_token_reward_is_summed_as_verl_sums_token_level_scores(tmp_path):
    batch = toy_batch(6, seed=2)
    scores = [[0.0] * (len(row) - 1) + [float(r)] for row, r in zip(batch.sampler, batch.rewards, strict=True)]
    log = load_log(write(tmp_path, "log.parquet", {"rollout_log_probs": batch.sampler, "old_log_probs": batch.trainer,
                                                   "token_level_scores": scores}))
    assert log.columns.reward == "token_level_scores" and np.array_equal(log.rewards, batch.rewards)
    acc = load_log(write(tmp_path, "acc.parquet", {"rollout_log_probs": batch.sampler, "old_log_probs": batch.trainer,
                                                   "acc": batch.rewards}))
    assert np.array_equal(acc.rewards, batch.rewards)


def test_advantages_are_the_advantage_when_there_is_no_reward(tmp_path):
    batch = toy_batch(10, seed=3)
    per_token = [[float(a)] * len(row) for row, a in zip(batch.sampler, batch.advantages, strict=True)]
    log = load_log(write(tmp_path, "log.parquet", {"inference_logprobs": batch.sampler, "trainer_logprobs": batch.trainer,
                                                   "advantages": per_token}))
    assert log.rewards is None and np.allclose(log.advantages, batch.advantages, rtol=0, atol=1e-15)
    assert np.array_equal(advantages_of(log), log.advantages)
    row = on_log(log, {"ppo_clip": {}})[0]
    assert not row.note
    padded = log.padded()
    direct = coefficients("ppo_clip", padded.trainer_logprobs, padded.sampler_logprobs, padded.mask, log.advantages)
    assert row.weight_mean == pytest.approx(direct[padded.mask].mean(), rel=1e-12)


def test_a_column_that_may_be_the_reward_is_named(tmp_path):
    batch = toy_batch(5, seed=4)
    log = load_log(write(tmp_path, "log.parquet", {"rollout_log_probs": batch.sampler, "old_log_probs": batch.trainer,
                                                   "correct": batch.rewards, "response_length": [6.0] * 5}))
    assert log.rewards is None
    assert any("'correct'" in notice and "may be the reward" in notice and "--reward correct" in notice
               for notice in log.notices)
    assert not any("response_length" in notice for notice in log.notices)


def test_an_unused_position_column_and_interleaved_sequences_are_noticed(tmp_path):
    rows = {"sequence_id": ["a", "b", "a", "b"], "tok_pos": [0.0, 0.0, 1.0, 1.0],
            "sampler_logprobs": [-0.1, -0.2, -0.3, -0.4], "trainer_logprobs": [-0.15, -0.2, -0.3, -0.5]}
    log = load_log(write(tmp_path, "tokens.parquet", rows))
    notices = " ".join(log.notices)
    assert says(notices, "'tok_pos'", "not used", "not contiguous (at row 3, sequence 'a'")
    assert np.array_equal(log.sampler_logprobs, [-0.1, -0.3, -0.2, -0.4])
    contiguous = load_log(write(tmp_path, "in_order.parquet", {**rows, "sequence_id": ["a", "a", "b", "b"],
                                                               "position": [0.0, 1.0, 0.0, 1.0]}))
    assert contiguous.notices == ()
