"""What the frameworks' frozen numbers show beyond each preset's coefficients (those are test_framework_code.py's):
masks that leave the loss mask alone, findings in the frameworks' code, which catalogue estimator each preset equals
on the toy, and that the docs' tables are the rows.

The numbers are tests/catalogue/reference/<framework>/numbers.json (framework_reference.py); toylab's side is the
public batch interface, ``toylab.coefficients`` (and ``kept_tokens``), on the same ragged batch.
"""

from pathlib import Path

import framework_reference
import numpy as np
import pytest

from toylab import EXACT_IDS, PRESET_IDS, coefficients, exact_moments, kept_tokens, make_toy
from toylab.catalogue.presets import PRESETS

FRAMEWORKS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"
FLOAT32 = 3e-7
TRAINER, SAMPLER, MASK, ADVANTAGES = framework_reference.batch("slime", "ragged")
VERL_TRAINER, VERL_SAMPLER, VERL_MASK, VERL_ADVANTAGES = framework_reference.batch("verl", "ragged")


def on_batch(name, advantages=ADVANTAGES, **params):
    return coefficients(name, TRAINER, SAMPLER, MASK, advantages, **params)


def frozen_equal(actual, frozen, rtol):
    frozen = np.array(frozen)
    np.testing.assert_array_equal(actual == 0, frozen == 0)
    np.testing.assert_allclose(actual, frozen, rtol=rtol, atol=0)


def frozen_case(framework, preset, setting, batch="ragged"):
    return next(case for case in framework_reference.cases(framework)
                if (case["preset"], case["setting"], case["batch"]) == (preset, setting, batch))


def test_every_framework_has_frozen_numbers():
    assert {preset.framework for preset in PRESETS} <= set(framework_reference.frameworks())
    assert {preset.id for preset in PRESETS} == set(PRESET_IDS)


@pytest.mark.parametrize("name", ["slime:icepop", "openrlhf:icepop", "nemo_rl:icepop", "ms_swift:token_mask",
                                  "skyrl:rollout_is", "open_instruct:rho_mask", "verl:decoupled_token_icepop"])
def test_weights_only_masks_keep_the_tokens_in_the_loss_mask(name):
    trainer, sampler, mask, advantages = (VERL_TRAINER, VERL_SAMPLER, VERL_MASK, VERL_ADVANTAGES) \
        if name.startswith("verl") else (TRAINER, SAMPLER, MASK, ADVANTAGES)
    c = coefficients(name, trainer, sampler, mask, advantages)
    assert np.any((c == 0) & (np.array(mask) == 1)), "the mask zeroes some weight on this batch"
    np.testing.assert_array_equal(kept_tokens(name, trainer, sampler, mask), np.array(mask, bool))


def test_verl_sequence_icepop_threshold():
    """A "lower_upper" threshold at rollout_is="sequence" zeroes W outside the band (seq_band, weights only)."""
    from test_frameworks import custom_verl
    config = {"rollout_is": "sequence", "rollout_is_threshold": "0.8_1.5", "rollout_rs": None, "bypass_mode": False}
    frozen = framework_reference.load("verl")["findings"]["custom/sequence_icepop_0.8_1.5"]["coefficients"]
    frozen_equal(custom_verl(config)[0], frozen, 1e-12)


# -- findings the frozen numbers show -------------------------------------------------------------------------

def test_openrlhf_seq_mask_tis_does_not_clamp_the_token_weight():
    """loss.py's comment says seq-mask-tis keeps "TIS (token-level clamp)"; row 2 (ρ_geo = 1.7, kept) carries
    ρ_t = e^12 unclamped."""
    c = on_batch("openrlhf:seq-mask-tis")
    assert c[2, 0] == pytest.approx(np.exp(12.0), rel=1e-12) and c[2, 0] > 5.0


def test_areal_kl_k3_is_the_reverse_of_its_help():
    """metric kl_k3's help says k3 = r − log r − 1; the code masks by 1/r − 1 + log r: at upper 0.5 the token with
    log r = 1.1 is kept (r − 1 − log r = 0.90) and the one with log r = −0.9 rejected (r − 1 − log r = 0.31)."""
    frozen = np.array(frozen_case("areal", "areal:token_mask", "kl_k3")["coefficients"])
    log_r = np.array(TRAINER) - np.array(SAMPLER)
    forward = np.exp(log_r) - 1 - log_r
    assert forward[4, 0] > 0.5 and frozen[4, 0] != 0
    assert forward[1, 1] < 0.5 and frozen[1, 1] == 0


