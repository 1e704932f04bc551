"""The hostile files of issue 25 on the page (streamlit.testing): each upload is one error naming the file, as code
text with no server path, and the rest of the page works; a run over the page's steps is shown as far as they go, with
a notice; a link that gave the page a traceback (an areal preset) opens on every tab."""

from pathlib import Path

import pytest
from hostile_runs import (
    deep_dump,
    deep_json,
    deflate64_member,
    duplicate_members,
    encrypted_member,
    exotic_step_column,
    exotic_step_names,
    gzip_empty_members,
    gzip_long_name,
    many_steps,
    parquet_many_chunks,
    surrogate_ids,
    zip_bomb,
)
from messages import says
from streamlit.testing.v1 import AppTest

from toylab.state.query import TAB_LABELS
from toylab.your_run.bounds import PAGE_BOUNDS
from toylab.your_run.gunzip import FIELD_BYTES
from toylab_app import your_run_uploads as uploads
from toylab_app.caches import run_cache, your_run_cache

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
ROOT = str(APP.parent)
SERVER_PATHS = (ROOT, "/tmp/", "/usr/", "site-packages")


def run(query=None):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query or {})
    at.session_state["tab"] = "Your run"
    return at.run()


def upload(at, built, key=uploads.UPLOAD_KEY):
    name, content = built
    at.file_uploader(key=key).set_value((name, content, "application/octet-stream")).run()
    return at


def assert_one_error(at, *words):
    assert not at.exception, [exception.message for exception in at.exception]
    [error] = at.error
    assert error.value.startswith("`") and all(word in error.value for word in words), error.value
    assert not any(path in error.value for path in SERVER_PATHS), error.value
    at.slider(key="mismatch").set_value(0.8).run()                     # the rest of the page works
    assert not at.exception and at.query_params["mismatch"] == "0.8"


@pytest.mark.parametrize(("build", "words"), [
    (encrypted_member, ["step_1.jsonl: encrypted in the archive"]),
    (deflate64_member, ["step_1.jsonl: compressed by Deflate64"]),
    (lambda: zip_bomb(60_000_000), ["step_1.jsonl: cannot be read from the archive"]),
    (duplicate_members, ["duplicates.zip: 'step_1.jsonl' is in the archive twice"]),
    (exotic_step_names, ["digits, over 15"]),
    (exotic_step_column, ["log.jsonl: row 2, column 'step': 1e+300 is not a step number"]),
    (surrogate_ids, ["surrogate_ids.jsonl: row 1, column 'sequence_id'", "not valid Unicode"]),
    (deep_json, ["deep.jsonl: not JSON Lines"]),
    (deep_dump, ["train_data_step1.jsonl: row 1 cannot be read"]),
    (lambda: gzip_empty_members(150_000), ["empty_members.jsonl.gz: gzip member 100,001 is over the limit"]),
    (lambda: gzip_long_name(2 * FIELD_BYTES), ["long_name.jsonl.gz: the file name in gzip member 1"]),
])
def test_each_hostile_upload_is_one_error_naming_the_file_without_a_server_path(build, words):
    name, content = build()
    at = upload(run(), (name, content))
    assert_one_error(at, *words)
    kept = name == "surrogate_ids.jsonl"          # its columns were read: a log whose reading fails with the columns
    held = uploads.BUDGET.held(at.session_state[uploads.SESSION_KEY])      # picked is kept, another pick may read it
    assert held == (len(content) if kept else 0)                           # the others are let go at once


def test_a_parquet_footer_over_the_page_s_bound_is_one_error_and_never_parsed(monkeypatch):
    monkeypatch.setattr(your_run_cache, "PAGE_BOUNDS", PAGE_BOUNDS.but(footer_bytes=1_000_000))
    monkeypatch.setattr("pyarrow.parquet.ParquetFile", lambda *args, **kwargs: pytest.fail("parsed"))
    at = upload(run(), parquet_many_chunks(row_groups=2_000))             # 20,000 column chunks: a 1.3 MB footer
    assert_one_error(at, "many_chunks.parquet: its metadata (1,", "over the limit of 1 MB of Parquet metadata")
    assert uploads.BUDGET.held(at.session_state[uploads.SESSION_KEY]) == 0


def test_a_run_over_the_page_s_steps_is_shown_as_far_as_they_go_with_a_notice(monkeypatch):
    monkeypatch.setattr(run_cache, "PAGE_BOUNDS", PAGE_BOUNDS.but(steps=4))
    at = upload(run(), many_steps(9))
    assert not at.exception and not at.error
    [notice] = [warning.value for warning in at.warning if "were read" in warning.value]
    assert says(notice, "first 4 steps of 9", "at most 4 steps")
    assert any("A run of 4 steps" in markdown.value for markdown in at.markdown)


@pytest.mark.parametrize("tab", TAB_LABELS)
def test_an_areal_preset_s_link_opens_on_every_tab(tab):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"est": "areal:token_mask,areal:token_clamp,areal:sequence_mask,areal:sequence_clamp",
                            "tab": tab})
    at.run()
    assert not at.exception and not [error for error in at.error if "unexpected error" in error.value]
    assert at.session_state["areal:token_mask.lower"] == "none"
    assert at.query_params["est"] == "areal:token_mask,areal:token_clamp,areal:sequence_mask,areal:sequence_clamp"
    assert "areal:token_mask.lower" not in at.query_params                # the default "none", written by no link
