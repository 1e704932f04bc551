"""How often the SGA view's Monte Carlo interval covers the truth, with and without the tail check.

    python benchmarks/sga_coverage.py                  # 300 repeats per case (several minutes on 2 cores)
    python benchmarks/sga_coverage.py --repeats 100

At the default toy, mismatch 1, θ₀ (step 0 of on_policy's run, J = 0.055), baseline none. For each case (estimator,
batch size N, number of batches B) it repeats the view's Monte Carlo with fresh seeds and counts how often an
interval holds the truth E[J(θ + lr·ĝ_N)] − J(θ): at N = 1 exact, by enumerating every sequence; at N = 64 a
Monte Carlo of TRUTH_BATCHES batches (its standard error printed beside it). Intervals: mean ± 2 s.e. (the page's),
a percentile bootstrap (BOOTSTRAP resamples), and ±2 s.e. split by the page's tail check
(``training.sga.MonteCarloImprovement.trusted``). Also the length of Adam's first step at lr 0.1 as a multiple of
‖ĝ_N‖ (N = 64), as a multiple of lr. It only reports; tests/training/test_sga_truthfulness.py checks the check with fixed seeds.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toylab import make_toy, resolve_params  # noqa: E402
from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms  # noqa: E402
from toylab.engine.coefficients import apply  # noqa: E402
from toylab.engine.counts import expected_reward  # noqa: E402
from toylab.engine.sampler import log_softmax  # noqa: E402
from toylab.engine.sequences import GivenSequences  # noqa: E402
from toylab.training.loop import TrainingConfig  # noqa: E402
from toylab.training.sga import _sequences, monte_carlo_improvement, second_order, toy_at  # noqa: E402

LRS = (0.03, 0.3, 3.0, 30.0)
CASES = (("seq_is", 64, 200), ("seq_is", 64, 1000), ("naive", 64, 200), ("seq_is", 1, 200), ("seq_is", 1, 4000),
         ("seq_tis", 1, 200), ("seq_tis", 1, 4000), ("seq_mis", 1, 200), ("seq_mis", 1, 4000))
TRUTH_BATCHES = 300_000
BOOTSTRAP = 500
DEFAULT_ESTIMATORS = ("naive", "tok_is", "tok_tis", "tok_mis", "seq_is", "seq_tis", "seq_mis", "geo_rs")


def gains_of_every_sequence(toy, estimator, lrs):
    """(J(θ + lr·ĝ(y)) − J(θ) for every sequence y, μ(y)): the N = 1 gains, enumerated."""
    tokens = _sequences(np.arange(toy.M), toy.T, toy.V)
    positions = np.arange(toy.T)
    sequences = GivenSequences(toy.log_pi[positions, tokens], toy.log_mu[positions, tokens])
    coefficient = np.broadcast_to(apply(estimator, sequences, resolve_params(estimator))[0], tokens.shape)
    reward = (2 * (tokens == 0).sum(axis=1) >= toy.T).astype(float)
    step = (coefficient * reward[:, None])[:, :, None] * (np.eye(toy.V)[tokens] - toy.pi)
    moved = toy.theta + np.asarray(lrs)[:, None, None, None] * step
    return expected_reward(np.exp(log_softmax(moved))) - toy.J, toy.p_sampler


def truth(toy, estimator, N, lrs):
    """(the truth per lr, its standard error per lr): exact at N = 1, else TRUTH_BATCHES batches."""
    if N == 1:
        gains, probability = gains_of_every_sequence(toy, estimator, lrs)
        return gains @ probability, np.zeros(len(lrs))
    result = monte_carlo_improvement(toy, {estimator: {}}, "none", N, lrs, TRUTH_BATCHES, seed=10**6)[estimator]
    return result.mean, result.se


def bootstrap(toy, estimator, N, lrs, batches, seed, rng):
    """The percentile bootstrap interval of the mean gain, per lr, from the batches of one repeat."""
    uniforms = np.random.default_rng(seed).random((batches, N, toy.T))
    steps = batch_estimates(Batches(toy, tokens_from_uniforms(uniforms, toy.mu), np.array([N]), 0.0), estimator)[:, 0]
    gains = expected_reward(np.exp(log_softmax(toy.theta + np.asarray(lrs)[:, None, None, None] * steps))) - toy.J
    means = gains[:, rng.integers(0, batches, (BOOTSTRAP, batches))].mean(axis=-1)
    return np.quantile(means, 0.025, axis=1), np.quantile(means, 0.975, axis=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=300)
    repeats = parser.parse_args().repeats
    toy = make_toy(mismatch=1.0)
    started = time.time()
    print(f"default toy, mismatch 1, θ₀ (J = {toy.J:.4f}), baseline none, {repeats} repeats; lrs {LRS}")
    rng = np.random.default_rng(0)
    for estimator, N, batches in CASES:
        target, target_se = truth(toy, estimator, N, LRS)
        exact = second_order(toy, estimator, {}, "none", N)
        normal, boot, trusted = np.zeros(len(LRS)), np.zeros(len(LRS)), np.zeros(repeats, bool)
        covered = np.zeros((repeats, len(LRS)), bool)
        for repeat in range(repeats):
            seed = 1000 * batches + repeat
            result = monte_carlo_improvement(toy, {estimator: {}}, "none", N, LRS, batches, seed=seed)[estimator]
            covered[repeat] = np.abs(result.mean - target) <= 2 * result.se
            trusted[repeat] = bool(result.trusted(exact))
            if batches <= 1000:
                low, high = bootstrap(toy, estimator, N, LRS, batches, seed, rng)
                boot += (low <= target) & (target <= high)
        normal = covered.mean(axis=0)
        passed = covered[trusted].mean(axis=0) if trusted.any() else np.full(len(LRS), np.nan)
        failed = covered[~trusted].mean(axis=0) if (~trusted).any() else np.full(len(LRS), np.nan)
        print(f"\n{estimator} N={N} B={batches}: truth {np.round(target, 6)} (se {np.round(target_se, 7)})")
        print(f"  ±2 s.e. covers        {np.round(normal, 3)}")
        if batches <= 1000:
            print(f"  bootstrap covers      {np.round(boot / repeats, 3)}")
        print(f"  check passes in {trusted.mean():.0%} of repeats; then ±2 s.e. covers {np.round(passed, 3)}, "
              f"when it fails {np.round(failed, 3)}   ({time.time() - started:.0f} s)", flush=True)
    _, adam = toy_at(toy, "none", TrainingConfig(lr=0.1, optimizer="adam"), 0)
    lengths = monte_carlo_improvement(toy, {id: {} for id in DEFAULT_ESTIMATORS}, "none", 64, [0.1], 200,
                                      optimizer=adam)
    print("\nAdam's first step at lr 0.1, N = 64: the lr of a plain step as long, as a multiple of lr (median over "
          "200 batches): " + ", ".join(f"{id} {result.actual_lr / 0.1:.3g}" for id, result in lengths.items()))


if __name__ == "__main__":
    main()
