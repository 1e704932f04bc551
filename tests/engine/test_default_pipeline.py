"""The default pipeline (logged = sampled, scored = plain softmax) gives bit-identical results to main before the
three distributions existed: 1,852 digests of exact results (``default_pipeline_results``) frozen at da6327a."""

from default_pipeline_digests import MAIN_DA6327A
from default_pipeline_results import digests


def test_every_default_result_is_bit_identical_to_main_da6327a():
    now = digests()
    assert now.keys() == MAIN_DA6327A.keys()
    changed = [key for key in now if now[key] != MAIN_DA6327A[key]]
    assert not changed, f"{len(changed)} results changed, e.g. {changed[:5]}"
