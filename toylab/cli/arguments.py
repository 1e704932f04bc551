"""What every command line shares: one-line errors, the page's ranges as argument types, the toy's options.

A command builds its parser from these pieces::

    parser = ToylabParser(prog=program("train"), description="…")
    add_toy_arguments(parser)          # --T --V --mismatch --seed, the sampler's, --baseline --set: the page's ranges
    add_batch_size_argument(parser)    # --N
    arguments = validate_toy_arguments(parser, parser.parse_args(argv))   # size limit; .selection from --set

Every error is one line on stderr, ``toylab: error: …``, with exit status 2, before any work.
"""

import argparse
import json
import math
import sys
from pathlib import Path

from toylab.catalogue.estimators import BASELINES, EXACT_IDS, PRESET_IDS, resolve_params
from toylab.catalogue.pipelines import LOGGED, PIPELINE_IDS, PIPELINES, SCORED
from toylab.engine.sampler import PRECISIONS, TEMPERATURE_RANGE
from toylab.state.query import (
    DEFAULTS,
    INTEGER_RANGES,
    MISMATCH_RANGE,
    TOP_K_RANGE,
    TOP_P_RANGE,
    make_settings,
    parse_number,
    size_problem,
    toy_problem,
)
from toylab.text import listed, printable, quoted

DEFAULT_IDS = tuple(id for id in EXACT_IDS if id not in PRESET_IDS)
MESSAGE_LIMIT = 400                 # characters of an error line


def program(command=""):
    """How the user called the command, for its usage line: "toylab train" through the installed ``toylab`` command
    (sys.argv[0] is the script named toylab on the PATH), "python -m toylab train" otherwise (``python -m toylab``
    runs toylab/__main__.py; a notebook or a test calls ``main`` from Python)."""
    invoked = "toylab" if Path(sys.argv[0] if sys.argv else "").stem == "toylab" else "python -m toylab"
    return f"{invoked} {command}".strip()


class ToylabParser(argparse.ArgumentParser):
    """argparse whose every error is one line on stderr, ``toylab: error: …``, with exit status 2."""

    def error(self, message, commands=()):
        """Exit with the one-line error; ``commands`` (shell commands the message refers to, too long for the line)
        are printed first, whole, a line each. A file's name or text in them is shown, never acted on: control and
        bidirectional characters escaped (``text.printable``)."""
        for command in commands:
            self._print_message(printable(command) + "\n", sys.stderr)
        text = " ".join(printable(message).split())
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
    add_sampler_arguments(parser)
    parser.add_argument("--baseline", type=one_of(BASELINES), default=DEFAULTS.baseline,
                        metavar="{" + ",".join(BASELINES) + "}",
                        help=f"b: none (0), logged (E_μ[r]) or true (J) (default {DEFAULTS.baseline})")
    parser.add_argument("--set", action="append", default=[], metavar="ID.PARAM=VALUE",
                        help="override a threshold, e.g. --set tok_tis.C=3 (repeatable; the page's ranges; default: the "
                             "estimator's own)")


