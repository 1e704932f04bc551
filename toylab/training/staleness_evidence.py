"""The staleness view's population, frozen where the page opens it without asking: at the page's defaults and at the
setting of the lesson on stale rollouts, each toy's ``staleness.Reading`` over seeds 0–29 at the setting and at its
neighbours (half and twice the mismatch, T = 4). The view reads it to say how often what the current toy shows holds
(a lag that puts a run ahead: "staleness helps"), without training 30 toys on the slider's path.

    python -m toylab.training.staleness_evidence        writes staleness_evidence.json beside this file

``tests/training/test_staleness_evidence.py`` recomputes every entry and fails when the file is stale.
"""

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from toylab.analysis.seeds import POPULATION
from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.engine.toy import make_toy
from toylab.training.loop import TrainingConfig
from toylab.training.staleness import Reading, read_config, reading, staleness_population

PATH = Path(__file__).with_name("staleness_evidence.json")


@dataclass(frozen=True)
class Entry:
    """A setting the view opens at: the toy's T, V and mismatch (default sampler), the baseline and the run."""
    T: int
    V: int
    mismatch: float
    baseline: str
    config: TrainingConfig

    def neighbours(self):
        """(label, Entry) of the population's groups: the setting, half and twice its mismatch, T = 4."""
        return (("at this setting", self), ("at half the mismatch", replace(self, mismatch=self.mismatch / 2)),
                ("at twice the mismatch", replace(self, mismatch=self.mismatch * 2)), ("at T = 4", replace(self, T=4)))


ENTRIES = {"page defaults": Entry(6, 4, 0.3, "none", TrainingConfig()),
           "stale rollouts lesson": Entry(6, 4, 0.3, "logged", TrainingConfig(30, 1.0, "sgd", "expected"))}


def entry_of(T, V, mismatch, sampler, baseline, config, draw, cap):
    """The name of the frozen entry the view is at (its seed any of 0–29), or None: the view's draw fixed, no cap."""
    if sampler != DEFAULT_SAMPLER or draw != "fixed" or cap:
        return None
    asked = Entry(T, V, mismatch, baseline, read_config(config))
    return next((name for name, entry in ENTRIES.items() if replace(entry, config=read_config(entry.config)) == asked),
                None)


def compute(entry):
    """{group label: [Reading] over seeds 0 … POPULATION − 1} of an Entry's neighbours."""
    return {label: [reading(result) for result in staleness_population(
        [make_toy(at.T, at.V, at.mismatch, seed) for seed in range(POPULATION)], at.baseline, at.config)]
        for label, at in entry.neighbours()}


@cache
def frozen():
    """{entry name: {group label: [Reading]}} as the file holds them."""
    data = read(PATH.read_text())
    return {name: {label: [Reading(tuple(r["lags"]), r["run_steps"], _tuples(r["steps"]), _tuples(r["lead"]),
                                   r["on_policy"]) for r in readings]
                   for label, readings in groups.items()} for name, groups in data.items()}


def _tuples(values):
    return {name: tuple(value) for name, value in values.items()}


LEAD_DIGITS = 6          # a lead is kept to 1e-6 of J (it is compared with VISIBLE, 0.0067, and shown to 0.001)


def as_json(evidence):
    """The file's text: one toy's Reading a line."""
    lines = []
    for name, groups in evidence.items():
        for label, readings in groups.items():
            lines += [json.dumps([name, label, {"lags": list(r.lags), "run_steps": r.run_steps,
                                                "steps": {o: list(v) for o, v in r.steps.items()},
                                                "lead": {o: [round(x, LEAD_DIGITS) for x in v]
                                                         for o, v in r.lead.items()},
                                                "on_policy": round(r.on_policy, 12)}], ensure_ascii=False, separators=(",", ":"))
                      for r in readings]
    return "\n".join(lines) + "\n"


def read(text):
    """{entry name: {group label: [JSON reading]}} of the file's text."""
    found = {}
    for line in text.splitlines():
        name, label, r = json.loads(line)
        found.setdefault(name, {}).setdefault(label, []).append(r)
    return found


if __name__ == "__main__":
    PATH.write_text(as_json({name: compute(entry) for name, entry in ENTRIES.items()}))
    print(f"wrote {PATH}")
