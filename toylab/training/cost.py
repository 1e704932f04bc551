"""What a training run costs, estimated before it starts: its seconds and its peak memory.

Seconds, from rates measured on a 2-core machine (rough; the page refuses a run estimated over PAGE_SECONDS,
the command line over PAGE_SECONDS × COMMAND_LINE_FACTOR):

    expected mode:  (K + 1) · M · (estimators whose mean is enumerated, not factorised) · SECONDS_PER_ENUMERATED_STEP
    sampled mode:   (K + 1) · estimators · runs · N · SECONDS_PER_SAMPLED_SEQUENCE

Bytes, from the arrays the loop keeps and one step's temporaries (measured: about 9 float64 per sampled token
of a step, 5 per sequence of the toy in expected mode; the constants below leave a margin):

    records:     8 · estimators · runs · (K + 1) · (T·V + 8)       θ_k and the per-step numbers (runs = 1 expected)
    one step:    8 · FLOATS_PER_SAMPLED_TOKEN · runs · N · T         sampled mode
                 8 · FLOATS_PER_ENUMERATED_SEQUENCE · M             expected mode
    the start:   8 · FLOATS_PER_ENUMERATED_SEQUENCE · M             the toy's diagnostics at θ₀, summed over all M
                                                                     sequences before the run (its peak, not added)
    lists:       LISTED_BYTES_PER_VALUE · estimators · runs · (K + 1) · LISTS      the command line's per-step lists
                 of every run (Python floats in lists), built from the records, which are then freed
    JSON text:   JSON_BYTES_PER_VALUE · (the same count)           ``--json``: a second list, the text joined, encoded

    peak = BASE_BYTES (the interpreter, numpy and toylab) + the largest of: records + one step + lists, the start,
    lists + JSON text. Measured at T = 11, V = 4, 9 estimators, 2,000 steps, N = 64: 110 runs peaked at 1,254 MB
    (estimated 1,305), 50 runs with --json at 633 MB (estimated 676).
"""

from toylab.engine.recursion import FACTORS

SECONDS_PER_ENUMERATED_STEP = 2.5e-8        # one enumerated estimator, one step, per sequence of the toy
SECONDS_PER_SAMPLED_SEQUENCE = 4e-7         # one drawn sequence of one run of one estimator, one step
PAGE_SECONDS = 10.0                         # the page refuses a run estimated over this
COMMAND_LINE_FACTOR = 30                    # … and the command line one over 30 times that
BASE_BYTES = 150 * 2**20
FLOATS_PER_SAMPLED_TOKEN = 12
FLOATS_PER_ENUMERATED_SEQUENCE = 8
MEMORY_LIMIT_BYTES = 10**9                  # the command line refuses a run estimated over this
LISTED_BYTES_PER_VALUE = 32                 # a float object and its place in a list
JSON_BYTES_PER_VALUE = 68
LISTS = {"expected": 7, "sampled": 5}       # per-step lists of a run (sampled: no rel_bias, step_cosine)


def estimated_seconds(T, V, config, estimator_ids):
    """Rough seconds of ``training.train`` for these estimators under ``config``."""
    if config.mode == "expected":
        enumerated = sum(id not in FACTORS for id in estimator_ids)
        return enumerated * V**T * (config.steps + 1) * SECONDS_PER_ENUMERATED_STEP
    return len(estimator_ids) * config.runs * config.N * (config.steps + 1) * SECONDS_PER_SAMPLED_SEQUENCE


def estimated_bytes(T, V, config, estimator_ids, as_json=False):
    """Peak bytes of ``python -m toylab train`` for these estimators under ``config`` (an upper estimate): the run,
    its per-step lists, and their JSON text if ``as_json``."""
    runs = config.runs if config.mode == "sampled" else 1
    records = 8 * len(estimator_ids) * runs * (config.steps + 1) * (T * V + 8)
    values = len(estimator_ids) * runs * (config.steps + 1) * LISTS[config.mode]
    lists, text = LISTED_BYTES_PER_VALUE * values, JSON_BYTES_PER_VALUE * values if as_json else 0
    enumerated = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T
    step = 8 * FLOATS_PER_SAMPLED_TOKEN * config.runs * config.N * T if config.mode == "sampled" else enumerated
    return BASE_BYTES + max(records + step + lists, enumerated, lists + text)
