"""``python -m toylab inspect FILE``: a rollout log's sample statistics and the toy that matches it.

Every number from the file is a sample estimate printed with its standard error; the matched toy's numbers
are exact. A bad file or argument, or a file over the bounds (``your_run.bounds``), prints one line,
``toylab: error: ...``, and exits with status 2.
"""

import argparse
import sys

from toylab.cli.arguments import (
    ToylabParser,
    chosen_ids,
    json_text,
    number_in,
    selection_from_overrides,
)
from toylab.state.query import INTEGER_RANGES, parse_number, size_problem
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.text import UNDEFINED, quoted
from toylab.your_run.applied import FEW_WEIGHTS, UNRELIABLE, on_log, reward_estimates
from toylab.your_run.bounds import CLI_BOUNDS, LOG_RATIO_LIMIT, REWARD_LIMIT
from toylab.your_run.log import load_log
from toylab.your_run.matching import comparison, match_toy, matched_length
from toylab.your_run.statistics import SINGLE_SEQUENCE, STANDARD_ERRORS, TAIL_THRESHOLDS, log_statistics

ROLES = ("sampler", "trainer", "mask", "reward", "sequence_id", "position")
BOUNDS_HELP = "\n".join(["bounds, checked while reading (a file over one is refused in one line):",
                         *(f"  {line}" for line in CLI_BOUNDS.lines()),
                         f"  |log π − log μ| of a response token: {LOG_RATIO_LIMIT:g}; |reward|: {REWARD_LIMIT:g}",
                         "  (1 MB = 1,000,000 bytes)"])


