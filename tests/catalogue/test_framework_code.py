"""Every framework preset computes what its framework's own code computes, on the ragged batch and at the boundary
probes: numbers frozen from running that code (tests/catalogue/reference/<framework>/, framework_reference.py).

toylab's side is the public batch interface, ``toylab.coefficients`` and ``toylab.kept_tokens``. A framework that
computes in float64 is compared at 10⁻¹², one that exponentiates in float32 (Miles' PPO ratio, SkyRL's
safe_exp_delta, AReaL's log ratio) at its float32 rounding; which tokens get a zero coefficient, and which tokens
the loss mask keeps, must agree exactly in both; where a loss has a term that does not depend on A (prime-rl's
kl_tau), the whole gradient c·A + d (``toylab.additive_terms``) is compared too.
"""

import numpy as np
import pytest
from framework_reference import assert_frozen_equal, batch, case_id, cases, frameworks, load, tolerance

from toylab import PRESET_IDS, additive_terms, coefficients, kept_tokens, resolve_params

CASES = [pytest.param(framework, case, id=case_id(case)) for framework in frameworks() for case in cases(framework)]


@pytest.mark.parametrize("framework, case", CASES)
def test_preset_equals_its_framework_code(framework, case):
    trainer, sampler, mask, advantages = batch(framework, case["batch"])
    actual = coefficients(case["preset"], trainer, sampler, mask, advantages, **case["params"])
    assert_frozen_equal(actual, case["coefficients"], tolerance(framework, case["batch"]))
    if "kept" in case:
        kept = kept_tokens(case["preset"], trainer, sampler, mask, advantages, **case["params"])
        np.testing.assert_array_equal(kept, np.array(case["kept"], bool))
    if "gradient" in case:                     # a term that does not depend on A: −∂loss/∂log π = c·A + d
        additive = additive_terms(case["preset"], trainer, sampler, mask, advantages, **case["params"])
        np.testing.assert_allclose(actual * advantages[:, None] + additive, case["gradient"],
                                   rtol=tolerance(framework, case["batch"]), atol=1e-15)


@pytest.mark.parametrize("framework", frameworks())
def test_every_preset_of_the_framework_is_frozen_at_the_probes(framework):
    """Each of the framework's presets has numbers on the ragged batch and at the boundary probes."""
    data = load(framework)
    presets = {preset for preset in PRESET_IDS if preset.partition(":")[0] == framework}
    for kind in ("ragged", "probes"):
        frozen = {case["preset"] for case in data["cases"] if case["batch"].partition("/")[0] == kind}
        assert presets <= frozen, (kind, sorted(presets - frozen))


@pytest.mark.parametrize("preset, params, words", [
    ("open_instruct:rho_mask", {"rho_mask_upper_bound": 1.0005}, "outside"),
    ("areal:token_mask", {"upper": 0.8}, "≤ 1 for the ratio metric"),
    ("areal:sequence_mask", {"metric": "kl_k3", "upper": 0.0}, "≤ 0 for kl_k3"),
    ("slime:mis_sequence", {"tis_lower_bound": 1.0, "tis_upper_bound": 1.0}, "tis_lower_bound < tis_upper_bound"),
    ("nemo_rl:sequence_level_icepop", {"truncated_importance_sampling_ratio_min": 0.9,
                                       "truncated_importance_sampling_ratio": 1.0}, None),
])
def test_a_preset_refuses_what_its_framework_refuses(preset, params, words):
    """Each framework's own config validation (open-instruct's GRPOExperimentConfig.__post_init__, through the
    parameters' ranges; AReaL's RejectionSamplingConfig, slime's mis.py assertions, NeMo-RL's ClippedPGLossFn,
    through their modules' check): a preset is only a combination the framework runs."""
    if words is None:
        resolve_params(preset, params)                   # min ≤ max: NeMo-RL runs it
        return
    with pytest.raises(ValueError, match=words):
        resolve_params(preset, params)
