"""``python -m toylab inspect FILE``: a rollout log's sample statistics and the toy that matches it; or a run's steps.

One parser serves both forms: a directory, a zip or several files (or --workers, --scheduler) make a run, read
step by step by ``inspect_run``; a path that does not exist is reported before any option is judged. Every number from the file is a sample estimate printed with its standard error; the matched toy's numbers
are exact. A bad file or argument, or a file over the bounds (``your_run.bounds``), prints one line,
``toylab: error: ...``, and exits with status 2.
"""

import argparse
import os
import sys

from toylab.cli import inspect_run
from toylab.cli.arguments import (
    ToylabParser,
    add_sampler_arguments,
    chosen_ids,
    json_text,
    number_in,
    program,
    sampler_of,
    selection_from_overrides,
)
from toylab.presentation.estimates import record_text, with_se
from toylab.presentation.pipeline_text import signature_text
from toylab.presentation.run_verdict import comparison
from toylab.state.query import INTEGER_RANGES, parse_number, size_problem
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.text import UNDEFINED, percent, printable, quoted, significant
from toylab.your_run.applied import FEW_WEIGHTS, UNRELIABLE, on_log, reward_estimates
from toylab.your_run.bounds import CLI_BOUNDS, LOG_RATIO_LIMIT, REWARD_LIMIT
from toylab.your_run.dumps import with_commands_apart
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import match_toy, matched_length, matching_estimate
from toylab.your_run.parity import by_framework, framework_metrics
from toylab.your_run.run import RunFile, load_file
from toylab.your_run.signature import logging_signature
from toylab.your_run.statistics import SINGLE_SEQUENCE, STANDARD_ERRORS, TAIL_THRESHOLDS, log_statistics
from toylab.your_run.suggestions import suggestions

ROLES = ("sampler", "trainer", "mask", "reward", "advantage", "sequence_id", "position")
BOUNDS_HELP = "\n".join(["bounds, checked while reading (a file over one is refused in one line):",
                         *(f"  {line}" for line in CLI_BOUNDS.lines()),
                         f"  |log π − log μ| of a response token: {LOG_RATIO_LIMIT:g}; |reward|: {REWARD_LIMIT:g}",
                         "  (1 MB = 1,000,000 bytes)"])


DESCRIPTION = ("One rollout log's sample statistics, the estimators applied to it and the toy that matches it;\n"
               "or a run's steps, each a sample, and the metrics that left their early range.")
FILE_ONLY = ("advantage", "T", "V", "seed", "top_p", "top_k", "temperature", "precision", "logged", "scored",
             "pipeline")                       # what one log file's report reads: its advantages and its matched toy


