"""Hidden variables on the command line: train's --replay, --switch and --versions with a framework's correction,
update and pipeline presets together, as the page's link sets them, against the brute force (tests/dense_hidden.py);
the routing and versions commands' numbers are the library's; their refusals one line."""

import json

import numpy as np
import pytest
from dense_hidden import DenseRoutedModel, DenseVersionsModel, dense_mixture_training
from tiers import fast_then_slow

from toylab import make_toy, resolve_params
from toylab.analysis.routing import routing_view
from toylab.catalogue.update_presets import UPDATE_PRESETS
from toylab.cli.main import main
from toylab.cli.train import parse_arguments
from toylab.engine.experts import Experts
from toylab.engine.versions import Versions
from toylab.state.query import TRAINING_TAB, parse_link, training_config
from toylab.training.mixtures import Routed


def json_of(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and err.startswith("toylab: error:"), err
    return err


TOY = ("--T", "3", "--V", "2", "--mismatch", "0.5", "--seed", "4", "--steps", "3", "--lr", "1")
COMBINED = {         # (a framework's presets: correction, update, pipeline, replay or versions; its link's; the model)
    "verl R3": (["--estimators", "on_policy,verl:decoupled_token_is,tok_tis", "--update", "verl:decoupled",
                 "--pipeline", "verl", "--temperature", "0.8", "--replay", "verl:R3", "--moe-layers", "1",
                 "--moe-experts", "3", "--router-error", "0.7", "--router-draws", "2"],
                {"pipeline": "verl", "temperature": "0.8", "est": "verl:decoupled_token_is,tok_tis",
                 "train_update": "verl:decoupled", "train_replay_preset": "verl:R3", "moe_layers": "1",
                 "moe_experts": "3", "moe_error": "0.7", "moe_draws": "2"}),
    "slime R2": (["--estimators", "on_policy,tok_tis", "--update", "miles:default", "--pipeline", "miles",
                  "--temperature", "1.25", "--replay", "miles:use_routing_replay", "--moe-layers", "2",
                  "--moe-experts", "3", "--moe-top-k", "1", "--router-error", "0.6", "--router-draws", "2",
                  "--router-draw", "token"],
                 {"pipeline": "miles", "temperature": "1.25", "est": "tok_tis", "train_update": "miles:default",
                  "train_replay_preset": "miles:use_routing_replay", "moe_layers": "2", "moe_experts": "3",
                  "moe_top_k": "1", "moe_error": "0.6", "moe_draws": "2", "moe_draw": "token"}),
    "AReaL loglinear": (["--estimators", "on_policy,areal:token_mask,tok_tis", "--update", "areal:decoupled",
                         "--pipeline", "areal", "--temperature", "0.8", "--versions", "areal:loglinear", "--switch",
                         "fixed", "--switch-at", "2"],
                        {"pipeline": "areal", "temperature": "0.8", "est": "areal:token_mask,tok_tis",
                         "train_update": "areal:decoupled", "train_version_preset": "areal:loglinear",
                         "train_switch": "fixed", "train_switch_at": "2"}),
    "slime masked": (["--estimators", "on_policy,tok_tis", "--update", "slime:async_keep_old_actor", "--pipeline",
                      "roll", "--versions", "slime:mask_offpolicy_in_partial_rollout", "--switch", "drawn"],
                     {"pipeline": "roll", "est": "tok_tis", "train_update": "slime:async_keep_old_actor",
                      "train_version_preset": "slime:mask_offpolicy_in_partial_rollout", "train_switch": "drawn"}),
}


@pytest.mark.parametrize("case", fast_then_slow(list(COMBINED), ["verl R3", "AReaL loglinear"]))
def test_a_replay_or_version_preset_trains_with_a_correction_update_and_pipeline_preset(capsys, case):
    """The command's run is the brute force's for the framework's update (anchor, loss, clamps, U, lag), pipeline
    (what is logged and scored) and correction, the mixture replayed or the versions handled as its preset says; the
    page's link with the same presets sets the same TrainingConfig."""
    argv, link = COMBINED[case]
    config = parse_arguments([*TOY, *argv])[1].config
    settings, view, notices = parse_link({"T": "3", "V": "2", "mismatch": "0.5", "seed": "4", "tab": TRAINING_TAB,
                                          **link})
    assert not notices
    from_link = training_config(view, settings.N)
    for name in ("update", "lag", "lag_draw", "experts", "replay", "versions"):
        assert getattr(from_link, name) == getattr(config, name), name
    result = json_of(capsys, "train", *TOY, *argv, "--baseline", "true", "--json")
    preset = result["update"]["preset"]
    assert (config.update, config.lag, config.lag_draw) == \
        (UPDATE_PRESETS[preset].update, UPDATE_PRESETS[preset].lag, UPDATE_PRESETS[preset].lag_draw)
    toy = make_toy(3, 2, 0.5, 4, **{key: value for key, value in result["toy"].items()
                                    if key in ("temperature", "logged", "scored", "top_p", "top_k", "precision")})
    if config.experts is not None:
        model = DenseRoutedModel(toy, Routed(toy, config.experts, config.replay).moe, config.replay)
    else:
        versions = config.versions
        model = DenseVersionsModel(toy, versions.switch, versions.at, versions.stamp, versions.mask_stale)
    for trajectory in result["trajectories"]:
        estimator = trajectory["estimator"]
        oracle = dense_mixture_training(toy, model, estimator, resolve_params(estimator, {}), "true", config.update,
                                        3, 1.0, lag=config.lag, lag_draw=config.lag_draw, prox=config.versions.prox)
        for name in ("J", "logged_reward", "kl_mu_pi", "clip_share", "ppo_kl", "lag"):
            np.testing.assert_allclose(trajectory[name], oracle[name], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{estimator} {name}")
    assert any(trajectory["J"][-1] != trajectory["J"][0] for trajectory in result["trajectories"])


@pytest.mark.parametrize("argv, says", [
    (["--update", "verl:decoupled", "--anchor", "bypass"], "--anchor contradicts it"),
    (["--update", "verl:decoupled", "--lag", "2"], "--lag contradicts it"),
    (["--update", "verl:nope"], "invalid choice 'verl:nope'"),
    (["--replay", "verl:R2", "--update", "verl:bypass"], "R2 replays the routing recorded"),
    (["--moe-layers", "2"], "add --replay off, R2 or R3"),
    (["--versions", "areal:loglinear", "--switch", "fixed", "--update", "verl:bypass"],
     "log-linear π_prox replaces the decoupled loss's recomputed anchor"),
    (["--versions", "areal:loglinear", "--stamp", "head"], "give one or the other"),
    (["--switch", "drawn", "--update", "verl:fully_async_decoupled"], "a drawn switch draws each sequence's head lag"),
    (["--replay", "R3", "--kl", "k3.loss", "--beta", "0.1"], "train one at a time"),
    (["--replay", "R3", "--switch", "fixed"], "train one at a time"),
    (["--replay", "R3", "--pipeline", "slime", "--top-p", "0.9"], "keeps the sampler's mask"),
])
def test_bad_combinations_are_one_line_refusals(capsys, argv, says):
    assert says in one_line_error(capsys, "train", *TOY, *argv)


def test_the_routing_command_is_the_library_s(capsys):
    result = json_of(capsys, "routing", "--T", "3", "--V", "3", "--router-error", "0.4", "--moe-experts", "3",
                     "--moe-top-k", "1", "--estimators", "naive,tok_tis,seq_tis", "--N", "32", "--json")
    toy = make_toy(3, 3)
    experts = Experts(experts=3, top_k=1, router_error=0.4)
    view = routing_view(toy, experts, {id: resolve_params(id, {}) for id in ("naive", "tok_tis", "seq_tis")}, "none",
                        32)
    assert result["J"] == pytest.approx(view.J, rel=1e-12)
    rows = {(row["estimator"], row["replay"]): row for row in result["rows"]}
    assert len(rows) == len(view.rows) == 9
    for row in view.rows:
        for name in ("rel_bias", "rel_std"):
            assert rows[row.estimator, row.replay][name] == pytest.approx(getattr(row, name), rel=1e-12)


def test_train_s_versions_default_to_none_and_a_version_preset_sets_them(capsys):
    assert parse_arguments(list(TOY))[1].config.versions == Versions()
    chosen = parse_arguments([*TOY, "--versions", "prime_rl:max_off_policy_steps", "--switch", "fixed"])[1].config
    assert (chosen.versions.stamp, chosen.versions.mask_stale, chosen.versions.prox) == ("head", False, "recompute")
