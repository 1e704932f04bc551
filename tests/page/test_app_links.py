"""Hand-edited links on the page (AppTest): undefined numbers shown as "—" with the reason, every bad view
parameter explained and removed from the address, repeated parameters, huge values quoted short.

The page runs in this process, so a RuntimeWarning in any computation fails these tests (pyproject.toml).
"""

import ast
import json
from pathlib import Path

import pyarrow as pa
import pytest
from messages import says
from streamlit.testing.v1 import AppTest

from toylab import exact_table, make_toy
from toylab.state.query import TAB_LABELS, VIEW_PARAMETERS, parse_query
from toylab.text import QUOTE_LIMIT, UNDEFINED

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
NOTICE_LIMIT = 600


def run(query=None, **state):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def charts(node):
    for child in getattr(node, "children", {}).values():
        if child.type == "vega_lite_chart":
            yield child
        yield from charts(child)


def chart_data(at):
    """Every dataset of the Estimators tab's scatter, as DataFrames."""
    chart = next(charts(at._tree))
    return [pa.ipc.open_stream(dataset.data.data).read_all().to_pandas() for dataset in chart.proto.datasets]


# -- undefined numbers: "—" in the table, the reason under it, nothing undefined in the scatter --------------

KEPT_WITH_A_ZERO = "every sequence it keeps has advantage A = r − b = 0 (b = 0)"


@pytest.mark.parametrize("query, reasons", [
    ({"est": "trm", "trm.eps": "0.01"}, {"trm": "every sequence is masked"}),
    ({"est": "tok_mis", "tok_mis.lo": "1", "tok_mis.hi": "1"}, {"tok_mis": "every token is masked"}),
    ({"T": "1", "mismatch": "2"}, {"tok_mis": "every token is masked", "seq_mis": KEPT_WITH_A_ZERO,
                                   "geo_rs": "every sequence is masked"}),
    ({"est": "naive,seq_is,k3_rs"}, {"k3_rs": KEPT_WITH_A_ZERO}),
])
def test_undefined_cosine_is_a_dash_with_its_reason(query, reasons):
    at = run(query)
    assert not at.exception and not at.error and not at.warning
    shown = at.dataframe[0].value
    settings, _ = parse_query(query)
    expected = exact_table(make_toy(*settings.toy_key), settings.selection(True), settings.baseline, settings.N)
    assert [row["estimator"] for row in expected if row["cosine"] is None] == list(reasons)
    assert list(shown["cosine"]) == [UNDEFINED if row["cosine"] is None else f"{row['cosine']:+.4f}"
                                     for row in expected]
    notes = [caption.value for caption in at.caption if caption.value.startswith(UNDEFINED)]
    assert len(notes) == len(reasons)
    for note, (id, reason) in zip(notes, reasons.items(), strict=True):
        assert note.startswith(f"{UNDEFINED} {id}: {reason}") and says(note, "E[ĝ] is 0", "undefined")
    for data in chart_data(at):
        assert "cosine" not in data and not data.isna().any().any()


def test_the_cosine_column_says_what_a_dash_means():
    at = run()
    help = json.loads(at.dataframe[0].proto.columns)["cosine"]["help"]      # the column config, as sent
    assert f"{UNDEFINED} where E[ĝ] = 0" in help and "the reason is under the table" in help


# -- view parameters: tab and per-position toggle ------------------------------------------------------------

@pytest.mark.parametrize("query, words, address", [
    ({"tab": "Nonexistent"}, "tab = 'Nonexistent' is not one of Estimators, Ratios", {}),
    ({"tab": ""}, "tab = '' is not one of", {}),
    ({"tab": "ratios"}, "tab = 'ratios' is not one of", {}),
    ({"ratio_panels": "maybe"}, "ratio_panels = 'maybe' is not 1 or 0", {}),
    ({"tab": "Ratios", "ratio_panels": "maybe"}, "ratio_panels = 'maybe'", {"tab": "Ratios"}),
    ({"tab": ["Ratios", "Lessons"]}, "'tab' given more than once", {"tab": "Lessons"}),
    ({"T": ["4", "5"]}, "'T' given more than once: using the last value", {"T": "5"}),
    ({"tab": "Training", "train_lr": "0.5"}, "train_lr = '0.5' is not one of 0.01, 0.03", {"tab": "Training"}),
    ({"tab": "Training", "train_steps": "5"}, "train_steps = '5' is outside 10 to 1000", {"tab": "Training"}),
    ({"tab": "Training", "train_mode": "greedy"}, "train_mode = 'greedy' is not one of expected, sampled",
     {"tab": "Training"}),
    ({"tab": "Training", "train_pick": "bogus"}, "train_pick = 'bogus' is not one of on_policy, naive", {"tab": "Training"}),
])
def test_bad_view_parameters_get_a_notice_and_leave_the_address(query, words, address):
    at = run(query)
    assert not at.exception and not at.error
    notices = [warning.value for warning in at.warning]
    assert len(notices) == 1 and words in notices[0]
    assert at.query_params == address
    open_tab = address.get("tab", TAB_LABELS[0])
    assert at.session_state["tab"] == open_tab


