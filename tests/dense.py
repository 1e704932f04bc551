"""The slow, obvious oracle: every sequence's (T, V) estimate materialised, then summed.

It shares nothing with toylab's exact engine but the toy's (T, V) tables: sequences come from
itertools.product, rewards from counting, ratios from indexing, coefficients from each estimator's
definition written out per sequence.
"""

import itertools

import numpy as np


class DenseToy:
    def __init__(self, toy):
        T, V = toy.T, toy.V
        self.T, self.V = T, V
        self.pi = np.exp(toy.log_pi)
        self.Y = np.array(list(itertools.product(range(V), repeat=T)))
        positions = np.arange(T)
        self.log_pi_tokens = toy.log_pi[positions, self.Y]          # (M, T)
        self.log_mu_tokens = toy.log_mu[positions, self.Y]
        self.p_train = np.exp(self.log_pi_tokens.sum(axis=1))
        self.p_sampler = np.exp(self.log_mu_tokens.sum(axis=1))
        self.R = ((self.Y == 0).sum(axis=1) * 2 >= T).astype(float)
        self.score = np.eye(V)[self.Y] - self.pi[None]                  # (M, T, V)
        self.true_grad = np.einsum("m,m,mtv->tv", self.p_train, self.R, self.score)
        self.rho = np.exp(self.log_pi_tokens - self.log_mu_tokens)       # (M, T)
        self.W = self.rho.prod(axis=1)

    def baseline(self, name):
        return {"none": 0.0, "logged": self.p_sampler @ self.R, "true": self.p_train @ self.R}[name]

    def coefficients(self, estimator, params):
        """c (M, T) for one estimator, straight from its definition."""
        rho, W, T = self.rho, self.W[:, None], self.T
        ones = np.ones_like(rho)
        geo = W ** (1.0 / T)
        p = params
        if estimator in ("on_policy", "naive"):
            return ones
        if estimator == "tok_is":
            return rho
        if estimator == "tok_tis":
            return np.minimum(rho, p["C"])
        if estimator == "tok_mis":
            return rho * ((rho >= p["lo"]) & (rho <= p["hi"]))
        if estimator == "prefix_is":
            return np.cumprod(rho, axis=1)
        if estimator == "seq_is":
            return W * ones
        if estimator == "seq_tis":
            return np.minimum(W, p["C"]) * ones
        if estimator == "seq_mis":
            return W * (W <= p["C"]) * ones
        if estimator == "geo_rs":
            return ((geo >= p["lo"]) & (geo <= p["hi"])) * ones
        if estimator == "geo_rs_tok_tis":
            return ((geo >= p["lo"]) & (geo <= p["hi"])) * np.minimum(rho, p["C"])
        if estimator == "k3_rs":
            k3 = (rho - 1 - np.log(rho)).mean(axis=1, keepdims=True)
            return (k3 <= p["delta"]) * ones
        if estimator == "trm":
            return (np.abs(np.log(rho)).max(axis=1, keepdims=True) <= p["eps"]) * ones
        if estimator == "gspo_geo":
            return geo * ones
        raise KeyError(estimator)

    def moments(self, estimator, params, baseline):
        """mean, bias, var of the single-sample estimate, summed over all M sequences."""
        coefficient = self.coefficients(estimator, params)
        advantage = self.R - self.baseline(baseline)
        estimate = (advantage[:, None] * coefficient)[:, :, None] * self.score     # (M, T, V)
        probability = self.p_train if estimator == "on_policy" else self.p_sampler
        mean = np.einsum("m,mtv->tv", probability, estimate)
        var = np.einsum("m,m->", probability, ((estimate - mean) ** 2).sum(axis=(1, 2)))
        return mean, float(np.linalg.norm(mean - self.true_grad)), float(var)
