"""The recipes in docs/your-run.md for verl and TRL users, run as written against stand-ins for the frameworks' classes that
hand them toy batches as arrays (``tolist`` works alike on arrays and tensors); toylab then reads what they wrote."""

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from framework_dumps import Batch, expected, toy_batch

from toylab.your_run.run import directory_files, step_logs
from toylab.your_run.statistics import log_statistics

YOUR_RUN_PAGE = Path(__file__).resolve().parents[2] / "docs" / "your-run.md"


def recipe(name):
    """The python block of docs/your-run.md that starts with the comment ``# {name} recipe``."""
    blocks = re.findall(r"```python\n(.*?)```", YOUR_RUN_PAGE.read_text(), flags=re.DOTALL)
    return next(block for block in blocks if block.startswith(f"# {name} recipe"))


def padded(rows, width):
    return np.array([row + [0.0] * (width - len(row)) for row in rows])


def response_mask(batch, width):
    return np.array([[1] * len(row) + [0] * (width - len(row)) for row in batch.sampler])


def assert_read_back(directory, batches):
    steps = list(step_logs(directory_files(directory)))
    assert [step.step for step in steps] == sorted(batches)
    for step in steps:
        numbers, statistics = expected(batches[step.step]), log_statistics(step.log)
        assert (statistics.sequences, statistics.tokens) == (numbers["sequences"], numbers["tokens"])
        assert statistics.k1.value == pytest.approx(numbers["k1"], rel=1e-12)


def test_the_verl_recipe(tmp_path, monkeypatch):
    class RayPPOTrainer:
        def _log_rollout_data(self, batch, reward_extra_infos_dict, timing_raw, rollout_data_dir):
            self.logged = True

    ray_trainer = types.ModuleType("verl.trainer.ppo.ray_trainer")
    ray_trainer.RayPPOTrainer = RayPPOTrainer
    ray_trainer.compute_response_mask = lambda batch: batch.batch["attention_mask"][:, -batch.batch["responses"].shape[1]:]
    for name in ("verl", "verl.trainer", "verl.trainer.ppo"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.trainer.ppo.ray_trainer", ray_trainer)
    namespace = {}
    exec(recipe("verl"), namespace)
    trainer = namespace["LogprobTrainer"]()
    batches = {3: toy_batch(7, seed=1), 4: toy_batch(9, seed=2)}
    for step, batch in batches.items():
        width = max(map(len, batch.sampler))
        scores = np.zeros((len(batch.sampler), width))
        scores[np.arange(len(scores)), [len(row) - 1 for row in batch.sampler]] = batch.rewards
        prompt = np.ones((len(batch.sampler), 2), int)
        data = types.SimpleNamespace(batch={
            "rollout_log_probs": padded(batch.sampler, width), "old_log_probs": padded(batch.trainer, width),
            "responses": np.zeros((len(batch.sampler), width), int), "token_level_scores": scores,
            "attention_mask": np.concatenate([prompt, response_mask(batch, width)], axis=1)})
        trainer.global_steps = step
        trainer._log_rollout_data(data, {}, {}, str(tmp_path))
    assert trainer.logged
    assert_read_back(tmp_path / "logprobs", batches)


def test_the_trl_recipe(tmp_path, monkeypatch):
    class GRPOTrainer:
        def _generate_and_score_completions(self, inputs):
            batch = inputs
            width = max(map(len, batch.sampler))
            return {"sampling_per_token_logps": padded(batch.sampler, width),
                    "old_per_token_logps": padded(batch.trainer, width), "completion_mask": response_mask(batch, width),
                    "advantages": batch.advantages, "prompt_ids": np.zeros((len(batch.sampler), 2), int)}

    trl = types.ModuleType("trl")
    trl.GRPOTrainer = GRPOTrainer
    monkeypatch.setitem(sys.modules, "trl", trl)
    namespace = {}
    exec(recipe("TRL"), namespace)
    trainer = namespace["LogprobGRPOTrainer"]()
    trainer.args = types.SimpleNamespace(output_dir=str(tmp_path))
    batches = {}
    for step in (1, 2):
        parts = [toy_batch(5, seed=10 * step + rank) for rank in (0, 1)]
        for rank, part in enumerate(parts):
            trainer.state = types.SimpleNamespace(global_step=step)
            trainer.accelerator = types.SimpleNamespace(process_index=rank)
            assert "old_per_token_logps" in trainer._generate_and_score_completions(part)
        batches[step] = Batch(parts[0].sampler + parts[1].sampler, parts[0].trainer + parts[1].trainer,
                              np.concatenate([p.rewards for p in parts]), np.concatenate([p.advantages for p in parts]))
    assert_read_back(tmp_path / "logprobs", batches)
