"""Every lesson holds on the setting its button opens, and its numbers agree with the dense oracle."""

import re
from dataclasses import replace

import numpy as np
import pytest
from dense import DenseToy

from toylab import make_toy
from toylab.catalogue.estimators import ESTIMATORS
from toylab.engine.toy import Toy
from toylab.lessons.lesson import CLAIM_LENGTH, settings, view_of
from toylab.lessons.tour import LESSONS
from toylab.state.query import (
    INTEGER_RANGES,
    MISMATCH_RANGE,
    VIEW_DEFAULTS,
    VIEW_PARAMETERS,
    parse_link,
    parse_query,
    to_query,
    training_config,
    view_query,
)
from toylab.training.loop import TrainingConfig, train

TABS = ("Estimators", "Ratios", "Error vs batch size", "Threshold sweep", "Mismatch sweep", "Sequence length",
        "Training", "Experts & versions")
BY_ID = {lesson.id: lesson for lesson in LESSONS}


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_statement_holds_on_its_setting(lesson):
    evidence = lesson.check(settings(lesson))
    assert evidence.holds, evidence.numbers
    assert all(np.isfinite(value) for value in evidence.numbers.values())


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_setting_is_a_valid_link_and_the_tab_exists(lesson):
    chosen = settings(lesson)
    for name in ("T", "V", "seed", "N"):
        low, high = INTEGER_RANGES[name]
        assert low <= getattr(chosen, name) <= high
    assert MISMATCH_RANGE[0] <= chosen.mismatch <= MISMATCH_RANGE[1]
    assert set(lesson.controls["est"]) <= set(ESTIMATORS)
    reopened, notices = parse_query(to_query(chosen))
    assert reopened == chosen and not notices
    assert lesson.tab in TABS
    assert 1 <= len(re.findall(r"\.(\s|$)", lesson.text)) <= 2     # one or two sentences


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_claim_fits_the_lesson_box_and_names_every_mark(lesson):
    """A room reads the claim on top of the chart: at most CLAIM_LENGTH characters (two lines of the box at 1280 px),
    each of the lesson's marks named by its number, "(1)", and no number the chart does not draw."""
    marks = lesson.check(settings(lesson)).marks
    assert 0 < len(lesson.claim) <= CLAIM_LENGTH, (len(lesson.claim), lesson.claim)
    assert sorted(int(number) for number in re.findall(r"\((\d+)\)", lesson.claim)) == \
        list(range(1, len(marks) + 1)), lesson.claim


def test_required_lessons_are_all_there():
    assert {"weight_below_one", "token_bias", "seq_is_variance", "threshold_depends_on_N", "baseline_shift",
            "logged_reward", "sequence_ratio_names", "token_mask_collapse", "full_mask_stalls"} <= set(BY_ID)
    assert len(BY_ID) == len(LESSONS)


def _dense(lesson_id):
    chosen = settings(BY_ID[lesson_id])
    return chosen, DenseToy(make_toy(*chosen.toy_key))


def test_weight_numbers_against_dense():
    chosen, dense = _dense("weight_below_one")
    numbers = BY_ID["weight_below_one"].check(chosen).numbers
    mu, W = dense.p_sampler, dense.W
    assert numbers["E_μ[W]"] == pytest.approx(mu @ W, rel=1e-12)
    assert numbers["E_μ[log W]"] == pytest.approx(mu @ np.log(W), rel=1e-12)
    assert numbers["P_μ(W < 1)"] == pytest.approx(mu @ (W < 1), abs=1e-12)
    assert numbers["largest W"] == pytest.approx(W.max(), rel=1e-12)


def test_token_bias_numbers_against_dense():
    chosen, dense = _dense("token_bias")
    numbers = BY_ID["token_bias"].check(chosen).numbers
    for id in ("tok_is", "tok_tis", "seq_is"):
        _, bias, _ = dense.moments(id, chosen.params(id), chosen.baseline)
        scale = np.linalg.norm(dense.true_grad)
        assert numbers[f"rel bias {id}"] == pytest.approx(bias / scale, rel=1e-9, abs=1e-12)


def test_token_corrections_are_unbiased_only_at_one_token():
    lesson = BY_ID["token_bias"]
    one_token = replace(settings(lesson), T=1)
    assert not lesson.check(one_token).holds
    assert lesson.check(one_token).numbers["rel bias tok_is"] < 1e-12


