"""What verl's and TRL's code shows beyond each preset's coefficients (those are test_framework_code.py's): their
loss aggregations, configurations that are not presets, and what the frozen numbers show as toylab mappings.

Every number compared against here is a finding of tests/catalogue/reference/verl/ or trl/ (verl 1dda039, TRL
f2cd577; numbers.json says which function produced it), on verl's four-row batch. toylab's side is the public
batch interface, ``toylab.coefficients``, and the loss aggregations of ``toylab.aggregation``.
"""

import numpy as np
import pytest
from framework_reference import batch, load

import toylab
from toylab import coefficients, exact_moments, gradient_weights, kept_tokens, make_toy
from toylab.catalogue.estimators import preset_weights
from toylab.catalogue.frameworks.preset import Preset, Ref
from toylab.catalogue.presets import PRESETS
from toylab.engine.sequences import GivenSequences

TRAINER, SAMPLER, MASK, ADVANTAGES = batch("verl", "ragged")
LOG_RATIO = TRAINER - SAMPLER
T = MASK.shape[1]
VERL, TRL = load("verl")["findings"], load("trl")["findings"]


def on_batch(name, **params):
    return coefficients(name, TRAINER, SAMPLER, MASK, ADVANTAGES, **params)


def frozen_equal(actual, frozen):
    np.testing.assert_allclose(actual, np.array(frozen), rtol=1e-12, atol=1e-15)


def test_the_presets_are_verl_classmethods_and_trl_modes():
    """Every verl and TRL preset is frozen from the framework's code (a classmethod, a mode), and no other."""
    frozen = {case["preset"] for framework in ("verl", "trl") for case in load(framework)["cases"]}
    assert {p.id for p in PRESETS if p.framework in ("verl", "trl")} == frozen
    assert set(toylab.PRESET_IDS) == {p.id for p in PRESETS}


@pytest.mark.parametrize("loss_type, mode, scale", [("dapo", "dapo", 1 / T), ("bnpo", "dapo", 1 / T),
                                                    ("grpo", "seq-mean-token-mean", 1 / T),
                                                    ("dr_grpo", "seq-mean-token-sum", 1 / T)])
def test_trl_losses_are_toylab_aggregations(loss_type, mode, scale):
    """TRL never removes a masked token from its denominators: grpo is seq-mean-token-mean over all response tokens
    (up to verl's 10⁻⁸ in that mode's per-sequence denominator), dr_grpo is seq-mean-token-sum ÷
    max_completion_length (= T here), bnpo on one device is dapo."""
    params = {"clip_min": 0.5, "clip_max": 1.5}
    c = on_batch("trl:token_mask", **params)
    kept = kept_tokens("trl:token_mask", TRAINER, SAMPLER, MASK, **params)
    np.testing.assert_array_equal(kept, np.array(MASK, bool))
    rtol = 1e-8 if mode == "seq-mean-token-mean" else 1e-12
    np.testing.assert_allclose(gradient_weights(c, kept, MASK, mode) * scale, TRL[f"losses/{loss_type}"]["coefficients"],
                               rtol=rtol, atol=1e-15)


@pytest.mark.parametrize("delta", ["0.05", "0.5"])
def test_off_policy_mask_times_trl_default_mode(delta):
    """TRL applies off_policy_mask_threshold on top of its IS mode (default sequence_mask, C_max = 3)."""
    c = on_batch("opsm", delta=float(delta), weight="trl:sequence_mask")
    frozen_equal(gradient_weights(c, np.array(MASK, bool), MASK, "dapo") / T,
                 TRL[f"off_policy_mask/{delta}"]["coefficients"])


@pytest.mark.parametrize("preset, params", [("decoupled_seq_is_rs", {}),
                                            ("decoupled_geo_rs_token_tis", {"rs_threshold": "0.8_1.1"})])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_verl_token_mean_divides_by_the_kept_tokens(preset, params, mode):
    name = f"verl:{preset}"
    c, kept = on_batch(name, **params), kept_tokens(name, TRAINER, SAMPLER, MASK, ADVANTAGES, **params)
    assert kept.sum() < np.sum(MASK)                       # the preset rejects something on this batch
    frozen_equal(gradient_weights(c, kept, MASK, mode) / T, VERL[f"aggregation/{preset}/{mode}"]["coefficients"])


def test_verl_token_rejection_under_every_mode():
    config = {"rollout_is": "token", "rollout_is_threshold": 2.0, "rollout_rs": "token_k1",
              "rollout_rs_threshold": "0.8_1.3", "bypass_mode": False}
    c, kept = custom_verl(config)
    for mode in ("token-mean", "seq-mean-token-mean"):
        frozen_equal(gradient_weights(c, kept, MASK, mode) / T, VERL[f"aggregation/token_k1/{mode}"]["coefficients"])


