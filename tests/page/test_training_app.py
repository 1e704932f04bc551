"""The Training tab under streamlit.testing: its controls live in the URL, its numbers are the library's."""

import numpy as np
from test_app import run, tab_content

from toylab import make_toy
from toylab.presentation.update_text import IGNORED
from toylab.state.query import parse_query
from toylab.state.settings import Settings
from toylab.training.loop import TrainingConfig, train


def shown_summary(at):
    return at.dataframe[0].value.set_index("estimator")


def test_default_training_tab_shows_the_library_run():
    at = run(tab="Training")
    assert not at.exception and not at.error and not at.warning
    assert tab_content(at, "Training").count("vega_lite_chart") == 5          # the one-step view is opt-in
    settings = Settings()
    expected = train(make_toy(*settings.toy_key), {"on_policy": {}} | settings.selection(True), "none",
                     TrainingConfig())
    table = shown_summary(at)
    assert list(table.index) == list(expected)
    for id, trajectory in expected.items():
        assert table.loc[id, "final_J"] == trajectory.J[-1]
        assert table.loc[id, "final_kl_mu_pi"] == trajectory.kl_mu_pi[-1]
    assert at.query_params == {"tab": "Training"}            # defaults stay out of the link


def test_the_one_step_view_is_a_toggle_in_the_link():
    at = run(tab="Training")
    assert not at.exception and not any(slider.key == "sga_step" for slider in at.slider)
    at.toggle(key="sga").set_value(True).run()
    assert not at.exception and tab_content(at, "Training").count("vega_lite_chart") == 6
    assert at.slider(key="sga_step").value == 10 and at.query_params == {"tab": "Training", "sga": "1"}
    at.toggle(key="sga").set_value(False).run()
    assert tab_content(at, "Training").count("vega_lite_chart") == 5 and at.query_params == {"tab": "Training"}


def test_a_link_sets_every_training_control():
    query = {"tab": "Training", "train_mode": "sampled", "train_lr": "0.3", "train_optimizer": "adam",
             "train_steps": "40", "train_runs": "3", "train_pick": "tok_mis", "sga": "1", "sga_step": "10", "mismatch": "1",
             "est": "naive,tok_mis,grpo"}
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    assert (at.radio(key="train_mode").value, at.radio(key="train_optimizer").value) == ("sampled", "adam")
    assert at.select_slider(key="train_lr").value == 0.3 and at.slider(key="train_steps").value == 40
    assert at.slider(key="train_runs").value == 3 and at.selectbox(key="train_pick").value == "tok_mis"
    assert at.slider(key="sga_step").value == 10
    assert parse_query(query)[1] == []                      # the tab's names are known to the URL parser
    expected = train(make_toy(mismatch=1.0), {"on_policy": {}, "naive": {}, "tok_mis": {}, "grpo": {}}, "none",
                     TrainingConfig(40, 0.3, "adam", "sampled", 64, 3))
    table = shown_summary(at)
    assert list(table.index) == ["on_policy", "naive", "tok_mis", "grpo"]
    assert table.loc["grpo", "final_J"] == np.median(expected["grpo"].J[:, -1])


def test_expected_mode_leaves_out_batch_coupled_estimators_with_a_note():
    at = run({"tab": "Training", "est": "naive,seq_snis,rloo"})
    assert not at.exception
    assert list(shown_summary(at).index) == ["on_policy", "naive"]
    assert any("Not trained: seq_snis (batch-coupled" in caption.value for caption in at.caption)


def test_changing_a_control_reruns_the_training():
    at = run(tab="Training")
    before = shown_summary(at)["final_J"].copy()
    at.select_slider(key="train_lr").set_value(0.1).run()
    assert not at.exception and not shown_summary(at)["final_J"].equals(before)
    at.radio(key="train_optimizer").set_value("adam").run()
    assert not at.exception and shown_summary(at).loc["on_policy", "final_J"] > before["on_policy"]


def test_too_much_work_is_refused_with_the_reason():
    at = run({"tab": "Training", "train_mode": "sampled", "train_runs": "64", "train_steps": "1000", "N": "10000"})
    assert not at.exception and not at.error
    assert any("over the limit of" in info.value for info in at.info)
    assert tab_content(at, "Training").count("vega_lite_chart") == 0