def test_baseline_shift_against_dense():
    chosen, dense = _dense("baseline_shift")
    numbers = BY_ID["baseline_shift"].check(chosen).numbers
    assert numbers["b"] == pytest.approx(dense.baseline(chosen.baseline), rel=1e-12)
    for id in ("naive", "tok_tis", "tok_is", "seq_is"):
        shift = dense.moments(id, chosen.params(id), "none")[0] - dense.moments(id, chosen.params(id), chosen.baseline)[0]
        assert numbers[f"‖mean shift‖ {id}"] == pytest.approx(np.linalg.norm(shift), rel=1e-9, abs=1e-13)


def test_logged_reward_and_sequence_ratios_against_dense():
    chosen, dense = _dense("logged_reward")
    numbers = BY_ID["logged_reward"].check(chosen).numbers
    assert numbers["J = E_π[r]"] == pytest.approx(dense.p_train @ dense.R, rel=1e-12)
    assert numbers["E_μ[r] (logged)"] == pytest.approx(dense.p_sampler @ dense.R, rel=1e-12)
    chosen, dense = _dense("sequence_ratio_names")
    numbers = BY_ID["sequence_ratio_names"].check(chosen).numbers
    geo = dense.W ** (1 / dense.T)
    assert numbers["E_μ[ρ_geo]"] == pytest.approx(dense.p_sampler @ geo, rel=1e-12)
    assert numbers["P_μ(ρ_geo > 2)"] == pytest.approx(dense.p_sampler @ (geo > 2), abs=1e-12)
    assert numbers["P_μ(W > 2)"] == pytest.approx(dense.p_sampler @ (dense.W > 2), abs=1e-12)


def test_the_variance_lesson_fails_without_mismatch():
    """A check that can fail: at mismatch 0 the variance ratio is 1 and does not grow."""
    lesson = BY_ID["seq_is_variance"]
    chosen = replace(settings(lesson), mismatch=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert not lesson.check(chosen).holds


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_a_lessons_link_parses_back_to_its_setting_and_view(lesson):
    assert set(lesson.view) <= {name for name, parameter in VIEW_PARAMETERS.items() if parameter.tab == lesson.tab}
    for present in (False, True):             # a sweep's panel is in the link only in presentation mode
        view = view_of(lesson) | {"present": present}
        link = to_query(settings(lesson)) | view_query(VIEW_DEFAULTS | view)
        reopened, reopened_view, notices = parse_link(link)
        assert (reopened, notices) == (settings(lesson), [])
        shown = {name for name in view if VIEW_PARAMETERS[name].shown(VIEW_DEFAULTS | view)}
        assert {name: reopened_view[name] for name in shown} == {name: view[name] for name in shown}


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if lesson.tab == "Training"], ids=lambda lesson: lesson.id)
def test_a_training_lesson_opens_the_dense_toy_its_check_trains(lesson):
    """No lesson trains a mixture of experts: its view keeps the tab's replay at "none" (its "off" is a mixture of
    experts without replay, another run than the check's)."""
    config = training_config(VIEW_DEFAULTS | view_of(lesson), settings(lesson).N)
    assert config.experts is None and config.replay == "off"


def test_the_collapse_lesson_fails_where_a_baseline_rescues_the_mask():
    """A check that can fail: with b = E_μ[r] tok_mis climbs to J ≈ 0.9 and never falls."""
    lesson = BY_ID["token_mask_collapse"]
    assert not lesson.check(replace(settings(lesson), baseline="logged")).holds


def test_the_collapse_numbers_against_dense_gradient_ascent():
    """tok_mis's flow in the lesson, re-run as plain ascent on the dense oracle's mean, reaches the same J."""
    chosen = settings(BY_ID["token_mask_collapse"])
    toy = make_toy(*chosen.toy_key)
    numbers = BY_ID["token_mask_collapse"].check(chosen).numbers
    theta = toy.theta.copy()
    params = chosen.params("tok_mis")
    for _ in range(40):
        dense = DenseToy(Toy(theta, toy.b, toy.mismatch, 0))
        theta = theta + 1.0 * dense.moments("tok_mis", params, "none")[0]
    fast = train(toy, {"tok_mis": params}, "none", TrainingConfig(steps=40))["tok_mis"]
    final = DenseToy(Toy(theta, toy.b, toy.mismatch, 0))
    assert final.p_train @ final.R == pytest.approx(fast.J[-1], abs=1e-10)
    assert numbers["peak J"] == pytest.approx(fast.J[35], abs=1e-12)
