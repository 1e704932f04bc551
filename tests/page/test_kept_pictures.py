"""What is the same for every user is made once: a second session's identical press builds no chart, trains no run and
shows no spinner; a kept picture is the picture its parameters make (no parameter left out of its key); the page
config is sent once a session. Counted, never timed (toylab_app/caches/kept.py, docs/performance.md)."""

import threading
from pathlib import Path

import pytest
import streamlit
from streamlit.testing.v1 import AppTest

from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.state.query import VIEW_DEFAULTS, to_query, view_query
from toylab_app import chart_element, training_tab
from toylab_app.caches import ahead, experts_cache, kept, training_cache
from toylab_app.caches.bounded_cache import ByteBoundedCache

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
MIX = ["Estimators", "Ratios", "Error vs batch size", "Training", "Threshold sweep", "Mismatch sweep",
       "Sequence length", "Experts & versions"]


class Counted:
    """A function's calls by the pages' runs (not by the pictures made ahead, in the background), counted, passed
    through to it."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, *args, **kwargs):
        self.calls += threading.current_thread().name != ahead.THREAD
        return self.function(*args, **kwargs)


def counted(monkeypatch):
    """Empty kept pictures and training runs, and counters on what a press would build: (prepared charts, training
    runs, spinners)."""
    assert ahead.settled(120)                                      # nothing still being made from an earlier test
    monkeypatch.setattr(kept, "KEPT", ByteBoundedCache(kept.KEPT_BYTES, kept.weight, grows=False))
    monkeypatch.setattr(training_cache, "TRAJECTORIES", ByteBoundedCache(2**28, lambda runs: 1))
    monkeypatch.setattr(training_tab, "CURVES", ByteBoundedCache(8, lambda curves: 1, grows=False))
    counts = Counted(chart_element.prepare), Counted(training_cache.train), Counted(streamlit.spinner)
    monkeypatch.setattr(chart_element, "prepare", counts[0])
    monkeypatch.setattr(training_cache, "train", counts[1])
    monkeypatch.setattr(streamlit, "spinner", counts[2])
    return counts


@pytest.fixture
def fresh(monkeypatch):
    """``counted``, with nothing made ahead: each press counts what it builds itself."""
    counts = counted(monkeypatch)
    monkeypatch.setattr(ahead, "note", lambda calls: None)
    return counts


def session(tab, **query):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"tab": tab, **query})
    return at


@pytest.mark.parametrize("tab", MIX)
def test_a_second_sessions_identical_press_builds_nothing(tab, fresh):
    prepared, trained, spinners = fresh
    first = session(tab)
    first.run()
    first.slider(key="mismatch").set_value(0.31).run()
    assert not first.exception and not first.error
    assert prepared.calls > 0 and spinners.calls > 0 and (trained.calls > 0) == (tab == "Training")
    before = prepared.calls, trained.calls, spinners.calls
    second = session(tab)
    second.run()
    second.slider(key="mismatch").set_value(0.31).run()
    assert not second.exception and not second.error
    assert (prepared.calls, trained.calls, spinners.calls) == before          # built nothing, said nothing
    assert _shown(second) == _shown(first)


def _shown(at):
    """What a page shows: every element's type and value, charts as their specs and data (their datasets by place)."""
    shown = []
    for node in _descendants(at._tree):
        if node.type == "vega_lite_chart":
            shown.append((node.proto.spec, [dataset.data.data for dataset in node.proto.datasets]))
        elif hasattr(node, "value") and node.type not in ("dataframe",):
            shown.append((node.type, repr(node.value)))
        elif node.type == "dataframe":
            shown.append(node.proto.arrow_data.data)
    return shown


