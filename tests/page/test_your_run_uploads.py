"""What a session holds on the Your run tab (toylab_app/your_run_uploads.py), under streamlit.testing: a file that cannot be
read is let go at once and its error stays; every session's files together stay within HELD_BYTES; two compared logs
are each read once however often the page reruns, and two files that share a name stay two; a file's detection runs in
the server's log slot."""

import contextlib
from pathlib import Path

import pytest
from hostile_logs import jsonl, row
from hostile_runs import zip_bomb, zipped
from streamlit.testing.v1 import AppTest

import toylab_app.your_run_uploads as uploads
from toylab_app.caches import your_run_cache

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"


def run():
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["tab"] = "Your run"
    return at.run()


def held(at):
    """Bytes of the files this AppTest's session holds."""
    return uploads.BUDGET.held(at.session_state[uploads.SESSION_KEY])


def upload(at, name, content, key=uploads.UPLOAD_KEY):
    at.file_uploader(key=key).set_value((name, content, "application/octet-stream")).run()
    assert not at.exception, [exception.message for exception in at.exception]
    return at


def test_a_file_that_cannot_be_read_is_let_go_at_once_and_its_error_stays():
    at = upload(run(), "bad.jsonl", b"[1, 2]\n" * 1000)
    assert len(at.error) == 1 and "bad.jsonl: not JSON Lines" in at.error[0].value
    assert held(at) == 0                                               # nothing kept
    at.slider(key="mismatch").set_value(0.8).run()
    assert not at.exception and len(at.error) == 1 and "bad.jsonl: not JSON Lines" in at.error[0].value
    assert held(at) == 0 and "Upload a rollout log" in at.info[0].value


def test_a_run_none_of_whose_steps_can_be_read_is_let_go_at_once():
    name, bomb = zip_bomb(60 * 1_000_000, declared=0)                 # its one step: a bad CRC, read in bounded chunks
    at = upload(run(), name, bomb)
    assert len(at.error) == 1 and "step_1.jsonl: cannot be read from the archive" in at.error[0].value
    assert held(at) == 0
    at.run()
    assert len(at.error) == 1 and held(at) == 0


def test_a_run_dropped_on_the_run_s_uploader_none_of_whose_steps_can_be_read_is_let_go_at_once():
    files = [(f"step_{step}.jsonl", b"[1, 2]\n" * 1000, "application/octet-stream") for step in (1, 2)]
    at = run()
    at.file_uploader(key=uploads.RUN_UPLOAD_KEY).set_value(files).run()
    assert not at.exception and len(at.error) == 1 and "step_1.jsonl: not JSON Lines" in at.error[0].value
    assert held(at) == 0
    at.slider(key="mismatch").set_value(0.8).run()
    assert not at.exception and len(at.error) == 1 and held(at) == 0


def test_a_file_over_the_server_s_budget_is_not_kept_and_a_smaller_one_is(monkeypatch):
    log = jsonl([row(3) for _ in range(50)])
    monkeypatch.setattr(uploads.BUDGET, "limit", uploads.BUDGET.held() + len(log) - 1)     # other tests' sessions
    at = upload(run(), "large.jsonl", log)
    assert len(at.error) == 1 and "was not kept" in at.error[0].value and held(at) == 0
    assert "Upload a rollout log" in at.info[0].value
    upload(at, "small.jsonl", jsonl([row(3) for _ in range(40)]))
    assert not at.error and held(at) == len(jsonl([row(3) for _ in range(40)]))
    assert any("40 sequences" in markdown.value for markdown in at.markdown)


def test_the_budget_is_shared_by_every_session_and_a_session_may_always_shrink():
    budget = uploads.Budget(100)
    assert budget.claim("a", 60) == (True, 0)
    assert budget.claim("b", 50) == (False, 60) and budget.held("b") == 0       # 110 > 100: not kept
    assert budget.claim("b", 40) == (True, 60) and budget.held() == 100
    assert budget.claim("a", 70) == (False, 40) and budget.held("a") == 60      # growing past the budget
    assert budget.claim("a", 65) == (False, 40)
    assert budget.claim("a", 10) == (True, 40)                                  # shrinking always is
    budget.release("b")                                                          # a session ends
    assert budget.claim("c", 90) == (True, 10) and budget.held() == 100


@contextlib.contextmanager
def counted_reads(monkeypatch):
    reads = []
    original = your_run_cache.read_log

    def counting(file, *arguments, **keywords):
        reads.append(file.name)
        return original(file, *arguments, **keywords)
    monkeypatch.setattr(your_run_cache, "read_log", counting)
    yield reads


def test_two_compared_logs_are_each_read_once_and_two_files_of_one_name_stay_two(monkeypatch):
    first, second = jsonl([row(3, reward=0.25) for _ in range(40)]), jsonl([row(5, reward=0.0) for _ in range(60)])
    with counted_reads(monkeypatch) as reads:
        at = upload(run(), "same.jsonl", first)
        upload(at, "same.jsonl", second, key=uploads.COMPARE_KEY)
        assert not at.error and reads.count("same.jsonl") == 2
        table = next(frame.value for frame in at.dataframe if "same.jsonl (2)" in frame.value.columns)
        assert {"same.jsonl (1)", "same.jsonl (2)"} <= set(table.columns)
        sequences = table.set_index("quantity").loc["sequences"]
        assert (float(sequences["same.jsonl (1)"]), float(sequences["same.jsonl (2)"])) == (40, 60)
        for mismatch in (0.4, 0.5, 0.6):                                  # reruns read neither again
            at.slider(key="mismatch").set_value(mismatch).run()
        assert not at.exception and reads.count("same.jsonl") == 2


def test_a_second_log_that_cannot_be_read_is_let_go_and_the_first_stays():
    at = upload(run(), "first.jsonl", jsonl([row(3) for _ in range(10)]))
    upload(at, "second.jsonl", b"not json\n", key=uploads.COMPARE_KEY)
    assert len(at.error) == 1 and "second.jsonl" in at.error[0].value
    assert held(at) == len(jsonl([row(3) for _ in range(10)]))
    at.run()
    assert len(at.error) == 1 and any("10 sequences" in markdown.value for markdown in at.markdown)


def test_a_file_s_detection_runs_in_the_log_slot(monkeypatch):
    inside = []
    slot = your_run_cache.log_work
    original = your_run_cache.preview

    @contextlib.contextmanager
    def recording(waiting):
        inside.append(True)
        with slot(waiting):
            yield
        inside.pop()

    def preview(file, *arguments, **keywords):
        assert inside, "a preview outside the log slot"
        return original(file, *arguments, **keywords)
    monkeypatch.setattr(your_run_cache, "log_work", recording)
    monkeypatch.setattr(your_run_cache, "preview", preview)
    at = upload(run(), "detected.jsonl", jsonl([row(2, reward=0.5) for _ in range(7)]))
    assert not at.error and any("7 sequences" in markdown.value for markdown in at.markdown)


@pytest.mark.parametrize("name", ["step_1.jsonl", "log.zip"])
def test_held_files_are_counted_once_however_they_are_shown(name):
    content = zipped({"step_1.jsonl": jsonl([row()])}) if name.endswith(".zip") else jsonl([row()])
    at = upload(run(), name, content)
    assert held(at) == len(content)
