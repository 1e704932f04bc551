"""The Experts & versions tab, and the Training tab's routing and version runs, under streamlit.testing: their controls
live in the link, their numbers are the library's."""

import numpy as np
from test_app import run, tab_content

from toylab import make_toy
from toylab.analysis.routing import routing_view
from toylab.analysis.versions import versions_view
from toylab.catalogue.updates import Update
from toylab.engine.experts import Experts
from toylab.engine.versions import Versions
from toylab.presentation import training_frames
from toylab.state.query import EXPERTS_TAB, parse_query
from toylab.state.settings import Settings
from toylab.training.history import history_of
from toylab.training.loop import TrainingConfig, train

POLICY_QUANTITIES = ("clip_share", "ppo_kl", "w_std")


def tables(at):
    """The tab's two tables (routing, then versions), indexed."""
    frames = [frame.value for frame in at.dataframe if "rel_bias" in frame.value]
    return frames[0].set_index(["estimator", "replay"]), frames[1].set_index(["estimator", "mode"])


def test_the_tab_shows_the_library_s_routing_and_versions_at_the_defaults():
    at = run(tab=EXPERTS_TAB)
    assert not at.exception and not at.error and not at.warning
    assert tab_content(at, EXPERTS_TAB).count("vega_lite_chart") == 3
    routing, versions = tables(at)
    settings = Settings()
    toy = make_toy(*settings.toy_key)
    selection = settings.selection(exact_only=True)
    expected = routing_view(toy, Experts(), selection, "none", settings.N)
    for row in expected.rows:
        assert routing.loc[(row.estimator, row.replay), "rel_bias"] == row.rel_bias
        assert routing.loc[(row.estimator, row.replay), "served_cosine"] == row.served_cosine
    view = versions_view(toy, Versions(switch="drawn"), 2, "rollout", Update(),
                         {id: p for id, p in selection.items() if id != "on_policy"}, history_of(toy, 20, 1.0),
                         "none", settings.N)
    assert len(versions) == len(view.rows)
    assert np.allclose(sorted(versions["rel_bias"]), sorted(row.rel_bias for row in view.rows), rtol=0, atol=0)
    assert at.query_params == {"tab": EXPERTS_TAB}


def test_a_link_sets_the_mixture_and_the_versions_controls():
    query = {"tab": EXPERTS_TAB, "moe_layers": "3", "moe_experts": "6", "moe_top_k": "3", "moe_error": "0.4",
             "moe_draws": "2", "moe_draw": "token", "moe_spread": "2", "flip_axis": "experts",
             "versions_switch": "fixed", "versions_at": "2", "versions_lag": "3", "versions_anchor": "loglinear",
             "versions_step": "10", "versions_lr": "0.3", "est": "naive,tok_tis,seq_tis"}
    assert parse_query(query)[1] == []
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    assert at.slider(key="moe_layers").value == 3 and at.radio(key="moe_draw").value == "token"
    assert at.radio(key="versions_anchor").value == "loglinear" and at.slider(key="versions_at").value == 2
    routing, versions = tables(at)
    toy = make_toy()
    selection = {"naive": {}, "tok_tis": {"C": 2.0}, "seq_tis": {"C": 2.0}}
    experts = Experts(layers=3, experts=6, top_k=3, router_error=0.4, draws=2, draw="token", spread=2.0)
    for row in routing_view(toy, experts, selection).rows:
        assert routing.loc[(row.estimator, row.replay), "rel_std"] == row.rel_std
    view = versions_view(toy, Versions(switch="fixed", at=2), 3, "loglinear", Update(), selection,
                         history_of(toy, 10, 0.3))
    assert sorted(versions["from_truth"]) == sorted(row.from_truth for row in view.rows)
    assert at.query_params == query


def test_a_bad_mixture_in_a_link_falls_back_with_a_notice_and_a_keep_mask_trainer_is_refused_in_words():
    at = run({"tab": EXPERTS_TAB, "moe_top_k": "7"})
    assert not at.exception
    assert any("moe_top_k" in warning.value for warning in at.warning)
    at = run({"tab": EXPERTS_TAB, "scored": "keep_mask", "top_p": "0.9"})
    assert not at.exception and not at.error
    assert sum("keep_mask" in info.value for info in at.info) == 2          # both sections say why, the page goes on


