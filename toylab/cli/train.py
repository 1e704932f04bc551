"""``python -m toylab train``: gradient ascent with chosen estimators on one toy, as a summary or JSON.

A bad argument prints one line, ``toylab: error: ...``, and exits with status 2. So does, before the run, a run
whose estimated memory is over MEMORY_LIMIT_BYTES (known from its sizes), or whose time is over COMMAND_LINE_FACTOR
times the page's limit (measured on small copies of it: ``training.cost``); a run estimated at over
PROGRESS_AFTER_S seconds shows a progress bar with the time left on stderr.
"""


import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.cli.arguments import (
    ToylabParser,
    add_toy_arguments,
    chosen_ids,
    json_text,
    number_in,
    one_of,
    validate_toy_arguments,
)
from toylab.cli.progress import ProgressBar
from toylab.cli.table import toy_line, toy_summary
from toylab.engine.toy import make_toy
from toylab.state.query import INTEGER_RANGES
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.training import cost
from toylab.training.cost import COMMAND_LINE_FACTOR, MEMORY_LIMIT_BYTES, PAGE_SECONDS
from toylab.training.loop import (
    LIMITS,
    MODES,
    NOISES,
    REACHED,
    UNDEFINED_BELOW,
    TrainingConfig,
    per_step_median,
    summary,
    train,
)
from toylab.training.optimizers import OPTIMIZERS

DEFAULTS = TrainingConfig()
LISTED = ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias")   # per-step JSON lists
LIMIT_SECONDS = PAGE_SECONDS * COMMAND_LINE_FACTOR
PROGRESS_AFTER_S = 2.0


def parse_arguments(argv):
    parser = ToylabParser(prog="python -m toylab train", description=__doc__.splitlines()[0],
                          epilog=f"A run estimated at over {LIMIT_SECONDS:,.0f} s ({COMMAND_LINE_FACTOR} times the "
                                 f"page's {PAGE_SECONDS:g} s; timed on small copies of it) or "
                                 f"{MEMORY_LIMIT_BYTES / 1e9:g} GB of memory is refused before it starts; one "
                                 f"estimated at over {PROGRESS_AFTER_S:g} s shows its progress on stderr.")
    add_toy_arguments(parser)
    parser.add_argument("--estimators", default=",".join(DEFAULT_ESTIMATORS), metavar="ID,ID,…",
                        help="estimators to train with (default: the page's default selection)")
    parser.add_argument("--steps", type=number_in(int, *LIMITS["steps"]), default=DEFAULTS.steps,
                        help="number of steps K")
    parser.add_argument("--lr", type=number_in(float, *LIMITS["lr"]), default=DEFAULTS.lr, help="step size")
    parser.add_argument("--optimizer", type=one_of(tuple(OPTIMIZERS)), default=DEFAULTS.optimizer,
                        help="update rule: " + ", ".join(OPTIMIZERS))
    parser.add_argument("--mode", type=one_of(MODES), default=DEFAULTS.mode,
                        help="expected: step along the exact mean; sampled: batches of N from μ")
    parser.add_argument("--N", type=number_in(int, *INTEGER_RANGES["N"]), default=DEFAULTS.N,
                        help="batch size (sampled mode)")
    parser.add_argument("--runs", type=number_in(int, *LIMITS["runs"]), default=DEFAULTS.runs,
                        help="independent runs (sampled mode)")
    parser.add_argument("--noise", type=one_of(NOISES), default=DEFAULTS.noise,
                        help="the engine's error b: fixed, or redrawn at every step (seeded)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    arguments = parser.parse_args(argv)
    try:
        ids = chosen_ids(arguments.estimators)
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        arguments.config = TrainingConfig(arguments.steps, arguments.lr, arguments.optimizer, arguments.mode,
                                          arguments.N, arguments.runs, arguments.noise)
        arguments.seconds = _check_cost(arguments)
    except ValueError as error:
        parser.error(str(error))
    return parser, arguments


def _check_cost(arguments):
    """The run's estimated seconds; ValueError naming the bound if its memory (known from its sizes, checked first)
    or its time (a probe of small copies of it: ``training.cost``) is over the limits."""
    config, ids = arguments.config, list(arguments.selection)
    T, V = arguments.T, arguments.V
    toy_key = (T, V, arguments.mismatch, arguments.seed, arguments.sampler_model)
    probed = []

    def probe():
        probed.append(cost.probe(toy_key, arguments.selection, arguments.baseline, config))
        return probed[0]
    refused = cost.refusal(T, V, config, ids, probe, LIMIT_SECONDS,
                           memory=cost.command_line_bytes(T, V, config, ids, as_json=arguments.json),
                           limit_note=f" ({COMMAND_LINE_FACTOR} times the page's {PAGE_SECONDS:g} s)")
    if refused:
        raise ValueError(refused)
    return probed[0].wall_seconds(T, V, config)


def report(arguments):
    toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed, arguments.sampler_model)
    config = arguments.config
    start = diagnostics(toy)            # before the run: its sums over all M sequences are freed before the records grow
    bar = ProgressBar("training", config.steps + 1) if arguments.seconds > PROGRESS_AFTER_S else None
    trajectories = train(toy, arguments.selection, arguments.baseline, config,
                         progress=None if bar is None else lambda k: bar.update(k + 1))
    if bar is not None:
        bar.close()
    return {
        "toy": toy_summary(toy) | {"J": start.J, "logged_reward": start.logged_reward, "kl_mu_pi": start.kl_mu_pi,
                                   "chi2_seq": start.chi2_seq, "unreachable_mass": start.unreachable_mass},
        "baseline": arguments.baseline, "noise": config.noise,
        "trajectories": [_trajectory(trajectory, config) for trajectory in trajectories.values()],
        "summary": summary(trajectories) if "on_policy" in trajectories else summary(trajectories, reference=None),
    }


