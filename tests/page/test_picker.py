"""The estimator picker with about 80 ids (AppTest): grouped by framework, "my framework" lists its presets first,
and the choice lives in the URL like every view parameter."""

from pathlib import Path

from streamlit.testing.v1 import AppTest
from test_app import open_sidebar

from toylab import ESTIMATORS, PRESET_IDS
from toylab.catalogue.presets import FRAMEWORKS

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"


def run(query=None):
    at = open_sidebar(AppTest.from_file(APP, default_timeout=60))
    at.query_params.update(query or {})
    return at.run()


def blocks(ids):
    """The framework of each contiguous run of ids (None: the catalogue)."""
    runs = []
    for id in ids:
        framework = ESTIMATORS[id].framework
        if not runs or runs[-1] != framework:
            runs.append(framework)
    return runs


def test_the_picker_lists_the_catalogue_then_each_framework_together():
    at = run()
    assert not at.exception and not at.warning
    options = at.multiselect(key="est").options
    assert sorted(options) == sorted(ESTIMATORS)
    assert blocks(options) == [None, *FRAMEWORKS]                  # every framework's presets in one run
    assert at.selectbox(key="framework").value == "any" and "framework" not in at.query_params


def test_my_framework_from_a_link_lists_its_presets_first():
    for framework in FRAMEWORKS:
        at = run({"framework": framework, "est": "naive,tok_tis"})
        assert not at.exception and not at.warning
        options = at.multiselect(key="est").options
        mine = [id for id in PRESET_IDS if ESTIMATORS[id].framework == framework]
        assert options[:len(mine)] == mine and sorted(options) == sorted(ESTIMATORS)
        assert blocks(options)[:2] == [framework, None]
        assert at.selectbox(key="framework").value == framework
        assert at.query_params == {"framework": framework, "est": "naive,tok_tis"}


def test_changing_my_framework_keeps_the_selection_and_its_link():
    at = run({"est": "naive,verl:decoupled_geo_rs,tok_tis", "tok_tis.C": "3"})
    chosen = at.multiselect(key="est").value
    at.selectbox(key="framework").set_value("trl").run()
    assert not at.exception
    assert at.multiselect(key="est").options[0].startswith("trl:")
    assert at.multiselect(key="est").value == chosen
    assert at.query_params["est"] == "naive,tok_tis,verl:decoupled_geo_rs" and at.query_params["tok_tis.C"] == "3"


def test_a_bad_framework_in_a_link_gets_a_notice_and_leaves_the_address():
    at = run({"framework": "nope", "T": "5"})
    assert not at.exception
    assert len(at.warning) == 1 and "framework = 'nope' is not one of" in at.warning[0].value
    assert at.query_params == {"T": "5"}
    assert at.selectbox(key="framework").value == "any"
