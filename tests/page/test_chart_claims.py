"""Every word a chart says about its lines holds on the lines it draws (issue 35, part 4): the page opened by its link
(AppTest), every chart's legend and the caption naming its dashed lines read back and checked on the rows each line
layer draws (``tests/chart_claims.py``: nothing from the code that wrote the words).

First the issue's cases, which failed on main: the Mismatch sweep's legend said "seq_is ≈ on_policy" (true of relative
bias) over the RMSE panel, where seq_is's RMSE is about 1e5 at mismatch 2 and on_policy's about 1; "tok_tis ≈ tok_is"
with no "in part" though it holds only up to mismatch 0.35; and on the top-p and temperature sweeps "seq_tis ≈ seq_is"
and "seq_mis ≈ seq_is" over less than half of the swept range. Then the sweep: every tab's default view, every option
of each tab that changes its charts of lines or adds a chart (the threshold sweep's second batch size, the mismatch
sweep's x, its panels and its pipelines, the seeds views of Estimators, Training and the staleness view, …) in the
page's normal and presentation layouts, a sampler that truncates and rounds, every exact estimator at once, every lesson's view, and the run view's shares chart. The cases that take every code path run in the fast tier
(one chart of stacked panels, one panel alone, two batch sizes, one panel, the Training tab's named chart, the
scatter's names and legend, the run view, a label of several lines), the rest in the slow tier.
"""

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from chart_claims import drawn_panels, legend_labels, problems, scatter_problems
from chart_specs import spec_nodes
from framework_dumps import toy_batch, write_nemo
from streamlit.testing.v1 import AppTest
from tiers import fast_then_slow

from toylab.catalogue.estimators import ESTIMATORS
from toylab.lessons.lesson import settings as lesson_settings
from toylab.lessons.lesson import view_of
from toylab.lessons.tour import LESSONS
from toylab.state.query import (
    COMPARED_SIZES,
    ERRORS_TAB,
    ESTIMATORS_TAB,
    LENGTH_TAB,
    MISMATCH_SWEEP_TAB,
    PANELS,
    SWEPT,
    TAB_LABELS,
    THRESHOLD_SWEEP_TAB,
    TRAINING_TAB,
    VIEW_DEFAULTS,
    to_query,
    view_query,
)
from toylab.training.loop import MODES
from toylab.training.optimizers import OPTIMIZERS

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "toylab_app" / "script" / "streamlit_app.py"


def _elements(node):
    for child in getattr(node, "children", {}).values():
        if child.type == "vega_lite_chart":
            yield child
        yield from _elements(child)


def _drawn(at):
    """([(spec, {dataset name: DataFrame})], [caption text]) of a page run."""
    assert not at.exception, at.exception
    charts = [(json.loads(chart.proto.spec),
               {dataset.name: pa.ipc.open_stream(io.BytesIO(dataset.data.data)).read_all().to_pandas()
                for dataset in chart.proto.datasets}) for chart in _elements(at._tree)]
    return charts, [caption.value for caption in at.caption]


def open_page(query):
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.query_params.update(query)
    return _drawn(at.run())


def view(tab, **values):
    """A view's link: the tab and view values given, the sidebar at its defaults."""
    return view_query(VIEW_DEFAULTS | {"tab": tab} | values)


EVERY_EXACT = {"est": ",".join(id for id, e in ESTIMATORS.items() if e.exact and ":" not in id)}
TRUNCATING = {"top_p": "0.9", "precision": "bf16"}
OPTIONS = {ESTIMATORS_TAB: [{"est_seeds": True}],
           ERRORS_TAB: [{"mc_dots": dots} for dots in (False, True)],
           THRESHOLD_SWEEP_TAB: [{"compare_N": N} for N in COMPARED_SIZES],
           MISMATCH_SWEEP_TAB: [*({"sweep": swept} for swept in SWEPT), {"sweep_pipelines": True}],
           LENGTH_TAB: [{"length_mc": sampled} for sampled in (False, True)],
           TRAINING_TAB: [*({"train_mode": mode, "train_optimizer": optimizer} for mode in MODES for optimizer in OPTIMIZERS),
                          {"staleness": True}, {"staleness": True, "staleness_draw": "uniform", "staleness_cap": 5.0},
                          {"train_seeds": True}, {"staleness": True, "staleness_seeds": True}]}
