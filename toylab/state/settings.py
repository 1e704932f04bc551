"""What the user chose: a frozen, hashable Settings object that every view and cache reads."""

from dataclasses import dataclass, field

from toylab.catalogue.aggregation import DEFAULT_AGGREGATION
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.sampler import Sampler

DEFAULT_ESTIMATORS = ("on_policy", "naive", "tok_is", "tok_tis", "tok_mis", "seq_is", "seq_tis", "seq_mis",
                      "geo_rs")


@dataclass(frozen=True)
class Settings:
    T: int = 6
    V: int = 4
    mismatch: float = 0.3
    seed: int = 0
    estimators: tuple = DEFAULT_ESTIMATORS
    thresholds: tuple = field(default=())    # ((estimator id, parameter, value), ...) overriding defaults
    baseline: str = "none"
    N: int = 64
    aggregation: str = DEFAULT_AGGREGATION   # how Monte Carlo batches aggregate token losses (``aggregation``)
    top_p: float = 1.0                       # the sampler model (``engine.sampler``): top-p, top-k, τ, precision
    top_k: int = 0
    temperature: float = 1.0
    precision: str = "none"
    logged: str = "processed"                # what the engine logs as μ, and what the trainer scores
    scored: str = "plain"
    pipeline: str = "custom"                 # a framework's pipeline preset (``catalogue.pipelines``), or custom

    @property
    def sampler(self):
        """The pipeline model: the sampler's four parameters, what it logs and what the trainer scores."""
        return Sampler(self.top_p, self.top_k, self.temperature, self.precision, self.logged, self.scored)

    @property
    def toy_key(self):
        """What a toy is built (and cached) from: T, V, mismatch, seed and the Sampler (the pipeline model)."""
        return self.T, self.V, self.mismatch, self.seed, self.sampler

    def params(self, estimator_id):
        """The estimator's parameters: its defaults, with this Settings' thresholds applied."""
        overrides = {name: value for id, name, value in self.thresholds if id == estimator_id}
        return resolve_params(estimator_id, overrides)

    def selection(self, exact_only=False):
        """{estimator id: parameters} for the chosen estimators, in registry order."""
        return {id: self.params(id) for id in ESTIMATORS
                if id in self.estimators and (ESTIMATORS[id].exact or not exact_only)}
