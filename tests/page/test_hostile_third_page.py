"""Issue 41's hostile files on the page (streamlit.testing): a Parquet file and a zip that understate their size are
one error each, refused before they are decoded or parsed and let go at once; a name holding a bidirectional override
or a terminal escape is shown escaped, in the step's error and in the table of steps not read."""

import pyarrow.parquet as pq
import pytest
from hostile_runs import step_log, zipped
from hostile_third import BIDI, escape_named, lying_parquet, understated_zip
from test_hostile_runs_page import assert_one_error, run, upload

from toylab_app import your_run_uploads as uploads


def test_a_parquet_whose_footer_understates_its_values_is_one_error_and_never_decoded(monkeypatch):
    """Case 1 on the page: the upload took the server from 562 MB to 3.7 GB, 2.15 GB still held after the error."""
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", lambda *args, **kwargs: pytest.fail("decoded"))
    at = upload(run(), lying_parquet(values=10**8, claimed=2))
    assert_one_error(at, "lying.parquet: column 'sampler_logprobs': its pages hold 100,000,000 values",
                     "over the limit of 2,000,000 tokens")
    assert uploads.BUDGET.held(at.session_state[uploads.SESSION_KEY]) == 0


def test_a_zip_whose_end_record_understates_its_entries_is_one_error_and_let_go():
    """Case 10 on the page: the server grew by 290 MB and kept it."""
    at = upload(run(), understated_zip(entries=150_000, claimed=1, real={"step_1.jsonl": step_log()}))
    assert_one_error(at, "understated.zip: the archive's directory lists more than 100,000 entries")
    assert uploads.BUDGET.held(at.session_state[uploads.SESSION_KEY]) == 0


def test_a_name_holding_a_bidirectional_override_or_an_escape_is_shown_escaped():
    """Case 9 on the page: a right-to-left override in a zip member's name reversed the rest of its step's error."""
    bidi = f"step_2_{BIDI}lmth.jsonl"
    at = upload(run(), ("run.zip", zipped({"step_1.jsonl": step_log(), bidi: b"not json\n",
                                           escape_named(3): b"not json\n"})))
    assert not at.exception and not at.error
    failed = at.dataframe[0].value
    assert failed["step"].tolist() == [2, 3]
    shown = " ".join(failed["files"]) + " ".join(failed["error"]) + " ".join(w.value for w in at.warning)
    assert BIDI not in shown and "\x1b" not in shown and "\x07" not in shown
    assert "step_2_\\u202elmth.jsonl" in " ".join(failed["files"]) and "\\x1b[2J" in " ".join(failed["error"])