def _descendants(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _descendants(child)


def test_a_mismatch_step_on_experts_and_versions_keeps_what_it_does_not_change(fresh, monkeypatch):
    """The flip rates read the router and the seed, on_policy's versions read π: a mismatch step recomputes neither."""
    flips, histories = Counted(experts_cache.flip_curve), Counted(experts_cache.history_of)
    monkeypatch.setattr(experts_cache, "flip_curve", flips)
    monkeypatch.setattr(experts_cache, "history_of", histories)
    at = session("Experts & versions", seed="7")                  # a seed no other test opens: st.cache_data is cold
    at.run()
    assert not at.exception and not at.error and (flips.calls, histories.calls) == (1, 1)
    prepared = fresh[0].calls
    at.slider(key="mismatch").set_value(0.31).run()
    assert not at.exception and not at.error and (flips.calls, histories.calls) == (1, 1)
    assert fresh[0].calls - prepared == 2                         # the replay and versions charts, not the flips'


def test_a_step_back_to_a_kept_value_builds_nothing(fresh):
    """The room's walk: one user steps up and back; the way back finds every picture kept."""
    prepared, trained, _ = fresh
    at = session("Training")
    at.run()
    for value in (0.31, 0.32):
        at.slider(key="mismatch").set_value(value).run()
    before = prepared.calls, trained.calls
    for value in (0.31, 0.3):
        at.slider(key="mismatch").set_value(value).run()
    assert not at.exception and not at.error and (prepared.calls, trained.calls) == before


@pytest.mark.parametrize("tab", ["Estimators", "Training", "Experts & versions"])
def test_the_next_position_of_the_slider_is_made_while_the_server_is_idle(tab, monkeypatch):
    """After a press, the pictures of the positions beside it are made in the background (``caches.ahead``): the next
    press, one step on, builds nothing and trains nothing."""
    prepared, trained, _ = counted(monkeypatch)
    at = session(tab)
    at.run()
    at.slider(key="mismatch").set_value(0.31).run()
    assert ahead.settled(120) and prepared.calls > 0
    before = prepared.calls, trained.calls
    at.slider(key="mismatch").set_value(0.32).run()
    assert not at.exception and not at.error
    assert (prepared.calls, trained.calls) == before
    assert ahead.settled(120)


VIEWS = [{"tab": tab} for tab in MIX] + [{"tab": tab, "present": "1"} for tab in MIX] + [
    {"tab": "Estimators", "compare_baseline": "true"}, {"tab": "Ratios", "ratio_panels": "1", "draw": "2"},
    {"tab": "Error vs batch size", "mc_dots": "1"}, {"tab": "Threshold sweep", "compare_N": "4096"},
    {"tab": "Mismatch sweep", "sweep": "temperature", "present": "1", "mismatch_panel": "bias"},
    {"tab": "Training", "train_optimizer": "adam", "train_lag": "2"}, {"tab": "Training", "staleness": "1"},
    {"tab": "Training", "train_mode": "sampled", "N": "16"},
    {"tab": "Experts & versions", "flip_axis": "experts", "moe_draw": "token", "moe_draws": "2", "N": "16"},
    {"tab": "Experts & versions", "versions_switch": "fixed", "versions_anchor": "loglinear", "versions_step": "10",
     "est": "naive,tok_tis"}]


def _lesson_views(lessons):
    return [to_query(lesson_settings(lesson)) | view_query(VIEW_DEFAULTS | view_of(lesson)) for lesson in lessons]


FEW_VIEWS = [{"tab": "Estimators"}, {"tab": "Estimators", "present": "1"}]      # a parameter a key could leave out


@pytest.mark.parametrize("views", [FEW_VIEWS, pytest.param(VIEWS, marks=pytest.mark.slow),
                                   pytest.param(_lesson_views(LESSONS), marks=pytest.mark.slow)],
                         ids=["few views", "views", "lessons"])
def test_a_kept_picture_is_what_its_parameters_make(views):
    """Views that differ, one after another in one process (a lesson's marks, presentation mode, another baseline,
    panel or run), each opened twice: with every kept value computed again and compared at each use
    (``kept.verifying``), a key that left out a parameter fails the run that reuses another view's picture."""
    with kept.verifying():
        for view in views:
            for _ in range(2):
                at = AppTest.from_file(APP, default_timeout=300)
                at.query_params.update({name: str(value) for name, value in view.items()})
                at.run()
                assert not at.exception and not at.error, (view, at.exception, [e.value for e in at.error])


def test_verifying_catches_a_key_that_leaves_a_parameter_out():
    """The check itself: a kept function that reads something besides its arguments fails under ``verifying``."""
    outside = {"value": 1}

    @kept.kept
    def reads_outside(x):
        return x + outside["value"]

    assert reads_outside(1) == 2
    outside["value"] = 5
    assert reads_outside(1) == 2                                  # kept: its key does not see the change
    with kept.verifying(), pytest.raises(AssertionError, match="kept value is not the value"):
        reads_outside(1)


def test_the_page_config_is_sent_once_a_session_and_again_when_presenting(monkeypatch):
    sent = Counted(streamlit.set_page_config)
    monkeypatch.setattr(streamlit, "set_page_config", sent)
    at = session("Estimators")
    at.run()
    at.slider(key="mismatch").set_value(0.31).run()
    at.slider(key="mismatch").set_value(0.32).run()
    assert sent.calls == 1
    at.session_state["present"] = True
    at.run()
    at.run()
    assert sent.calls == 2 and not at.exception
