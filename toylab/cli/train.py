"""``python -m toylab train``: gradient ascent with chosen estimators on one toy, as a summary or JSON.

A bad argument prints one line, ``toylab: error: ...``, and exits with status 2. So does, before the run, a run
whose estimated memory is over MEMORY_LIMIT_BYTES (known from its sizes), or whose time is over COMMAND_LINE_FACTOR
times the page's limit (measured on small copies of it: ``training.cost``); a run estimated at over
PROGRESS_AFTER_S seconds shows a progress bar with the time left on stderr.
"""


import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.catalogue.updates import ANCHORS, LAG_DRAWS, LOSSES, UPDATES_AT_MOST, WEIGHTS_AT, Update
from toylab.cli.arguments import (
    ToylabParser,
    add_toy_arguments,
    chosen_ids,
    json_text,
    number_in,
    one_of,
    validate_toy_arguments,
)
from toylab.cli.hidden_arguments import add_experts_arguments, add_versions_arguments, experts_of, versions_of
from toylab.cli.progress import ProgressBar
from toylab.cli.table import toy_line, toy_summary
from toylab.engine.toy import make_toy
from toylab.state.query import INTEGER_RANGES
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.text import quoted
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
LISTED = ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias", "clip_share", "ppo_kl",
          "w_std", "lag")                                                       # per-step JSON lists
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
    update = parser.add_argument_group("three policies: the engine's lag, the anchor, the loss, updates per batch")
    update.add_argument("--lag", type=number_in(int, *LIMITS["lag"]), default=DEFAULTS.lag, metavar="S",
                        help="the engine samples from the policy S steps old (default 0)")
    update.add_argument("--lag-draw", type=one_of(LAG_DRAWS), default=DEFAULTS.lag_draw,
                        help="fixed: s = S every batch; uniform: s drawn from 0 … S per batch (η = S, seeded)")
    update.add_argument("--anchor", type=one_of(ANCHORS), default=DEFAULTS.update.anchor,
                        help="π_old: recompute (π_θk), rollout (π_θ(k−s)) or bypass (the engine's μ)")
    update.add_argument("--loss", type=one_of(tuple(LOSSES)), default=DEFAULTS.update.loss,
                        help="the per-token loss: " + ", ".join(LOSSES))
    update.add_argument("--eps-low", type=number_in(float, 0, 1), default=None,
                        help="ε_low of ppo and cispo (default 0.2)")
    update.add_argument("--eps-high", type=number_in(float, 0, 10), default=None,
                        help="ε_high of ppo and cispo (default 0.2)")
    update.add_argument("--dual-clip", default=None, metavar="C|off",
                        help="ppo's dual clip c > 1 for A < 0 (default off; verl's is 3)")
    update.add_argument("--loss-param", action="append", default=[], metavar="NAME=VALUE",
                        help="any other parameter of the loss: clamp, delta_low, delta_high, delta, tau (repeatable)")
    update.add_argument("--minibatches", type=number_in(int, 1, UPDATES_AT_MOST), default=1,
                        help="minibatches a batch is split into (sampled mode; expected mode: updates per epoch)")
    update.add_argument("--epochs", type=number_in(int, 1, UPDATES_AT_MOST), default=1,
                        help="passes over each batch; U = minibatches × epochs updates per batch")
    update.add_argument("--weights-at", type=one_of(WEIGHTS_AT), default=DEFAULTS.update.weights_at,
                        help="the correction's ratio: anchor (w = π_old/μ, frozen) or current (sg(π_θ)/μ at each "
                             "update, verl's bypass mode)")
    add_experts_arguments(parser)
    add_versions_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    arguments = parser.parse_args(argv)
    try:
        ids = chosen_ids(arguments.estimators)
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        experts, replay = experts_of(arguments)
        arguments.config = TrainingConfig(arguments.steps, arguments.lr, arguments.optimizer, arguments.mode,
                                          arguments.N, arguments.runs, arguments.noise, _update(arguments),
                                          arguments.lag, arguments.lag_draw, experts, replay, versions_of(arguments))
        arguments.config.versions.check(arguments.T)
        arguments.seconds = _check_cost(arguments)
    except ValueError as error:
        parser.error(str(error))
    return parser, arguments


