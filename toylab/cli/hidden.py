"""``python -m toylab routing`` and ``python -m toylab versions``: the exact tables of hidden variables.

    routing     each estimator's relative bias, standard deviation at N and cosines to ∇J (the trainer's own policy)
                and ∇J_μ (the served one) with routing replay off, R2 and R3, the KL the correction sees, and the
                flip rates of the toy's mixture of experts (``analysis.routing``)
    versions    each estimator's first update under each way of logging a switched sequence's versions (per-token,
                head or tail stamp, the stale prefix masked) against the per-token truth, at on_policy's k-th step
                (``analysis.versions``)

Text or ``--json``; a bad argument is one line, ``toylab: error: …``, exit status 2.
"""

from toylab.analysis.routing import routing_view
from toylab.analysis.versions import ANCHORS, versions_view
from toylab.catalogue.updates import Update
from toylab.cli.arguments import (
    ToylabParser,
    add_batch_size_argument,
    add_toy_arguments,
    chosen_ids,
    json_text,
    number_in,
    one_of,
    program,
    validate_toy_arguments,
)
from toylab.cli.hidden_arguments import add_experts_arguments, add_versions_arguments, experts_of, versions_of
from toylab.cli.table import toy_line, toy_summary
from toylab.engine.toy import make_toy
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.text import UNDEFINED
from toylab.training.history import history_of
from toylab.training.loop import LIMITS


def parser_for(command):
    parser = ToylabParser(prog=program(command), description=__doc__.splitlines()[0])
    add_toy_arguments(parser)
    add_batch_size_argument(parser)
    parser.add_argument("--estimators", default=",".join(DEFAULT_ESTIMATORS), metavar="ID,ID,…",
                        help=f"estimators (default: the page's default selection, {','.join(DEFAULT_ESTIMATORS)})")
    if command == "routing":
        add_experts_arguments(parser, replay=False)
    else:
        add_versions_arguments(parser)
        parser.add_argument("--lag", type=number_in(int, 1, LIMITS["lag"][1]), default=2, metavar="S|η",
                            help=f"the head's lag (fixed switch) or its bound η (drawn switch), 1 to {LIMITS['lag'][1]} "
                                 "(default 2)")
        parser.add_argument("--anchor", type=one_of(ANCHORS), default="rollout",
                            help="π_old: recompute, rollout (at the stamped version), bypass, or loglinear (AReaL) "
                                 "(default rollout)")
        parser.add_argument("--step", type=number_in(int, 0, 2000), default=20,
                            help="the analysis's θ: on_policy's after this many exact SGD steps, 0 to 2,000 (default 20)")
        parser.add_argument("--lr", type=number_in(float, *LIMITS["lr"]), default=1.0, help="their step size, {:g} to {:g} (default 1)".format(*LIMITS["lr"]))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def cell(value, style):
    return UNDEFINED if value is None else style.format(value)


def routing_report(arguments, toy):
    experts, _ = experts_of(arguments)
    view = routing_view(toy, experts, arguments.selection, arguments.baseline, arguments.N)
    return {"toy": toy_summary(toy), "experts": experts.__dict__, "J": view.J, "served_J": view.served_J,
            "flip_rate": float(view.flips.mean()), "token_flip_rate": float(view.token_flips.mean()),
            "sequence_flip_rate": view.sequence_flips, "kl": view.kl, "logged_reward": view.logged_reward,
            "N": arguments.N, "baseline": arguments.baseline,
            "rows": [row.__dict__ for row in view.rows]}


def versions_report(arguments, toy):
    versions = versions_of(arguments)
    if versions.switch == "off":
        raise ValueError("give a switch: --switch fixed (at --switch-at) or drawn")
    history = history_of(toy, arguments.step, arguments.lr)
    view = versions_view(toy, versions, arguments.lag, arguments.anchor, Update(), arguments.selection, history,
                         arguments.baseline, arguments.N)
    return {"toy": toy_summary(toy), "versions": versions.__dict__, "lag": arguments.lag, "anchor": arguments.anchor,
            "step": arguments.step, "lr": arguments.lr, "J": view.J, "kl": view.kl, "patterns": view.patterns,
            "N": arguments.N, "baseline": arguments.baseline, "rows": [row.__dict__ for row in view.rows]}


def routing_text(result):
    experts = result["experts"]
    lines = [toy_line(result["toy"]),
             f"mixture: {experts['layers']} layers, top-{experts['top_k']} of {experts['experts']} experts, router "
             f"error {experts['router_error']:g} ({experts['draws']} draws per {experts['draw']}), spread "
             f"{experts['spread']:g}",
             f"J={result['J']:.5f}  served J_mu={result['served_J']:.5f}  flips: {result['flip_rate']:.1%} of "
             f"decisions, {result['token_flip_rate']:.1%} of tokens, {result['sequence_flip_rate']:.1%} of sequences",
             "KL(mu||pi_old) the correction sees: " + ", ".join(f"{mode} {kl:.4f}" for mode, kl in result["kl"].items()),
             f"batch size N={result['N']}, baseline={result['baseline']}", ""]
    lines.append(f"{'estimator':16}{'replay':>7}{'rel bias':>10}{'rel std':>10}{'cos ∇J':>9}{'cos ∇J_μ':>10}")
    for row in result["rows"]:
        lines.append(f"{row['estimator']:16}{row['replay']:>7}{row['rel_bias']:10.4f}{row['rel_std']:10.4f}"
                     f"{cell(row['cosine'], '{:+.4f}'):>9}{cell(row['served_cosine'], '{:+.4f}'):>10}")
    lines.append("\n∇J: the trainer's own policy (its routing); ∇J_μ: the served policy (the engine's draws); R2 equals "
                 f"off at one update (it differs across a batch's updates: {program('train')} --replay R2)")
    return "\n".join(lines)


def versions_text(result):
    versions = result["versions"]
    where = f"at {versions['at']}" if versions["switch"] == "fixed" else "drawn per sequence"
    lines = [toy_line(result["toy"]),
             f"switch {where}, lag {result['lag']}, anchor {result['anchor']}, θ after {result['step']} on_policy "
             f"steps at lr {result['lr']:g}; {result['patterns']} pattern(s)",
             f"J={result['J']:.5f}  KL(mu||pi)={result['kl']:.4f}  batch size N={result['N']}, "
             f"baseline={result['baseline']}", ""]
    lines.append(f"{'estimator':16}{'stamp':>7}{'masked':>8}{'rel bias':>10}{'rel std':>10}{'cosine':>9}"
                 f"{'from truth':>12}")
    for row in result["rows"]:
        lines.append(f"{row['estimator']:16}{row['stamp']:>7}{'yes' if row['masked'] else 'no':>8}"
                     f"{row['rel_bias']:10.4f}{row['rel_std']:10.4f}{cell(row['cosine'], '{:+.4f}'):>9}"
                     f"{row['from_truth']:12.4f}")
    lines.append("\nfrom truth: ‖E ĝ − E ĝ(per-token stamps, no mask)‖/‖∇J‖; stamps matter to the rollout and "
                 "loglinear anchors only")
    return "\n".join(lines)


def main(argv, command):
    parser = parser_for(command)
    arguments = parser.parse_args(argv)
    try:
        ids = chosen_ids(arguments.estimators)
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed, arguments.sampler_model)
        result = (routing_report if command == "routing" else versions_report)(arguments, toy)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    if arguments.json:
        print(json_text(result))
    else:
        print((routing_text if command == "routing" else versions_text)(result))
    return 0


def routing(argv):
    return main(argv, "routing")


def versions(argv):
    return main(argv, "versions")