def test_skyrl_sequence_ratio_is_taken_over_the_tokens_the_token_mask_left():
    """With token_mask_is_threshold (0.5, 2) and tis_ratio_type sequence, row 1's W is exp of the log ratios of the
    three tokens the mask kept, not of all four."""
    frozen = np.array(framework_reference.load("skyrl")["findings"]["token_mask_then_sequence_tis"]["coefficients"])
    log_r = np.array(TRAINER[1][:4]) - np.array(SAMPLER[1][:4])
    kept = (np.exp(log_r) >= 0.5) & (np.exp(log_r) <= 2)
    assert not kept.all()
    np.testing.assert_allclose(frozen[1, :4][kept], np.exp(log_r[kept].sum()), rtol=FLOAT32)
    assert not np.isclose(frozen[1, 0], min(np.exp(log_r.sum()), 5.0), rtol=1e-3)


def test_roll_token_mean_ignores_the_filters_on_the_workers_path_only():
    """agg_loss's token-mean never reads loss_mask: on the worker's path (enable_old_logprobs_recompute false) a token
    the ratio filter removed keeps coefficient 1; on ROLL's default path (init_kl_coef 0.2 turns the recompute on)
    apply_train_infer_correction_to_batch filters response_mask first, and op_compute_log_probs multiplies the
    log-probs by it: the filtered tokens have none, as toylab's roll:ratio_filter_token keeps them."""
    findings = framework_reference.load("roll")["findings"]
    filtered = np.array(frozen_case("roll", "roll:ratio_filter_token", "defaults")["coefficients"])
    assert np.any((filtered == 0) & (np.array(MASK) == 1))
    np.testing.assert_array_equal(findings["token_mean_ignores_the_filter"]["coefficients"], np.array(MASK, float))
    kept = kept_tokens("roll:ratio_filter_token", TRAINER, SAMPLER, MASK, ADVANTAGES)
    np.testing.assert_allclose(findings["token_mean_on_the_recompute_path"]["coefficients"], kept.astype(float),
                               rtol=1e-12)


# -- on the toy: which catalogue estimator each preset equals (the README's column) ---------------------------

L2, L5 = np.log(2.0), np.log(5.0)
TOYS = [make_toy(6, 4, 0.3, 0), make_toy(5, 3, 1.0, 7)]


def band(scope, lo, hi, weight="naive"):
    return {"statistic": "log_ratio", "scope": scope, "lo": lo, "hi": hi, "weight": weight}