def inspect_parser():
    """The one parser of both forms: one log file's options, a run's, and those they share."""
    parser = ToylabParser(prog=program("inspect"), description=DESCRIPTION, epilog=BOUNDS_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", metavar="FILE", nargs="+",
                        help=f"one rollout log: Parquet, JSONL or CSV (text ones may be .gz), at most "
                             f"{CLI_BOUNDS.amount('file_bytes')}; or a run, read step by step: {inspect_run.RUN_FORMS}")
    for role in ROLES:
        parser.add_argument(f"--{role.replace('_', '-')}", metavar="COL", help=f"the column holding the {role} "
                            "(default: recognised by name)" + ("; one log file only" if role == "advantage" else ""))
    parser.add_argument("--estimators", default=",".join(DEFAULT_ESTIMATORS), metavar="ID,ID,…",
                        help="the estimators to apply to the log or to each step (default: the page's selection, "
                             f"{', '.join(DEFAULT_ESTIMATORS)})")
    parser.add_argument("--set", action="append", default=[], metavar="ID.PARAM=VALUE",
                        help="override a threshold of a chosen estimator, e.g. --set tok_tis.C=3 (repeatable; "
                             "default: the estimator's own)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    toy = parser.add_argument_group("one log file: the toy matched to it (exact numbers beside the file's)")
    toy.add_argument("--T", default="6", help="tokens of the matched toy, or 'data' for the log's mean length "
                                              "capped at the page's limit (default 6)")
    toy.add_argument("--V", type=number_in(int, *INTEGER_RANGES["V"]), default=4,
                     help="vocabulary size of the matched toy (default 4)")
    toy.add_argument("--seed", type=number_in(int, *INTEGER_RANGES["seed"]), default=0,
                     help="seed of the matched toy (default 0)")
    add_sampler_arguments(toy)
    inspect_run.add_run_arguments(parser.add_argument_group("a run (a directory, a zip, or several files)"))
    return parser


def parse_arguments(argv):
    """The parsed arguments, with ``run``: whether they name a run (``inspect_run``) or one log file (``file``).
    A path that does not exist is the first error, before any option is judged against the form."""
    parser = inspect_parser()
    arguments = parser.parse_args(argv)
    missing = next((path for path in arguments.paths if not os.path.exists(path)), None)
    if missing is not None:
        parser.error(f"{missing}: no such file or directory")
    given = [name for name in vars(arguments) if getattr(arguments, name) != parser.get_default(name)]
    arguments.run = inspect_run.is_run(arguments.paths)
    misplaced = [name for name in (FILE_ONLY if arguments.run else inspect_run.RUN_ONLY) if name in given]
    if misplaced:
        options = " ".join(f"--{name.replace('_', '-')}" for name in misplaced)
        parser.error(f"{options}: {'one log file' if arguments.run else 'a run'}'s option{'s' * (len(misplaced) > 1)}"
                     f"; {' '.join(arguments.paths)} is {'a run, read step by step' if arguments.run else 'one log file'}")
    if arguments.run:
        inspect_run.check_run_arguments(parser, arguments)
    else:
        _check_file_arguments(parser, arguments)
    return parser, arguments


def _check_file_arguments(parser, arguments):
    """One log file's arguments: ``file``, the sampler model, the matched toy's size and the estimators."""
    arguments.file = arguments.paths[0]
    arguments.sampler_model = sampler_of(parser, arguments)
    try:
        _check_toy_arguments(arguments)
        arguments.selection = selection_from_overrides(arguments.set, chosen_ids(arguments.estimators))
    except ValueError as error:
        parser.error(str(error))


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
    log = load_file(RunFile(arguments.file, None, None, path=arguments.file), bounds=CLI_BOUNDS, allow_torch=True,
                    **explicit)[0]
    statistics = log_statistics(log)
    sizes = magnitudes(log)
    T = matched_length(statistics.mean_length.value, arguments.V) if arguments.T == "data" else arguments.T
    matched_on, kl = matching_estimate(statistics)
    match = match_toy(kl, T, arguments.V, arguments.seed, sampler=arguments.sampler_model, statistic=matched_on)
    signature = logging_signature(sizes.identity)
    result = {
        "file": log.name, "shape": log.columns.shape, "columns": log.columns.roles(),
        "sequences": statistics.sequences, "tokens": statistics.tokens,
        "sequences_without_response_tokens": statistics.dropped,
        "mean_length": statistics.mean_length.as_dict(),
        "k1": statistics.k1.as_dict(), "k3": statistics.k3.as_dict(),
        "chi2_token": statistics.chi2_token.as_dict(), "chi2_low_variance": sizes.chi2_low_variance.as_dict(),
        "identity_mean_rho_minus_1": sizes.identity.as_dict(),
        "tail_shares": [{"threshold": c, **statistics.tail_shares[c].as_dict()} for c in TAIL_THRESHOLDS],
        "abs_log_rho_quantiles": sizes.abs_log_rho_quantiles, "min_rho": sizes.min_rho, "max_rho": sizes.max_rho,
        "worst_tokens": sizes.worst_tokens, "worst_sequences": sizes.worst_sequences,
        "log_W": statistics.log_W.as_dict(), "log_rho_geo": statistics.log_rho_geo.as_dict(),
        "ess_fraction": statistics.ess_fraction,
        "mean_reward": None if statistics.mean_reward is None else statistics.mean_reward.as_dict(),
        "standard_errors": STANDARD_ERRORS,
        "matched_toy": {**match.as_dict(), "matched_on": matched_on, "summary": comparison(match, statistics, sizes)},
        "estimators": [row.as_dict() for row in on_log(log, arguments.selection)],
        "threshold_suggestions": suggestions(log, arguments.selection),
        "reward_estimates": None if log.rewards is None else reward_estimates(log).as_dict(),
        "advantages": "the log's own" if log.rewards is None and log.advantages is not None else
                      "r − mean(r)" if log.rewards is not None else None,
        "frameworks": by_framework(framework_metrics(log)),
        "logging_signature": signature.as_dict(),
        "notices": list(log.notices) + ([signature_text(signature, "cli").removesuffix(".")]   # a notice: no period
                                        if signature.verdict in ("raw", "truncated") else []),
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
    """The report as text: the file, the sample estimates, the extremes, the estimators, the thresholds, the
    frameworks' metrics, the matched toy and the notes, each a section."""
    sections = (_file_lines, _estimate_lines, _extreme_lines, _estimator_lines, _suggestion_lines, _framework_lines,
                _match_lines)
    return "\n".join(line for section in sections for line in section(result))


def _file_lines(result):
    columns = ", ".join(f"{role} {quoted(column)}" for role, column in result["columns"].items())
    shape = "a row per sequence" if result["shape"] == "sequence" else "a row per token"
    lines = [f"{result['file']}: {shape}; {columns}",
             f"{result['sequences']:,} sequences, {result['tokens']:,} response tokens, mean length "
             f"{record_text(result['mean_length'])}"
             + (f" ({result['sequences_without_response_tokens']:,} sequences without response tokens left out)"
                if result["sequences_without_response_tokens"] else "")]
    return lines + [f"Notice: {notice}." for notice in result["notices"]]


def _estimate_lines(result):
    lines = ["", f"Sample estimates ± {STANDARD_ERRORS}:",
             f"  k1 = mean(log μ − log π)   {record_text(result['k1'])}   per-token KL(μ‖π)",
             f"  k3 = mean(ρ − 1 − log ρ)   {record_text(result['k3'])}   per-token KL(μ‖π), low variance",
             f"  χ² = mean((ρ − 1)²)        {record_text(result['chi2_low_variance'])}   per-token χ², low variance",
             f"  χ² = mean(ρ²) − 1          {record_text(result['chi2_token'])}",
             f"  mean ρ − 1                 {record_text(result['identity_mean_rho_minus_1'])}   0 if μ is what was sampled"]
    lines += [f"  share |log ρ| > {row['threshold']:<6g}    {percent(row['value'])} ± {percent(row['se'], 2)}"
              for row in result["tail_shares"]]
    quantiles = result["abs_log_rho_quantiles"]
    lines.append("  |log ρ|: " + ", ".join(f"{name} {significant(value)}" for name, value in quantiles.items())
                 + f"; smallest ρ {significant(result['min_rho'])}, largest ρ {significant(result['max_rho'])}")
    for name, key in (("log W", "log_W"), ("log ρ_geo", "log_rho_geo")):
        spread = result[key]
        values = " ".join(significant(value) for value in spread["quantiles"].values())
        lines.append(f"  {name}: mean {record_text(spread['mean'])}, sd {significant(spread['sd'])}, 5/25/50/75/95 %: "
                     f"{values}, range {significant(spread['min'])} to {significant(spread['max'])}")
    lines.append(f"  ESS fraction of these {result['sequences']:,} sequence weights: {percent(result['ess_fraction'])}")
    return lines + _reward_lines(result)


def _reward_lines(result):
    lines = [f"  mean reward E_μ[r]: {record_text(result['mean_reward'])}"] if result["mean_reward"] is not None else []
    rewards = result["reward_estimates"]
    if rewards is not None:
        lines.append(f"  J = E_π[r] by seq_is: {record_text(rewards['seq_is']) if rewards['seq_is'] else UNDEFINED},  "
                     f"by self-normalised IS: {record_text(rewards['snis'])}")
        if result["ess_fraction"] < FEW_WEIGHTS:
            lines.append("  " + UNRELIABLE.format(result["ess_fraction"]))
    return lines


def _extreme_lines(result):
    lines = ["", "The most extreme tokens (position in the response, μ and π of the token, log ρ):"]
    lines += [f"  row {row['row']}, position {row['position']}: μ {significant(row['sampler_probability'])}, π "
              f"{significant(row['trainer_probability'])}, log ρ {significant(row['log_rho'])}"
              for row in result["worst_tokens"][:5]]
    lines += ["The most extreme sequences (by |log W|):"]
    return lines + [f"  row {row['row']}: {row['length']:,} tokens, log W {significant(row['log_W'])}, largest |log ρ| "
                    f"{significant(row['max_abs_log_rho'])}" for row in result["worst_sequences"][:5]]


def _estimator_lines(result):
    lines = ["", "What each estimator does to these sequences (shares of this log, not probabilities):",
             f"  {'estimator':<28}{'tokens hit':>12}{'seqs hit':>11}{'weight mean':>13}{'sd':>10}{'ESS':>9}"]
    for row in result["estimators"]:
        if row["note"] and row["tokens_affected"] is not None:
            lines.append(f"  {row['name']:<28}{percent(row['tokens_affected']):>12}{percent(row['sequences_affected']):>11}"
                         f"  {UNDEFINED} {row['note']}")
        elif row["note"]:
            lines.append(f"  {row['name']:<28}{UNDEFINED} {row['note']}")
        else:
            lines.append(f"  {row['name']:<28}{percent(row['tokens_affected']):>12}{percent(row['sequences_affected']):>11}"
                         f"{significant(row['weight_mean'], 4):>13}{significant(row['weight_sd']):>10}"
                         f"{percent(row['ess_fraction']):>9}")
    if result["advantages"] == "the log's own":
        lines.append("  (the estimators that read the advantage use the log's own advantages: it has no reward)")
    return lines


def _suggestion_lines(result):
    if not result["threshold_suggestions"]:
        return []
    lines = ["", "Thresholds that would touch 0.1 % / 1 % / 10 % of this log (* outside the estimator's range):"]
    for row in result["threshold_suggestions"]:
        at = " / ".join(significant(point["value"], 4) + ("" if point["in_range"] else "*") for point in row["at"])
        lines.append(f"  {row['estimator']}.{row['parameter']} (now {significant(row['current'])}; "
                     f"{row['counts']}, {row['side']}): {at}")
    return lines


def _framework_lines(result):
    lines = ["", "The frameworks' own metrics on this log (the JSON's \"frameworks\" has them all):"]
    for framework, rows in result["frameworks"].items():
        shown = [f"{row['name']} {with_se(row['value'], row.get('se'))}"
                 for row in rows if row["value"] is not None][:4]
        lines.append(f"  {framework}: " + "; ".join(shown))
    return lines


def _match_lines(result):
    match = result["matched_toy"]
    lines = ["", f"Matched toy (exact), on {match['matched_on']}: T={match['T']} V={match['V']} seed={match['seed']} "
                 f"mismatch={significant(match['mismatch'], 4)} ± {significant(match['mismatch_se'], 2)}"]
    lines += [f"  {sentence}" for sentence in match["summary"]]
    if result["notes"]:
        lines += ["", "Notes (why a value is —):"] + [f"  {note}" for note in result["notes"]]
    return lines


def main(argv=None):
    parser, arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    command = inspect_run if arguments.run else sys.modules[__name__]
    try:
        result = command.report(arguments)
    except (ValueError, OSError, MemoryError) as error:
        if isinstance(error, MemoryError):
            parser.error(f"out of memory: the {'run' if arguments.run else 'log'} is too large")
        parser.error(*with_commands_apart(str(error)))
    print(json_text(result) if arguments.json else printable(command.as_text(result)))
    return 0
