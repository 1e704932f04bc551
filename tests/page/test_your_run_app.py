"""The Your run tab under streamlit.testing: uploads, the example, the library's numbers on the page, every bad
input as an error that leaves the rest of the page working, and the matched toy's button."""

import io
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
from framework_dumps import prime_run as recorded_prime_run
from framework_dumps import toy_batch, write_nemo
from rollout_logs import EXAMPLES, SEQUENCES, TOKENS, log_bytes
from streamlit.testing.v1 import AppTest
from test_app import open_sidebar

from toylab.presentation.estimates import with_se
from toylab.state.query import YOUR_RUN_TAB, parse_query
from toylab.state.settings import Settings
from toylab.text import percent, significant
from toylab.your_run.applied import on_log, reward_estimates
from toylab.your_run.dumps import SKYRL_EXPORT
from toylab.your_run.log import load_log
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import match_toy, matched_length, matching_estimate
from toylab.your_run.parity import framework_metrics
from toylab.your_run.statistics import log_statistics

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
LABEL = YOUR_RUN_TAB
UPLOAD = "your_run_upload"
RUN_UPLOAD = "your_run_run_upload"
HEADER_METRICS = 8                    # the default page: M, J, E_μ[r], ‖∇J‖, KL, χ², ESS, E_μs[W]


def run(**state):
    at = open_sidebar(AppTest.from_file(APP, default_timeout=60))
    at.session_state["tab"] = LABEL
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def upload(at, name, content):
    at.file_uploader(key=UPLOAD).set_value((name, content, "application/octet-stream")).run()
    return at


def upload_many(at, files):
    """Several files at once, on the run's uploader: [(name, bytes)]."""
    at.file_uploader(key=RUN_UPLOAD).set_value([(name, content, "application/octet-stream") for name, content in files])
    return at.run()


def tab_elements(at):
    tab = next(tab for tab in at.tabs if tab.label == LABEL)
    return list(_descendants(tab))


