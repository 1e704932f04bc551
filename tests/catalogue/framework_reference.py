"""The numbers frozen from running each framework's own code, read from tests/catalogue/reference/<framework>/.

Each framework's ``numbers.json`` was written by the ``generate.py`` beside it (the framework's functions copied
verbatim, run with torch in a scratch environment; tests/catalogue/reference/harness.py says how). A case is a
preset, its parameters, a batch (trainer and sampler log-probs, mask, advantages) and the coefficients the
framework's loss gives each token, c[b, t] = −∂loss/∂log π(y_{b,t}) / A_b, with the loss mask it leaves where it
returns one. No torch is needed to read them.
"""

import json
from functools import cache
from pathlib import Path

import numpy as np

REFERENCE = Path(__file__).resolve().parent / "reference"
FLOAT64_RTOL = 1e-12
# A framework that exponentiates in float32 rounds the log ratio (or the log-probs it is the difference of) and its
# exp to float32: relative error 2⁻²⁴·(|log-prob| + 1) each, so at most 2⁻²³·(2 + the row's largest |log-prob|)
FLOAT32_UNIT = 2.0**-23


ACROSS_FRAMEWORKS = ("hidden",)     # several frameworks' arithmetic on one toy (test_hidden_reference.py), not a preset's


def frameworks():
    return sorted(path.parent.name for path in REFERENCE.glob("*/numbers.json")
                  if path.parent.name not in ACROSS_FRAMEWORKS)


@cache
def load(framework):
    return json.loads((REFERENCE / framework / "numbers.json").read_text())


def batch(framework, name):
    """(trainer, sampler, mask, advantages) of a batch, as arrays."""
    data = load(framework)["batches"][name]
    return (np.array(data["trainer"]), np.array(data["sampler"]), np.array(data["mask"]),
            np.array(data["advantages"]))


def cases(framework):
    return load(framework)["cases"]


def case_id(case):
    batch_name = case["batch"].partition("/")[0]
    return f"{case['preset']}-{case['setting']}-{batch_name}"


def tolerance(framework, name):
    """(B, 1) relative tolerance per row: 10⁻¹² in float64, the float32 bound above otherwise."""
    if not load(framework)["float32"]:
        return FLOAT64_RTOL
    trainer, sampler, mask, _ = batch(framework, name)
    largest = np.where(mask > 0, np.maximum(np.abs(trainer), np.abs(sampler)), 0.0).max(axis=1, keepdims=True)
    return FLOAT32_UNIT * (2.0 + largest)


def assert_frozen_equal(actual, frozen, rtol):
    """The same tokens are zero, and the others agree to rtol (per row where rtol is a column)."""
    frozen = np.asarray(frozen, dtype=float)
    np.testing.assert_array_equal(actual == 0, frozen == 0, err_msg="the zero coefficients differ")
    scale = np.broadcast_to(rtol, frozen.shape) * np.abs(frozen)
    np.testing.assert_array_less(np.abs(actual - frozen), scale + 1e-300, err_msg="beyond the tolerance")


# -- three policies: each framework's policy loss with π_θ, π_old and μ apart (issue 37) ------------------------

def updates(framework):
    """The framework's update checks: an update preset, the loss parameters and correction a setting means in
    toylab's terms, and the framework's per-token loss and ∂loss/∂log π_θ on a batch of one-token rows."""
    return load(framework).get("updates", [])


def update_id(entry):
    return f"{entry['preset']}-{entry['setting']}"


def update_batch(framework, name):
    """(log π_θ, log π_old, log μ, mask, advantages) of an update batch, as arrays."""
    data = load(framework)["batches"][name]
    return (np.array(data["trainer"]), np.array(data["old"]), np.array(data["sampler"]), np.array(data["mask"]),
            np.array(data["advantages"]))


def update_tolerance(framework, name, float32):
    """(B, 1) relative tolerance: 10⁻¹² in float64; where the framework's loss or correction exponentiates in
    float32, 2⁻²³·(2 + the row's largest |log-prob|) as for the cases."""
    if not float32:
        return FLOAT64_RTOL
    trainer, old, sampler, mask, _ = update_batch(framework, name)
    largest = np.where(mask > 0, np.maximum.reduce([np.abs(trainer), np.abs(old), np.abs(sampler)]), 0.0)
    return FLOAT32_UNIT * (2.0 + largest.max(axis=1, keepdims=True))