def test_the_training_tab_trains_the_mixture_and_the_version_switches_as_the_library():
    for query, config in (
            ({"train_replay": "R3", "train_steps": "30"},
             TrainingConfig(30, experts=Experts(), replay="R3")),
            ({"train_replay_preset": "slime:use_routing_replay", "train_steps": "20", "train_epochs": "2"},
             TrainingConfig(20, experts=Experts(), replay="R2", update=Update(epochs=2))),
            ({"train_switch": "drawn", "train_lag": "2", "train_anchor": "rollout", "train_stamp": "head",
              "train_steps": "20"},
             TrainingConfig(20, lag=2, update=Update("rollout"), versions=Versions("drawn", stamp="head"))),
            ({"train_version_preset": "areal:loglinear", "train_lag": "2", "train_steps": "20"},
             TrainingConfig(20, lag=2, versions=Versions(prox="loglinear")))):
        at = run({"tab": "Training", "est": "naive,tok_tis,seq_tis"} | query)
        assert not at.exception and not at.error and not at.warning, query
        expected = train(make_toy(), {"on_policy": {}, "naive": {}, "tok_tis": {}, "seq_tis": {}}, "none", config)
        table = at.dataframe[0].value.set_index("estimator")
        for id, trajectory in expected.items():
            assert table.loc[id, "final_J"] == trajectory.J[-1], (query, id)
        curves = training_frames.curve_frame(expected, training_frames.CURVES + training_frames.POLICY_CURVES)
        varying = sum(training_frames.constant_value(curves, quantity) is None for quantity in POLICY_QUANTITIES)
        assert tab_content(at, "Training").count("vega_lite_chart") == 5 + varying    # the three policies' charts too,
        #                                                                             one constant over the run: words


def test_contradictions_in_the_training_link_are_warnings_and_the_page_goes_on():
    at = run({"tab": "Training", "train_replay": "R2", "train_anchor": "bypass"})
    assert not at.exception and any("R2" in warning.value for warning in at.warning)
    at = run({"tab": "Training", "train_prox": "loglinear", "train_anchor": "rollout"})
    assert not at.exception and any("log-linear" in warning.value for warning in at.warning)
    at = run({"tab": "Training", "train_replay": "R3", "train_mode": "sampled"})
    assert not at.exception and any("expected mode" in warning.value for warning in at.warning)
    at = run({"tab": "Training", "train_replay": "R3", "train_kl": "k3.loss"})
    assert not at.exception and any("one at a time" in warning.value for warning in at.warning)


def test_a_replay_preset_with_a_framework_s_update_pipeline_and_correction_trains_as_the_library():
    """The presets combine on the page as on the command line (tests/cli/test_hidden_cli.py checks their runs against
    the brute force): verl's R3, its decoupled update (U = 4, clamp 20, dual clip 3), its pipeline and correction."""
    from toylab.catalogue.update_presets import UPDATE_PRESETS
    from toylab.engine.sampler import Sampler

    query = {"tab": "Training", "T": "4", "V": "3", "pipeline": "verl", "temperature": "0.8",
             "est": "verl:decoupled_token_is,tok_tis", "train_update": "verl:decoupled",
             "train_replay_preset": "verl:R3", "train_steps": "20"}
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    preset = UPDATE_PRESETS["verl:decoupled"]
    config = TrainingConfig(20, update=preset.update, lag=preset.lag, experts=Experts(), replay="R3")
    toy = make_toy(4, 3, sampler=Sampler(temperature=0.8, logged="processed", scored="temperature"))
    expected = train(toy, {"on_policy": {}, "verl:decoupled_token_is": {}, "tok_tis": {}}, "none", config)
    table = at.dataframe[0].value.set_index("estimator")
    for id, trajectory in expected.items():
        assert table.loc[id, "final_J"] == trajectory.J[-1], id
