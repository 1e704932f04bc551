"""Undefined numbers are deliberate (None with a reason, "—" in text), rounding never leaves a number's range,
and no allowed input anywhere makes a RuntimeWarning, NaN or inf reach the user unexplained."""

import io
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from toylab import ESTIMATORS, EXACT_IDS, exact_moments, make_toy
from toylab.analysis.diagnostics import diagnostics, sequence_chi2
from toylab.analysis.length import length_point, length_toy
from toylab.analysis.montecarlo import monte_carlo, summarise, undefined_sizes
from toylab.engine.recursion import RECURSIVE_IDS, exact_by_recursion
from toylab.presentation import frames
from toylab.presentation.sweep_frames import (
    length_divergence_frame,
    length_estimator_frame,
    length_overflow_caption,
    length_overflow_notes,
)
from toylab.state.query import make_settings
from toylab.text import UNDEFINED

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
EXTREME_TOYS = [(T, V, mismatch, seed) for T, V in ((1, 2), (1, 8), (2, 8), (3, 4)) for mismatch in (0.0, 2.0)
                for seed in (0, 1, 2)]


@pytest.mark.parametrize("estimator, params, reason", [
    ("trm", {"eps": 0.01}, "every sequence is masked"),
    ("tok_mis", {"lo": 1.0, "hi": 1.0}, "every token is masked"),
    ("k3_rs", {"delta": 0.01}, "every sequence it keeps has advantage A = r − b = 0 (b = 0)"),
])
def test_a_zero_mean_has_no_cosine_and_says_why(estimator, params, reason):
    moments = exact_moments(make_toy(), estimator, params)
    assert not np.any(moments.mean) and moments.cosine is None
    assert moments.note.startswith(reason) and moments.note.endswith("(the cosine to ∇J) is undefined")
    assert moments.rel_bias == pytest.approx(1.0) and math.isfinite(moments.rel_rmse(64))


@pytest.mark.parametrize("estimator, params", [("trm", {"eps": 0.01}), ("tok_mis", {"lo": 1.0, "hi": 1.0})])
def test_the_recursion_represents_it_the_same_way(estimator, params):
    toy = make_toy()
    enumerated, recursed = exact_moments(toy, estimator, params), exact_by_recursion(toy, estimator, params)
    assert (enumerated.cosine, enumerated.note) == (recursed.cosine, recursed.note)


def test_a_kept_sequence_with_a_nonzero_advantage_makes_the_cosine_defined_again():
    assert exact_moments(make_toy(), "k3_rs", {}, "logged").cosine is not None


@pytest.mark.parametrize("toy_key", EXTREME_TOYS, ids=lambda key: "T{}V{}m{}s{}".format(*key))
def test_rounding_never_leaves_a_numbers_range(toy_key):
    toy = make_toy(*toy_key)
    for baseline in ("none", "logged", "true"):
        for estimator in EXACT_IDS:
            m = exact_moments(toy, estimator, {}, baseline)
            assert m.cosine is None or -1 <= m.cosine <= 1
            assert 0 <= m.tokens_affected <= 1 and 0 <= m.sequences_affected <= 1
            if estimator in RECURSIVE_IDS:
                r = exact_by_recursion(toy, estimator, {}, baseline)
                assert r.cosine is None or -1 <= r.cosine <= 1
                assert 0 <= r.tokens_affected <= 1 and 0 <= r.sequences_affected <= 1
    d = diagnostics(toy)
    assert 0 <= d.J <= 1 and 0 <= d.logged_reward <= 1 and 0 < d.ess <= 1
    assert d.chi2_seq >= 0 and d.kl_mu_pi >= 0 and d.kl_pi_mu >= 0
    facts = frames.sequence_facts(toy)
    assert 0 <= facts["above_one"] <= 1


def test_without_mismatch_every_divergence_is_exactly_zero_and_the_ess_exactly_one():
    for T in (1, 6, 64, 256):
        toy = length_toy(T, 4, 0.0, 0)
        assert sequence_chi2(toy) == 0.0
    d = diagnostics(make_toy(T=6, mismatch=0.0))
    assert (d.chi2_seq, d.kl_mu_pi, d.ess) == (0.0, 0.0, 1.0)


def test_csv_writes_a_dash_and_the_reason():
    toy = make_toy()
    moments = {id: exact_moments(toy, id) for id in ("naive", "k3_rs")}
    table = frames.table_frame(moments, 64)
    frame = pd.read_csv(io.StringIO(frames.table_csv(table)), keep_default_na=False)
    assert list(frame["cosine"]) == [f"{moments['naive'].cosine!r}", UNDEFINED]
    assert list(frame["note"]) == ["", moments["k3_rs"].note]
    assert frames.table_notes(table) == [f"k3_rs: {moments['k3_rs'].note}"]
    assert [frames.cosine_text(value) for value in table["cosine"]] == [f"{moments['naive'].cosine:+.4f}", UNDEFINED]


def test_monte_carlo_names_the_batch_sizes_where_an_estimator_is_undefined():
    sizes = (1, 2, 10)
    errors = monte_carlo(make_toy(), {"rloo": {}, "grpo": {}, "naive": {}}, "none", sizes, replicates=10, seed=0)
    assert undefined_sizes(errors, sizes) == {"rloo": [1]}
    assert {(row["estimator"], row["N"]) for row in summarise(errors, sizes)} == \
        set(itertools.product(("rloo", "grpo", "naive"), sizes)) - {("rloo", 1)}
    assert ESTIMATORS["rloo"].undefined.startswith("at N = 1")


def test_the_error_tab_explains_the_missing_rloo_point():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"est": "naive,rloo", "tab": "Error vs batch size", "mc_dots": "1"})
    at.run()
    assert not at.exception and not at.error
    assert any(caption.value.startswith("No Monte Carlo point for rloo") and "N = 1" in caption.value
               for caption in at.caption)


def test_long_sequences_at_the_largest_mismatch_overflow_deliberately():
    settings = make_settings(V=4, mismatch=2.0, estimators=("on_policy", "seq_is", "tok_is"))
    population, estimators = [], []
    for T in (64, 192, 256):
        point = length_point(settings, T, samples=500)
        population += point[0]
        estimators += point[1]
    chi2 = {row["T"]: row["value"] for row in population if row["quantity"] == "χ²_seq"}
    assert math.isfinite(chi2[64]) and chi2[256] == math.inf
    notes = length_overflow_notes(population, estimators)
    assert any(note.startswith("χ²_seq at T = ") and "256" in note for note in notes)
    assert any(note.startswith("seq_is's std ÷ on-policy std at T = ") for note in notes)
    caption = length_overflow_caption(population, estimators)
    assert all(note in caption for note in notes) and "ESS fraction" in caption
    assert length_overflow_caption(population[:1], estimators[:1]) == ""
    for frame in (length_divergence_frame(population), length_estimator_frame(estimators)):
        assert np.isfinite(frame["value"]).all()
