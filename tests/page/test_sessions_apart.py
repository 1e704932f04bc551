"""A user's own settings never reach another's page: two sessions of the page (two AppTests in one process, so they
share every cross-session cache) with different settings, their runs interleaved, each showing exactly its own
toy's numbers and its own link. benchmarks/reading_group.py checks the same with up to 100 websocket clients at once
(each press's address must carry that user's own value)."""

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from toylab import exact_table, make_toy
from toylab.analysis.diagnostics import diagnostics
from toylab.state.query import parse_query

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"


def session(query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    return at


def assert_shows(at, settings):
    """The page shows ``settings``' header and exact table, and its address is ``settings``' link."""
    assert not at.exception and not at.error
    d = diagnostics(make_toy(*settings.toy_key))
    assert [metric.value for metric in at.metric[:5]] == [f"{d.M:,}", f"{d.J:.4f}", f"{d.logged_reward:.4f}",
                                                        f"{d.grad_norm:.4f}", f"{d.kl_mu_pi:.4f}"]
    expected = exact_table(make_toy(*settings.toy_key), settings.selection(True), settings.baseline, settings.N)
    shown = at.dataframe[0].value
    for column in ("rel_bias", "rel_std", "rel_rmse"):
        np.testing.assert_array_equal(shown[column], [row[column] for row in expected], err_msg=column)
    linked, _ = parse_query({name: [value] for name, value in at.query_params.items()})
    assert linked == settings


def settings_of(mismatch, **link):
    return parse_query({name: [str(value)] for name, value in link.items()} | {"mismatch": [str(mismatch)]})[0]


def test_two_sessions_interleaved_each_see_only_their_own_settings():
    first = session({"mismatch": "0.3"})
    second = session({"mismatch": "1.2", "N": "16", "baseline": "true", "T": "5"})
    first.run()
    second.run()
    assert_shows(first, settings_of(0.3))
    assert_shows(second, settings_of(1.2, N=16, baseline="true", T=5))
    for step in range(1, 4):                              # each presses its slider in turn, the other's page stays
        first.slider(key="mismatch").set_value(round(0.3 + 0.05 * step, 2)).run()
        assert_shows(second, settings_of(round(1.2 + 0.05 * (step - 1), 2), N=16, baseline="true", T=5))
        second.slider(key="mismatch").set_value(round(1.2 + 0.05 * step, 2)).run()
        assert_shows(first, settings_of(round(0.3 + 0.05 * step, 2)))
        assert_shows(second, settings_of(round(1.2 + 0.05 * step, 2), N=16, baseline="true", T=5))
    first.run()                                           # a rerun after the other's press: still its own
    assert_shows(first, settings_of(0.45))
