"""``python -m toylab``: the exact table of every exact estimator on one toy, as text or JSON.

The framework presets (verl:…, trl:…) are left out unless named with ``--estimators``.

The command line accepts exactly the page's ranges (``toylab.query``: T, V, mismatch, seed, N, the size
limit, each threshold's range) and refuses anything else before any work: one line on stderr,
``toylab: error: …``, and exit status 2. An undefined number (the cosine of a zero mean gradient) is "—"
in the text and null in the JSON, with its reason (a note line under the table; the JSON's "notes").

Subcommands (``train``, ``inspect``) reuse the pieces::

    parser = ToylabParser(prog="python -m toylab train", description="…")
    add_toy_arguments(parser)          # --T --V --mismatch --seed --baseline --set, with the page's ranges
    add_batch_size_argument(parser)    # --N
    arguments = validate_toy_arguments(parser, parser.parse_args(argv))   # size limit; .selection from --set
"""

import argparse
import json
import math
import sys

from toylab.diagnostics import diagnostics
from toylab.estimators import BASELINES, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.moments import exact_table
from toylab.query import DEFAULTS, INTEGER_RANGES, MISMATCH_RANGE, parse_number, size_problem
from toylab.text import UNDEFINED, listed, quoted
from toylab.toy import make_toy

DEFAULT_IDS = tuple(id for id in EXACT_IDS if id not in PRESET_IDS)
COLUMNS = [("rel_bias", "rel bias", "{:.4f}"), ("rel_std", "rel std", "{:.4f}"), ("rel_rmse", "rel RMSE", "{:.4f}"),
           ("cosine", "cosine", "{:+.4f}"), ("tokens_affected", "tokens hit", "{:.2%}"),
           ("sequences_affected", "seqs hit", "{:.2%}")]
MESSAGE_LIMIT = 400                 # characters of an error line


class ToylabParser(argparse.ArgumentParser):
    """argparse whose every error is one line on stderr, ``toylab: error: …``, with exit status 2."""

    def error(self, message):
        text = " ".join(message.split())
        self.exit(2, f"toylab: error: {text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + '…'}\n")

    def parse_args(self, args=None, namespace=None):
        arguments, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized argument{'s' if len(extra) > 1 else ''} {listed(extra)}")
        return arguments


def number_in(kind, low, high):
    """An argparse ``type``: the ``kind`` (int or float) number in [low, high], read as the page reads the URL
    (``query.parse_number``: "1e1" is 10, "1e9" is out of range, "nan" is refused) in O(1)."""
    def parse(raw):
        try:
            return parse_number(raw, kind, low, high)
        except ValueError as why:
            raise argparse.ArgumentTypeError(f"{quoted(raw)} {why}") from None
    return parse


def one_of(choices):
    """An argparse ``type``: one of ``choices``, the refused value quoted."""
    def parse(raw):
        if raw not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice {quoted(raw)} (choose from {', '.join(choices)})")
        return raw
    return parse


def add_toy_arguments(parser):
    """--T, --V, --mismatch, --seed, --baseline and --set (repeatable), with the page's ranges and defaults."""
    for name, help in (("T", "tokens per sequence"), ("V", "vocabulary size"), ("seed", "seed of θ and b")):
        low, high = INTEGER_RANGES[name]
        parser.add_argument(f"--{name}", type=number_in(int, low, high), default=getattr(DEFAULTS, name),
                            help=f"{help}, {low} to {high:,} (default {getattr(DEFAULTS, name)})")
    parser.add_argument("--mismatch", type=number_in(float, *MISMATCH_RANGE), default=DEFAULTS.mismatch,
                        help="sampler logit error scale, {:g} to {:g} (default {:g})".format(*MISMATCH_RANGE,
                                                                                           DEFAULTS.mismatch))
    parser.add_argument("--baseline", type=one_of(BASELINES), default=DEFAULTS.baseline,
                        metavar="{" + ",".join(BASELINES) + "}", help="b: 0, E_μ[r] or J")
    parser.add_argument("--set", action="append", default=[], metavar="ID.PARAM=VALUE",
                        help="override a threshold, e.g. --set tok_tis.C=3 (repeatable; the page's ranges)")


def add_batch_size_argument(parser):
    """--N, the batch size, with the page's range."""
    low, high = INTEGER_RANGES["N"]
    parser.add_argument("--N", type=number_in(int, low, high), default=DEFAULTS.N,
                        help=f"batch size for rel std and rel RMSE, {low} to {high:,} (default {DEFAULTS.N})")


def validate_toy_arguments(parser, arguments, ids=DEFAULT_IDS):
    """The checks that need several options, as one-line errors: the toy's size (M = V**T within the page's
    limit, decided in logarithms) and every --set. Adds ``arguments.selection``: {id: params} for the
    estimators ``ids``, --set applied."""
    problem = size_problem(arguments.T, arguments.V)
    if problem:
        parser.error(problem)
    try:
        arguments.selection = selection_from_overrides(arguments.set, ids)
    except ValueError as error:
        parser.error(str(error))
    return arguments


