"""The run view under streamlit.testing: a NeMo-RL run's step chart, a malformed step listed and the others shown,
the departure marked, the frameworks' metrics of a step, and what the readers noticed."""

from pathlib import Path

import pyarrow as pa
from framework_dumps import prime_run, toy_batch, write_nemo
from streamlit.testing.v1 import AppTest

from toylab.presentation.run_frames import STEP_METRICS

ROOT = Path(__file__).resolve().parents[2]


def app(uploads, root):
    import sys

    sys.path.insert(0, root)
    from toylab.state.settings import Settings
    from toylab_app import your_run_steps
    from toylab_app.caches.your_run_cache import Source

    your_run_steps.render(Settings(), [Source.of(name, data) for name, data in uploads])


def uploads_of(directory):
    return [(str(path.relative_to(directory)), path.read_bytes()) for path in sorted(Path(directory).rglob("*.jsonl"))]


def run_view(uploads):
    return AppTest.from_function(app, args=(uploads, str(ROOT)), default_timeout=60).run()


def test_a_run_shows_every_metric_against_step_and_a_step_that_left_its_range(tmp_path):
    for step in range(1, 9):
        batch = toy_batch(12, seed=step)
        if step >= 6:                               # a drift: the trainer gives the sampled tokens far less
            batch.trainer = [[value - 0.5 for value in row] for row in batch.trainer]
        write_nemo(tmp_path, step, batch)
    at = run_view(uploads_of(tmp_path))
    assert not at.exception and not at.error
    assert "A run of 8 steps" in at.markdown[0].value
    data = chart_rows(at)
    assert {row["metric"] for row in data} >= {STEP_METRICS["k1"], STEP_METRICS["k3"]}
    assert sorted({row["step"] for row in data}) == list(range(1, 9))
    assert any(row["left"] and row["metric"] == STEP_METRICS["k1"] and row["step"] == 6 for row in data)
    assert "k1 = mean(log μ − log π) at step 6" in at.caption[0].value
    frameworks = at.dataframe[-1].value
    assert "gen_kl_error" in list(frameworks["metric"])
    constant = " ".join(caption.value for caption in at.caption if "Not drawn, the same at every step" in caption.value)
    assert ". Not drawn, the same at every step" in constant          # its own sentence ("step 10 Not drawn" was)
    for metric in ("share |log ρ| > 0.01", "share |log ρ| > 1"):                  # a panel, or said: never both
        assert (metric in {row["metric"] for row in data}) != (f"{metric} = " in constant)
    affected = chart_rows(at, 1)                           # each default estimator's share of tokens, step by step
    assert {row["estimator"] for row in affected} >= {"tok_tis", "seq_mis"}
    assert sorted({row["step"] for row in affected}) == list(range(1, 9))
    assert [(button.proto.label, button.proto.ignore_rerun) for button in at.get("download_button")] == [
        ("The run's steps (CSV)", True)]


def chart_rows(at, index=0):
    """The rows of a chart's data sets (the first chart's by default)."""
    chart = at.get("vega_lite_chart")[index]
    return [row for dataset in chart.proto.datasets for row in pa.ipc.open_stream(dataset.data.data).read_all().to_pylist()]


def test_a_malformed_step_is_listed_and_the_others_shown(tmp_path):
    for step in (1, 2, 3):
        write_nemo(tmp_path, step, toy_batch(6, seed=step))
    uploads = uploads_of(tmp_path)
    uploads[1] = (uploads[1][0], b"{not json\n")
    at = run_view(uploads)
    assert not at.exception and "1 step(s) could not be read" in at.warning[0].value
    failed = at.dataframe[0].value
    assert list(failed["step"]) == [2] and failed["error"][0].startswith("train_data_step2.jsonl")
    assert "3 steps" in at.markdown[0].value and "2 steps read" in at.markdown[0].value
    assert sorted({row["step"] for row in chart_rows(at)}) == [1, 3]


def test_what_the_reader_noticed_in_a_step_is_shown_as_code(tmp_path):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    uploads = []
    for step, ids in ((1, ["a", "a", "b", "b"]), (2, ["a", "b", "a", "**b**"]), (3, ["a", "a", "b", "b"])):
        sink = io.BytesIO()
        pq.write_table(pa.table({"sequence_id": ids, "sampler_logprobs": [-0.1, -0.2, -0.3, -0.4],
                                 "trainer_logprobs": [-0.15, -0.2, -0.3, -0.5]}), sink)
        uploads.append((f"step_{step}.parquet", sink.getvalue()))
    at = run_view(uploads)
    assert not at.exception and not at.error and len(at.warning) == 1
    notice = at.warning[0].value
    assert notice.startswith("` step 2: the rows of a sequence are not contiguous (at row 3, sequence 'a'")
    assert notice.endswith(" `")                                     # one code span: a file's text is never Markdown


def test_what_the_readers_noticed_is_on_the_page(tmp_path):
    """A rank missing from one step of a prime-rl run, and NeMo-RL validation data beside a training step."""
    prime_run(tmp_path, steps=(1, 2, 3))
    (tmp_path / "token_exports" / "step_2" / "rank_1.jsonl").unlink()
    at = run_view(uploads_of(tmp_path))
    assert not at.exception and not at.error
    assert "step 2: ranks found: 0; rank 1" in at.warning[0].value
    nemo = tmp_path / "nemo"
    nemo.mkdir()
    write_nemo(nemo, 2, toy_batch(6, seed=2))
    (nemo / "val_data_step2.jsonl").write_text('{"content": [[]], "rewards": [1.0], "idx": 0}\n')
    at = run_view(uploads_of(nemo))
    assert not at.exception and "val_data_step2.jsonl: NeMo-RL's validation data" in at.warning[0].value
