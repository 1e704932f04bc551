"""Hostile input on the page (streamlit.testing): markup from a file, a file name or a link reaches the page only as
code text, quoted short; a log too small for a standard error shows "—" with the reason; the uploader's limit is the
app's own; a log's reading stops where the page's progress callback stops it, keeping nothing; logs are released when
the session shows another. (tests/page/test_browser_hostile.py checks the same in a real browser: no element, no
request.)"""

import re
from pathlib import Path

import pytest
from hostile_logs import HOST, MARKUP, jsonl, markup_cell, markup_names, row, tiny
from messages import says
from streamlit.testing.v1 import AppTest

from toylab.text import QUOTE_LIMIT
from toylab.your_run import files
from toylab.your_run.bounds import MB, PAGE_BOUNDS
from toylab.your_run.columns import choose
from toylab_app.caches import work_slots
from toylab_app.caches import your_run_cache as cache
from toylab_app.caches.your_run_cache import Source

APP = Path(__file__).resolve().parents[2] / "toylab_app" / "script" / "streamlit_app.py"
UPLOAD = "your_run_upload"
CODE_SPAN = re.compile(r"(`+) (.*?) \1")
FRAGMENTS = ("toylab-test.invalid", "![", "](", "<img", "\\frac", ":red[", "**bold**", ":material/warning")
TEXT_FIELDS = ("value", "label", "body", "help", "placeholder", "caption", "text")


def run(query=None, **state):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.session_state["tab"] = "Your run"
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def upload(at, name, content):
    at.file_uploader(key=UPLOAD).set_value((name, content, "application/octet-stream")).run()
    assert not at.exception
    return at


def texts(at):
    """Every piece of text an element of the page shows, with the element's type (selectbox options apart: those
    are plain text, not Markdown)."""
    found = []
    stack = list(at._tree.children.values())
    while stack:
        node = stack.pop()
        stack += list(getattr(node, "children", {}).values())
        for field in TEXT_FIELDS:
            try:
                value = getattr(node, field)
            except (AttributeError, ValueError, TypeError, KeyError, IndexError):
                continue
            if isinstance(value, str):
                found.append((node.type, field, value))
    return found


def outside_code(text):
    return CODE_SPAN.sub("", text)


def assert_no_markup_outside_code(at):
    for type, field, text in texts(at):
        rest = outside_code(text)
        assert not any(fragment in rest for fragment in FRAGMENTS), (type, field, text)
        for span in CODE_SPAN.finditer(text):
            assert len(span.group(2)) < 700, (type, field)


def assert_no_nan(at):
    for type, field, text in texts(at):
        assert not re.search(r"\bnan\b|\binf\b", text, re.IGNORECASE), (type, field, text)


@pytest.mark.parametrize("kind", list(MARKUP))
def test_markup_in_column_names_and_cells_is_code_text(kind):
    at = upload(run(), *markup_names(kind))
    assert len(at.error) == 1 and "which column holds the sampler" in at.error[0].value
    assert_no_markup_outside_code(at)
    at = upload(run(), *markup_cell(kind))
    assert len(at.error) == 1 and "is not a number" in at.error[0].value
    assert_no_markup_outside_code(at)


def test_a_file_named_with_markup_is_named_in_code_text_and_short():
    name = MARKUP["image"] * 5 + ".jsonl"
    at = upload(run(), name, jsonl([row(3), row(2)]))
    assert not at.error and "2 sequences" in at.markdown[0].value
    assert_no_markup_outside_code(at)
    shown = CODE_SPAN.search(at.markdown[0].value).group(2)
    assert len(shown) == QUOTE_LIMIT and shown.endswith(".jsonl")


@pytest.mark.parametrize("query", [
    {"tab": MARKUP["image"]}, {"tab": MARKUP["link"] * 500}, {"est": "naive", MARKUP["image"]: "1"},
    {"est": "naive,tok_tis", "tok_tis.C": MARKUP["latex"]}, {"T": MARKUP["colour"]},
    {"est": "verl:decoupled_geo_rs", "verl:decoupled_geo_rs.rs_threshold": MARKUP["link"] * 1000},
    {"framework": MARKUP["image"], "top_p": MARKUP["link"], "precision": MARKUP["colour"]},
], ids=["tab image", "tab long link", "parameter name", "threshold latex", "T colour", "text threshold",
        "framework and sampler"])
