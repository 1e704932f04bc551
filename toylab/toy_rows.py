"""Many toys at once: one θ per row, sharing b and the mismatch — the training loop's toys at one step.

The tables (log π, log μ, π, μ, log ρ, ρ) have θ's leading axes; given a SplitGrid, the M-vectors a weight
function reads (log W, mean k3, max |log ρ_t|, μ(y), π(y)) are built for every row in one pass when first
asked for. ``rows[i]`` is a view of row i (or of a slice of rows): its tables and M-vectors are the
parent's, indexed — a Toy-like object for the estimators' weight functions and for ``montecarlo.Batches``.
"""

from functools import cached_property

import numpy as np

from toylab.toy import log_softmax

SHARED = ("T", "V", "M", "grid", "R", "rewarded", "b", "mismatch")       # the same for every row: a view passes them through unindexed


class ToyRows:
    def __init__(self, theta, b, mismatch, grid=None):
        self.theta, self.b, self.mismatch = theta, b, mismatch
        self.T, self.V = theta.shape[-2:]
        self.M, self.grid = self.V**self.T, grid
        self.log_pi = log_softmax(theta)
        self.log_mu = log_softmax(theta + mismatch * b)
        self.pi, self.mu = np.exp(self.log_pi), np.exp(self.log_mu)
        self.log_rho = self.log_pi - self.log_mu
        self.rho = np.exp(self.log_rho)

    def __getitem__(self, index):
        return RowView(self, index)

    def subset(self, rows):
        """A ToyRows of the given rows (a list of indices) with the same grid: its M-vectors only for those."""
        return ToyRows(self.theta[rows], self.b, self.mismatch, self.grid)

    @property
    def R(self):
        """r(y) for every sequence (the same for every row)."""
        return self.grid.reward

    @property
    def rewarded(self):
        """r(y) = 1 as a boolean, as ``Toy.rewarded``."""
        return self.grid.reward > 0

    @cached_property
    def p_train(self):
        """π(y) = ∏_t π_t(y_t) per row."""
        return self.grid.outer_product(self.log_pi)

    @cached_property
    def p_sampler(self):
        """μ(y) per row."""
        return self.grid.outer_product(self.log_mu)

    @cached_property
    def log_W(self):
        """log W(y) = Σ_t log ρ_t(y_t) per row."""
        return self.grid.outer_sum(self.log_rho)

    @cached_property
    def mean_k3(self):
        """(1/T) Σ_t (ρ_t − 1 − log ρ_t) per row."""
        return self.grid.outer_sum(self.rho - 1 - self.log_rho) / self.T

    @cached_property
    def max_abs_log_rho(self):
        """max_t |log ρ_t(y_t)| per row."""
        return self.grid.outer_max(np.abs(self.log_rho))


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
