"""``python -m toylab``: the exact table of every exact estimator on one toy, as text or JSON.

The framework presets (verl:…, trl:…) are left out unless named with ``--estimators``.

A bad argument prints one line, ``toylab: error: ...``, and exits with status 2.
"""

import argparse
import json
import math
import sys

from toylab.diagnostics import diagnostics
from toylab.estimators import BASELINES, ESTIMATORS, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.moments import exact_table
from toylab.toy import make_toy

DEFAULT_IDS = tuple(id for id in EXACT_IDS if id not in PRESET_IDS)
COLUMNS = [("rel_bias", "rel bias", "{:.4f}"), ("rel_std", "rel std", "{:.4f}"), ("rel_rmse", "rel RMSE", "{:.4f}"),
           ("cosine", "cosine", "{:+.4f}"), ("tokens_affected", "tokens hit", "{:.2%}"),
           ("sequences_affected", "seqs hit", "{:.2%}")]


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"toylab: error: {message}\n")


def parse_arguments(argv):
    parser = OneLineParser(prog="python -m toylab", description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=6, help="tokens per sequence")
    parser.add_argument("--V", type=int, default=4, help="vocabulary size")
    parser.add_argument("--mismatch", type=float, default=0.3, help="sampler logit error scale")
    parser.add_argument("--seed", type=int, default=0, help="seed of θ and b")
    parser.add_argument("--N", type=int, default=64, help="batch size for rel std and rel RMSE")
    parser.add_argument("--baseline", choices=BASELINES, default="none", help="b: 0, E_μ[r] or J")
    parser.add_argument("--set", action="append", default=[], metavar="ID.PARAM=VALUE",
                        help="override a threshold, e.g. --set tok_tis.C=3 (repeatable)")
    parser.add_argument("--estimators", metavar="ID,...",
                        help="the exact estimators to show, presets included (default: all but the presets)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    arguments = parser.parse_args(argv)
    try:
        if arguments.N < 1:
            raise ValueError(f"N must be ≥ 1, got {arguments.N}")
        arguments.selection = selection_from_overrides(arguments.set, table_ids(arguments.estimators))
    except ValueError as error:
        parser.error(str(error))
    return parser, arguments


def table_ids(listed):
    """The ids of ``--estimators ID,...`` (checked), or the default table."""
    if listed is None:
        return DEFAULT_IDS
    ids = [id.strip() for id in listed.split(",") if id.strip()]
    for id in ids:
        if id not in EXACT_IDS:
            raise ValueError(f"--estimators: {id!r} is not an exact estimator (known: {', '.join(EXACT_IDS)})")
    return tuple(dict.fromkeys(ids))


def selection_from_overrides(assignments, ids=DEFAULT_IDS):
    """{id: params} for the table's estimators, with ``ID.PARAM=VALUE`` overrides applied and checked."""
    overrides = {id: {} for id in ids}
    for assignment in assignments:
        target, equals, value = assignment.partition("=")
        estimator_id, dot, name = target.partition(".")
        if not equals or not dot:
            raise ValueError(f"--set expects ID.PARAM=VALUE, got {assignment!r}")
        if estimator_id in ESTIMATORS and estimator_id not in EXACT_IDS:
            raise ValueError(f"{estimator_id} is batch-coupled (Monte Carlo only); the table shows exact estimators")
        resolve_params(estimator_id, {name: value})
        if estimator_id not in overrides:
            raise ValueError(f"--set {target}: {estimator_id} is not in the table (name it with --estimators)")
        overrides[estimator_id][name] = value
    return {id: resolve_params(id, params) for id, params in overrides.items()}


def report(arguments):
    toy = make_toy(arguments.T, arguments.V, arguments.mismatch, arguments.seed)
    population = diagnostics(toy)
    rows = exact_table(toy, arguments.selection, arguments.baseline, arguments.N)
    return {
        "toy": {"T": toy.T, "V": toy.V, "M": toy.M, "mismatch": toy.mismatch, "seed": toy.seed,
                "J": population.J, "logged_reward": population.logged_reward,
                "grad_norm": population.grad_norm, "kl_mu_pi": population.kl_mu_pi,
                "kl_pi_mu": population.kl_pi_mu, "chi2_seq": population.chi2_seq, "ess": population.ess},
        "N": arguments.N, "baseline": arguments.baseline,
        "estimators": [{"name": row.pop("estimator"), **row} for row in rows],
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
        cells = "".join(f"{_format(style, row[key]):>11}" for key, _, style in COLUMNS)
        lines.append(row["name"].ljust(name_width) + cells + ("  yes" if row["unbiased"] else "  no"))
    return "\n".join(lines)


def _format(style, value):
    return "nan" if isinstance(value, float) and math.isnan(value) else style.format(value)


def _json_safe(value):
    """NaN is not JSON: write null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        from toylab.train_cli import main as train_main  # here: train_cli imports this module
        return train_main(argv[1:])
    if argv[:1] == ["inspect"]:
        from toylab.inspect_cli import main as inspect  # it imports this module
        return inspect(argv[1:])
    parser, arguments = parse_arguments(argv)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: use a smaller toy")
    print(json.dumps(_json_safe(result)) if arguments.json else as_text(result))
    return 0
