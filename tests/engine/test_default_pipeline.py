"""The default pipeline (logged = sampled, scored = plain softmax) gives bit-identical results to main before the
three distributions existed: 1,897 digests of exact results (``default_pipeline_results``) frozen at main 7b17a9e."""

from default_pipeline_digests import MAIN_7B17A9E
from default_pipeline_results import digests


def test_every_default_result_is_bit_identical_to_main_before_the_pipeline():
    now = digests()
    assert now.keys() == MAIN_7B17A9E.keys()
    changed = [key for key in now if now[key] != MAIN_7B17A9E[key]]
    assert not changed, f"{len(changed)} results changed, e.g. {changed[:5]}"
