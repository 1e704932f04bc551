"""The last resort (toylab_app/last_resort.py): an unexpected error in a tab is a notice with its one line and no server
path; the rest of the page works (another tab opens, the sidebar moves, the address is written)."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from toylab_app import lessons_tab, ratios_tab
from toylab_app.last_resort import one_line

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
ROOT = str(APP.parent)


def failing(settings):
    raise TypeError(f"unsupported format string passed to NoneType.__format__ in {ROOT}/toylab/state/query.py\n"
                    "second line")


def test_an_error_in_a_tab_is_one_line_without_a_path_and_the_page_goes_on(monkeypatch):
    monkeypatch.setattr(ratios_tab, "render", failing)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"tab": "Ratios"})
    at.run()
    assert not at.exception
    [error] = at.error
    assert "The Ratios tab stopped on an unexpected error" in error.value
    assert "TypeError: unsupported format string passed to NoneType.__format__ in query.py" in error.value
    assert ROOT not in error.value and "/toylab/" not in error.value and "second line" not in error.value
    at.slider(key="mismatch").set_value(0.8).run()
    assert not at.exception and at.query_params["mismatch"] == "0.8" and at.query_params["tab"] == "Ratios"
    at.session_state["tab"] = "Estimators"
    at.run()
    assert not at.exception and not at.error and len(at.dataframe) > 0


def test_streamlit_control_flow_passes_through(monkeypatch):
    """st.stop in a tab stops the script as it would without the last resort (a BaseException, not an Exception)."""
    import streamlit as st
    monkeypatch.setattr(lessons_tab, "render", lambda settings: st.stop())
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"tab": "Lessons"})
    at.run()
    assert not at.exception and not at.error


def test_one_line_keeps_a_path_s_last_part_and_stays_short():
    assert one_line(OSError(2, "No such file", "/srv/app/data/x.parquet")) == \
        "FileNotFoundError: [Errno 2] No such file: 'x.parquet'"
    assert one_line(ValueError("C:\\Users\\me\\run\\step_1.jsonl is bad")) == "ValueError: step_1.jsonl is bad"
    assert one_line(RuntimeError("")) == "RuntimeError"
    assert len(one_line(ValueError("x" * 10_000))) == 200
