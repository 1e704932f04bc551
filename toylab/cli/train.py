"""``python -m toylab train``: gradient ascent with chosen estimators on one toy, as a summary or JSON.

A bad argument prints one line, ``toylab: error: ...``, and exits with status 2. So does, before the run, a run
whose estimated memory is over MEMORY_LIMIT_BYTES (known from its sizes), or whose time is over COMMAND_LINE_FACTOR
times the page's limit (measured on small copies of it: ``training.cost``); a run estimated at over
PROGRESS_AFTER_S seconds shows a progress bar with the time left on stderr, when stderr is a terminal (piped, it holds
the errors alone).

``--kl SETTING --beta B`` adds a KL penalty to the reference (a framework's preset, e.g. ``nemo_rl:kl_loss``, whose
default β is taken when --beta is not given, or ESTIMATOR.PLACEMENT[.MODIFIER], e.g. ``k1.reward.to_go``:
``catalogue.kl_settings``); ``--reference-distance D`` moves π_ref from θ_0 to θ_0 + D·d. Every run records
KL(π_k‖π_ref), in the JSON's "kl_ref" and the summary's "final KL(pi||ref)".
"""

import sys
from dataclasses import replace

import numpy as np

from toylab.analysis.diagnostics import diagnostics
from toylab.catalogue import kl_settings
from toylab.catalogue.kl import BETA_RANGE, NO_PENALTY
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.catalogue.update_presets import UPDATE_PRESETS
from toylab.catalogue.updates import ANCHORS, LAG_DRAWS, LOSSES, UPDATES_AT_MOST, WEIGHTS_AT, Update
from toylab.cli.arguments import (
    ToylabParser,
    add_toy_arguments,
    chosen_ids,
    json_text,
    number_in,
    one_of,
    program,
    validate_toy_arguments,
)
from toylab.cli.hidden_arguments import add_experts_arguments, add_versions_arguments, experts_of, versions_of
from toylab.cli.progress import ProgressBar
from toylab.cli.table import toy_line, toy_summary
from toylab.engine.reference import DISTANCE_RANGE, Reference
from toylab.engine.toy import make_toy
from toylab.state.query import INTEGER_RANGES
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.text import formatted, quoted
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
    reached_in_words,
    stop_notice,
    summary,
    train,
)
from toylab.training.optimizers import OPTIMIZERS

DEFAULTS = TrainingConfig()
LISTED = ("J", "logged_reward", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias", "clip_share", "ppo_kl",
          "w_std", "lag", "kl_ref")                                             # per-step JSON lists
LIMIT_SECONDS = PAGE_SECONDS * COMMAND_LINE_FACTOR
PROGRESS_AFTER_S = 2.0