def test_verl_legacy_seq_mean_token_sum_divides_by_the_surviving_sequences():
    """Not toylab's 1/N: verl's default worker passes no global batch size, so agg_loss divides by the sequences
    that kept a token (3 of 4 here), like token-mean does on a fixed-length batch."""
    name = "verl:decoupled_seq_is_rs"
    c, kept = on_batch(name), kept_tokens(name, TRAINER, SAMPLER, MASK)
    surviving = np.count_nonzero(kept.any(axis=1))
    assert surviving == 3
    frozen_equal(gradient_weights(c, kept, MASK, "seq-mean-token-sum") * len(MASK) / surviving,
                 VERL["aggregation/decoupled_seq_is_rs/seq-mean-token-sum"]["coefficients"])


def custom_verl(config):
    """(c, kept) of any RolloutCorrectionConfig through the preset machinery."""
    preset = Preset("verl:custom", "RolloutCorrectionConfig(...)", "custom", config, "naive", "")
    return GivenSequences(TRAINER, SAMPLER, MASK, ADVANTAGES).assemble(preset_weights(
        preset, GivenSequences(TRAINER, SAMPLER, MASK, ADVANTAGES)))


def test_chained_rejections_all_must_pass():
    config = {"rollout_is": "sequence", "rollout_is_threshold": 2.0, "rollout_rs": "token_k2,seq_max_k3",
              "rollout_rs_threshold": "0.05,1.0", "bypass_mode": False}
    frozen_equal(custom_verl(config)[0], VERL["custom/chain_token_k2_seq_max_k3"]["coefficients"])


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_batch_normalised_is_is_verl_rollout_is_batch_normalize(level):
    frozen_equal(on_batch("tis_bn", level=level, C=2.0), VERL[f"custom/batch_normalize_{level}"]["coefficients"])


# -- what the frozen numbers show, stated as toylab mappings -------------------------------------------------

def test_verl_k1_keeps_the_inverse_ratio_band():
    """verl's seq_mean_k1 with "0.8_1.1" keeps 1/1.1 ≤ ρ_geo ≤ 1/0.8 (code), not 0.8 ≤ ρ_geo ≤ 1.1 (docs).

    Rows 0, 1, 3 (row 2 is the clamp's: its clamped mean log ratio 0.32 is rejected, its true one −0.08 kept)."""
    code = on_batch("verl:decoupled_geo_rs", rs_threshold="0.8_1.1") > 0
    rho_geo_row_1 = np.exp(np.mean(LOG_RATIO[1][:3]))
    assert 1.1 < rho_geo_row_1 < 1 / 0.8 and code[1, :3].all()
    assert not (on_batch("geo_rs", lo=0.8, hi=1.1) > 0)[1].any()
    unclamped = [0, 1, 3]
    np.testing.assert_array_equal(code[unclamped], (on_batch("geo_rs", lo=1 / 1.1, hi=1 / 0.8) > 0)[unclamped])
    assert not code[2].any() and (on_batch("geo_rs", lo=1 / 1.1, hi=1 / 0.8) > 0)[2].all()


def test_verl_clamp_changes_the_rejection():
    """Row 2: Σ log ρ = −0.4 (W = 0.67, kept by 0.5_2.0) but Σ clamp(log ρ, ±20) = 1.6: verl rejects it."""
    assert not on_batch("verl:decoupled_seq_is_rs")[2].any()
    assert on_batch("seq_band", C_min=0.5, C_max=2.0)[2].all()
    assert np.sum(LOG_RATIO[2]) == pytest.approx(-0.4) and np.sum(np.clip(LOG_RATIO[2], -20, 20)) == pytest.approx(1.6)


def test_verl_token_weight_is_clamped_trl_is_not():
    token = 0                                                   # log ρ = −22 on row 2
    assert on_batch("verl:decoupled_token_is")[2, token] == pytest.approx(np.exp(-20.0), rel=1e-12)
    assert on_batch("trl:token_truncate")[2, token] == pytest.approx(np.exp(-22.0), rel=1e-12)


def test_padding_never_matters():
    """Changing the log-probabilities under the mask changes no coefficient of any preset."""
    noisy_trainer, noisy_sampler = TRAINER.copy(), np.array(SAMPLER)
    padding = np.array(MASK) == 0
    noisy_trainer[padding], noisy_sampler[padding] = -50.0, 3.0
    for preset in PRESETS:
        np.testing.assert_array_equal(coefficients(preset.id, noisy_trainer, noisy_sampler, MASK, ADVANTAGES),
                                      on_batch(preset.id))