@pytest.mark.parametrize("query, address", [
    ({"tab": "Estimators"}, {}),                                     # the default: no parameter needed
    ({"ratio_panels": "false"}, {}),
    ({"tab": "Ratios", "ratio_panels": "TRUE"}, {"tab": "Ratios", "ratio_panels": "1"}),
    ({"ratio_panels": "true"}, {}),                                  # the Ratios tab is not open
    ({"tab": "Training", "train_optimizer": "adam", "train_lr": "0.1", "train_steps": "300"},
     {"tab": "Training", "train_optimizer": "adam", "train_lr": "0.1", "train_steps": "300"}),
    ({"train_optimizer": "adam"}, {}),                               # the Training tab is not open
])
def test_the_address_is_cleaned_to_the_view_shown(query, address):
    at = run(query)
    assert not at.exception and not at.warning
    assert at.query_params == address


def test_a_closed_tabs_value_waits_for_its_tab():
    at = run({"ratio_panels": "true"})
    assert at.query_params == {}
    at.session_state["tab"] = "Ratios"                 # what a click on the tab does
    at.run()
    assert not at.exception and at.toggle(key="ratio_panels").value is True


def test_every_view_parameter_is_declared_for_the_pages_tabs():
    at = run()
    assert tuple(tab.label for tab in at.tabs) == TAB_LABELS
    assert all(parameter.tab in (None, *TAB_LABELS) for parameter in VIEW_PARAMETERS.values())


NOT_A_TAB = {("toylab_app/sidebar.py", "Estimators")}      # the sidebar's heading over the estimator picker


def test_a_tab_label_is_spelled_only_in_tab_labels():
    """Every other module names a tab by its name in toylab/state/query.py (``ESTIMATORS_TAB``, …)."""
    root = APP.parent
    spelled = []
    for path in [APP, *sorted((root / "toylab").rglob("*.py")), *sorted((root / "toylab_app").rglob("*.py"))]:
        name = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        defining = {id(node) for statement in tree.body if isinstance(statement, ast.Assign)
                    and any(getattr(target, "id", "") == "TAB_LABELS" for target in statement.targets)
                    for node in ast.walk(statement)}
        spelled += [(name, node.lineno, node.value) for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and node.value in TAB_LABELS and id(node) not in defining
                    and (name, node.value) not in NOT_A_TAB]
    assert spelled == []


def test_a_huge_bad_value_is_quoted_short():
    at = run({"T": "9" * 10_000, "tab": "x" * 10_000, "zzz" * 5_000: "1", "est": ",".join(["bogus"] * 1000) + ",naive"})
    assert not at.exception
    notices = [warning.value for warning in at.warning]
    assert len(notices) == 4 and all(len(notice) < NOTICE_LIMIT for notice in notices)
    assert all("9" * (QUOTE_LIMIT + 1) not in notice and "x" * (QUOTE_LIMIT + 1) not in notice for notice in notices)
    assert any("10,000 characters" in notice for notice in notices)


def test_a_value_the_link_does_not_turn_on_is_said_and_kept_for_when_it_is():
    """``?tab=Training&sga_step=0`` opened Training without the SGA view and said nothing."""
    at = run({"tab": "Training", "sga_step": "0"})
    assert not at.exception and not at.error
    (notice,) = [warning.value for warning in at.warning]
    assert "URL parameter sga_step = '0' takes effect only with sga = 1, which this link does not set: kept for " \
           "when it does." in notice
    assert at.query_params == {"tab": "Training"}
    at.toggle(key="sga").set_value(True).run()
    assert not at.exception and at.query_params == {"tab": "Training", "sga": "1", "sga_step": "0"}
