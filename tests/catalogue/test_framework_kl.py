"""Every KL preset, token by token, against its framework's own code (frozen in
tests/catalogue/reference/<framework>/kl_numbers.json by kl_generate.py): the loss term ℓ and its derivative
∂ℓ/∂log π_θ at log ratios near 0, far, and on each side of every clamp, at several ratios; the reward's per-token
values and the penalty β·K_t the framework's advantage loses, per token of a ragged batch."""

import json
from pathlib import Path

import numpy as np
import pytest

from toylab.catalogue.kl import REWARD_SUMS
from toylab.catalogue.kl_presets import KL_PRESETS, NO_KL_FRAMEWORKS

REFERENCE = Path(__file__).parent / "reference"
FILES = sorted(REFERENCE.glob("*/kl_numbers.json"))
NUMBERS = {path.parent.name: json.loads(path.read_text()) for path in FILES}
LOSS = [(framework, index) for framework, data in NUMBERS.items() for index in range(len(data["loss"]))]
REWARD = [(framework, index) for framework, data in NUMBERS.items() for index in range(len(data["reward"]))]


def assert_close(actual, expected, rtol, atol, setting):
    """|actual − expected| ≤ atol + rtol·|expected| token by token (atol may vary by token)."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    off = np.abs(actual - expected) > atol + rtol * np.abs(expected)
    assert not off.any(), (f"{setting}: {off.sum()} of {off.size} tokens differ, e.g. toylab {actual[off][:3]} "
                           f"against {expected[off][:3]}")


def tolerance(entry, scale):
    """float64 code agrees to 1e-12 relative; float32 code (log-probabilities cast by .float()) to its rounding of
    the largest intermediate (e^{−x}, x, the ratio)."""
    return (1e-12, 1e-14 * scale) if not entry["float32"] else (1e-6, 2e-7 * scale)


@pytest.mark.parametrize("framework, index", LOSS, ids=[f"{f}-{i}" for f, i in LOSS])
def test_loss_terms_agree_token_by_token(framework, index):
    entry = NUMBERS[framework]["loss"][index]
    penalty = KL_PRESETS[entry["preset"]].with_beta(1.0)
    tokens = {name: np.array(values) for name, values in entry["tokens"].items()}
    if entry["float32"]:
        tokens = {name: values.astype(np.float32).astype(float) for name, values in tokens.items()}
    term, derivative = penalty.loss_terms(tokens["log_pi"], tokens["log_old"], tokens["log_mu"], tokens["log_ref"])
    x = tokens["log_pi"] - tokens["log_ref"]
    ratio = np.exp(np.abs(tokens["log_pi"] - tokens["log_old"]) + np.abs(tokens["log_pi"] - tokens["log_mu"]))
    scale = np.maximum.reduce([np.ones_like(x), np.exp(np.minimum(-x, 60)), np.abs(x)]) * ratio
    rtol, atol = tolerance(entry, scale)
    if entry["term"] is not None:
        assert_close(term, entry["term"], rtol, atol, entry["setting"])
    assert_close(derivative, entry["derivative"], rtol, atol, entry["setting"])


def penalty_per_token(values, mask, reward_sum):
    """K_t from each token's k: the sequence's sum, the sum to go, or the token's own, 0 at padding."""
    values = np.where(mask, values, 0.0)
    summed = {"sequence": np.repeat(values.sum(axis=1, keepdims=True), values.shape[1], axis=1),
              "to_go": np.cumsum(values[:, ::-1], axis=1)[:, ::-1], "token": values}[reward_sum]
    return np.where(mask, summed, 0.0)


@pytest.mark.parametrize("framework, index", REWARD, ids=[f"{f}-{i}" for f, i in REWARD])
def test_reward_penalties_agree_token_by_token(framework, index):
    entry = NUMBERS[framework]["reward"][index]
    penalty = KL_PRESETS[entry["preset"]].penalty
    batch = {name: np.array(values) for name, values in entry["batch"].items()}
    mask = batch["mask"].astype(bool)
    log_old, log_ref = batch["log_old"], batch["log_ref"]
    if entry["float32"]:
        log_old, log_ref = log_old.astype(np.float32).astype(float), log_ref.astype(np.float32).astype(float)
    values = np.where(mask, penalty.values(log_old, log_ref), 0.0)
    rtol, atol = tolerance(entry, 10.0)
    assert_close(values, np.where(mask, entry["values"], 0.0), rtol, atol, entry["setting"])
    expected = entry["beta"] * penalty_per_token(values, mask, penalty.reward_sum)
    assert_close(expected, np.where(mask, entry["penalty"], 0.0), rtol, atol, entry["setting"])
    if "probe" in entry:                                  # the value's clamps, on each side
        tokens = {name: np.array(values) for name, values in entry["probe"]["tokens"].items()}
        if entry["float32"]:
            tokens = {name: values.astype(np.float32).astype(float) for name, values in tokens.items()}
        x = tokens["log_pi"] - tokens["log_ref"]
        scale = np.maximum.reduce([np.ones_like(x), np.exp(np.minimum(-x, 60)), np.abs(x)])
        rtol, atol = tolerance(entry, scale)
        assert_close(penalty.values(tokens["log_pi"], tokens["log_ref"]), entry["probe"]["values"], rtol, atol,
                     entry["setting"] + " (probe)")


@pytest.mark.parametrize("framework", ["slime", "miles"])
def test_grpo_returns_ignore_the_kl_coefficient(framework):
    """slime's and Miles' --kl-coef is documented as reward shaping, but get_grpo_returns, the default advantage
    estimator's, hands each token its sequence's reward whatever the KL: no GRPO preset carries a reward KL."""
    finding = NUMBERS[framework]["findings"]["grpo_ignores_kl_coef"]
    mask = np.array(NUMBERS[framework]["reward"][0]["batch"]["mask"], bool)
    returns = np.array(finding["returns"])
    np.testing.assert_array_equal(returns[mask], np.repeat(finding["rewards"], mask.sum(axis=1)))
    assert not any(":kl_in_reward_grpo" in id or id == f"{framework}:kl_in_reward" for id in KL_PRESETS)


def test_every_preset_is_checked_against_its_framework():
    checked = {entry["preset"] for data in NUMBERS.values() for entry in data["loss"] + data["reward"]}
    assert set(KL_PRESETS) <= checked, sorted(set(KL_PRESETS) - checked)


def test_each_file_names_its_framework_commit_and_presets():
    for framework, data in NUMBERS.items():
        assert data["commit"] and data["repository"] and framework not in NO_KL_FRAMEWORKS
        for entry in data["loss"] + data["reward"]:
            preset = KL_PRESETS[entry["preset"]]
            assert preset.framework == framework and preset.commit == data["commit"]
            assert (preset.penalty.placement == "loss") == (entry in data["loss"])
            assert preset.penalty.reward_sum in REWARD_SUMS