def table_ids(listed):
    """The ids of ``--estimators ID,...`` (checked), or the default table."""
    if listed is None:
        return DEFAULT_IDS
    ids = [id.strip() for id in listed.split(",") if id.strip()]
    for id in ids:
        if id not in EXACT_IDS:
            raise ValueError(f"--estimators: {quoted(id)} is not an exact estimator (known: {', '.join(EXACT_IDS)})")
    return tuple(dict.fromkeys(ids))


def selection_from_overrides(assignments, ids=DEFAULT_IDS):
    """{id: params} for the estimators ``ids``, with ``ID.PARAM=VALUE`` overrides applied and checked."""
    overrides = {id: {} for id in ids}
    for assignment in assignments:
        target, equals, value = assignment.partition("=")
        estimator_id, dot, name = target.partition(".")
        if not equals or not dot:
            raise ValueError(f"--set expects ID.PARAM=VALUE, got {quoted(assignment)}")
        if estimator_id not in overrides:
            resolve_params(estimator_id)                           # an unknown id: the registry says so
            kind = "" if estimator_id in EXACT_IDS else " (it is batch-coupled: Monte Carlo only)"
            raise ValueError(f"--set {target}: {estimator_id} is not among the estimators{kind}; name it with "
                             "--estimators")
        overrides[estimator_id][name] = value
    return {id: resolve_params(id, params) for id, params in overrides.items()}


def table_parser():
    parser = ToylabParser(prog="python -m toylab", description=__doc__.splitlines()[0])
    add_toy_arguments(parser)
    add_batch_size_argument(parser)
    parser.add_argument("--estimators", metavar="ID,...",
                        help="the exact estimators to show, presets included (default: all but the presets)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def report(arguments):
    """The result as plain data: the toy's numbers, one row per estimator (cosine None when undefined), and
    "notes": 'id: why' for each undefined number."""
    toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed)
    population = diagnostics(toy)
    rows = exact_table(toy, arguments.selection, arguments.baseline, arguments.N)
    notes = [f"{row['estimator']}: {row['note']}" for row in rows if row["note"]]
    return {
        "toy": {"T": toy.T, "V": toy.V, "M": toy.M, "mismatch": toy.mismatch, "seed": toy.seed,
                "J": population.J, "logged_reward": population.logged_reward,
                "grad_norm": population.grad_norm, "kl_mu_pi": population.kl_mu_pi,
                "kl_pi_mu": population.kl_pi_mu, "chi2_seq": population.chi2_seq, "ess": population.ess},
        "N": arguments.N, "baseline": arguments.baseline,
        "estimators": [{"name": row.pop("estimator"), **{key: value for key, value in row.items() if key != "note"}}
                       for row in rows],
        "notes": notes,
    }


def as_text(result):
    toy = result["toy"]
    lines = [f"T={toy['T']} V={toy['V']} M={toy['M']:,} mismatch={toy['mismatch']:g} seed={toy['seed']}   "
             f"J={toy['J']:.5f}  E_mu[r]={toy['logged_reward']:.5f}  |grad J|={toy['grad_norm']:.5f}  "
             f"KL(mu||pi)={toy['kl_mu_pi']:.4f}  chi2_seq={toy['chi2_seq']:.4f}  ESS={toy['ess']:.3f}",
             f"batch size N={result['N']}, baseline={result['baseline']}", ""]
    name_width = max(len(row["name"]) for row in result["estimators"]) + 2
    lines.append("estimator".ljust(name_width) + "".join(f"{title:>11}" for _, title, _ in COLUMNS) + "  unbiased")
    for row in result["estimators"]:
        cells = "".join(f"{UNDEFINED if row[key] is None else style.format(row[key]):>11}" for key, _, style in COLUMNS)
        lines.append(row["name"].ljust(name_width) + cells + ("  yes" if row["unbiased"] else "  no"))
    return "\n".join(lines + [""] * bool(result["notes"]) + [f"{UNDEFINED} {note}" for note in result["notes"]])


def json_text(result):
    """One JSON object; a non-finite float (an undefined value, explained in the result's "notes") is null."""
    return json.dumps(_finite_or_null(result), allow_nan=False)


def _finite_or_null(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(item) for item in value]
    return value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        from toylab.train_cli import main as train_main  # here: train_cli imports this module
        return train_main(argv[1:])
    if argv[:1] == ["inspect"]:
        from toylab.inspect_cli import main as inspect  # it imports this module
        return inspect(argv[1:])
    parser = table_parser()
    arguments = parser.parse_args(argv)
    try:
        ids = table_ids(arguments.estimators)
    except ValueError as error:
        parser.error(str(error))
    arguments = validate_toy_arguments(parser, arguments, ids)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json_text(result) if arguments.json else as_text(result))
    return 0
