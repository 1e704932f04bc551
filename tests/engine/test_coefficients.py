"""toylab.coefficients, the one batch interface, agrees with the exact engine sequence by sequence.

The engine's coefficients are expanded here from the Weights it evaluates on every sequence of the toy
(sequence · token table at y_t · prefix product of the carry table); the batch interface gets the same
sequences as per-token log-probabilities and must return the same numbers and the same kept tokens.
"""

import numpy as np
import pytest

from toylab import ESTIMATORS, EXACT_IDS, additive_terms, coefficients, kept_tokens, make_toy, resolve_params
from toylab.engine.moments import baseline_value
from toylab.engine.sequences import AllSequences
from toylab.engine.toy import Toy

TOY = make_toy(T=4, V=3, mismatch=0.7, seed=2)
TALL = make_toy(T=6, V=3, mismatch=0.7, seed=2)


def engine_coefficients(toy, estimator_id, params, b):
    """(c, kept) (M, T) from the Weights the exact engine uses on every sequence of the toy."""
    view = AllSequences(toy, b)
    weights = ESTIMATORS[estimator_id].weights(view, **resolve_params(estimator_id, params))
    Y, positions = toy.Y, np.arange(toy.T)

    def at_tokens(table, fill):
        return np.full(Y.shape, fill) if table is None else np.asarray(table)[positions, Y]

    token = at_tokens(weights.token, 1.0)
    for members, class_token, _ in weights.token_classes()[1:]:
        token = np.where(members[:, None], at_tokens(class_token, 1.0), token)
    carried = at_tokens(weights.carry, 1.0)
    prefix = np.cumprod(np.hstack([np.ones((toy.M, 1)), carried[:, :-1]]), axis=1)
    sequence = np.broadcast_to(np.asarray(weights.sequence, float), (toy.M,))[:, None]
    rejected = at_tokens(weights.token_rejected, False).astype(bool)
    if weights.sequence_rejected is not None:
        rejected |= weights.sequence_rejected[:, None]
    return sequence * token * prefix, ~rejected


@pytest.mark.parametrize("baseline", ["none", "logged"])
@pytest.mark.parametrize("estimator", EXACT_IDS)
def test_batch_interface_equals_the_exact_engine_on_every_sequence(estimator, baseline):
    b = baseline_value(TOY, baseline)
    expected, expected_kept = engine_coefficients(TOY, estimator, {}, b)
    advantages = TOY.R - b
    actual = coefficients(estimator, TOY.logp_train, TOY.logp_sampler, advantages=advantages)
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(kept_tokens(estimator, TOY.logp_train, TOY.logp_sampler, advantages=advantages),
                                  expected_kept)


def sub_toy(toy, length):
    """The toy's first ``length`` positions: a sequence cut there is a sequence of this toy."""
    return Toy(toy.theta[:length], toy.b[:length], toy.mismatch, toy.seed)


@pytest.mark.parametrize("estimator", EXACT_IDS)
def test_ragged_sequences_are_the_shorter_toys(estimator):
    """A batch mixing sequences of length 3 and 5 padded to 6 (garbage under the mask) gives, row by row, the
    engine's coefficients of the toy cut to that length: statistics use each sequence's own tokens only."""
    rng = np.random.default_rng(0)
    rows, masks, advantages, expected = [], [], [], []
    for length in (3, 5):
        toy = sub_toy(TALL, length)
        b = baseline_value(toy, "logged")
        c, _ = engine_coefficients(toy, estimator, {}, b)
        pad = TALL.T - length
        expected.append(np.hstack([c, np.zeros((toy.M, pad))]))
        rows.append((np.hstack([toy.logp_train, rng.normal(-3, 5, (toy.M, pad))]),
                     np.hstack([toy.logp_sampler, rng.normal(-3, 5, (toy.M, pad))])))
        masks.append(np.hstack([np.ones((toy.M, length)), np.zeros((toy.M, pad))]))
        advantages.append(toy.R - b)
    actual = coefficients(estimator, np.vstack([r[0] for r in rows]), np.vstack([r[1] for r in rows]),
                          np.vstack(masks), np.concatenate(advantages))
    np.testing.assert_allclose(actual, np.vstack(expected), rtol=1e-12, atol=1e-300)


def test_an_empty_sequence_has_zero_coefficients_and_no_nan():
    trainer, sampler = TOY.logp_train[:3].copy(), TOY.logp_sampler[:3].copy()
    mask = np.ones(trainer.shape)
    mask[1] = 0
    trainer[1] = np.nan
    for estimator in EXACT_IDS:
        c = coefficients(estimator, trainer, sampler, mask, advantages=[1.0, -1.0, 0.5])
        assert np.all(np.isfinite(c)) and np.all(c[1] == 0), estimator


