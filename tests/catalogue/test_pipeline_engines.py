"""The toy's three logged and three scored choices against what the engines and trainers compute, from their code.

tests/catalogue/frozen_pipeline_engines.py holds the tables vLLM, SGLang, slime's patched SGLang and the trainers
produce on three toys' logits (float32, from running their code). The toy's tables (float64) must equal them to
float32's precision, with −∞ at the same tokens:

    logged raw          vLLM's raw_logprobs
    logged processed    vLLM's processed_logprobs; slime's renormalised SGLang log-probabilities (top-k off)
    logged temperature  SGLang's default log-probabilities
    scored plain        ROLL's log_probs_from_logits
    scored temperature  the trainers' logits divided by τ
    scored keep_mask    slime's trainer over the rollout's nucleus; NeMo-RL's trainer at mismatch 0 (its own
                        truncation, which departs from the sampler's kept set once the mismatch moves the cut)
"""

import numpy as np
import pytest
from frozen_pipeline_engines import ENGINES

from toylab.engine.toy import make_toy

FLOAT32 = 2e-6


def toy_of(entry, **pipeline):
    T, V, mismatch, seed = entry["toy"]
    return make_toy(T, V, mismatch, seed, **entry["sampler"], **pipeline)


def assert_same_table(found, frozen):
    frozen = np.array(frozen)
    assert np.array_equal(np.isinf(found), np.isinf(frozen))
    finite = np.isfinite(frozen)
    np.testing.assert_allclose(found[finite], frozen[finite], rtol=0, atol=FLOAT32)


@pytest.mark.parametrize("entry", ENGINES, ids=lambda entry: "toy{}".format(entry["toy"]))
def test_the_logged_choices_are_what_the_engines_log(entry):
    assert_same_table(toy_of(entry, logged="raw").log_logged, entry["vllm_raw"])
    assert_same_table(toy_of(entry).log_logged, entry["vllm_processed"])
    assert_same_table(toy_of(entry, logged="temperature").log_logged, entry["sglang_default"])
    if not entry["sampler"]["top_k"]:
        assert_same_table(toy_of(entry).log_logged, entry["slime_renorm"])


@pytest.mark.parametrize("entry", ENGINES, ids=lambda entry: "toy{}".format(entry["toy"]))
def test_the_scored_choices_are_what_the_trainers_score(entry):
    assert_same_table(toy_of(entry).log_pi, entry["trainer_plain"])
    assert_same_table(toy_of(entry, scored="temperature").log_pi, entry["trainer_temperature"])
    keep_mask = toy_of(entry, scored="keep_mask").log_pi
    if not entry["sampler"]["top_k"]:
        assert_same_table(keep_mask, entry["slime_keep_mask"])
    if entry["toy"][2] == 0:
        assert_same_table(keep_mask, entry["nemo_own_mask"])


def test_nemo_rl_s_own_truncation_departs_from_the_sampler_s_kept_set_under_a_mismatch():
    """docs/frameworks.md: NeMo-RL truncates the trainer's own logits, so at mismatch 0.7 its kept set is not the
    sampler's (the toy's keep_mask models the latter)."""
    entry = ENGINES[0]
    assert entry["toy"][2] == 0.7
    assert not np.array_equal(np.isinf(entry["nemo_own_mask"]), np.isinf(entry["vllm_processed"]))


def test_sglang_applies_top_p_before_renormalising_over_top_k():
    """With top-k and top-p both on, SGLang's nucleus (slime's patch: ranks < top_k and the mass before a token
    ≤ top_p, both on the full distribution) can keep more tokens than vLLM's, which applies top-p after top-k's
    renormalisation: the toy's sampler is vLLM's."""
    entry = ENGINES[1]
    assert entry["sampler"]["top_k"] == 4
    kept_by_sglang = np.isfinite(entry["slime_renorm"]).sum()
    kept_by_vllm = np.isfinite(entry["vllm_processed"]).sum()
    assert kept_by_sglang > kept_by_vllm and np.isfinite(toy_of(entry).log_mu).sum() == kept_by_vllm