def test_markup_in_a_link_is_code_text_in_short_notices(query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception and at.warning
    assert_no_markup_outside_code(at)
    for warning in at.warning:
        assert len(warning.value) < 800
        for value in query.values():
            assert value[:QUOTE_LIMIT + 1] not in warning.value or len(value) <= QUOTE_LIMIT


@pytest.mark.parametrize("case", ["single sequence", "single token"])
def test_a_log_of_one_sequence_shows_dashes_with_the_reason(case):
    at = upload(run(), *tiny(case))
    assert not at.error
    assert_no_nan(at)
    shown = {metric.label: metric.delta for metric in at.metric}
    assert not shown["k1 = mean(log μ − log π)"]           # no "± —" under every number: the caption says why
    assert any("no standard error" in caption.value for caption in at.caption)
    assert any("no standard error" in markdown.value for markdown in at.markdown)
    for frame in at.dataframe:                                          # no column of "None" cells
        assert not frame.value.isna().all().any(), frame.value


def test_huge_numbers_are_written_in_scientific_notation():
    """The issue's k3 "as a 40-digit number": past a million a number is shown to 4 significant digits."""
    at = upload(run(), *__import__("hostile_logs").extreme("log W 355 to 709"))
    assert not at.error
    shown = {metric.label: metric.value for metric in at.metric}
    assert shown["k3 = mean(ρ − 1 − log ρ)"].endswith(("e+20", "e+21")) and len(shown["k3 = mean(ρ − 1 − log ρ)"]) <= 10


def test_the_uploaders_limit_is_the_apps_own():
    """Streamlit's uploader counts its limit in MB of 10**6 bytes (frontend utils: 1024 on Windows, else 1000); the
    app refuses one byte more than PAGE_BOUNDS.file_bytes (tests/page/test_your_run_app.py)."""
    at = run()
    assert at.file_uploader(key=UPLOAD).proto.max_upload_size_mb * MB == PAGE_BOUNDS.file_bytes == 50 * MB
    assert "at most 50 MB" in at.file_uploader(key=UPLOAD).label


def _source_and_columns(records, name="log.jsonl"):
    source = Source.of(name, jsonl(records))
    file = files.open_log_file(source.name, data=source.data, bounds=PAGE_BOUNDS)
    return source, choose(files.preview(file), file.name)


class Stop(BaseException):
    """What Streamlit raises at a Streamlit call once the user leaves the tab (a BaseException, as its own are)."""


def test_reading_stops_where_the_progress_callback_stops_it_and_keeps_nothing(monkeypatch):
    monkeypatch.setattr(files, "CHUNK_BYTES", 2_000)
    source, columns = _source_and_columns([row(20) for _ in range(300)])
    calls = []

    def leave_the_tab(share):
        calls.append(share)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        cache.rollout_log(source, columns, leave_the_tab)
    assert len(calls) == 2 and all(0 < share <= 1 for share in calls)      # stopped after 2 of ~37 chunks
    assert (source.digest, columns) not in cache.LOGS._values
    with work_slots.log_work(waiting=pytest.fail):                     # the log slot is free again
        pass


def test_a_session_keeps_one_log_and_lets_go_of_the_last_one():
    at = upload(run(), "first.jsonl", jsonl([row(3), row(4)]))
    first = next(key for key in cache.LOGS._values if key[0] == Source.of("first.jsonl", jsonl([row(3), row(4)])).digest)
    upload(at, "second.jsonl", jsonl([row(2), row(5), row(1)]))
    assert not at.error and "3 sequences" in at.markdown[0].value
    assert first not in cache.LOGS._values
    second = Source.of("second.jsonl", jsonl([row(2), row(5), row(1)])).digest
    assert any(key[0] == second for key in cache.LOGS._values)


def test_a_refused_file_leaves_the_rest_of_the_page_working():
    at = upload(run(), "bomb.csv.gz", __import__("hostile_logs").bomb_one_giant_row(40 * MB)[1])
    assert len(at.error) == 1 and says(at.error[0].value, "line 2", "16 MB per line")
    at.slider(key="mismatch").set_value(0.8).run()
    assert not at.exception and at.query_params["mismatch"] == "0.8" and len(at.error) == 1
    assert HOST not in "".join(text for _, _, text in texts(at))
