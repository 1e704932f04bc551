"""The lessons: plain statements for a reading group, each with the setting that shows it and its evidence.

    lesson         what a lesson is: statement, controls, tab, and the check that computes its evidence
    population     the toys a lesson claims its statement for (its seeds and neighbours), and a Tally of one group
    shares         the claim evaluated over every toy of the population, shipped as shares.json for the page
    estimators     lessons about the estimators on one toy
    training       lessons about training with a correction
    sampler        lessons about the mismatch real engines make: top-p, bf16 against fp16, an error redrawn each step
    pipeline       lessons about what a pipeline logs as μ and what its trainer scores: raw log-probabilities, top-p
                   with a temperature-only trainer, the Keep Sampling Mask
    reference      lessons about the reference π_ref: what k3 in the loss follows, the ratio the KL term needs, low_var_kl's
                   clamp, how β trades J for KL
    hidden         lessons about hidden variables: what routing replay removes and leaves, when one version stamp
                   misleads, what masking a stale prefix trades away
    tour           the lessons in the order a reading group meets them
"""