def _trajectory(trajectory, config):
    entry = {"estimator": trajectory.estimator, "params": trajectory.params, "mode": config.mode,
             "optimizer": config.optimizer, "lr": config.lr, "noise": config.noise}
    if config.mode == "sampled":
        entry |= {"N": config.N, "runs": config.runs}
    entry["steps"] = list(range(config.steps + 1))
    for name in LISTED:
        values = getattr(trajectory, name)
        entry[name] = None if values is None else values.tolist()
    if config.mode == "sampled":
        entry["median"] = {name: per_step_median(getattr(trajectory, name)).tolist()
                           for name in LISTED if getattr(trajectory, name) is not None}
    entry["notes"] = notes(trajectory)
    return entry


def notes(trajectory):
    """Why some values are null: undefined cosines (and relative biases), and rel_bias in sampled mode."""
    found, size = [], trajectory.cosine.size
    at_maximum = trajectory.grad_norm < UNDEFINED_BELOW
    zero = np.isnan(trajectory.cosine) & ~at_maximum
    if zero.any():
        what = "the estimator's mean" if trajectory.mode == "expected" else "the step taken"
        found.append(f"cosine null at {int(zero.sum())} of {size} values: {what} is zero (every sequence masked, "
                     "or no reward signal)")
    if at_maximum.any():
        found.append(f"cosine{' and rel_bias' if trajectory.rel_bias is not None else ''} null at "
                     f"{int(at_maximum.sum())} of {size} values: ‖∇J‖ < {UNDEFINED_BELOW:g}, J at a maximum to "
                     "within rounding, where a direction is rounding noise")
    if trajectory.rel_bias is None:
        found.append("rel_bias and step_cosine are null in sampled mode: rel_bias is the exact mean's, an "
                     "expected-mode quantity, and cosine is already the step's")
    return found


def as_text(result, config):
    toy = result["toy"]
    lines = [f"{toy_line(toy)}   "
             f"J0={toy['J']:.5f}  E_mu[r]0={toy['logged_reward']:.5f}  KL(mu||pi)0={toy['kl_mu_pi']:.4f}",
             f"{config.mode} mode, {config.optimizer}, lr={config.lr:g}, {config.steps} steps, baseline="
             f"{result['baseline']}, engine error b {config.noise}" + (
                 f", N={config.N}, {config.runs} runs (per-step medians)" if config.mode == "sampled" else ""), ""]
    reach = f"steps to {REACHED:.0%}"
    width = max(len(row["estimator"]) for row in result["summary"]) + 2
    lines.append("estimator".ljust(width) + f"{'final J':>9}{reach:>14}{'largest drop':>14}{'final E_mu[r]':>15}"
                 f"{'final KL':>10}")
    for row in result["summary"]:
        steps = row.get("steps_to_reach", "–")
        lines.append(row["estimator"].ljust(width) + f"{row['final_J']:9.4f}{'never' if steps is None else steps:>14}"
                     f"{row['largest_drop']:14.4f}{row['final_logged_reward']:15.4f}{row['final_kl_mu_pi']:10.4f}")
    if "steps_to_reach" in result["summary"][0]:
        lines.append(f"\nsteps to {REACHED:.0%}: first step with J ≥ {REACHED:g} × on_policy's final J")
    return "\n".join(lines)


def main(argv):
    parser, arguments = parse_arguments(argv)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json_text(result) if arguments.json else as_text(result, arguments.config))
    return 0