def test_sga_step_follows_a_shorter_run():
    at = run({"tab": "Training", "sga": "1", "sga_step": "80"})
    at.slider(key="train_steps").set_value(50).run()
    assert not at.exception and at.slider(key="sga_step").value == 50


def test_rloo_at_batch_size_one_is_left_out_with_the_reason():
    at = run({"tab": "Training", "est": "naive,rloo,grpo", "train_mode": "sampled", "N": "1", "sga": "1"})
    assert not at.exception and not at.error
    assert list(shown_summary(at).index) == ["on_policy", "naive", "grpo"]
    assert sum("rloo (needs N ≥ 2" in caption.value for caption in at.caption) == 2        # the run and the SGA view
    assert not any(frame.value.astype(str).apply(lambda column: column.str.contains("nan")).any().any()
                   for frame in at.dataframe)


# -- three policies: the lag, the anchor, the loss, updates per batch ------------------------------------------

def test_a_link_with_three_policy_controls_opens_their_group_and_shows_the_library_run():
    from toylab.catalogue.updates import Update
    query = {"tab": "Training", "train_anchor": "bypass", "train_epochs": "3", "train_minibatches": "2",
             "train_dual_clip": "3", "train_eps_high": "0.28", "train_lag": "2", "train_steps": "30",
             "baseline": "logged"}
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    assert at.radio(key="train_anchor").value == "bypass" and at.slider(key="train_epochs").value == 3
    assert at.select_slider(key="train_dual_clip").value == 3.0 and at.slider(key="train_eps_high").value == 0.28
    assert parse_query(query)[1] == []
    assert tab_content(at, "Training").count("vega_lite_chart") == 7          # + the clip and PPO KL charts;
    assert any("spread of w = π_old/μ**: 0 at every step of every run (w ≡ 1)" in markdown.value
               for markdown in at.markdown)                                     # w ≡ 1: in words
    assert any(info.value == IGNORED for info in at.info)                       # the estimator choice: moot
    settings = Settings(baseline="logged")
    update = Update("bypass", "ppo", {"dual_clip": 3.0, "eps_high": 0.28}, 2, 3)
    expected = train(make_toy(*settings.toy_key), {"on_policy": {}} | settings.selection(True), "logged",
                     TrainingConfig(30, update=update, lag=2))
    table = shown_summary(at)
    for id, trajectory in expected.items():
        assert table.loc[id, "final_J"] == trajectory.J[-1]
    assert at.query_params == query | {"train_dual_clip": "3"}


def test_the_default_run_builds_no_three_policy_widget_until_the_group_opens():
    at = run(tab="Training")
    assert not any(widget.key == "train_anchor" for widget in at.radio)
    at.expander(key="group_policies").open = True            # what a click does: the group reruns the page open
    at.session_state["group_policies"] = True
    at.run()
    assert not at.exception and at.radio(key="train_anchor").value == "recompute"
    assert tab_content(at, "Training").count("vega_lite_chart") == 5          # today's run: no new charts
    at.radio(key="train_anchor").set_value("bypass").run()
    assert not at.exception and tab_content(at, "Training").count("vega_lite_chart") == 7     # w's spread: words
    assert at.query_params == {"tab": "Training", "train_anchor": "bypass"}


def test_the_staleness_view_is_a_toggle_in_the_link():
    at = run({"tab": "Training", "train_steps": "20", "staleness": "1"})
    assert not at.exception and not at.error
    assert tab_content(at, "Training").count("vega_lite_chart") == 7          # learning curves, steps to the target
    assert any("PPO centred on μ, no correction (AReaL's naive PPO)" in caption.value for caption in at.caption)
    at.toggle(key="staleness").set_value(False).run()
    assert tab_content(at, "Training").count("vega_lite_chart") == 5
    assert at.query_params == {"tab": "Training", "train_steps": "20"}


