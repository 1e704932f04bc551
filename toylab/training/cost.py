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
    plus BASE_BYTES (the interpreter, numpy and toylab).
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


def estimated_seconds(T, V, config, estimator_ids):
    """Rough seconds of ``training.train`` for these estimators under ``config``."""
    if config.mode == "expected":
        enumerated = sum(id not in FACTORS for id in estimator_ids)
        return enumerated * V**T * (config.steps + 1) * SECONDS_PER_ENUMERATED_STEP
    return len(estimator_ids) * config.runs * config.N * (config.steps + 1) * SECONDS_PER_SAMPLED_SEQUENCE


def estimated_bytes(T, V, config, estimator_ids):
    """Peak bytes of ``training.train`` for these estimators under ``config`` (an upper estimate)."""
    runs = config.runs if config.mode == "sampled" else 1
    records = 8 * len(estimator_ids) * runs * (config.steps + 1) * (T * V + 8)
    if config.mode == "sampled":
        step = 8 * FLOATS_PER_SAMPLED_TOKEN * config.runs * config.N * T
    else:
        step = 8 * FLOATS_PER_ENUMERATED_SEQUENCE * V**T
    return BASE_BYTES + records + step