def _descendants(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _descendants(child)


def code_text(element):
    """The text of an element that shows one code span (what a file's message is shown as), without the fence."""
    text = element.value
    fence = text[:len(text) - len(text.lstrip("`"))]
    assert fence and text.startswith(fence + " ") and text.endswith(" " + fence), text
    return text[len(fence) + 1:-len(fence) - 1]


def charts(at):
    return sum(node.type == "vega_lite_chart" for node in tab_elements(at))


def metrics(at):
    """The tab's metrics, label → "value ± se" (or the value alone; the header's seven come first)."""
    return {metric.label: f"{metric.value} {metric.delta}" if metric.delta else metric.value
            for metric in at.metric[HEADER_METRICS:]}


@pytest.fixture(scope="module")
def example():
    at = run()
    next(button for button in at.button if button.label == "Use the example log").click().run()
    return at


def test_without_a_file_the_tab_explains_what_to_upload():
    at = run()
    assert not at.exception and not at.error and charts(at) == 0
    assert at.file_uploader(key=UPLOAD).label == "Rollout log, or a zip of a run (at most 50 MB)"
    assert at.file_uploader(key=RUN_UPLOAD).label == "A run: its step files (at most 50 MB each, 200 MB in all)"
    assert "Upload a rollout log" in at.info[0].value and "Recognised names" in at.markdown[0].value


def test_the_example_shows_the_library_numbers(example):
    assert not example.exception and not example.error
    log = load_log(str(EXAMPLES / "rollouts_per_sequence.parquet"))
    statistics, sizes = log_statistics(log), magnitudes(log)
    shown = metrics(example)
    assert shown["k1 = mean(log μ − log π)"] == f"{significant(statistics.k1.value)} ± {significant(statistics.k1.se, 2)}"
    assert shown["k3 = mean(ρ − 1 − log ρ)"] == "0.169 ± 0.0017"
    assert shown["χ² = mean((ρ − 1)²)"] == with_se(sizes.chi2_low_variance.value, sizes.chi2_low_variance.se)
    assert shown["mean ρ − 1"] == with_se(sizes.identity.value, sizes.identity.se)
    assert shown["ESS fraction (this sample)"] == percent(statistics.ess_fraction) == "2.26 %"
    assert shown["mean length"] == "55.1 ± 1.7"
    assert charts(example) == 5
    tails = example.dataframe[0].value
    assert list(tails["threshold"]) == [0.001, 0.01, 0.1, 1.0]
    assert list(tails["share"]) == [estimate.value for estimate in statistics.tail_shares.values()]
    quantiles = example.dataframe[1].value.set_index("quantity")["value"]
    assert quantiles["|log ρ| p99.9"] == sizes.abs_log_rho_quantiles["p99.9"] and quantiles["smallest ρ"] == sizes.min_rho
    worst = next(frame.value for frame in example.dataframe if "sampler_probability" in frame.value.columns)
    assert worst.to_dict("records") == sizes.worst_tokens
    match = match_toy(matching_estimate(statistics)[1], 6, 4, 0)
    assert f"At mismatch {significant(match.mismatch, 4)} ± {significant(match.mismatch_se, 2)}" in \
        example.markdown[-1].value and "k3 = 0.169 ± 0.0017 (k3, not k1" in example.markdown[-1].value
    comparison = example.dataframe[-1].value
    assert comparison["toy"][1] == match.toy_chi2_token and comparison["data"][1] == sizes.chi2_low_variance.value
    assert list(comparison["verdict"]) == ["matched"] + ["consistent"] * 5


@pytest.mark.parametrize("path", [EXAMPLES / "rollouts_per_token.csv.gz", EXAMPLES / "rollouts_per_sequence.jsonl"],
                         ids=lambda path: path.name)
def test_an_upload_shows_the_same_numbers(example, path):
    at = upload(run(), path.name, path.read_bytes())
    assert not at.exception and not at.error
    assert metrics(at) == metrics(example) and charts(at) == 5


def test_matching_at_the_data_length():
    at = upload(run(), "log.parquet", (EXAMPLES / "rollouts_per_token.parquet").read_bytes())
    at.radio(key="your_run_match_length").set_value("data").run()
    statistics = log_statistics(load_log(str(EXAMPLES / "rollouts_per_token.parquet")))
    match = match_toy(matching_estimate(statistics)[1], matched_length(statistics.mean_length.value, 4), 4, 0)
    assert match.T == 11 and "the toy (T = 11, V = 4, seed 0)" in at.markdown[-1].value
    assert f"At mismatch {significant(match.mismatch, 4)}" in at.markdown[-1].value


def test_the_match_button_opens_the_estimators_tab_at_the_matched_toy():
    at = upload(run(), "log.parquet", (EXAMPLES / "rollouts_per_token.parquet").read_bytes())
    at.button(key="your_run_open_match").click().run()
    assert not at.exception and not at.error
    assert at.session_state["tab"] == "Estimators"
    statistics = log_statistics(load_log(str(EXAMPLES / "rollouts_per_token.parquet")))
    found = match_toy(matching_estimate(statistics)[1], 6, 4, 0).mismatch                  # k3's match, 0.5032…
    assert at.slider(key="mismatch").value == pytest.approx(found, rel=1e-9) and at.slider(key="T").value == 6
    settings, notices = parse_query(dict(at.query_params))     # the link carries the mismatch as found, not 0.5
    assert notices == [] and settings.mismatch == pytest.approx(found, rel=1e-9) and settings.mismatch != 0.5
    assert at.dataframe[0].value["estimator"].iloc[0] == "on_policy"           # the Estimators table is shown
    at.session_state["tab"] = LABEL                                             # back: the file is still there
    at.run()
    assert not at.exception and charts(at) == 5 and "log.parquet" in at.markdown[0].value


BAD_UPLOADS = [
    ("log.csv", log_bytes([{**TOKENS[0], "sampler_logprobs": "abc"}, TOKENS[1]], "csv"),
     "log.csv: row 1, column 'sampler_logprobs': 'abc' is not a log-probability"),
    ("log.csv", log_bytes([TOKENS[0], {**TOKENS[1], "sampler_logprobs": "abc"}], "csv"),
     "log.csv: row 2, column 'sampler_logprobs': 'abc' is not a number"),
    ("log.jsonl", log_bytes([{**SEQUENCES[0], "rollout_log_probs": [-0.1, float("nan"), 0]}], "jsonl"),
     "log.jsonl: row 1, column 'rollout_log_probs', element 2: NaN or missing"),
    ("log.parquet", log_bytes([SEQUENCES[0], {**SEQUENCES[1], "old_log_probs": [-1.0, 0.2, -0.3]}], "parquet"),
     "log.parquet: row 2, column 'old_log_probs', element 2: 0.2 is positive"),
    ("log.parquet", log_bytes([{**SEQUENCES[0], "old_log_probs": [-0.1]}], "parquet"),
     "log.parquet: row 1: 'rollout_log_probs' has 3 values but 'old_log_probs' has 1"),
    ("log.jsonl.gz", log_bytes([{**SEQUENCES[0], "response_mask": [1, 1]}], "jsonl.gz"),
     "log.jsonl.gz: row 1, column 'response_mask': 2 values for 3 tokens"),
    ("log.csv", b"", "log.csv: the file is empty"),
    ("log.parquet", log_bytes(TOKENS, "csv"), "log.parquet: not a Parquet file"),
    ("log.csv", log_bytes(TOKENS, "parquet"), "log.csv: not CSV text: the content is a Parquet file"),
    ("log.csv", b"x" * (50_000_000 + 1), "log.csv: the file (50,000,001 bytes) is over the limit of 50 MB per file"),
]


@pytest.mark.parametrize("name, content, message", BAD_UPLOADS, ids=[message.split(": ", 1)[1][:40]
                                                                   for _, _, message in BAD_UPLOADS])
def test_a_bad_upload_is_an_error_and_the_page_keeps_working(name, content, message):
    at = upload(run(), name, content)
    assert not at.exception
    assert len(at.error) == 1 and code_text(at.error[0]).startswith(message), at.error[0].value
    assert len(at.metric) == HEADER_METRICS and charts(at) == 0          # the header is still there
    kl = at.metric[4].value
    at.slider(key="mismatch").set_value(0.8).run()                        # and the controls still work
    assert not at.exception and at.metric[4].value != kl and at.query_params["mismatch"] == "0.8"
    assert len(at.error) == 1 and code_text(at.error[0]).startswith(message)


def test_probability_columns_and_unknown_names_open_the_column_pickers():
    records = [{"p_mu": [0.5, 0.9], "lp_mu": [-0.6, -0.1], "lp_pi": [-0.7, -0.2]} for _ in range(3)]
    at = upload(run(), "mine.jsonl", log_bytes(records, "jsonl"))
    assert not at.exception and len(at.error) == 1 and "which column holds the sampler" in at.error[0].value
    assert any("no column is named like the sampler" in warning.value for warning in at.warning)
    pickers = {box.label: box for box in at.selectbox if box.key.startswith("your_run_column.")}
    assert pickers["sampler"].options == ["p_mu", "lp_mu", "lp_pi"] and pickers["sampler"].value is None
    pickers["sampler"].set_value("lp_mu").run()
    next(box for box in at.selectbox if box.label == "trainer").set_value("lp_pi").run()
    assert not at.exception and not at.error and charts(at) == 5
    assert metrics(at)["k1 = mean(log μ − log π)"] == "0.1 ± 0"                # every log μ − log π is 0.1
    next(box for box in at.selectbox if box.label == "sampler").set_value("p_mu").run()
    assert "looks like probabilities, not log-probabilities" in at.error[0].value


def test_closed_the_tab_computes_nothing(example):
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert charts(at) == 0 and not tab_elements(at)


def test_the_example_shows_what_each_selected_estimator_does_to_it(example):
    log = load_log(str(EXAMPLES / "rollouts_per_sequence.parquet"))
    selection = Settings().selection()
    expected = [row for row in on_log(log, selection) if not row.note]
    table = next(frame.value for frame in example.dataframe if "tokens_affected" in frame.value.columns)
    assert list(table["name"]) == [row.name for row in expected]
    assert list(table["tokens_affected"]) == [row.tokens_affected for row in expected]
    assert list(table["ess_fraction"]) == [row.ess_fraction for row in expected]
    assert any("on_policy** is not applied" in markdown.value for markdown in example.markdown)
    estimates = reward_estimates(log)
    assert metrics(example)["J by self-normalised IS"] == with_se(estimates.snis.value, estimates.snis.se)
    assert any("sample ESS fraction is 2.3%" in warning.value for warning in example.warning)


# -- a run: several step files, a zip, the example run -------------------------------------------------------------

def step_chart_rows(at):
    """The rows of the tab's step chart (the one chart a run view draws)."""
    chart = next(node for node in tab_elements(at) if node.type == "vega_lite_chart")
    return [row for dataset in chart.proto.datasets for row in pa.ipc.open_stream(dataset.data.data).read_all().to_pylist()]


def prime_run(directory, steps=4):
    recorded_prime_run(directory, steps=range(1, steps + 1))
    return [(str(path.relative_to(directory)), path.read_bytes()) for path in sorted(Path(directory).rglob("*.jsonl"))]


def nemo_run(directory, steps=4):
    """NeMo-RL's files: their names carry the step, as a browser's upload (which sends no folders) keeps them."""
    return [(path.name, path.read_bytes()) for path in (write_nemo(directory, step, toy_batch(8, seed=step))
                                                         for step in range(1, steps + 1))]


def test_a_run_uploaded_as_several_files_shows_its_step_chart(tmp_path):
    at = upload_many(run(), nemo_run(tmp_path))
    assert not at.exception and not at.error
    assert "A run of 4 steps" in next(markdown.value for markdown in at.markdown if "A run of" in markdown.value)
    rows = step_chart_rows(at)
    assert sorted({row["step"] for row in rows}) == [1, 2, 3, 4]
    assert {row["metric"] for row in rows} >= {"k1 = mean(log μ − log π)", "k3 = mean(ρ − 1 − log ρ)"}
    assert len(at.metric) == HEADER_METRICS                               # a run has no single-log headline


def test_a_zip_of_a_run_and_the_example_run(tmp_path):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as writer:
        for name, content in prime_run(tmp_path, steps=3):
            writer.writestr(f"outputs/{name}", content)
    at = upload(run(), "run.zip", archive.getvalue())
    assert not at.exception and not at.error and sorted({row["step"] for row in step_chart_rows(at)}) == [1, 2, 3]
    at = run()
    next(button for button in at.button if button.label == "Use the example run").click().run()
    assert not at.exception and not at.error and sorted({row["step"] for row in step_chart_rows(at)}) == list(range(1, 13))
    caption = next(caption.value for caption in at.caption if "Dashed vermilion rule" in caption.value)
    assert "k3 = mean(ρ − 1 − log ρ) at step 9" in caption


def test_a_run_with_a_malformed_step_shows_the_others(tmp_path):
    files = prime_run(tmp_path, steps=3)
    files[2] = (files[2][0], b"{not json\n")                         # step 2, rank 0
    at = upload_many(run(), files)
    assert not at.exception and not at.error
    assert "1 step(s) could not be read" in at.warning[0].value
    assert list(at.dataframe[0].value["step"]) == [2]
    assert sorted({row["step"] for row in step_chart_rows(at)}) == [1, 3]


def test_framework_dumps_on_the_page(tmp_path):
    path = write_nemo(tmp_path, 5, toy_batch(9, seed=1))
    at = upload(run(), path.name, path.read_bytes())
    assert not at.exception and not at.error and charts(at) == 5
    assert metrics(at)["k1 = mean(log μ − log π)"].startswith(significant(log_statistics(read_nemo(path)).k1.value))
    at = upload(run(), "global_step_3_training_input.pkl", b"\x80\x04 never opened")
    assert len(at.error) == 1 and "a pickle is never opened here" in at.error[0].value and SKYRL_EXPORT[:40] in \
        at.error[0].value
    at = upload(run(), "train_data/3.pt", b"PK\x03\x04 never opened")
    assert len(at.error) == 1 and "read only by the command line" in at.error[0].value


def read_nemo(path):
    from toylab.your_run.run import RunFile, load_file
    return load_file(RunFile(path.name, None, None, path=str(path)))[0]


def test_the_frameworks_expander_export_and_a_second_log_side_by_side():
    example = run()
    next(button for button in example.button if button.label == "Use the example log").click().run()
    log = load_log(str(EXAMPLES / "rollouts_per_sequence.parquet"))
    frameworks = next(frame.value for frame in example.dataframe if "framework" in frame.value.columns)
    gen_kl = frameworks.set_index("metric").loc["gen_kl_error"]
    assert gen_kl["value"] == significant(log_statistics(log).k3.value)
    assert len(frameworks) == len(framework_metrics(log))
    assert [button.proto.ignore_rerun for button in example.get("download_button")] == [True, True]
    second = (EXAMPLES / "rollouts_per_token.csv").read_bytes()
    example.file_uploader(key="your_run_compare").set_value(("other.csv", second, "text/csv")).run()
    assert not example.exception and not example.error
    table = next(frame.value for frame in example.dataframe if "other.csv" in frame.value.columns)
    assert table.set_index("quantity").loc["k1", "other.csv"] == significant(log_statistics(log).k1.value)
    assert charts(example) == 6                                            # the overlaid histograms


def test_the_runs_uploader_shows_even_one_file_as_a_run_and_refuses_a_run_over_its_bound(tmp_path, monkeypatch):
    files = nemo_run(tmp_path, steps=2)
    at = upload_many(run(), files[:1])
    assert not at.exception and not at.error
    assert "A run of 1 step**" in next(markdown.value for markdown in at.markdown if "A run of" in markdown.value)
    import toylab_app.your_run_uploads as uploads
    monkeypatch.setattr(uploads, "RUN_UPLOAD_BYTES", sum(len(content) for _, content in files) - 1)
    at = upload_many(run(), files)
    assert not at.exception and len(at.error) == 1 and "over the page's" in at.error[0].value
    assert not any("A run of" in markdown.value for markdown in at.markdown)
    assert "Upload a rollout log" in at.info[0].value                # nothing is held, the tab invites an upload