def test_a_staleness_view_over_the_pages_seconds_is_refused_with_the_estimate(monkeypatch):
    """A step timed at 0.01 s (a fixed probe: timed for real, this setting came under the limit on a quiet machine and
    the run itself over it on a busy one): the run, 301 steps, is estimated at 3 s and drawn; the view, the run at
    each of its 6 lags in turn, at 18 s and refused."""
    from toylab.training.cost import Probe
    from toylab_app.caches import training_cache
    monkeypatch.setattr(training_cache, "probe", lambda *args: Probe("expected", a=0.01, b=0.0))
    at = run({"tab": "Training", "est": "naive", "train_steps": "300", "train_minibatches": "8", "train_epochs": "8",
              "staleness": "1"})
    assert not at.exception and not at.error
    assert tab_content(at, "Training").count("vega_lite_chart") == 8      # the run's charts, not the staleness view's
    (notice,) = [info.value for info in at.info if info.value.startswith("The staleness view (12 runs")]
    assert "estimated at 18 s, over the limit of 10 s; use fewer steps or updates per batch" in notice


def test_too_few_sequences_for_the_minibatches_is_a_warning():
    at = run({"tab": "Training", "train_mode": "sampled", "train_minibatches": "8", "N": "4"})
    assert not at.exception and not at.error
    assert any("cannot make 8 minibatches" in warning.value for warning in at.warning)


# -- a framework's update in one pick; the update's equation by its controls --------------------------------------

def open_group(at):
    """The three policies' group opened, as a click opens it (it reruns the page)."""
    at.expander(key="group_policies").open = True
    at.session_state["group_policies"] = True
    return at.run()


def test_a_framework_update_is_one_pick_and_runs_exactly_as_its_module_gives_it():
    from toylab.catalogue.update_presets import UPDATE_PRESETS
    from toylab.presentation.update_text import label

    preset = UPDATE_PRESETS["verl:bypass_geo_rs"]        # bypass, U = 4, the correction read at π_θ, a clamp of 20
    at = open_group(run({"tab": "Training", "train_steps": "20"}))
    at.selectbox(key="train_update").set_value(preset.id)
    at = open_group(at)                                  # (the browser keeps an open expander open; AppTest, told)
    assert not at.exception and not at.error
    assert preset.correction in at.session_state["est"]                  # its correction joined the sidebar's
    assert not any(widget.key == "train_anchor" for widget in at.radio)  # its update replaces the own controls …
    assert any(preset.code in caption.value for caption in at.caption)   # … and is shown in words
    assert any(caption.value == label(preset.update, preset.lag, preset.lag_draw) for caption in at.caption)
    settings = Settings(estimators=tuple(at.session_state["est"]))
    expected = train(make_toy(*settings.toy_key), {"on_policy": {}} | settings.selection(True), "none",
                     TrainingConfig(20, update=preset.update, lag=preset.lag, lag_draw=preset.lag_draw))
    table = shown_summary(at)
    assert list(table.index) == list(expected)
    for id, trajectory in expected.items():
        assert table.loc[id, "final_J"] == trajectory.J[-1], id
    assert at.query_params["train_update"] == preset.id
    at.selectbox(key="train_update").set_value("custom")
    at = open_group(at)                                                  # custom starts from its values
    assert at.radio(key="train_anchor").value == "bypass" and at.slider(key="train_minibatches").value == 4
    assert at.radio(key="train_weights").value == "current"


def test_every_framework_update_in_a_link_is_that_update():
    from toylab.catalogue.update_presets import UPDATE_PRESETS
    from toylab.state.query import parse_link, training_config

    for id, preset in UPDATE_PRESETS.items():
        _, view, notices = parse_link({"tab": "Training", "train_update": id})
        config = training_config(view, 64)
        assert notices == [] and (config.update, config.lag, config.lag_draw) == \
            (preset.update, preset.lag, preset.lag_draw), id


def test_the_update_equation_sits_by_the_controls_and_follows_them():
    at = run({"tab": "Training", "train_anchor": "rollout", "train_lag": "2"})
    assert any(caption.value.startswith("Three policies: r = π_θ/π_old, π_old = π_θ(k−s)") for caption in at.caption)
    equation = next(markdown.value for markdown in at.markdown if markdown.value.startswith("Each token:"))
    assert "r = π_θk/π_θ(k−s) from the first update" in equation and "μ = the engine at θ_(k−s), s = 2" in equation
    assert not at.info                                                   # the corrections apply: nothing moot