def _update(arguments):
    """The Update of --anchor, --loss, its parameters, --minibatches, --epochs and --weights-at; ValueError naming
    what is wrong."""
    params = {}
    for assignment in arguments.loss_param:
        name, equals, value = assignment.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--loss-param expects NAME=VALUE, got {quoted(assignment)}")
        params[name.strip()] = value.strip()
    given = {"eps_low": arguments.eps_low, "eps_high": arguments.eps_high, "dual_clip": arguments.dual_clip}
    params |= {name: value for name, value in given.items() if value is not None}
    return Update(arguments.anchor, arguments.loss, params, arguments.minibatches, arguments.epochs,
                  arguments.weights_at)


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
        "baseline": arguments.baseline, "noise": config.noise, "update": update_entry(config),
        "trajectories": [_trajectory(trajectory, config) for trajectory in trajectories.values()],
        "summary": summary(trajectories) if "on_policy" in trajectories else summary(trajectories, reference=None),
    }


def update_entry(config):
    """How each batch was used: the anchor, the loss and its parameters, minibatches × epochs, where the correction
    reads its ratio, and the engine's lag."""
    update = config.update
    entry = {"anchor": update.anchor, "loss": update.loss, "loss_params": update.loss_params,
             "minibatches": update.minibatches, "epochs": update.epochs, "U": update.U, "weights_at": update.weights_at,
             "lag": config.lag, "lag_draw": config.lag_draw}
    if config.experts is not None:
        entry["experts"] = config.experts.__dict__ | {"replay": config.replay}
    if not config.versions.is_default:
        entry["versions"] = dict(config.versions.__dict__)
    return entry


def update_line(config):
    """'anchor recompute, loss ppo (eps_low 0.2, eps_high 0.2), U = 1 (1 minibatch × 1 epoch), lag 0'."""
    update = config.update
    params = ", ".join(f"{name} {'off' if value is None else f'{value:g}'}" for name, value in update.params)
    lag = f"lag s ~ U{{0..{config.lag}}}" if config.lag_draw == "uniform" else f"lag {config.lag}"
    return (f"anchor {update.anchor}, loss {update.loss}" + (f" ({params})" if params else "")
            + f", U = {update.U} ({update.minibatches} minibatch{'es' * (update.minibatches > 1)} × {update.epochs} "
            f"epoch{'s' * (update.epochs > 1)}), {lag}"
            + (", correction at the current π_θ" if update.weights_at == "current" else "")
            + (f"; mixture of experts: {config.experts.describe()}, replay {config.replay}"
               if config.experts is not None else "")
            + (f"; versions: {config.versions.describe()}" if not config.versions.is_default else ""))


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
                 f", N={config.N}, {config.runs} runs (per-step medians)" if config.mode == "sampled" else ""),
             update_line(config), ""]
    reach = f"steps to {REACHED:.0%}"
    width = max(len(row["estimator"]) for row in result["summary"]) + 2
    lines.append("estimator".ljust(width) + f"{'final J':>9}{reach:>14}{'largest drop':>14}{'final E_mu[r]':>15}"
                 f"{'final KL':>10}{'clipped':>9}{'PPO KL':>10}")
    for row in result["summary"]:
        steps = row.get("steps_to_reach", "–")
        lines.append(row["estimator"].ljust(width) + f"{row['final_J']:9.4f}{'never' if steps is None else steps:>14}"
                     f"{row['largest_drop']:14.4f}{row['final_logged_reward']:15.4f}{row['final_kl_mu_pi']:10.4f}"
                     f"{row['mean_clip_share']:9.4f}{row['mean_ppo_kl']:10.4f}")
    if "steps_to_reach" in result["summary"][0]:
        lines.append(f"\nsteps to {REACHED:.0%}: first step with J ≥ {REACHED:g} × on_policy's final J")
    lines.append("clipped, PPO KL: the share of tokens a clip or mask holds and the token mean of −log r, averaged "
                 "over the steps")
    return "\n".join(lines)


def main(argv):
    parser, arguments = parse_arguments(argv)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json_text(result) if arguments.json else as_text(result, arguments.config))
    return 0
