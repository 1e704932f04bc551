"""The sampler model — precision, temperature, top-k, top-p — against torch's rounding and the dense oracle.

Every combination is checked against ``dense.dense_sampler_log_mu``, which builds μ token by token in plain
Python (its own rounding, sorting and softmax); the exact engine's moments over μ's support against the dense
sums over the sequences μ can draw.
"""

import numpy as np
import pytest
from dense import DenseToy, as_float32, assert_exact_equals_dense, dense_sampler_log_mu, rounded

from toylab import EXACT_IDS, exact_moments, make_toy, resolve_params
from toylab.analysis.diagnostics import diagnostics, sequence_log_ratio
from toylab.engine import moments as moments_module
from toylab.engine.recursion import RECURSIVE_IDS, exact_by_recursion
from toylab.engine.sampler import Sampler, bfloat16, float16, top_k_kept, top_p_kept
from toylab.engine.toy import Toy

# Computed with torch 2.13.0+cpu (/work/scratch/torch-venv), x as float64:
# torch.tensor(x, dtype=torch.float64).to(torch.float32).to(torch.bfloat16 / torch.float16).to(torch.float64).
# 1 + 2**-8, 1 + 3·2**-8 (bf16) and 1 + 2**-11, 1 + 3·2**-11 (fp16) are ties: to even.
TORCH_X = [0.1, -2.718281828459045, 1.00390625, 1.01171875, 1.00048828125, 1.00146484375, 1.0009766221046448,
           0.333333333333333, 12345.678, -0.00012345]
TORCH_BF16 = [0.10009765625, -2.71875, 1.0, 1.015625, 1.0, 1.0, 1.0, 0.333984375, 12352.0, -0.00012302398681640625]
TORCH_FP16 = [0.0999755859375, -2.71875, 1.00390625, 1.01171875, 1.0, 1.001953125, 1.0009765625, 0.333251953125,
              12344.0, -0.00012350082397460938]
# Measured once against torch in the same way on 400,013 values (normal, Student-t, ties): 0 differences.

SAMPLERS = {
    "top_p 0.7": Sampler(top_p=0.7),
    "top_k 2": Sampler(top_k=2),
    "top_k 1": Sampler(top_k=1),
    "tau 0.5": Sampler(temperature=0.5),
    "tau 2.5": Sampler(temperature=2.5),
    "bf16": Sampler(precision="bf16"),
    "fp16": Sampler(precision="fp16"),
    "all four": Sampler(top_p=0.9, top_k=3, temperature=0.6, precision="bf16"),
    "top_p 0.3, fp16, tau 3": Sampler(top_p=0.3, temperature=3.0, precision="fp16"),
}
TOYS = [(4, 4, 0.5, 0), (3, 5, 1.0, 7)]


def toy_with(key, sampler):
    return make_toy(*key, **sampler.parameters())


# -- the model itself -----------------------------------------------------------------------------------------

def test_rounding_equals_torch_bit_for_bit():
    assert bfloat16(np.array(TORCH_X)).tolist() == TORCH_BF16
    assert float16(np.array(TORCH_X)).tolist() == TORCH_FP16
    assert [rounded(as_float32(x), 8, 2.0**-133) for x in TORCH_X] == TORCH_BF16      # the oracle's own rounding
    assert [rounded(as_float32(x), 11, 2.0**-24) for x in TORCH_X] == TORCH_FP16


def test_rounding_goes_through_float32_first():
    """1 + 2**-11 + 2**-40 is above fp16's halfway point in float64 but on it in float32: ties to even, 1."""
    assert float16(np.array([1 + 2**-11 + 2**-40])).tolist() == [1.0]
    assert bfloat16(np.array([1 + 2**-8 + 2**-40])).tolist() == [1.0]


def test_fp16_overflow_is_a_clear_error():
    with pytest.raises(ValueError, match="beyond float16's largest value"):
        float16(np.array([7e4]))


def test_top_k_keeps_ties_at_the_kth_value():
    logits = np.array([[3.0, 1.0, 1.0, 0.0]])
    assert top_k_kept(logits, 2).tolist() == [[True, True, True, False]]
    assert top_k_kept(logits, 1).tolist() == [[True, False, False, False]]
    assert top_k_kept(logits, 0).all() and top_k_kept(logits, 4).all()