def parse_arguments(argv):
    parser = ToylabParser(prog="python -m toylab inspect", description=__doc__.splitlines()[0], epilog=BOUNDS_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help=f"Parquet, JSONL or CSV (text ones may be .gz), at most "
                                                     f"{CLI_BOUNDS.amount('file_bytes')}")
    for role in ROLES:
        parser.add_argument(f"--{role.replace('_', '-')}", metavar="COL", help=f"the column holding the {role} "
                            "(default: recognised by name)")
    parser.add_argument("--T", default="6", help="tokens of the matched toy, or 'data' for the log's mean length "
                                                 "capped at the page's limit (default 6)")
    parser.add_argument("--V", type=number_in(int, *INTEGER_RANGES["V"]), default=4,
                        help="vocabulary size of the matched toy")
    parser.add_argument("--seed", type=number_in(int, *INTEGER_RANGES["seed"]), default=0,
                        help="seed of the matched toy")
    parser.add_argument("--estimators", default=",".join(DEFAULT_ESTIMATORS), metavar="ID,ID,…",
                        help="the estimators to apply to the log (default: the page's default selection)")
    parser.add_argument("--set", action="append", default=[], metavar="ID.PARAM=VALUE",
                        help="override a threshold of a chosen estimator, e.g. --set tok_tis.C=3 (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    arguments = parser.parse_args(argv)
    try:
        _check_toy_arguments(arguments)
        arguments.selection = selection_from_overrides(arguments.set, chosen_ids(arguments.estimators))
    except ValueError as error:
        parser.error(str(error))
    return parser, arguments


def _check_toy_arguments(arguments):
    if arguments.T != "data":
        try:
            arguments.T = parse_number(arguments.T, int, *INTEGER_RANGES["T"])
        except ValueError as why:
            raise ValueError(f"--T: {quoted(arguments.T)} {why} (or 'data')") from None
        problem = size_problem(arguments.T, arguments.V)
        if problem:
            raise ValueError(problem)


def report(arguments):
    explicit = {role: getattr(arguments, role) for role in ROLES}
    log = load_log(arguments.file, bounds=CLI_BOUNDS, **explicit)
    statistics = log_statistics(log)
    T = matched_length(statistics.mean_length.value, arguments.V) if arguments.T == "data" else arguments.T
    match = match_toy(statistics.k1, T, arguments.V, arguments.seed)
    result = {
        "file": log.name, "shape": log.columns.shape, "columns": log.columns.roles(),
        "sequences": statistics.sequences, "tokens": statistics.tokens,
        "sequences_without_response_tokens": statistics.dropped,
        "mean_length": statistics.mean_length.as_dict(),
        "k1": statistics.k1.as_dict(), "k3": statistics.k3.as_dict(),
        "chi2_token": statistics.chi2_token.as_dict(),
        "tail_shares": [{"threshold": c, **statistics.tail_shares[c].as_dict()} for c in TAIL_THRESHOLDS],
        "log_W": statistics.log_W.as_dict(), "log_rho_geo": statistics.log_rho_geo.as_dict(),
        "ess_fraction": statistics.ess_fraction,
        "mean_reward": None if statistics.mean_reward is None else statistics.mean_reward.as_dict(),
        "standard_errors": STANDARD_ERRORS,
        "matched_toy": {**match.as_dict(), "summary": comparison(match, statistics)},
        "estimators": [row.as_dict() for row in on_log(log, arguments.selection)],
        "reward_estimates": None if log.rewards is None else reward_estimates(log).as_dict(),
    }
    result["notes"] = _notes(result)
    return result


def _notes(result):
    """Why a value is null: standard errors need two sequences; a clamped match has no mismatch se."""
    notes = []
    if result["sequences"] < 2:
        notes.append(f"standard errors, spreads and matched_toy.mismatch_se are null: {SINGLE_SEQUENCE}")
    if result["mean_reward"] is None:
        notes.append("mean_reward is null: the log has no reward column")
    notes += [f"{row['name']}: its {'weights are' if row['tokens_affected'] is not None else 'shares and weights are'} "
              f"null: {row['note']}" for row in result["estimators"] if row["note"]]
    if result["reward_estimates"] is None:
        notes.append("reward_estimates is null: the log has no reward column")
    elif result["reward_estimates"]["seq_is"] is None:
        notes.append("reward_estimates.seq_is is null: its mean or standard error is beyond float64 (the sequence "
                     "weights W reach e^709)")
    if result["ess_fraction"] < FEW_WEIGHTS:
        notes.append(UNRELIABLE.format(result["ess_fraction"]))
    clamped = result["matched_toy"]["clamped"]
    if clamped:
        notes.append(f"matched_toy.mismatch_se is null: the match is clamped at the range's "
                     f"{'bottom (k1 ≤ 0)' if clamped == 'zero' else 'top (k1 above the toy’s largest KL)'}")
    return notes


def as_text(result):
    columns = ", ".join(f"{role} {quoted(column)}" for role, column in result["columns"].items())
    shape = "a row per sequence" if result["shape"] == "sequence" else "a row per token"
    lines = [f"{result['file']}: {shape}; {columns}",
             f"{result['sequences']:,} sequences, {result['tokens']:,} response tokens, mean length "
             f"{_pm(result['mean_length'], '{:.1f}')}"
             + (f" ({result['sequences_without_response_tokens']:,} sequences without response tokens left out)"
                if result["sequences_without_response_tokens"] else ""),
             "", f"Sample estimates ± {STANDARD_ERRORS}:",
             f"  k1 = mean(log μ − log π)   {_pm(result['k1'], '{:.4f}')}   per-token KL(μ‖π)",
             f"  k3 = mean(ρ − 1 − log ρ)   {_pm(result['k3'], '{:.4f}')}   per-token KL(μ‖π)",
             f"  χ²_token = mean(ρ²) − 1    {_pm(result['chi2_token'], '{:.4g}')}"]
    lines += [f"  share |log ρ| > {row['threshold']:<4g}      {_pm(row, '{:.2%}')}" for row in result["tail_shares"]]
    for name, key in (("log W", "log_W"), ("log ρ_geo", "log_rho_geo")):
        spread = result[key]
        quantiles = " ".join(f"{value:.3g}" for value in spread["quantiles"].values())
        lines.append(f"  {name}: mean {_pm(spread['mean'], '{:.4g}')}, sd {_number(spread['sd'], '{:.3g}')}, "
                     f"5/25/50/75/95 %: {quantiles}, range {spread['min']:.3g} to {spread['max']:.3g}")
    lines.append(f"  ESS fraction of these {result['sequences']:,} sequence weights: {result['ess_fraction']:.2%}")
    if result["mean_reward"] is not None:
        lines.append(f"  mean reward E_μ[r]: {_pm(result['mean_reward'], '{:.4f}')}")
    rewards = result["reward_estimates"]
    if rewards is not None:
        lines.append(f"  J = E_π[r] by seq_is: {_pm(rewards['seq_is'], '{:.4f}') if rewards['seq_is'] else '—'},  "
                     f"by self-normalised IS: {_pm(rewards['snis'], '{:.4f}')}")
        if result["ess_fraction"] < FEW_WEIGHTS:
            lines.append("  " + UNRELIABLE.format(result["ess_fraction"]))
    lines += ["", "What each estimator does to these sequences (shares of this log, not probabilities):",
              f"  {'estimator':<28}{'tokens hit':>11}{'seqs hit':>10}{'weight mean':>13}{'sd':>9}{'ESS':>8}"]
    for row in result["estimators"]:
        if row["note"] and row["tokens_affected"] is not None:
            lines.append(f"  {row['name']:<28}{row['tokens_affected']:>11.2%}{row['sequences_affected']:>10.2%}  "
                         f"{UNDEFINED} {row['note']}")
        elif row["note"]:
            lines.append(f"  {row['name']:<28}{UNDEFINED} {row['note']}")
        else:
            lines.append(f"  {row['name']:<28}{row['tokens_affected']:>11.2%}{row['sequences_affected']:>10.2%}"
                         f"{row['weight_mean']:>13.4g}{row['weight_sd']:>9.3g}{row['ess_fraction']:>8.1%}")
    match = result["matched_toy"]
    lines += ["", f"Matched toy (exact): T={match['T']} V={match['V']} seed={match['seed']} "
                  f"mismatch={match['mismatch']:.4f} ± {_number(match['mismatch_se'], '{:.4f}')}"]
    lines += [f"  {sentence}" for sentence in match["summary"]]
    if result["notes"]:
        lines += ["", "Notes (why a value is —):"] + [f"  {note}" for note in result["notes"]]
    return "\n".join(lines)


def _pm(estimate, style):
    return f"{style.format(estimate['value'])} ± {_number(estimate['se'], style)}"


def _number(value, style):
    return UNDEFINED if value is None else style.format(value)


def main(argv=None):
    parser, arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    try:
        result = report(arguments)
    except (ValueError, MemoryError) as error:
        parser.error(str(error) if isinstance(error, ValueError) else "out of memory: the log is too large")
    print(json_text(result) if arguments.json else as_text(result))
    return 0
