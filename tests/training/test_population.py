"""A population of toys trained in one loop: each toy's rows are its lone run's, and one of them the dense oracle's."""

import numpy as np
import pytest
from dense import dense_three_policies

from toylab import make_toy
from toylab.catalogue.updates import Update
from toylab.training.loop import RECORDED, TrainingConfig, train, train_population

SEEDS = (0, 3, 7, 11)
SELECTION = {"on_policy": {}, "naive": {}, "tok_is": {}, "seq_tis": {"C": 1.5}}      # seq_tis: an enumerated mean


def _same(alone, row):
    for id, trajectory in alone.items():
        for name in RECORDED:
            a, b = getattr(trajectory, name), getattr(row[id], name)
            if a is None:
                assert b is None
                continue
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=f"{id} {name}")


@pytest.mark.parametrize("config", [
    TrainingConfig(12),
    TrainingConfig(12, 0.1, "adam", noise="redrawn"),                          # each toy its own redrawn errors
    TrainingConfig(12, lag=3, lag_draw="uniform", update=Update("rollout")),  # … its own drawn lags, s per row
    TrainingConfig(12, lag=2, update=Update("bypass", minibatches=2)),        # a fixed lag, U = 2 away from the anchor
], ids=["plain", "adam-redrawn", "rollout-drawn-lags", "bypass-U2"])
def test_each_toy_of_a_population_trains_as_it_does_alone(config):
    toys = [make_toy(4, 3, 0.7, seed) for seed in SEEDS]
    selection = SELECTION if not config.weights_only else {id: SELECTION[id] for id in ("on_policy", "naive", "tok_is")}
    population = train_population(toys, selection, "logged", config)
    assert len(population) == len(toys)
    for toy, row in zip(toys, population, strict=True):
        _same(train(toy, selection, "logged", config), row)
    lags = [row["tok_is"].lag for row in population]
    if config.lag_draw == "uniform":                                 # the toys' draws differ: s was per row
        assert any(not np.array_equal(lags[0], other) for other in lags[1:])


def test_a_population_row_against_the_dense_oracle():
    """Independent of the loop: brute-force training of one toy of the population, lags drawn from its own seed."""
    toys = [make_toy(3, 3, 0.5, seed) for seed in (4, 5, 6)]
    config = TrainingConfig(8, lag=2, lag_draw="uniform", update=Update("recompute"))
    row = train_population(toys, {"tok_is": {}}, "none", config)[1]["tok_is"]
    dense = dense_three_policies(toys[1], "tok_is", {}, "none", Update("recompute"), 8, 1.0, lag=2, lag_draw="uniform")
    np.testing.assert_allclose(row.J, dense["J"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(row.theta, np.array(dense["theta"]), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(row.lag, dense["lag"])


def test_a_population_is_one_kind_of_toy_in_expected_mode():
    toys = [make_toy(4, 3, 0.7, 0), make_toy(4, 3, 0.3, 1)]
    with pytest.raises(ValueError, match="share T, V, the mismatch and the sampler"):
        train_population(toys, {"naive": {}})
    with pytest.raises(ValueError, match="expected mode"):
        train_population(toys[:1], {"naive": {}}, config=TrainingConfig(mode="sampled"))