def test_top_p_keeps_a_token_while_the_mass_strictly_above_it_is_below_p():
    probability = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(probability)[None]
    everything = np.ones(logits.shape, bool)
    assert top_p_kept(logits, everything, 0.5).tolist() == [[True, False, False, False]]      # 0.5 is not < 0.5
    assert top_p_kept(logits, everything, 0.51).tolist() == [[True, True, False, False]]
    assert top_p_kept(logits, everything, 0.01).tolist() == [[True, False, False, False]]     # the top is always kept
    tied = np.log([[0.4, 0.4, 0.2]])
    assert top_p_kept(tied, np.ones(tied.shape, bool), 0.3).tolist() == [[True, True, False]]  # a tie stays whole


def test_the_order_is_precision_temperature_top_k_top_p():
    """Top-p reads the probabilities after temperature and after top-k has removed tokens."""
    theta = np.array([[2.0, 1.2, 1.0, -1.0]])
    sampler = Sampler(top_p=0.7, top_k=3, temperature=2.0)
    log_mu = sampler.log_probabilities(theta)
    np.testing.assert_allclose(log_mu, dense_sampler_log_mu(theta, np.zeros_like(theta), 0.0, 0.7, 3, 2.0), atol=1e-15)
    assert np.isinf(log_mu[0, 3])                                                 # top-k removed it
    z = theta[0] / 2
    after_top_k, before_top_k = np.exp(z[:3]) / np.exp(z[:3]).sum(), np.exp(z) / np.exp(z).sum()
    assert after_top_k[:2].sum() >= 0.7 > before_top_k[:2].sum()                 # top-p reads the renormalised ones
    assert np.isfinite(log_mu[0, :2]).all() and np.isinf(log_mu[0, 2])
    np.testing.assert_allclose(np.exp(log_mu[0, :2]), np.exp(z[:2]) / np.exp(z[:2]).sum(), rtol=1e-15)


@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("key", TOYS, ids=lambda t: "T{}V{}m{}s{}".format(*t))
def test_log_mu_equals_the_dense_construction(key, name):
    toy = toy_with(key, SAMPLERS[name])
    dense = dense_sampler_log_mu(toy.theta, toy.b, toy.mismatch, **SAMPLERS[name].parameters())
    np.testing.assert_array_equal(np.isinf(toy.log_mu), np.isinf(dense))
    np.testing.assert_allclose(toy.log_mu[toy.kept], dense[toy.kept], rtol=0, atol=1e-13)
    assert toy.kept.any(axis=1).all()


@pytest.mark.parametrize("kwargs, message", [
    ({"top_p": 0.0}, "top_p must be a number in"), ({"top_p": 1.5}, "top_p must be"), ({"top_k": -1}, "top_k must"),
    ({"top_k": 5}, "top_k must be 0 .off. or between 1 and V = 4"), ({"temperature": 0.1}, "temperature must be"),
    ({"temperature": float("nan")}, "temperature must be"), ({"precision": "fp8"}, "precision must be one of"),
    ({"top_k": 2.5}, "top_k must be an integer"), ({"top_p": True}, "top_p must be"),
])
def test_bad_sampler_arguments_raise_a_value_error_naming_the_rule(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_toy(**kwargs)


def test_the_default_is_plain_softmax_bit_for_bit():
    toy = make_toy()
    logits = toy.theta + toy.mismatch * toy.b
    shifted = logits - logits.max(axis=1, keepdims=True)
    assert np.array_equal(toy.log_mu, shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))
    assert not toy.truncates and toy.unreachable_mass == 0.0 and Sampler().is_default


# -- exact everywhere: J unchanged, E_μ[r], KL, χ², ESS and every estimator over μ's support -----------------------

@pytest.fixture(scope="module", params=[(key, name) for key in TOYS for name in SAMPLERS],
                ids=lambda p: "T{}V{}m{}s{}-".format(*p[0]) + p[1])
def toy_pair(request):
    key, name = request.param
    toy = toy_with(key, SAMPLERS[name])
    return toy, DenseToy(toy)