PANEL_OF = {tab: name for name, (tab, _) in PANELS.items()}


def _views():
    """(case id, link) of every view swept: each tab's default, each option of a tab with charts of lines in the normal
    layout and with each of its panels alone (presentation mode), with a truncating sampler, and with every exact
    estimator."""
    cases = [(f"default {tab}", view(tab)) for tab in TAB_LABELS]
    for tab, options in OPTIONS.items():
        for option in options:
            name = f"{tab} {' '.join(f'{key}={value}' for key, value in option.items())}"
            cases.append((name, view(tab, **option)))
            panels = PANELS[PANEL_OF[tab]][1] if tab in PANEL_OF else [None]
            for panel in panels:
                alone = {PANEL_OF[tab]: panel} if panel else {}
                cases.append((f"{name} present {panel or ''}".rstrip(), view(tab, present=True, **option, **alone)))
            cases.append((f"{name} top_p=0.9 bf16", view(tab, **option) | TRUNCATING))
            cases.append((f"{name} every exact estimator", view(tab, **option) | EVERY_EXACT))
    return cases


VIEWS = dict(_views())
FAST = ["default Estimators", f"{MISMATCH_SWEEP_TAB} sweep=mismatch", f"{MISMATCH_SWEEP_TAB} sweep=mismatch present rmse",
        f"{THRESHOLD_SWEEP_TAB} compare_N=4096", f"{ERRORS_TAB} mc_dots=False", f"{LENGTH_TAB} length_mc=False",
        f"{TRAINING_TAB} train_mode=expected train_optimizer=sgd", f"{TRAINING_TAB} staleness=True"]


@pytest.mark.parametrize("case", fast_then_slow(list(VIEWS), FAST))
def test_every_claim_about_lines_holds_on_every_view(case):
    charts, captions = open_page(VIEWS[case])
    assert not problems(charts, captions, case) + scatter_problems(charts, case)


@pytest.mark.parametrize("lesson", fast_then_slow(LESSONS, []), ids=lambda lesson: lesson.id)
def test_every_claim_about_lines_holds_in_every_lessons_view(lesson):
    charts, captions = open_page(to_query(lesson_settings(lesson)) | view_query(VIEW_DEFAULTS | view_of(lesson)
                                                                                   | {"present": True}))
    assert not problems(charts, captions, lesson.id) + scatter_problems(charts, lesson.id)


def _run_app(uploads, root, estimators):
    import sys

    sys.path.insert(0, root)
    from toylab.state.settings import Settings
    from toylab_app import your_run_steps
    from toylab_app.caches.your_run_cache import Source

    your_run_steps.render(Settings(estimators=estimators), [Source.of(name, data) for name, data in uploads])


def test_the_run_views_shares_chart_says_only_what_it_draws(tmp_path):
    """seq_mis masks no token from step 6 on, nor tok_tis clips one: "seq_mis = tok_tis at step ≥ 6" (and TRL's
    token_truncate, counting no clipped token here, lies on seq_mis from step 5)."""
    for step in range(1, 9):
        batch = toy_batch(12, seed=step)
        if step >= 6:
            batch.trainer = [[value - 0.5 for value in row] for row in batch.trainer]
        write_nemo(tmp_path, step, batch)
    uploads = [(str(path.relative_to(tmp_path)), path.read_bytes()) for path in sorted(tmp_path.rglob("*.jsonl"))]
    at = AppTest.from_function(_run_app, args=(uploads, str(ROOT), ("tok_tis", "trl:token_truncate", "seq_mis")),
                               default_timeout=60).run()
    charts, captions = _drawn(at)
    labels = {id: label for spec, _ in charts for id, label in (legend_labels(spec) or {}).items()}
    assert labels["seq_mis"] == "seq_mis = tok_tis in part"
    assert any("seq_mis = tok_tis at step ≥ 6" in caption for caption in captions)
    assert not problems(charts, captions, "run view")


# -- the cases ------------------------------------------------------------------------------------

def _labels(charts):
    (labels,) = [legend_labels(spec) for spec, _ in charts if legend_labels(spec) is not None]
    return labels


