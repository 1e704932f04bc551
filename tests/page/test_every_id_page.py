"""Every id of the catalogue opens by link on every tab of the page, its parameters at their defaults (areal's lower
bound "none", which parses to None, included) and at edges drawn from each one's range or choices (hypothesis,
derandomized): no exception, no notice about the link, no tab stopped by the last resort, and the page writes back the
link it opened. (tests/state/test_every_id_link.py checks the same links id by id without the page.)"""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from link_edges import edges, text, thresholds_of
from streamlit.testing.v1 import AppTest

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.state.query import TAB_LABELS, parse_link, to_query, view_query

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
NOTICE_ICON = ":material/link_off:"
LAST_RESORT = "stopped on an unexpected error"
EVERY_ID = ",".join(ESTIMATORS)


def opens_on_every_tab(link):
    settings_, view, notices = parse_link(link)
    assert not notices, notices
    for tab in TAB_LABELS:
        at = AppTest.from_file(APP, default_timeout=300)
        at.query_params.update(link | {"tab": tab})
        at.run()
        assert not at.exception, (tab, [exception.message for exception in at.exception])
        assert not [warning for warning in at.warning if warning.icon == NOTICE_ICON], tab
        assert not [error.value for error in at.error if LAST_RESORT in error.value], tab
        expected = to_query(settings_) | view_query(view | {"tab": tab})
        assert at.query_params == expected, tab


@pytest.mark.slow
def test_every_id_at_its_defaults_opens_on_every_tab():
    opens_on_every_tab({"est": EVERY_ID})


def drawn_thresholds(data):
    """Every id's parameters, each at a drawn edge, an id's left at its defaults where its draws do not fit together
    (a lower end above the upper)."""
    link = {}
    for id, estimator in ESTIMATORS.items():
        chosen = {name: data.draw(st.sampled_from(edges(param))) for name, param in estimator.params.items()}
        try:
            resolve_params(id, {name: text(value) for name, value in chosen.items()})
        except ValueError:
            continue
        link |= thresholds_of(id, chosen)
    return link


@pytest.mark.slow
@settings(derandomize=True, database=None, deadline=None, max_examples=2)
@given(st.data())
def test_every_id_with_every_parameter_at_a_drawn_edge_opens_on_every_tab(data):
    opens_on_every_tab({"est": EVERY_ID} | drawn_thresholds(data))