def test_population_numbers_equal_the_dense_sums_over_the_support(toy_pair):
    toy, dense = toy_pair
    found = diagnostics(toy)
    plain = make_toy(toy.T, toy.V, toy.mismatch, toy.seed)
    assert found.J == plain.J and np.array_equal(toy.true_grad, plain.true_grad)        # π is unchanged
    rows = dense.on_support
    mu, W = rows.p_sampler, rows.W
    assert found.logged_reward == pytest.approx(dense.p_sampler @ dense.R, rel=1e-12)
    assert found.kl_mu_pi == pytest.approx(-(mu @ np.log(W)), rel=1e-10, abs=1e-14)
    assert found.chi2_seq == pytest.approx((mu @ W**2) / (mu @ W) ** 2 - 1, rel=1e-10, abs=1e-14)
    assert found.ess == pytest.approx((mu @ W) ** 2 / (mu @ W**2), rel=1e-10)
    assert found.unreachable_mass == pytest.approx(dense.unreachable_mass(), rel=1e-12, abs=1e-15)
    assert found.unreachable_mass == pytest.approx(1 - mu @ W, rel=1e-10, abs=1e-14)    # E_μ[W] = π(S)
    assert np.isfinite([found.kl_mu_pi, found.chi2_seq, found.ess]).all()
    log_W, probability = sequence_log_ratio(toy)
    assert np.isfinite(log_W).all() and probability @ np.exp(log_W) == pytest.approx(mu @ W, rel=1e-10)


@pytest.mark.parametrize("baseline", ["none", "logged", "true"])
def test_every_exact_estimator_equals_the_dense_sums_over_the_support(toy_pair, baseline):
    toy, dense = toy_pair
    for estimator in EXACT_IDS:
        assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), baseline)


def test_sequence_is_bias_is_exactly_the_part_out_of_reach(toy_pair):
    toy, _ = toy_pair
    seq_is, naive = exact_moments(toy, "seq_is", baseline="logged"), exact_moments(toy, "naive", baseline="logged")
    assert seq_is.rel_within_reach < 1e-12 and seq_is.rel_bias == pytest.approx(seq_is.rel_out_of_reach, rel=1e-9, abs=1e-13)
    assert naive.rel_out_of_reach == seq_is.rel_out_of_reach
    assert abs(naive.rel_out_of_reach - naive.rel_within_reach) <= naive.rel_bias * (1 + 1e-12) + 1e-15
    assert naive.rel_bias <= naive.rel_out_of_reach + naive.rel_within_reach + 1e-12
    assert (seq_is.rel_out_of_reach > 0) == toy.truncates


@pytest.mark.parametrize("chunk", [4, 16])
def test_the_pass_in_chunks_equals_the_dense_sums(toy_pair, chunk, monkeypatch):
    """Tiny chunks put truncated tokens in the fixed prefix of a chunk (every sequence of it outside μ's support)."""
    monkeypatch.setattr(moments_module, "CHUNK", chunk)
    toy, dense = toy_pair
    for estimator in ("tok_mis", "prefix_is", "seq_is", "seq_mis", "k3_rs", "ppo_clip", "verl:decoupled_geo_rs"):
        assert_exact_equals_dense(toy, dense, estimator, resolve_params(estimator), "logged")


def test_the_count_recursion_equals_the_dense_sums(toy_pair):
    toy, dense = toy_pair
    for estimator in RECURSIVE_IDS:
        mean, bias, var = dense.moments(estimator, resolve_params(estimator), "logged")
        moments = exact_by_recursion(toy, estimator, {}, "logged")
        scale = np.linalg.norm(dense.true_grad)
        np.testing.assert_allclose(moments.mean, mean, rtol=0, atol=1e-10 * scale)
        assert moments.var == pytest.approx(var, rel=1e-9, abs=1e-14)
        assert moments.rel_out_of_reach == pytest.approx(exact_moments(toy, estimator, baseline="logged").rel_out_of_reach,
                                                  rel=1e-9, abs=1e-13)


def test_affected_shares_count_only_what_mu_draws():
    toy = make_toy(5, 3, 1.0, 7, top_p=0.8)
    dense = DenseToy(toy).on_support
    moments = exact_moments(toy, "tok_tis")
    hit = dense.rho > 2
    assert moments.tokens_affected == pytest.approx(dense.p_sampler @ hit.mean(axis=1), abs=1e-12)
    assert moments.sequences_affected == pytest.approx(dense.p_sampler @ hit.any(axis=1), abs=1e-12)


def test_a_probability_that_underflows_counts_as_outside_the_support():
    theta = np.array([[0.0, 0.0], [0.0, -800.0]])
    toy = Toy(theta, np.zeros_like(theta), 0.0, 0, Sampler(temperature=0.5))
    assert toy.kept.tolist() == [[True, True], [True, False]] and np.isinf(toy.log_rho[1, 1])
    assert np.isfinite(exact_moments(toy, "seq_is").var)