def train_parser():
    parser = ToylabParser(prog=program("train"), description=__doc__.splitlines()[0],
                          epilog=f"A run estimated at over {LIMIT_SECONDS:,.0f} s of computing ({COMMAND_LINE_FACTOR} "
                                 f"times the page's {PAGE_SECONDS:g} s; timed on small copies of it, for at most "
                                 f"{cost.PROBE_SECONDS:g} s) or "
                                 f"{MEMORY_LIMIT_BYTES / 1e9:g} GB of memory is refused before it starts; one "
                                 f"estimated at over {PROGRESS_AFTER_S:g} s shows its progress on a terminal's "
                                 "stderr.")
    add_toy_arguments(parser)
    parser.add_argument("--estimators", default=",".join(DEFAULT_ESTIMATORS), metavar="ID,ID,…",
                        help="estimators to train with (default: the page's selection, "
                             f"{', '.join(DEFAULT_ESTIMATORS)})")
    parser.add_argument("--steps", type=number_in(int, *LIMITS["steps"]), default=DEFAULTS.steps,
                        help="number of steps K, {} to {:,} (default {})".format(*LIMITS["steps"], DEFAULTS.steps))
    parser.add_argument("--lr", type=number_in(float, *LIMITS["lr"]), default=DEFAULTS.lr,
                        help="step size, {:g} to {:g} (default {:g})".format(*LIMITS["lr"], DEFAULTS.lr))
    parser.add_argument("--optimizer", type=one_of(tuple(OPTIMIZERS)), default=DEFAULTS.optimizer,
                        help=f"update rule: {', '.join(OPTIMIZERS)} (default {DEFAULTS.optimizer})")
    parser.add_argument("--mode", type=one_of(MODES), default=DEFAULTS.mode,
                        help="expected: step along the exact mean; sampled: batches of N from μ (default "
                             f"{DEFAULTS.mode})")
    parser.add_argument("--N", type=number_in(int, *INTEGER_RANGES["N"]), default=DEFAULTS.N,
                        help="batch size (sampled mode), {} to {:,} (default {})".format(*INTEGER_RANGES["N"],
                                                                                         DEFAULTS.N))
    parser.add_argument("--runs", type=number_in(int, *LIMITS["runs"]), default=DEFAULTS.runs,
                        help="independent runs (sampled mode), {} to {:,} (default {})".format(*LIMITS["runs"],
                                                                                               DEFAULTS.runs))
    parser.add_argument("--noise", type=one_of(NOISES), default=DEFAULTS.noise,
                        help=f"the engine's error b: fixed, or redrawn at every step (seeded) (default "
                             f"{DEFAULTS.noise})")
    update = parser.add_argument_group("three policies: the engine's lag, the anchor, the loss, updates per batch")
    update.add_argument("--update", type=one_of(tuple(UPDATE_PRESETS)), default=None, metavar="PRESET",
                        help="a framework's update, as the page's: it sets the anchor, the loss and its parameters, "
                             "minibatches, epochs, where the correction reads its ratio, the lag and its draw (giving "
                             "one of those too is an error): " + ", ".join(UPDATE_PRESETS) + " (default: none, the "
                             "options below)")
    update.add_argument("--lag", type=number_in(int, *LIMITS["lag"]), default=None, metavar="S",
                        help="the engine samples from the policy S steps old, {} to {} (default {})".format(
                            *LIMITS["lag"], DEFAULTS.lag))
    update.add_argument("--lag-draw", type=one_of(LAG_DRAWS), default=None,
                        help="fixed: s = S every batch; uniform: s drawn from 0 … S per batch (η = S, seeded) "
                             f"(default {DEFAULTS.lag_draw})")
    update.add_argument("--anchor", type=one_of(ANCHORS), default=None,
                        help="π_old: recompute (π_θk), rollout (π_θ(k−s)) or bypass (the engine's μ) (default "
                             f"{DEFAULTS.update.anchor})")
    update.add_argument("--loss", type=one_of(tuple(LOSSES)), default=None,
                        help=f"the per-token loss: {', '.join(LOSSES)} (default {DEFAULTS.update.loss})")
    update.add_argument("--eps-low", type=number_in(float, 0, 1), default=None,
                        help="ε_low of ppo and cispo (default 0.2)")
    update.add_argument("--eps-high", type=number_in(float, 0, 10), default=None,
                        help="ε_high of ppo and cispo (default 0.2)")
    update.add_argument("--dual-clip", default=None, metavar="C|off",
                        help="ppo's dual clip c > 1 for A < 0 (default off; verl's is 3)")
    update.add_argument("--loss-param", action="append", default=[], metavar="NAME=VALUE",
                        help="any other parameter of the loss: clamp, delta_low, delta_high, delta, tau (repeatable; "
                             "default: the loss's own)")
    update.add_argument("--minibatches", type=number_in(int, 1, UPDATES_AT_MOST), default=None,
                        help=f"minibatches a batch is split into (sampled mode; expected mode: updates per epoch), "
                             f"1 to {UPDATES_AT_MOST} (default 1)")
    update.add_argument("--epochs", type=number_in(int, 1, UPDATES_AT_MOST), default=None,
                        help=f"passes over each batch; U = minibatches × epochs updates per batch, 1 to "
                             f"{UPDATES_AT_MOST} (default 1)")
    update.add_argument("--weights-at", type=one_of(WEIGHTS_AT), default=None,
                        help="the correction's ratio: anchor (w = π_old/μ, frozen) or current (sg(π_θ)/μ at each "
                             f"update, verl's bypass mode) (default {DEFAULTS.update.weights_at})")
    reference = parser.add_argument_group("the reference: a KL penalty to π_ref")
    reference.add_argument("--kl", default=None, metavar="SETTING",
                           help="a preset (" + ", ".join(list(KL_PRESETS)[:3]) + ", …) or ESTIMATOR.PLACEMENT[.MODIFIER] "
                                "(k3.loss, k3.loss.engine, k1.reward.to_go, …); default: none")
    reference.add_argument("--beta", type=number_in(float, *BETA_RANGE), default=None, metavar="B",
                           help="the penalty's coefficient β (default: the preset's framework default)")
    reference.add_argument("--reference-distance", type=number_in(float, *DISTANCE_RANGE), default=0.0, metavar="D",
                           help="π_ref at θ_0 + D·d, d a seeded standard normal direction (default 0: the initial π)")
    add_experts_arguments(parser)
    add_versions_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def parse_arguments(argv):
    parser = train_parser()
    arguments = parser.parse_args(argv)
    try:
        ids = chosen_ids(arguments.estimators)
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        experts, replay = experts_of(arguments)
        update, lag, lag_draw = policies(arguments)
        arguments.config = TrainingConfig(arguments.steps, arguments.lr, arguments.optimizer, arguments.mode,
                                          arguments.N, arguments.runs, arguments.noise, update, lag, lag_draw,
                                          penalty(arguments),
                                          Reference(arguments.reference_distance), experts, replay,
                                          versions_of(arguments))
        arguments.config.versions.check(arguments.T)
        arguments.seconds = _check_cost(arguments)
    except ValueError as error:
        parser.error(str(error))
    return parser, arguments


