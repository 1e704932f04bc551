"""The Training tab refuses, before it trains, a run it cannot finish within the page's seconds or memory
(toylab/training/cost.py), and says which bound and what to change (streamlit.testing)."""

from pathlib import Path

import pytest
from messages import says
from streamlit.testing.v1 import AppTest

from toylab.catalogue.estimators import ESTIMATORS
from toylab.training.cost import Probe
from toylab.training.loop import train
from toylab_app.caches import training_cache

APP = Path(__file__).resolve().parents[2] / "streamlit_app.py"
PROBE = Probe("expected", a=1e-4, b=1e-9)             # a step of the default toy in well under the page's seconds


def opened(link):
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"tab": "Training"} | link)
    at.run()
    assert not at.exception, [exception.message for exception in at.exception]
    return at


def refusals(at):
    return [info.value for info in at.info if "over the limit" in info.value]


@pytest.mark.slow
def test_the_issue_s_link_is_refused_by_its_memory_before_any_probe_or_training(monkeypatch):
    """Every estimator, sampled, 64 runs of 1,000 steps at T = 16: estimated at 5.8 s, it took 361 s and 2.3 GB."""
    monkeypatch.setattr(training_cache, "train", pytest.fail)
    monkeypatch.setattr(training_cache, "probe", pytest.fail)
    at = opened({"T": "16", "V": "2", "N": "2", "train_mode": "sampled", "train_runs": "64", "train_steps": "1000",
                 "est": ",".join(ESTIMATORS)})
    [refused] = refusals(at)
    assert says(refused, "need 2.", "limit of 1 GB")


def test_a_run_over_the_page_s_seconds_is_refused_after_a_probe_of_small_copies(monkeypatch):
    monkeypatch.setattr(training_cache, "train", pytest.fail)
    at = opened({"T": "11", "V": "4", "est": "seq_mis,geo_rs,k3_rs", "train_steps": "1000"})
    [refused] = refusals(at)
    assert says(refused, "estimated at", "limit of 10 s")


def test_a_run_within_the_bounds_trains():
    at = opened({"train_steps": "20"})
    assert not refusals(at) and len(at.get("vega_lite_chart")) >= 2


def test_a_mismatch_step_keeps_the_probe_and_trains_again(monkeypatch):
    """A step's work does not depend on the mismatch: the probe timed at the first mismatch serves the next, while
    the run itself is trained again at the new mismatch."""
    probed, trained = [], []
    monkeypatch.setattr(training_cache.cost, "probe", lambda *args, **kwargs: probed.append(args) or PROBE)
    monkeypatch.setattr(training_cache, "train", lambda *args: trained.append(args[0].mismatch) or train(*args))
    at = opened({"seed": "7", "train_steps": "5"})            # a seed no other test trains: nothing cached
    at.slider(key="mismatch").set_value(0.45).run()
    assert not at.exception
    assert [toy_key[2] for toy_key, *_ in probed] == [0.3] and trained == [0.3, 0.45]
