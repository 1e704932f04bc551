"""benchmarks/layout_app is the Estimators tab's layout: the same kinds of element, as many of each, as the page's
first run sends (its one custom component aside), so that page_latency.py's multiple for it is Streamlit's cost for
the page's elements."""

from collections import Counter
from pathlib import Path

from streamlit.testing.v1 import AppTest
from test_app import _descendants

ROOT = Path(__file__).resolve().parents[2]


def element_kinds(script):
    run = AppTest.from_file(str(script), default_timeout=120).run()
    assert not run.exception
    return Counter(node.type for node in _descendants(run._tree))


def test_the_layout_app_sends_the_estimators_tabs_elements():
    page = element_kinds(ROOT / "toylab_app" / "script" / "streamlit_app.py")
    assert page.pop("bidi_component") == 1
    assert element_kinds(ROOT / "benchmarks" / "layout_app" / "streamlit_app.py") == page
