"""The default pipeline (logged = sampled, scored = plain softmax) gives the results of main before the three
distributions existed: 1,897 items of exact results (``default_pipeline_results``) frozen at main 7b17a9e.

Each item is compared as a whole: its NaNs and infinities where they were, and every other number within RELATIVE_TOLERANCE of the
largest magnitude among the item's numbers. The tolerance is relative to the item, not to each number, because an
item holds numbers that are zero up to rounding (the bias of an unbiased estimator, a share that nothing masks) and
those carry the rounding of their larger neighbours. The last bits differ between CPUs (numpy's SIMD dispatch,
glibc's and OpenBLAS's kernels): under numpy's AVX2 and SSE4.2 paths with glibc's non-FMA kernels the items moved by
at most 7.3e-16 of their scale here, so 1e-12 leaves three orders of margin, while a change to the computation moves
them by far more. Adam's runs are the exception: its first steps are lr·g/(|g| + ε) per coordinate, which turns a
coordinate's rounding error of ~1e-17 into ~1e-17·lr/ε = 1e-10 of θ (lr = 0.1, ε = 1e-8), and later steps carry it;
one moved by 7.3e-12 of its scale, and ADAM_TOLERANCE leaves two orders of margin. Bit-for-bit equality holds only
between two computations in one process."""

from pathlib import Path

import numpy as np
from default_pipeline_results import read, results

FROZEN = Path(__file__).with_name("default_pipeline_numbers.json.gz")
RELATIVE_TOLERANCE = 1e-12
ADAM_TOLERANCE = 1e-9          # training/…/adam/…: Adam amplifies a gradient's rounding by lr/ε


def differs(now, then, tolerance=RELATIVE_TOLERANCE):
    """Why an item's numbers are not those frozen, beyond ``tolerance`` of the item's scale (a sentence), or None."""
    if [value.shape for value in now] != [value.shape for value in then]:
        return f"shapes {[value.shape for value in now]} were {[value.shape for value in then]}"
    now, then = np.concatenate(now), np.concatenate(then)
    finite = np.isfinite(then)
    if not np.array_equal(now[~finite], then[~finite], equal_nan=True) or not np.isfinite(now[finite]).all():
        return "NaN or infinity in other places"
    scale = np.max(np.abs(then[finite]), initial=0.0)
    gap = np.max(np.abs(now[finite] - then[finite]), initial=0.0)
    return None if gap <= tolerance * scale else f"moved by {gap:.3g}, {gap / scale:.3g} of its scale"


def test_every_default_result_is_the_one_main_gave_before_the_pipeline():
    now, then = results(), read(FROZEN)
    assert now.keys() == then.keys()
    changed = {key: reason for key in now
               if (reason := differs(now[key], then[key], ADAM_TOLERANCE if "/adam/" in key else RELATIVE_TOLERANCE))}
    assert not changed, f"{len(changed)} of {len(now)} results changed, e.g. {list(changed.items())[:5]}"


def test_the_comparison_sees_a_change_of_one_number_beyond_the_tolerance():
    """A number moved by 1e-9 of its item's scale, or a NaN or an infinity moved, is a change; a move of 1e-14 is
    rounding."""
    then = [np.array([0.5, -2.0, np.nan, np.inf]), np.array([1e-17])]
    assert differs([then[0] + [0.0, 2e-9, 0.0, 0.0], then[1]], then) is not None
    assert differs([np.array([0.5, np.nan, 1.0, np.inf]), then[1]], then) == "NaN or infinity in other places"
    assert differs([np.array([0.5, -2.0, np.nan, -np.inf]), then[1]], then) == "NaN or infinity in other places"
    assert differs([then[0] + [1e-14, 0.0, 0.0, 0.0], then[1] + 3e-16], then) is None
