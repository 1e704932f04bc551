"""The page's reference: the Estimators tab's KL view (opt-in) and the Training tab's KL penalty, their numbers the
library's, their controls in the link."""

import numpy as np
from page.test_app import run

from toylab import make_toy
from toylab.analysis.kl_view import kl_table
from toylab.catalogue import kl_settings
from toylab.catalogue.kl import KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.engine.reference import Reference
from toylab.state.settings import DEFAULT_ESTIMATORS
from toylab.training.loop import TrainingConfig, train


def kl_table_shown(at):
    return next((frame.value for frame in at.dataframe if "setting" in frame.value.columns), None)


def test_the_kl_view_is_off_by_default_and_off_the_slider_path():
    at = run({"tab": "Estimators"})
    assert not at.exception and kl_table_shown(at) is None


def test_the_kl_view_shows_the_librarys_rows():
    at = run({"tab": "Estimators", "kl_view": "1", "kl_distance": "2", "mismatch": "0.7", "N": "16"})
    assert not at.exception and not at.warning
    shown = kl_table_shown(at)
    rows = kl_table(make_toy(mismatch=0.7), kl_settings.VIEW_SETTINGS, Reference(2.0), 16)
    assert list(shown["setting"]) == list(kl_settings.VIEW_SETTINGS)
    np.testing.assert_allclose(shown["rel_bias"], [row["rel_bias"] for row in rows], rtol=1e-12)
    np.testing.assert_allclose(shown["rel_std"], [row["rel_std"] for row in rows], rtol=1e-12)
    assert any("biased on the engine's tokens here: k2.loss" in caption.value for caption in at.caption)
    assert dict(at.query_params)["kl_distance"] == "2"


def test_the_kl_view_adds_every_framework_preset_on_request():
    at = run({"tab": "Estimators", "kl_view": "1", "kl_frameworks": "1"})
    assert list(kl_table_shown(at)["setting"]) == list(kl_settings.VIEW_SETTINGS) + list(KL_PRESETS)


def test_training_with_a_penalty_from_a_link():
    at = run({"tab": "Training", "train_kl": "k3.loss.engine", "train_beta": "0.3", "train_ref_distance": "1",
              "train_steps": "20"})
    assert not at.exception and not at.warning
    assert at.session_state["group_reference"] is True                       # the link opened the group
    assert any("KL(π_k‖π_ref)" in markdown.value for markdown in at.markdown)
    summary = next(frame.value for frame in at.dataframe if "final_kl_ref" in frame.value.columns)
    config = TrainingConfig(20, kl=KLPenalty(0.3, "k3", ratio="engine"), reference=Reference(1.0))
    runs = train(make_toy(), {id: {} for id in ("on_policy", *DEFAULT_ESTIMATORS)}, "none", config)
    for id, final in zip(summary["estimator"], summary["final_kl_ref"], strict=True):
        assert final == runs[id].kl_ref[-1]


def test_a_preset_is_cited_under_the_control():
    at = run({"tab": "Training", "train_kl": "trl:grpo_bias_correction", "train_steps": "10"})
    assert any("f2cd577" in caption.value and "default β is 0" in caption.value for caption in at.caption)
