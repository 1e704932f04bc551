"""Every URL parameter survives a link at every allowed value (AppTest, hypothesis derandomized).

The parameters and their values come from the registry, ``toylab.state.query.URL_PARAMETERS`` (the sidebar's
single-valued controls and every view parameter), so a parameter added there is covered here unchanged. Each is
opened alone — with its tab, what it ``needs`` (e.g. presentation mode), and the vocabulary its whole range needs
(T = 16 fits only at V = 2, top_k = 8 only at V = 8) — at each of its choices, or its range's ends, and at interior
values hypothesis draws; the link parser must accept each (no notice). The page must show the value — in the widget
whose key is the parameter's name, or in session state where no widget shows it (the open tab, the resampled draw,
presentation mode) — with no notice, and write back the very link it opened.
"""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from toylab.state.query import URL_PARAMETERS, parse_link, to_query, view_query

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
NOTICE_ICON = ":material/link_off:"          # the page's notices about a link (toylab_app/page.py)
PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=30)
VOCABULARY = {"T": "2", "top_k": "8"}      # V at which the parameter's whole range is allowed (M = V**T, top_k ≤ V)


def context(name):
    """The link a parameter is opened in: its tab and what it needs, as URL values."""
    parameter = URL_PARAMETERS[name]
    given = ({"tab": parameter.tab} if parameter.tab else {}) | ({"V": VOCABULARY[name]} if name in VOCABULARY else {})
    return given | {other: URL_PARAMETERS[other].to_url(value) for other, value in parameter.needs.items()}


def allowed(name):
    """(choices, low, high) of the parameter in its context's Settings and view."""
    settings_, view, _ = parse_link(context(name))
    return URL_PARAMETERS[name].allowed(settings_, view)


def special_values(name):
    """Each choice (both, for a switch), or the range's two ends."""
    choices, low, high = allowed(name)
    if isinstance(URL_PARAMETERS[name].default, bool):
        return [False, True]
    return list(choices) if choices else [low, high]


def interior(name):
    """A strategy for values strictly inside the parameter's range, on its steps (None for a choice list)."""
    parameter = URL_PARAMETERS[name]
    choices, low, high = allowed(name)
    if choices or isinstance(parameter.default, bool):
        return None
    if parameter.step:
        return st.integers(1, round((high - low) / parameter.step) - 1).map(lambda k: type(parameter.default)(
            low + k * parameter.step))
    if isinstance(parameter.default, int):
        return st.integers(int(low) + 1, int(high) - 1)
    return st.floats(low, high, exclude_min=True, exclude_max=True).map(lambda x: float(f"{x:.10g}"))


def widgets(node):
    for child in getattr(node, "children", {}).values():
        if getattr(child, "key", None) is not None and hasattr(child, "value"):
            yield child
        yield from widgets(child)


def opens(name, value):
    """Open the link with ``name`` at ``value``: the parser accepts it, the page shows it and writes the same link
    back."""
    link = context(name) | {name: URL_PARAMETERS[name].to_url(value)}
    settings_, view, notices = parse_link(link)
    assert not notices, (link, notices)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(link)
    at.run()
    notices = [warning.value for warning in at.warning if warning.icon == NOTICE_ICON]
    assert not at.exception and not notices, (link, at.exception, notices)
    shown = {widget.key: widget.value for widget in widgets(at._tree)}
    assert (shown[name] if name in shown else at.session_state[name]) == value, link
    assert at.query_params == to_query(settings_) | view_query(view), link


@pytest.mark.slow
@pytest.mark.parametrize("name", list(URL_PARAMETERS))
def test_every_parameter_opens_at_each_choice_and_both_ends_of_its_range(name):
    for value in special_values(name):
        opens(name, value)


@pytest.mark.slow
@PROPERTY
@given(st.data())
def test_every_parameter_opens_at_interior_values(data):
    name = data.draw(st.sampled_from([name for name in URL_PARAMETERS if interior(name) is not None]))
    opens(name, data.draw(interior(name)))


def test_the_registry_is_covered_including_the_training_controls_and_the_draw():
    assert {"tab", "present", "draw", "train_lr", "train_steps", "train_runs", "train_mode", "train_optimizer",
            "train_pick", "sga_step", "train_noise", "sweep", "T", "V", "mismatch", "seed", "N", "baseline", "agg",
            "top_p", "top_k", "temperature", "precision"} <= set(URL_PARAMETERS)