def add_sampler_arguments(parser):
    """--top-p, --top-k, --temperature, --precision: the sampler model (``engine.sampler``), the page's ranges."""
    parser.add_argument("--top-p", type=number_in(float, *TOP_P_RANGE), default=DEFAULTS.top_p,
                        help="the sampler keeps a token while the probability of the tokens strictly more likely is "
                             "below p, {:g} to {:g} (default {:g}: off)".format(*TOP_P_RANGE, DEFAULTS.top_p))
    parser.add_argument("--top-k", type=number_in(int, *TOP_K_RANGE), default=DEFAULTS.top_k,
                        help="the sampler keeps the k most likely tokens, 1 to V (default 0: off)")
    parser.add_argument("--temperature", type=number_in(float, *TEMPERATURE_RANGE), default=DEFAULTS.temperature,
                        help="the sampler's temperature τ, μ ∝ exp(z/τ), {:g} to {:g} (default {:g})".format(
                            *TEMPERATURE_RANGE, DEFAULTS.temperature))
    parser.add_argument("--precision", type=one_of(PRECISIONS), default=DEFAULTS.precision,
                        metavar="{" + ",".join(PRECISIONS) + "}",
                        help="the sampler's logits rounded to bf16 or fp16 through float32 (default none)")
    parser.add_argument("--logged", type=one_of(LOGGED), metavar="{" + ",".join(LOGGED) + "}",
                        help="what the engine logs as μ, the correction's denominator: processed (what it samples "
                             "from, the default), raw (before temperature and truncation: vLLM's default) or "
                             "temperature (no truncation: SGLang's default)")
    parser.add_argument("--scored", type=one_of(SCORED), metavar="{" + ",".join(SCORED) + "}",
                        help="what the trainer scores: plain softmax(θ) (the default), temperature softmax(θ/τ) or "
                             "keep_mask, softmax(θ/τ) over the sampler's kept tokens")
    parser.add_argument("--pipeline", type=one_of(PIPELINE_IDS), default=DEFAULTS.pipeline, metavar="ID",
                        help="a framework's pipeline, which sets --logged and --scored: "
                             + ", ".join(PIPELINES) + f" (default {DEFAULTS.pipeline})")


def sampler_of(parser, arguments):
    """The Sampler of --top-p, --top-k, --temperature, --precision and the pipeline (--logged, --scored or
    --pipeline), with top_k checked against --V and the pipeline's choices against --logged/--scored (one-line
    errors)."""
    given = {name: getattr(arguments, name) for name in ("logged", "scored") if getattr(arguments, name) is not None}
    settings = make_settings(V=arguments.V, top_p=arguments.top_p, top_k=arguments.top_k,
                             temperature=arguments.temperature, precision=arguments.precision,
                             pipeline=arguments.pipeline, **given)
    clashes = [f"--{name} {value}" for name, value in given.items() if getattr(settings, name) != value]
    if clashes:
        parser.error(f"--pipeline {arguments.pipeline} logs {settings.logged} and scores {settings.scored}; "
                     f"{' and '.join(clashes)} contradicts it (give one or the other)")
    try:
        settings.sampler.check_vocabulary(arguments.V)
    except ValueError as error:
        parser.error(f"--top-k: {error}")
    return settings.sampler


def add_batch_size_argument(parser):
    """--N, the batch size, with the page's range."""
    low, high = INTEGER_RANGES["N"]
    parser.add_argument("--N", type=number_in(int, low, high), default=DEFAULTS.N,
                        help=f"batch size for rel std and rel RMSE, {low} to {high:,} (default {DEFAULTS.N})")


def validate_toy_arguments(parser, arguments, ids=DEFAULT_IDS):
    """The checks that need several options, as one-line errors: the toy's size (M = V**T within the page's
    limit, decided in logarithms), top_k ≤ V, the sampler's W within float64 (``query.toy_problem``) and every
    --set. Adds ``arguments.sampler_model`` (the Sampler) and ``arguments.selection``: {id: params} for the estimators ``ids``, --set
    applied."""
    problem = size_problem(arguments.T, arguments.V)
    if problem:
        parser.error(problem)
    arguments.sampler_model = sampler_of(parser, arguments)
    problem = toy_problem(make_settings(arguments.T, arguments.V, arguments.mismatch, arguments.seed,
                                        **arguments.sampler_model.parameters()))
    if problem:
        parser.error(problem)
    try:
        arguments.selection = selection_from_overrides(arguments.set, ids)
    except ValueError as error:
        parser.error(str(error))
    return arguments


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


def chosen_ids(estimators):
    """The comma-separated estimator ids, each checked against the registry (batch-coupled ones included)."""
    ids = tuple(dict.fromkeys(id.strip() for id in estimators.split(",") if id.strip()))
    if not ids:
        raise ValueError("--estimators names no estimator")
    for id in ids:
        resolve_params(id)
    return ids


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
