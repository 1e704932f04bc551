"""Many toys at once: one θ per row, sharing b, the mismatch and the sampler — the training loop's toys at one step.

The tables (log π, log μ_log, log μ, π, μ, log ρ, ρ, the sampler's kept tokens) have θ's leading axes, built as the
toy builds them (``toy.pipeline_tables``: the engine's μ from ``engine_theta`` when it holds a stale policy); the reward r(y) is the SplitGrid's, the same for every row. ``rows[i]`` is a
view of row i (or of a slice of rows): its tables are the parent's, indexed — a Toy-like object for the
estimators' weight functions (through ``sequences.AllSequences``, which builds the M-vectors they read) and for
``montecarlo.Batches``.
"""


import numpy as np

from toylab.engine.sampler import DEFAULT_SAMPLER
from toylab.engine.toy import largest_log_W, pipeline_tables

SHARED = ("T", "V", "M", "grid", "R", "b", "mismatch", "sampler", "score_scale")   # the same for every row: unindexed


class ToyRows:
    def __init__(self, theta, b, mismatch, grid=None, sampler=DEFAULT_SAMPLER, engine_theta=None):
        self.theta, self.b, self.mismatch, self.sampler = theta, b, mismatch, sampler
        self.T, self.V = theta.shape[-2:]
        self.M, self.grid = self.V**self.T, grid
        self.log_pi, self.log_logged, self.log_mu, self.mu, self.kept, self.log_rho = pipeline_tables(
            theta, b, mismatch, sampler, engine_theta)
        self.pi = np.exp(self.log_pi)
        self.truncates = ~self.kept.all(axis=(-2, -1))                 # per row: some token outside μ's support
        self.rho = np.exp(self.log_rho)
        self.score_scale = sampler.score_scale

    def __getitem__(self, index):
        return RowView(self, index)

    def subset(self, rows):
        """A ToyRows of the given rows (a list of indices) with the same grid: its tables indexed, not rebuilt."""
        subset = ToyRows.__new__(ToyRows)
        subset.__dict__.update({name: value if name in SHARED or name == "V" else value[rows]
                                for name, value in self.__dict__.items()})
        return subset

    def anchored(self, log_old):
        """The same rows with the trainer's π replaced by an anchor π_old (tables ``log_old``, −∞ where π_old is 0):
        what a correction sees of them, w = π_old/μ_log in place of ρ (+∞ outside μ's support)."""
        anchored = ToyRows.__new__(ToyRows)
        anchored.__dict__.update(self.__dict__)
        anchored.log_pi, anchored.pi = log_old, np.exp(log_old)
        anchored.log_rho = np.subtract(log_old, self.log_logged, out=np.full(log_old.shape, np.inf), where=self.kept)
        anchored.rho = np.exp(anchored.log_rho)
        return anchored

    @property
    def largest_log_W(self):
        """Per row, a bound on log W over the sequences its sampler draws (``toy.largest_log_W``)."""
        return largest_log_W(self.log_rho, self.kept)

    @property
    def R(self):
        """r(y) for every sequence (the same for every row)."""
        return self.grid.reward


class RowView:
    """Row ``index`` of a ToyRows: every attribute is the parent's, indexed (the shared ones as they are)."""

    def __init__(self, parent, index):
        self._parent, self._index = parent, index

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._parent, name)
        value = value if name in SHARED else value[self._index]
        setattr(self, name, value)
        return value