EQUAL_ON_THE_TOY = [
    ("slime:use_tis", {}, "tok_tis", {"C": 2.0}),
    ("slime:use_tis", {"tis_clip_low": 0.5}, "tok_clip", {"C_min": 0.5, "C_max": 2.0}),
    ("slime:icepop", {"tis_clip_low": 0.5}, "tok_mis", {"lo": 0.5, "hi": 2.0}),
    ("slime:mis", {"use_rs": "false"}, "tok_tis", {"C": 2.0}),
    ("slime:mis", {}, "rs", band("token", np.log(0.5), L2, "tok_tis")),
    ("slime:mis_sequence", {}, "seq_band", {"C_min": 0.5, "C_max": 2.0}),
    ("miles:mis_sequence", {"tis_mode": "clip", "use_rs": "false"}, "seq_clip", {"C_min": 0.5, "C_max": 2.0}),
    ("skyrl:tis_ratio_type_token", {}, "tok_tis", {"C": 2.0}),
    ("skyrl:tis_ratio_type_sequence", {}, "seq_tis", {"C": 5.0}),
    ("skyrl:sequence_mask_metric_geometric", {"geo_mask_low": 0.9, "geo_mask_high": 1.2}, "geo_rs",
     {"lo": 0.9, "hi": 1.2}),
    ("skyrl:sequence_mask_metric_product", {}, "rs", band("seq_sum", np.log(0.5), L2)),
    ("skyrl:outlier_token_is_threshold", {"outlier_token_is_threshold_low": np.exp(-0.5),
                                          "outlier_token_is_threshold_high": np.exp(0.5)}, "trm", {"eps": 0.5}),
    ("skyrl:token_mask_is_threshold", {}, "rs", band("token", np.log(0.5), L2)),
    ("skyrl:rollout_is", {}, "tok_mis", {"lo": 0.8, "hi": 1.2}),
    ("openrlhf:tis", {}, "tok_clip", {"C_min": 0.5, "C_max": 5.0}),
    ("openrlhf:icepop", {}, "tok_mis", {"lo": 0.5, "hi": 5.0}),
    ("openrlhf:seq-mask-tis", {"low": 0.9, "high": 1.2}, "rs", band("seq_mean", np.log(0.9), np.log(1.2), "tok_is")),
    ("openrlhf:gspo", {"eps_clip_low": 0.1, "eps_clip_high": 0.05}, "gspo_clip", {"eps_low": 0.1, "eps_high": 0.05}),
    ("nemo_rl:use_importance_sampling_correction", {}, "tok_is", {}),
    ("nemo_rl:tis", {}, "tok_tis", {"C": 2.0}),
    ("nemo_rl:icepop", {}, "tok_mis", {"lo": 0.5, "hi": 5.0}),
    ("nemo_rl:sequence_level_importance_ratios", {}, "seq_is", {}),
    ("nemo_rl:sequence_level_tis", {}, "seq_tis", {"C": 2.0}),
    ("nemo_rl:sequence_level_icepop", {}, "seq_band", {"C_min": 0.5, "C_max": 5.0}),
    ("areal:token_mask", {}, "rs", band("token", -1000.0, L5, "tok_is")),
    ("areal:token_mask", {"lower": "0.5"}, "tok_mis", {"lo": 0.5, "hi": 5.0}),
    ("areal:token_clamp", {}, "tok_tis", {"C": 5.0}),
    ("areal:sequence_mask", {"upper": 1.2}, "rs", band("seq_mean", -1000.0, np.log(1.2), "gspo_geo")),
    ("roll:is_weight_token", {}, "tok_tis", {"C": 1.2}),
    ("roll:is_weight_sequence", {}, "seq_tis", {"C": 1.2}),
    ("roll:is_weight_geometric", {}, "geo_tis", {"C": 1.2}),
    ("roll:ratio_filter_token", {}, "rs", band("token", np.log(0.8), np.log(1.2))),
    ("roll:ratio_filter_geometric", {}, "geo_rs", {"lo": 0.8, "hi": 1.2}),
    ("roll:ratio_filter_sequence", {}, "rs", band("seq_sum", np.log(0.8), np.log(1.2))),
    ("roll:topr", {}, "naive", {}),
    ("ms_swift:token_truncate", {}, "tok_tis", {"C": 2.0}),
    ("ms_swift:token_mask", {}, "rs", band("token", -1000.0, L2, "tok_is")),
    ("ms_swift:sequence_mask", {}, "rs", band("seq_mean", -1000.0, L2, "tok_is")),
    ("open_instruct:use_rho_correction", {}, "tok_tis", {"C": 2.0}),
    ("open_instruct:rho_mask", {}, "rs", band("token", np.log(0.5), L2, "tok_tis")),
    ("slime:mis_geometric", {"use_rs": "false", "tis_upper_bound": 1.1}, "geo_tis", {"C": 1.1}),
    ("miles:mis_geometric", {"use_rs": "false", "tis_mode": "clip", "tis_lower_bound": 0.9, "tis_upper_bound": 1.1},
     "geo_clip", {"C_min": 0.9, "C_max": 1.1}),
    ("skyrl:dppo_binary_tv", {}, "dppo", {"delta_low": 0.2, "delta_high": 0.2, "dppo_type": "binary_tv"}),
    ("skyrl:dppo_binary_kl", {"delta_low": 0.05}, "dppo", {"delta_low": 0.05, "delta_high": 0.2,
                                                          "dppo_type": "binary_kl"}),
    ("nemo_rl:seq_logprob_error_threshold", {"seq_logprob_error_threshold": 1.3}, "rs",
     {"statistic": "mult_error", "scope": "seq_mean", "lo": -1000.0, "hi": 1.3, "weight": "naive"}),
    ("areal:token_mask", {"metric": "kl_k3", "upper": 0.1}, "rs",
     {"statistic": "k3_reverse", "scope": "token", "lo": -1000.0, "hi": 0.1, "weight": "tok_is"}),
    ("areal:sequence_clamp", {"lower": "0.9", "upper": 1.1}, "geo_clip", {"C_min": 0.9, "C_max": 1.1}),
    ("roll:diff_filter_token", {}, "rs", {"statistic": "prob_diff", "scope": "token", "lo": -0.2, "hi": 0.2,
                                          "weight": "naive"}),
    ("prime_rl:default", {"kl_tau": 0.0}, "dppo", {"delta_low": 0.2, "delta_high": 0.2, "dppo_type": "binary_tv"}),
    ("prime_rl:default", {}, "k2_penalty", {"tau": 1e-3, "weight": "dppo"}),
    ("ms_swift:sequence_truncate", {}, "geo_tis", {"C": 2.0}),
    ("open_instruct:rho_mask_sequence_level", {"rho_mask_lower_bound": 0.0, "rho_mask_upper_bound": 1000.0,
                                               "rho_clamp_lower_bound": 0.9, "rho_clamp_upper_bound": 1.1},
     "geo_clip", {"C_min": 0.9, "C_max": 1.1}),
    ("open_instruct:rho_mask_tv_divergence", {"rho_mask_upper_bound": 1.1}, "tv_mask",
     {"lo": 0.0, "hi": 1.1, "weight": "tok_tis"}),
    ("verl:decoupled_token_icepop", {}, "tok_mis", {"lo": 0.5, "hi": 5.0}),
    ("verl:bypass_pg_token_icepop", {"threshold_lower": 0.9, "threshold": 1.2}, "tok_mis", {"lo": 0.9, "hi": 1.2}),
]


