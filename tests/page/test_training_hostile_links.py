"""Links of issue 41's third audit on the Training tab (streamlit.testing): a run that goes non-finite says where,
in the tab and in the staleness view, and a valid rloo run in one-sequence minibatches trains."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
CASE_7 = {"temperature": "0.25", "mismatch": "0", "tab": "Training", "train_anchor": "bypass", "train_loss": "ipo_kl",
          "train_weights": "current", "train_lr": "10", "train_steps": "10", "train_minibatches": "2",
          "train_epochs": "2"}


def opened(link):
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(link)
    at.run()
    assert not at.exception, [exception.message for exception in at.exception]
    return at


def test_a_run_that_goes_non_finite_says_where_on_the_tab():
    """Case 7: tok_is's J was NaN from step 5, its line just stopped, the table read None for its final J and 0.0000
    for its final KL, and nothing said why."""
    at = opened(CASE_7)
    assert not at.error
    [warning] = [warning.value for warning in at.warning if "stopped" in warning.value]
    assert warning.startswith("Tok_is stopped at step 4: its update was not a finite number")
    table = at.dataframe[0].value.set_index("estimator")
    assert table.loc["tok_is", "steps_to_reach"] == "stopped at step 4"
    assert table.loc[["tok_is"], ["final_J", "final_kl_mu_pi"]].isna().all(axis=None)


@pytest.mark.slow
def test_a_staleness_run_that_stops_is_named_under_the_view():
    """Case 7's last part: the staleness view dropped a NaN point without a word."""
    at = opened(CASE_7 | {"mismatch": "0.3", "train_anchor": "recompute", "staleness": "1"})
    assert not at.error
    assert any(warning.value.startswith("Ended early: π_old recomputed, no weight at lag 1 (step 7)")
               for warning in at.warning)


def test_a_valid_rloo_run_in_one_sequence_minibatches_is_not_refused():
    """Case 8: ?tab=Training&est=rloo&N=4096&train_mode=sampled&train_minibatches=8&train_weights=current said
    "Advantages must be 1 finite numbers, one per sequence, got shape (1,)" (the probe's small copy of the run)."""
    at = opened({"tab": "Training", "est": "rloo", "N": "4096", "train_mode": "sampled", "train_minibatches": "8",
                 "train_weights": "current", "train_steps": "20"})
    assert not at.error
    assert not [warning.value for warning in at.warning if "dvantages" in warning.value]
    assert "rloo" in at.dataframe[0].value["estimator"].tolist()
