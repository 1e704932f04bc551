"""A lesson: a plain statement, the setting and tab that show it, and the check that computes its evidence.

A lesson's ``claim`` is what a room reads on top of its chart: at most CLAIM_LENGTH characters (two lines of the
lesson box at 1280 px), naming its marks by their numbers, "(1)"; ``text`` says it in full, and why, on demand.

A lesson's ``controls`` are sidebar values under their session-state keys (T, V, mismatch, seed, est,
baseline, N, the sampler's top_p, top_k, temperature and precision, the pipeline's logged, scored and pipeline, and
"id.param" thresholds); ``settings(lesson)``
is the Settings they make. ``view`` holds the values of its tab's own controls that differ from their defaults, under
their URL names (the Training tab's, the Mismatch sweep's ``sweep``); ``view_of(lesson)`` is the whole view it opens.
``check(settings)`` computes the evidence from the library on that setting: named numbers, whether the claim
holds, and the marks it refers to on the page's charts (``Mark``: a point, or an x alone, on one of CHARTS, in that
chart's own units, with what it shows in words). Whether the claim holds is a predicate, exact, of the setting; the
lesson claims it for its ``population`` of toys (``population``: seeds at its setting and the neighbours it
generalises to), and the numbers it quotes are one example of it, at its setting.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from toylab.engine.toy import make_toy
from toylab.lessons.population import Population
from toylab.state.query import (
    ESTIMATORS_TAB,
    LENGTH_TAB,
    MISMATCH_SWEEP_TAB,
    RATIOS_TAB,
    SAMPLER_FIELDS,
    THRESHOLD_SWEEP_TAB,
    TRAINING_TAB,
    VIEW_PARAMETERS,
    make_settings,
)

UNBIASED = 1e-9
CLAIM_LENGTH = 150


CHARTS = {"bias_std": ESTIMATORS_TAB, "sequence_W": RATIOS_TAB, "sequence_geo": RATIOS_TAB,
          "threshold_rmse": THRESHOLD_SWEEP_TAB, "sampler_divergence": MISMATCH_SWEEP_TAB,
          "length_std_ratio": LENGTH_TAB, "length_capped": LENGTH_TAB, "training_J": TRAINING_TAB, "training_cosine": TRAINING_TAB,
          "training_logged": TRAINING_TAB, "training_clip": TRAINING_TAB, "training_w": TRAINING_TAB,
          "training_staleness": TRAINING_TAB, "training_kl_ref": TRAINING_TAB, "kl_bias_std": ESTIMATORS_TAB}     # chart name → the tab that draws it


@dataclass(frozen=True)
class Mark:
    chart: str                   # a key of CHARTS
    text: str                    # what the mark shows, in a sentence
    x: float | str               # on the chart's x axis (a sweep's threshold, a step, log W, …; a name on a nominal one)
    y: float | None = None       # on its y axis; None: a mark at x alone (a rule across the plot)
    panel: str | None = None     # on a chart of several panels, the one it is on (the staleness view's objective)


@dataclass(frozen=True)
class Evidence:
    numbers: dict        # name → value, as shown under the lesson
    holds: bool
    marks: tuple = ()    # Marks on the charts of the lesson's tab


@dataclass(frozen=True)
class Lesson:
    id: str
    text: str
    controls: dict
    tab: str
    check: Callable
    view: dict = field(default_factory=dict)
    claim: str = ""
    predicate: str = ""                      # what its check's ``holds`` tests on a toy, in words
    population: Population = Population()   # the toys it claims its statement for (``population``)


def settings(lesson):
    """The Settings a lesson's controls make (canonical, as the sidebar would)."""
    return settings_of(lesson.controls)


def settings_of(controls):
    """The Settings that sidebar values (a lesson's ``controls``, or a toy of its population) make."""
    controls = dict(controls)
    thresholds = {tuple(key.split(".")): value for key, value in controls.items() if "." in key}
    return make_settings(controls["T"], controls["V"], controls["mismatch"], controls["seed"], controls["est"],
                         thresholds, controls["baseline"], controls["N"],
                         **{name: controls[name] for name in SAMPLER_FIELDS})


def view_of(lesson):
    """The view parameters a lesson sets (URL name → value): its tab, and every control of that tab at the lesson's
    value or the default. Presentation mode, and other tabs' controls, stay as the user has them."""
    return {"tab": lesson.tab} | {name: lesson.view.get(name, parameter.default)
                                  for name, parameter in VIEW_PARAMETERS.items() if parameter.tab == lesson.tab}


def toy_of(settings):
    return make_toy(*settings.toy_key)


def controls(estimators, mismatch=1.0, T=6, baseline="none", N=64, top_p=1.0, top_k=0, temperature=1.0,
             precision="none", logged="processed", scored="plain", pipeline="custom", V=4, seed=0, **thresholds):
    """A lesson's sidebar values: V = 4 and seed 0 unless given, the sampler (plain softmax by default), the pipeline
    (logged as sampled and scored plain by default, or a framework's preset), thresholds as ``id__param=value``."""
    return {"T": T, "V": V, "mismatch": mismatch, "seed": seed, "est": list(estimators), "baseline": baseline,
            "N": N, "top_p": top_p, "top_k": top_k, "temperature": temperature, "precision": precision,
            "logged": logged, "scored": scored, "pipeline": pipeline} \
        | {key.replace("__", "."): value for key, value in thresholds.items()}