POLICY_OPTIONS = ("anchor", "loss", "eps_low", "eps_high", "dual_clip", "loss_param", "minibatches", "epochs",
                  "weights_at", "lag", "lag_draw")             # what --update sets


def policies(arguments):
    """(Update, lag, lag draw): --update's preset exactly as its framework's module gives it (the page's
    train_update), or the options' (``_update``); ValueError when both are given."""
    if arguments.update is None:
        return (_update(arguments), DEFAULTS.lag if arguments.lag is None else arguments.lag,
                arguments.lag_draw or DEFAULTS.lag_draw)
    given = [name for name in POLICY_OPTIONS if getattr(arguments, name) not in (None, [])]
    if given:
        raise ValueError(f"--update {arguments.update} sets the update and the lag; --{given[0].replace('_', '-')} "
                         "contradicts it (give one or the other)")
    preset = UPDATE_PRESETS[arguments.update]
    return preset.update, preset.lag, preset.lag_draw


def _update(arguments):
    """The Update of --anchor, --loss, its parameters, --minibatches, --epochs and --weights-at (each defaulting to
    ``TrainingConfig``'s); ValueError naming what is wrong."""
    params = {}
    for assignment in arguments.loss_param:
        name, equals, value = assignment.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--loss-param expects NAME=VALUE, got {quoted(assignment)}")
        params[name.strip()] = value.strip()
    given = {"eps_low": arguments.eps_low, "eps_high": arguments.eps_high, "dual_clip": arguments.dual_clip}
    given = {name: value for name, value in given.items() if value is not None}
    twice = [name for name in given if name in params]
    if twice:
        name = twice[0]
        raise ValueError(f"--{name.replace('_', '-')} {given[name]} and --loss-param {name}={params[name]} both set "
                         f"{name}: give it once")
    params |= given
    base = DEFAULTS.update
    return Update(arguments.anchor or base.anchor, arguments.loss or base.loss, params,
                  arguments.minibatches or base.minibatches, arguments.epochs or base.epochs,
                  arguments.weights_at or base.weights_at)


def penalty(arguments):
    """The KLPenalty of --kl and --beta (none without --kl); ValueError naming what is wrong."""
    if arguments.kl is None:
        if arguments.beta is not None:
            raise ValueError("--beta needs --kl (which KL penalty)")
        return NO_PENALTY
    chosen, _ = kl_settings.parse(arguments.kl, correction_allowed=False)
    if arguments.beta is None and arguments.kl not in KL_PRESETS:
        raise ValueError(f"--kl {arguments.kl} needs --beta (its coefficient)")
    beta = chosen.beta if arguments.beta is None else arguments.beta
    if beta == 0:
        raise ValueError(f"--kl {arguments.kl}: its framework's default β is 0 (off); give --beta")
    return replace(chosen, beta=beta)


def _check_cost(arguments):
    """The run's estimated seconds; ValueError naming the bound if its memory (known from its sizes, checked first)
    or its time (a probe of small copies of it: ``training.cost``) is over the limits."""
    config, ids = arguments.config, list(arguments.selection)
    T, V = arguments.T, arguments.V
    toy_key = (T, V, arguments.mismatch, arguments.seed, arguments.sampler_model)
    probed = []

    def probe(stop_above):
        probed.append(cost.probe(toy_key, arguments.selection, arguments.baseline, config, stop_above=stop_above))
        return probed[-1]
    refused = cost.refusal(T, V, config, ids, probe, LIMIT_SECONDS,
                           memory=cost.command_line_bytes(T, V, config, ids, as_json=arguments.json),
                           limit_note=f" ({COMMAND_LINE_FACTOR} times the page's {PAGE_SECONDS:g} s)")
    if refused:
        raise ValueError(refused)
    return probed[-1].wall_seconds(T, V, config)