# -- on the toy: which catalogue id each preset equals, under which mapping (the README's column) -------------

TOYS = [make_toy(6, 4, 0.3, 0), make_toy(5, 3, 1.0, 7)]
EQUAL_ON_THE_TOY = [
    ("verl:decoupled_token_is", {"threshold": 1.5}, "tok_tis", {"C": 1.5}),
    ("verl:decoupled_seq_is", {"threshold": 3.0}, "seq_tis", {"C": 3.0}),
    ("verl:bypass_pg_is", {}, "seq_tis", {"C": 2.0}),
    ("verl:decoupled_seq_is_rs", {}, "seq_band", {"C_min": 0.5, "C_max": 2.0}),
    ("verl:decoupled_geo_rs", {"rs_threshold": "0.8_1.1"}, "geo_rs", {"lo": 1 / 1.1, "hi": 1 / 0.8}),
    ("verl:bypass_pg_geo_rs", {"rs_threshold": "0.8_1.1"}, "verl:decoupled_geo_rs", {"rs_threshold": "0.8_1.1"}),
    ("verl:decoupled_geo_rs_token_tis", {"rs_threshold": "0.9_1.2", "is_threshold": 1.5}, "geo_rs_tok_tis",
     {"lo": 1 / 1.2, "hi": 1 / 0.9, "C": 1.5}),
    ("verl:bypass_pg_geo_rs_token_tis", {}, "verl:decoupled_geo_rs_token_tis", {}),
    ("verl:bypass_pg_geo_rs_seq_tis", {}, "verl:decoupled_geo_rs_seq_tis", {}),
    ("verl:decoupled_k3_rs", {"rs_threshold": 0.2}, "k3_rs", {"delta": 0.2}),
    ("verl:bypass_ppo_clip", {"clip_ratio_low": 0.1, "clip_ratio_high": 0.28}, "ppo_clip",
     {"eps_low": 0.1, "eps_high": 0.28, "C_dual": 3.0}),
    ("verl:disabled", {}, "naive", {}),
    ("trl:token_truncate", {"clip_max": 2.5}, "tok_tis", {"C": 2.5}),
    ("trl:token_truncate", {"clip_min": 0.5}, "tok_clip", {"C_min": 0.5, "C_max": 3.0}),
    ("trl:sequence_truncate", {}, "seq_tis", {"C": 3.0}),
    ("trl:sequence_mask", {}, "seq_mis", {"C": 3.0}),
    ("trl:sequence_mask", {"clip_min": 0.5, "clip_max": 2.0}, "seq_band", {"C_min": 0.5, "C_max": 2.0}),
    ("trl:token_mask", {"clip_min": 0.5}, "tok_mis", {"lo": 0.5, "hi": 3.0}),
]


@pytest.mark.parametrize("toy", TOYS, ids=repr)
@pytest.mark.parametrize("preset, preset_params, estimator, params", EQUAL_ON_THE_TOY)
def test_preset_equals_its_catalogue_estimator_on_the_toy(toy, preset, preset_params, estimator, params):
    assert np.abs(toy.log_rho).max(axis=1).sum() < 20          # verl's clamp cannot bind on these toys
    for baseline in ("none", "logged"):
        a = exact_moments(toy, preset, preset_params, baseline)
        b = exact_moments(toy, estimator, params, baseline)
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-15)
        assert a.var == pytest.approx(b.var, rel=1e-12, abs=1e-15)


def test_verl_k1_presets_equal_the_documented_band_only_when_it_is_symmetric():
    toy = TOYS[1]
    symmetric = exact_moments(toy, "verl:decoupled_geo_rs", {"rs_threshold": "0.5_2.0"})
    assert symmetric.bias == pytest.approx(exact_moments(toy, "geo_rs", {"lo": 0.5, "hi": 2.0}).bias, rel=1e-12)
    code = exact_moments(toy, "verl:decoupled_geo_rs", {"rs_threshold": "0.8_1.1"})
    docs = exact_moments(toy, "geo_rs", {"lo": 0.8, "hi": 1.1})
    assert abs(code.bias - docs.bias) > 1e-3 * code.grad_norm


def test_a_preset_row_is_data():
    """Each preset's configuration fields are the framework's, with Ref (or Joined) for its own parameters, and the
    row names the framework's commit."""
    for preset in PRESETS:
        assert preset.parameter_names == set(preset.params), preset.id
        assert preset.equals and preset.option and preset.alias and preset.commit, preset.id
    assert all(isinstance(value, Ref) for preset in PRESETS if preset.framework == "trl"
               for key, value in preset.config.items() if key != "mode")