@pytest.mark.parametrize("call, message", [
    (lambda: coefficients("naive", np.zeros((2, 3)), np.zeros((2, 4))), "one shape"),
    (lambda: coefficients("naive", np.zeros(3), np.zeros(3)), r"\(B, T\)"),
    (lambda: coefficients("naive", np.zeros((2, 3)), np.zeros((2, 3)), mask=np.full((2, 3), 2)), "0 \\(padding\\)"),
    (lambda: coefficients("naive", np.full((1, 2), np.inf), np.zeros((1, 2))), "finite"),
    (lambda: coefficients("ppo_clip", np.zeros((1, 2)), np.zeros((1, 2))), "pass advantages"),
    (lambda: coefficients("opsm", np.zeros((1, 2)), np.zeros((1, 2)), advantages=[1.0, 2.0]), "one per sequence"),
    (lambda: coefficients("nope", np.zeros((1, 2)), np.zeros((1, 2))), "unknown estimator"),
    (lambda: coefficients("verl:decoupled_geo_rs", np.zeros((1, 2)), np.zeros((1, 2)), rs_threshold="0.5_x"),
     "not a number"),
    (lambda: coefficients("rs", np.zeros((1, 2)), np.zeros((1, 2)), scope="sequence"), "must be one of"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_padding_may_hold_minus_infinity():
    trainer = np.array([[-0.5, -np.inf]])
    c = coefficients("seq_is", trainer, np.array([[-1.0, -np.inf]]), mask=[[1, 0]])
    np.testing.assert_allclose(c, [[np.exp(0.5), 0.0]])


UNBOUNDED = {"tok_is": "ρ_t", "prefix_is": "∏ρ", "seq_is": "W", "gspo_geo": "ρ_geo", "dppo": "ρ_t where the mask keeps it",
             "m2po": "its weight, tok_is, on the tokens it keeps", "gspo_clip": "ρ_geo when A < 0",
             "openrlhf:gspo": "ρ_geo when A < 0", "openrlhf:seq-mask-tis": "ρ_t in a kept sequence",
             "nemo_rl:use_importance_sampling_correction": "ρ_t", "nemo_rl:seq-mask-tis": "ρ_t in a kept sequence",
             "nemo_rl:sequence_level_importance_ratios": "W", "prime_rl:default": "ρ_t where its DPPO mask keeps it",
             "prime_rl:ipo": "ρ_t where |Δp| is small",
             "areal:kpop": "ρ_t where both probabilities are below 10⁻⁸, which its clamp makes equal"}


def ragged_batch(largest_log_ratio, seed=0):
    """Six rows of up to three response tokens: an empty row, a fully masked row with garbage (NaN, −∞) under its
    mask, log-probabilities 0 and tiny ones, |log ρ_t| up to ``largest_log_ratio``; advantages of both signs and 0."""
    rng = np.random.default_rng(seed)
    trainer = -rng.uniform(0, largest_log_ratio, (6, 3))
    sampler = -rng.uniform(0, largest_log_ratio, (6, 3))
    trainer[0, 0], sampler[0, 1], sampler[2, 2] = 0.0, 0.0, -1e-300
    mask = np.ones((6, 3))
    mask[1] = 0
    mask[3, 1:] = 0
    trainer[1] = [np.nan, -np.inf, 0.0]
    sampler[3, 1:] = -np.inf
    return trainer, sampler, mask, np.array([1.0, -0.5, 0.0, -2.0, 0.3, 1.5])


@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_every_id_is_finite_on_ragged_batches(estimator):
    """Every registry id (batch-coupled ones included): finite coefficients and additive terms, 0 at padding,
    on rows whose every statistic is representable (Σ_t |log ρ_t| ≤ 3·236 < 709), with empty and fully masked rows
    and log-probabilities of 0; an empty batch gives empty arrays."""
    trainer, sampler, mask, advantages = ragged_batch(236)
    for c in (coefficients(estimator, trainer, sampler, mask, advantages),
              additive_terms(estimator, trainer, sampler, mask, advantages)):
        assert np.all(np.isfinite(c)), estimator
        assert np.all(c[mask == 0] == 0), estimator
    kept = kept_tokens(estimator, trainer, sampler, mask, advantages)
    assert not np.any(kept & (mask == 0))
    empty = coefficients(estimator, np.zeros((0, 3)), np.zeros((0, 3)), advantages=np.zeros(0))
    assert empty.shape == (0, 3)


@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_beyond_float64_no_id_gives_nan_and_only_unbounded_weights_overflow(estimator):
    """With log ratios of ±10⁴ (weights e^{±10⁴}), every id stays free of NaN; only the weights that are unbounded
    by definition (UNBOUNDED) may overflow, to +∞ — their true value is beyond float64."""
    trainer, sampler, mask, advantages = ragged_batch(1e4, seed=1)
    with np.errstate(invalid="ignore" if estimator == "prefix_is" else "raise"):
        c = coefficients(estimator, trainer, sampler, mask, advantages)
        d = additive_terms(estimator, trainer, sampler, mask, advantages)
    if estimator == "prefix_is":      # a prefix holding e^{+10⁴} and e^{−10⁴} multiplies ∞ by 0: NaN, there only
        log_rho = np.where(mask == 1, trainer - sampler, 0.0)
        mixed = np.maximum.accumulate(log_rho > 709, axis=1) & np.maximum.accumulate(log_rho < -745, axis=1)
        c = np.where(mixed, 0.0, c)
    assert not np.any(np.isnan(c)), estimator
    if estimator in UNBOUNDED:
        assert np.all(np.isfinite(c) | (c == np.inf)), estimator
    else:
        assert np.all(np.isfinite(c)), estimator
    assert np.all(np.isfinite(d)), estimator
