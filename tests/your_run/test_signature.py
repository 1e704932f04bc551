"""A log's identity check: sequences drawn from a toy's sampled μ_s, logged through its pipeline (logged μ_log, scored
π), read as a rollout log. The mean ratio π/μ over the tokens says "raw" for raw log-probabilities with a trainer that
divides by τ ≠ 1, "truncated" for processed ones with top-p and a trainer without the mask, "consistent" when the
logged μ is the sampled one; the matched toy with the same pipeline gives back the mismatch the log was drawn at."""

import json

import pytest
from rollout_logs import log_records, pipeline_log, write_log

from toylab.cli.main import main
from toylab.engine.toy import make_toy
from toylab.presentation.pipeline_text import signature_text
from toylab.your_run.magnitudes import magnitudes
from toylab.your_run.matching import match_toy, matching_estimate
from toylab.your_run.signature import logging_signature
from toylab.your_run.statistics import Estimate, log_statistics


@pytest.mark.parametrize("pipeline, verdict", [
    ({"temperature": 0.6, "logged": "raw", "scored": "temperature"}, "raw"),               # TRL before #4163
    ({"temperature": 1.4, "logged": "raw", "scored": "temperature"}, "raw"),               # SkyRL at τ = 1.4
    ({"temperature": 0.8, "top_p": 0.9, "scored": "temperature"}, "truncated"),            # verl with top-p
    ({"temperature": 0.8, "top_p": 0.9, "scored": "keep_mask"}, "consistent"),             # slime
    ({"temperature": 0.6, "scored": "temperature"}, "consistent"),                         # verl without top-p
    ({}, "consistent"),
])
def test_the_log_s_mean_ratio_reads_the_pipeline(pipeline, verdict):
    toy = make_toy(6, 4, 0.1, 0, **pipeline)
    identity = magnitudes(pipeline_log(toy, 600, seed=3)).identity
    signature = logging_signature(identity)
    assert signature.verdict == verdict, (signature, toy.identity_tokens.mean())
    assert abs(identity.value + 1 - toy.identity_tokens.mean()) <= 4 * identity.se
    assert str(round(signature.mean_ratio, 4)) in signature_text(signature)


def test_raw_logging_with_a_tempering_trainer_has_a_mean_ratio_above_one_while_the_logit_error_is_small():
    """Above 1 at mismatch 0 and 0.1 (and, for τ > 1, 0.5); at τ < 1 a mismatch of 0.5 pulls it below 1: a pattern."""
    for temperature in (0.5, 0.7, 1.3, 2.0):
        for mismatch in (0.0, 0.1) + ((0.5,) if temperature > 1 else ()):
            toy = make_toy(6, 4, mismatch, 0, temperature=temperature, logged="raw", scored="temperature")
            assert toy.identity_tokens.mean() > 1.005, (temperature, mismatch)
    assert make_toy(6, 4, 0.5, 0, temperature=0.6, logged="raw", scored="temperature").identity_tokens.mean() < 0.9


@pytest.mark.parametrize("pipeline, verdict", [
    ({"temperature": 0.6, "logged": "raw", "scored": "temperature"}, "raw"),
    ({"temperature": 0.8, "top_p": 0.9, "scored": "temperature"}, "truncated"),
    ({"temperature": 0.8, "top_p": 0.9, "scored": "keep_mask"}, "consistent"),
])
def test_inspect_reads_the_signature_in_its_json_and_notices(pipeline, verdict, tmp_path, capsys):
    """``inspect`` on a log written to a file: logging_signature is the library's, and a raw or truncated verdict is
    a notice, in the JSON and in the text (one final period)."""
    log = pipeline_log(make_toy(6, 4, 0.1, 0, **pipeline), 600, seed=3)
    path = str(write_log(tmp_path, "log", log_records(log), "jsonl"))
    assert main(["inspect", path, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    expected = logging_signature(magnitudes(log).identity)
    assert result["logging_signature"] == expected.as_dict() and expected.verdict == verdict
    opening = {"raw": "These log-probabilities look pre-temperature", "truncated": "These log-probabilities look "
               "truncated", "consistent": None}[verdict]
    assert [notice for notice in result["notices"] if notice.startswith("These log-probabilities")] == \
        ([] if opening is None else [signature_text(expected, "cli").removesuffix(".")])
    assert main(["inspect", path]) == 0
    text = capsys.readouterr().out
    assert (opening is None and "These log-probabilities" not in text) or f"Notice: {opening}" in text
    assert ".." not in text and "sidebar" not in text
    assert opening is None or ("--pipeline" in text and "--pipeline" not in signature_text(expected))


def test_one_sequence_gives_no_verdict_and_an_exact_one_no_distance():
    assert logging_signature(Estimate(0.2, None)).verdict == "unknown"
    assert logging_signature(Estimate(0.0, 0.0)).verdict == "consistent"


def test_the_matched_toy_matches_the_pipeline():
    """A log drawn at mismatch 0.5 with raw logging at τ = 0.6: matched with the same pipeline the toy comes back
    near 0.5; the default pipeline's KL curve would not (the log's k3 is not a KL there)."""
    toy = make_toy(6, 4, 0.5, 0, temperature=0.6, logged="raw", scored="temperature")
    statistics = log_statistics(pipeline_log(toy, 2000, seed=5))
    name, kl = matching_estimate(statistics)
    match = match_toy(kl, 6, 4, 0, sampler=toy.sampler, statistic=name)
    assert match.clamped is None and abs(match.mismatch - 0.5) <= 3 * match.mismatch_se
    assert match.toy_kl == pytest.approx(kl.value, rel=1e-9)
    plain = match_toy(kl, 6, 4, 0, statistic=name)
    assert abs(plain.mismatch - 0.5) > 10 * match.mismatch_se
