"""The registry is the single place an estimator is declared: the README, the table and the CLI follow it."""

import json
from pathlib import Path

import numpy as np
import pytest

import toylab.catalogue.estimators as estimators
import toylab.cli.table
from toylab import ESTIMATORS, exact_moments, make_toy
from toylab.cli.main import main

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_catalogue_page_lists_every_estimator():
    text = (DOCS / "catalogue.md").read_text() + (DOCS / "frameworks.md").read_text()
    for estimator_id in ESTIMATORS:
        assert f"| {estimator_id} |" in text, estimator_id


@pytest.fixture
def with_new_estimator(monkeypatch):
    """A registry with one more exact estimator, c_t = sqrt(ρ_t), added the documented way."""
    def sqrt_token_ratio(stats):
        return estimators.Weights(token=np.sqrt(stats.rho))

    new = estimators.Estimator(id="tok_sqrt", label="token sqrt IS", latex=r"c_t = \sqrt{\rho_t}", source="a test",
                               weights=sqrt_token_ratio, colour="#123456")
    monkeypatch.setitem(estimators.ESTIMATORS, "tok_sqrt", new)
    monkeypatch.setattr(toylab.cli.table, "EXACT_IDS", (*estimators.EXACT_IDS, "tok_sqrt"))
    monkeypatch.setattr(toylab.cli.table, "DEFAULT_IDS", (*toylab.cli.table.DEFAULT_IDS, "tok_sqrt"))
    yield "tok_sqrt"


def test_a_new_estimator_reaches_the_cli(with_new_estimator, capsys):
    main(["--json"])
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["estimators"]}
    toy = make_toy()
    moments = exact_moments(toy, "tok_sqrt")
    mu, rho = toy.p_sampler, np.sqrt(toy.rho)
    assert rows["tok_sqrt"]["rel_bias"] == pytest.approx(moments.rel_bias)
    # against the dense definition: mean = Σ_m μ_m·r_m·Σ_t sqrt(ρ_t)·s_t
    coefficient = rho[np.arange(toy.T), toy.Y] * (mu * toy.R)[:, None]
    mean = np.einsum("mt,mtv->tv", coefficient, toy.score)
    np.testing.assert_allclose(moments.mean, mean, atol=1e-14)
