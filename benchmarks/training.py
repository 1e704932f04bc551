"""Speed of training, in-process, back to back in one run.

    python benchmarks/training.py

1. Default toy (T=6, V=4), expected mode, 300 SGD steps, the page's nine default estimators; against the slow
   obvious loop (a fresh Toy and ``exact_moments`` per estimator per step, the same numbers).
2. Default toy, sampled mode, N = 64, 8 runs, 300 steps, the nine default estimators.
3. T=10, V=4 (M = 1,048,576), expected mode, 100 steps, the command line's default exact estimators (every
   exact one but the framework presets: 20).
4. The Training tab's extras on the default toy: the SGA second order of the nine, and their Monte Carlo.
Each is the best and the median of a few repeats (the machine is shared: read the ratios).
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exact_table import best_of  # noqa: E402  (benchmarks/ is the script's directory)

from toylab import exact_moments, make_toy  # noqa: E402
from toylab.cli.arguments import DEFAULT_IDS  # noqa: E402
from toylab.engine.toy import Toy  # noqa: E402
from toylab.state.settings import DEFAULT_ESTIMATORS  # noqa: E402
from toylab.training.loop import TrainingConfig, train  # noqa: E402
from toylab.training.optimizers import make_optimizer  # noqa: E402
from toylab.training.sga import monte_carlo_improvement, second_order  # noqa: E402


def slow_obvious(toy, selection, steps, lr):
    """Expected-mode SGD one estimator and one step at a time: a Toy per θ, the O(M) engine's full Moments."""
    final = {}
    for id, params in selection.items():
        theta, optimizer = toy.theta.copy(), make_optimizer("sgd", lr, toy.theta.shape)
        for _ in range(steps):
            theta = theta + optimizer.step(exact_moments(Toy(theta, toy.b, toy.mismatch, toy.seed), id, params).mean)
        final[id] = Toy(theta, toy.b, toy.mismatch, toy.seed).J
    return final


def main():
    toy = make_toy()
    defaults = {id: {} for id in DEFAULT_ESTIMATORS}
    rows = []

    fast = best_of(5, lambda: train(toy, defaults, "none", TrainingConfig(steps=300)))
    slow = best_of(1, lambda: slow_obvious(toy, defaults, 300, 1.0))
    reference = slow_obvious(toy, defaults, 300, 1.0)
    trained = train(toy, defaults, "none", TrainingConfig(steps=300))
    agreement = max(abs(trained[id].J[-1] - reference[id]) for id in defaults)
    rows.append(("default toy, expected, 300 steps, 9 estimators", fast, f"aim 0.3 s; slow obvious loop "
                 f"{slow[0]:.2f} s ({slow[0] / fast[0]:.0f}×), final J equal to {agreement:.0e}"))

    sampled = TrainingConfig(steps=300, mode="sampled", N=64, runs=8)
    rows.append(("default toy, sampled N=64, 8 runs, 300 steps, 9 estimators",
                 best_of(3, lambda: train(toy, defaults, "none", sampled)), "aim 1 s"))

    large = make_toy(T=10, V=4)
    every = {id: {} for id in DEFAULT_IDS}
    rows.append((f"T=10 V=4, expected, 100 steps, the CLI's {len(every)} exact estimators",
                 best_of(1, lambda: train(large, every, "none", TrainingConfig(steps=100))), "report"))

    rows.append(("default toy, SGA second order, 9 estimators",
                 best_of(5, lambda: [second_order(toy, id, {}, "none", 64) for id in defaults]), ""))
    lrs = np.logspace(-2, 2, 9)
    rows.append(("default toy, SGA Monte Carlo, 400 batches of 64, 9 lrs, 9 estimators",
                 best_of(5, lambda: monte_carlo_improvement(toy, defaults, "none", 64, lrs, 400)), ""))

    width = max(len(name) for name, _, _ in rows) + 2
    print("measured in-process, back to back (2 shared cores: timings vary with load)\n")
    print("what".ljust(width) + f"{'best':>9}{'median':>9}   note")
    for name, (best, median), note in rows:
        print(name.ljust(width) + f"{best:8.3f}s{median:8.3f}s   {note}")


if __name__ == "__main__":
    main()
