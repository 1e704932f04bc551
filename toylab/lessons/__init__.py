"""The lessons: plain statements for a reading group, each with the setting that shows it and its evidence.

    lesson         what a lesson is: statement, controls, tab, and the check that computes its evidence
    estimators     lessons about the estimators on one toy
    training       lessons about training with a correction
    sampler        lessons about the mismatch real engines make: top-p, bf16 against fp16, an error redrawn each step
    pipeline       lessons about what a pipeline logs as μ and what its trainer scores: raw log-probabilities, top-p
                   with a temperature-only trainer, the Keep Sampling Mask
    hidden         lessons about hidden variables: what routing replay removes and leaves, when one version stamp
                   misleads, what masking a stale prefix trades away
    tour           the lessons in the order a reading group meets them
"""
