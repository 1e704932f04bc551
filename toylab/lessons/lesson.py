"""A lesson: a plain statement, the setting and tab that show it, and the check that computes its evidence.

A lesson's ``controls`` are sidebar values under their session-state keys (T, V, mismatch, seed, est,
baseline, N, the sampler's top_p, top_k, temperature and precision, and "id.param" thresholds); ``settings(lesson)`` is the Settings they make. ``view`` holds the
values of its tab's own controls, under their URL names (the Training tab's). ``check(settings)`` computes
the evidence from the library on that setting: named numbers and whether the statement holds.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from toylab.engine.toy import make_toy
from toylab.state.query import SAMPLER_FIELDS, make_settings

UNBIASED = 1e-9


@dataclass(frozen=True)
class Evidence:
    numbers: dict        # name → value, as shown under the lesson
    holds: bool


@dataclass(frozen=True)
class Lesson:
    id: str
    text: str
    controls: dict
    tab: str
    check: Callable
    view: dict = field(default_factory=dict)


def settings(lesson):
    """The Settings a lesson's controls make (canonical, as the sidebar would)."""
    controls = dict(lesson.controls)
    thresholds = {tuple(key.split(".")): value for key, value in controls.items() if "." in key}
    return make_settings(controls["T"], controls["V"], controls["mismatch"], controls["seed"], controls["est"],
                         thresholds, controls["baseline"], controls["N"],
                         **{name: controls[name] for name in SAMPLER_FIELDS})


def toy_of(settings):
    return make_toy(*settings.toy_key)


def controls(estimators, mismatch=1.0, T=6, baseline="none", N=64, top_p=1.0, top_k=0, temperature=1.0,
             precision="none", **thresholds):
    """A lesson's sidebar values: V = 4 and seed 0, the sampler (plain softmax by default), thresholds as
    ``id__param=value``."""
    return {"T": T, "V": 4, "mismatch": mismatch, "seed": 0, "est": list(estimators), "baseline": baseline,
            "N": N, "top_p": top_p, "top_k": top_k, "temperature": temperature, "precision": precision} \
        | {key.replace("__", "."): value for key, value in thresholds.items()}
