"""Training as it was before the three policies (main 7eb0cc2, toylab/training/loop.py ``_expected`` and
``_sampled``): the loop of one update per batch, anchored at the trainer, the engine at the trainer's θ. The tests
check that today's Training — U = 1, the recompute anchor, lag 0 — is this loop bit for bit."""

import numpy as np

from toylab.analysis.montecarlo import Batches, batch_estimates, tokens_from_uniforms, trainer_side
from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.engine.recursion import FACTORS
from toylab.engine.split_grid import split_grid
from toylab.training.exact import Population, exact_means
from toylab.training.loop import check_range, cosine, engine_errors, relative_error
from toylab.training.optimizers import make_optimizer
from toylab.training.toy_rows import ToyRows

RECORDED = ("theta", "J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq", "cosine", "step_cosine", "rel_bias")


def todays_training(toy, selection, baseline, config):
    """{estimator id: {record name: array}} as main 7eb0cc2's ``train`` computed them."""
    selection = {id: resolve_params(id, params) for id, params in selection.items()}
    records = _expected(toy, selection, baseline, config) if config.mode == "expected" else \
        _sampled(toy, selection, baseline, config)
    return {id: {name: None if records[name] is None else records[name][index] for name in RECORDED}
            for index, id in enumerate(selection)}


def _empty_records(theta, steps, expected):
    records = {name: np.empty((*theta.shape[:-2], steps + 1)) for name in RECORDED}
    records["theta"] = np.empty((*theta.shape[:-2], steps + 1, *theta.shape[-2:]))
    for name in ("rel_bias", "step_cosine"):
        records[name] = records[name] if expected else None
    return records


def _record(records, k, theta, population, cosines, rel_bias=None, step_cosines=None):
    records["theta"][..., k, :, :] = theta
    for name in ("J", "logged_reward", "grad_norm", "kl_mu_pi", "chi2_seq"):
        records[name][..., k] = getattr(population, name)
    records["cosine"][..., k] = cosines
    if rel_bias is not None:
        records["rel_bias"][..., k] = rel_bias
        records["step_cosine"][..., k] = step_cosines


def _expected(toy, selection, baseline, config):
    grid = split_grid(toy.T, toy.V)
    estimators = list(selection.items())
    enumerated = any(id not in FACTORS for id, _ in estimators)
    theta = np.repeat(toy.theta[None], len(estimators), axis=0)
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    records = _empty_records(theta, config.steps, expected=True)
    for k, b in enumerate(engine_errors(toy, config.noise, config.steps)):
        rows = ToyRows(theta, b, toy.mismatch, grid, toy.sampler)
        if enumerated:
            check_range(rows, k)
        population = Population.of(rows)
        means = exact_means(rows, estimators, population.baseline(baseline))
        step = optimizer.step(means)
        _record(records, k, theta, population, cosine(means, population.grad), relative_error(means, population.grad),
                cosine(step, population.grad))
        if k < config.steps:
            theta = theta + step
    return records


def _sampled(toy, selection, baseline, config):
    N, runs = config.N, config.runs
    theta = np.broadcast_to(toy.theta, (len(selection), runs, toy.T, toy.V)).copy()
    optimizer = make_optimizer(config.optimizer, config.lr, theta.shape)
    generators = [np.random.default_rng([toy.seed, run]) for run in range(runs)]
    records = _empty_records(theta, config.steps, expected=False)
    for k, b in enumerate(engine_errors(toy, config.noise, config.steps)):
        rows = ToyRows(theta, b, toy.mismatch, sampler=toy.sampler)
        population = Population.of(rows)
        b = population.baseline(baseline)
        uniforms = np.stack([generator.random((N, toy.T)) for generator in generators])     # (runs, N, T)
        estimates = np.empty_like(theta)
        for index, (id, params) in enumerate(selection.items()):
            mine = rows[index]
            on_policy = ESTIMATORS[id].on_policy
            tokens = tokens_from_uniforms(uniforms, mine.pi if on_policy else mine.mu)
            side = trainer_side(mine) if on_policy else mine
            estimates[index] = batch_estimates(Batches(side, tokens, np.array([N]), b[index]), id, params)[:, 0]
        step = optimizer.step(estimates)
        _record(records, k, theta, population, cosine(step, population.grad))
        if k < config.steps:
            theta = theta + step
    return records