def test_the_rmse_panel_alone_does_not_borrow_the_bias_panels_words():
    """Presentation mode, the RMSE panel (the default): "seq_is ≈ on_policy" holds of relative bias (both about 0),
    not of this panel; and the caption names no panel it does not draw."""
    charts, captions = open_page(view(MISMATCH_SWEEP_TAB, present=True))
    assert "seq_is" not in _labels(charts)
    assert not any("relative bias:" in caption for caption in captions)
    assert not problems(charts, captions, "rmse alone")


def test_the_stacked_mismatch_sweep_says_which_panel_and_in_part():
    """Stacked panels under one legend: seq_is lies on on_policy in the bias panel only, and tok_tis on tok_is up to
    mismatch 0.35 (RMSE) or 0.3 (bias) only."""
    charts, captions = open_page(view(MISMATCH_SWEEP_TAB))
    labels = _labels(charts)
    assert labels["seq_is"] == "seq_is ≈ on_policy (bias)"
    assert labels["tok_tis"] == "tok_tis ≈ tok_is in part"
    assert any("relative RMSE at N: tok_tis ≈ tok_is at mismatch ≤ 0.35 (" in caption for caption in captions)
    assert not problems(charts, captions, "stacked")


@pytest.mark.parametrize("swept", ["top_p", "temperature"])
def test_seq_tis_and_seq_mis_lie_on_seq_is_in_part_on_the_top_p_and_temperature_sweeps(swept):
    charts, captions = open_page(view(MISMATCH_SWEEP_TAB, sweep=swept))
    labels = _labels(charts)
    for id in ("seq_tis", "seq_mis"):                  # on each panel, or one line a panel
        lines = [labels[id]] if isinstance(labels[id], str) else labels[id]
        assert lines[0].startswith(f"{id} ") and all(line.endswith(("in part", ")")) and " in part" in line
                                                     for line in lines)
    assert not problems(charts, captions, swept)


def test_each_legend_speaks_of_the_panels_under_it():
    """The stacked sweep draws one estimator legend, over the bias and RMSE panels both; laid out as before (each panel
    its own colour scale, so each its own legend), the RMSE panel's legend would say "seq_is ≈ on_policy (bias)" of a
    panel it does not sit over, and the reader says so."""
    charts, captions = open_page(view(MISMATCH_SWEEP_TAB))
    (spec, datasets), = [chart for chart in charts if legend_labels(chart[0])]
    block, divergence = spec["vconcat"]
    assert [len(node.get("vconcat", ())) for node in (block, divergence)] == [2, 0]
    assert not problems([(spec, datasets)], captions, "one legend")
    apart = spec | {"vconcat": [*block["vconcat"], divergence]}
    found = problems([(apart, datasets)], captions, "a legend a panel")
    assert any("'seq_is ≈ on_policy (bias)' names a panel not drawn" in problem for problem in found), found


def test_the_divergence_panel_draws_no_dashes():
    """KL and χ²_seq are solid lines: short dashes mean a line lying on another."""
    charts, _ = open_page(view(MISMATCH_SWEEP_TAB))
    marks = [node["mark"] for spec, _ in charts for node in spec_nodes(spec)
             if isinstance(node, dict) and node.get("encoding", {}).get("color", {}).get("field") == "quantity"]
    assert marks and all("strokeDash" not in mark for mark in marks if isinstance(mark, dict))


def test_the_staleness_views_lags_are_read_and_a_false_legend_is_caught():
    """The learning curves colour their lines by lag, a panel per objective: the reader finds each panel's lags, the
    words hold, and a legend that said "2 ≈ 1" where the lines part would be caught."""
    charts, captions = open_page(view(TRAINING_TAB, staleness=True))
    (spec, datasets), = [chart for chart in charts if "hconcat" in chart[0]]
    assert [panel.key for panel in drawn_panels(spec, datasets)] == [(o, None) for o in ("bypass", "decoupled",
                                                                                          "recompute")]
    assert not problems(charts, captions, "staleness")
    tampered = json.loads(json.dumps(spec))
    for node in spec_nodes(tampered):
        if isinstance(node.get("legend"), dict) and "labelExpr" in node["legend"]:
            node["legend"]["labelExpr"] = node["legend"]["labelExpr"].replace("2 \\u2248 1 in part", "2 \\u2248 1")
    found = problems([(tampered if chart[0] is spec else chart[0], chart[1]) for chart in charts], captions, "tampered")
    assert any(problem.startswith("tampered: legend '2 ≈ 1' on bypass") for problem in found), found