def report(arguments):
    toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed, arguments.sampler_model)
    config = arguments.config
    start = diagnostics(toy)            # before the run: its sums over all M sequences are freed before the records grow
    shown = arguments.seconds > PROGRESS_AFTER_S and sys.stderr.isatty()
    bar = ProgressBar("training", config.steps + 1) if shown else None
    trajectories = train(toy, arguments.selection, arguments.baseline, config,
                         progress=None if bar is None else lambda k: bar.update(k + 1))
    if bar is not None:
        bar.close()
    return {
        "toy": toy_summary(toy) | {"J": start.J, "logged_reward": start.logged_reward, "kl_mu_pi": start.kl_mu_pi,
                                   "chi2_seq": start.chi2_seq, "unreachable_mass": start.unreachable_mass},
        "baseline": arguments.baseline, "noise": config.noise,
        "update": update_entry(config) | ({} if arguments.update is None else {"preset": arguments.update}),
        "kl": kl_entry(config, arguments.kl),
        "trajectories": [_trajectory(trajectory, config) for trajectory in trajectories.values()],
        "summary": summary(trajectories) if "on_policy" in trajectories else summary(trajectories, reference=None),
        "stops": [note for trajectory in trajectories.values() if (note := stop_notice(trajectory))],
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


def kl_entry(config, name):
    """The penalty (None when off: β = 0) and where π_ref sits."""
    penalty = config.kl
    described = None if not penalty.active else {
        "setting": name, "beta": penalty.beta, "estimator": penalty.estimator, "placement": penalty.placement,
        "reward_sum": penalty.reward_sum if penalty.placement == "reward" else None, "ratio": penalty.ratio,
        "log_ratio_clamp": penalty.log_ratio_clamp, "value_clamp": penalty.value_clamp,
        "ratio_held_by_clamp": penalty.ratio_held_by_clamp}
    return {"penalty": described, "reference_distance": config.reference.distance}


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
    stopped = trajectory.stopped.tolist()
    entry["stopped_at"] = [None if k < 0 else k for k in stopped] if config.mode == "sampled" else \
        (None if stopped < 0 else stopped)
    entry["notes"] = notes(trajectory)
    return entry


def notes(trajectory):
    """Why some values are null: a run that stopped (its values after), undefined cosines (and relative biases)
    before any stop, and rel_bias in sampled mode."""
    found, size = [], trajectory.cosine.size
    stop = stop_notice(trajectory)
    if stop:
        found.append(stop)
    ran = np.arange(trajectory.J.shape[-1]) < np.where(trajectory.stopped < 0, size, trajectory.stopped)[..., None]
    at_maximum = (trajectory.grad_norm < UNDEFINED_BELOW) & ran
    zero = np.isnan(trajectory.cosine) & ~at_maximum & ran
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
             update_line(config),
             ("KL penalty: " + config.kl.describe() if config.kl.active else "no KL penalty")
             + f"; reference pi_ref at theta_0 + {config.reference.distance:g}*d", ""]
    reach = f"steps to {REACHED:.0%}"
    referenced = "steps_to_reach" in result["summary"][0]          # on_policy, the reference, was trained
    width = max(len(row["estimator"]) for row in result["summary"]) + 2
    lines.append("estimator".ljust(width) + f"{'final J':>9}" + (f"{reach:>19}" if referenced else "")
                 + f"{'largest drop':>14}{'final E_mu[r]':>15}{'final KL':>10}{'clipped':>9}{'PPO KL':>10}"
                 f"{'KL(pi||ref)':>13}")
    for row in result["summary"]:
        lines.append(row["estimator"].ljust(width) + f"{formatted(row['final_J']):>9}"
                     + (f"{reached_in_words(row):>19}" if referenced else "")
                     + f"{formatted(row['largest_drop']):>14}"
                     f"{formatted(row['final_logged_reward']):>15}{formatted(row['final_kl_mu_pi']):>10}"
                     f"{formatted(row['mean_clip_share']):>9}{formatted(row['mean_ppo_kl']):>10}"
                     f"{formatted(row['final_kl_ref']):>13}")
    lines.append(f"\nsteps to {REACHED:.0%}: first step with J ≥ {REACHED:g} × on_policy's final J"
                 + ("" if referenced else "; a column only when on_policy, the reference, is among --estimators"))
    lines.append("clipped, PPO KL: the share of tokens a clip or mask holds and the token mean of −log r, averaged "
                 "over the steps; KL(pi||ref): the final KL(π‖π_ref), exact")
    return "\n".join(lines + [f"Notice: {note}." for note in result["stops"]])


def main(argv):
    parser, arguments = parse_arguments(argv)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json_text(result) if arguments.json else as_text(result, arguments.config))
    return 0