@pytest.mark.parametrize("toy", TOYS, ids=repr)
@pytest.mark.parametrize("preset, preset_params, estimator, params", EQUAL_ON_THE_TOY)
def test_preset_equals_its_catalogue_estimator_on_the_toy(toy, preset, preset_params, estimator, params):
    assert np.abs(toy.log_rho).max() < 10                  # no framework's clamp binds on these toys
    for baseline in ("none", "logged"):
        a = exact_moments(toy, preset, preset_params, baseline)
        b = exact_moments(toy, estimator, params, baseline)
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-15)
        assert a.var == pytest.approx(b.var, rel=1e-12, abs=1e-15)


def test_geometric_means_with_a_count_epsilon_still_equal_geo_rs_on_the_toy():
    """NeMo-RL's ρ_geo divides Σ log ρ by T + 10⁻⁸; no toy sequence sits within that of a bound."""
    for toy in TOYS:
        nemo = exact_moments(toy, "nemo_rl:seq-mask-tis", {"truncated_importance_sampling_ratio_min": 0.9,
                                                            "truncated_importance_sampling_ratio": 1.2}, "logged")
        rs = exact_moments(toy, "rs", band("seq_mean", np.log(0.9), np.log(1.2), "tok_is"), "logged")
        np.testing.assert_allclose(nemo.mean, rs.mean, rtol=1e-12, atol=1e-15)


# -- every id, on a ragged batch with ratios far beyond every clamp -------------------------------------------

def test_every_exact_id_is_finite_on_a_ragged_batch_beyond_every_clamp():
    rng = np.random.default_rng(19)
    sampler = rng.uniform(-40.0, -0.01, (6, 7))
    trainer = np.minimum(sampler + rng.normal(0.0, 15.0, sampler.shape), 0.0)
    mask = np.array([[1] * 7, [1] * 3 + [0] * 4, [0] * 7, [1] + [0] * 6, [1] * 5 + [0] * 2, [1] * 7])
    advantages = rng.normal(size=6)
    for estimator in EXACT_IDS:
        c = coefficients(estimator, trainer, sampler, mask, advantages)
        assert np.all(np.isfinite(c)) and np.all(c[mask == 0] == 0), estimator


def test_the_framework_tables_are_the_rows():
    """docs/frameworks.md's table of each framework has one row per preset, with its parameters' defaults, the row's
    "on the toy" text and where the framework's code computes it (regenerated from the rows whenever they change)."""
    text = FRAMEWORKS_PAGE.read_text()
    for preset in PRESETS:
        row = next(line for line in text.splitlines() if line.startswith(f"| {preset.id} |"))
        assert preset.equals.replace("|", r"\|") in row, preset.id
        assert preset.code and preset.code in row, preset.id
        for name in preset.params:
            assert f"{name}=" in row, (preset.id, name)
