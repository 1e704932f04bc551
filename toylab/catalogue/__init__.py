"""The catalogue: every estimator as formulas and data, evaluated on whatever sequences it is given.

Nothing here knows the toy: a weight function reads a view of sequences (``engine.sequences``) and returns the
factors of its per-token coefficient. Bottom to top:

    weights        what a weight function returns (Weights, TokenClass) and what a threshold is (Param)
    statistics     per-token statistics by name (k1, k2, k3, k3_reverse, mult_error, prob_diff, kpop, …)
    aggregation    how a batch's per-token losses become one gradient (verl's, TRL's and slime's loss modes)
    corrections    the core catalogue: naive, tok_is, tok_tis, tok_mis, prefix_is, seq_is, … and the batch-coupled ones
    families       parametrised families: rejection by a statistic, two-sided clips and masks, PPO-clip, opsm, tis_bn
    ratio_bounds   geometric-level weights (geo_tis, geo_clip), sequences rejected by one token (outlier_rs, veto)
    probability_masks   masks in probability space: DPPO, KPop, open-instruct's TV mask
    loss_shapes    losses not of the form mask × A: an additive penalty (k2_penalty), TOPR, VESPO
    second_moment  AReaL's M2PO second-moment mask, batch-coupled
    frameworks/    one module per framework: its presets as rows of data, its rules, its formulas
    presets        every framework's presets in one table
    pipelines      what a pipeline logs as μ and what its trainer scores; each framework's pipeline as a preset
    updates        one update of a batch: the per-token surrogate sg(g(w))·L(r, A) of π_θ, π_old and μ, and its data
    update_presets every framework's update presets in one table
    replay         routing replay (off, R2, R3) and each framework's option for it, as presets
    version_handling   what each framework logs of a sequence's versions (stamps, a masked stale prefix, π_prox)
    estimators     the registry: id → formula, source, thresholds, colour and weight function
    kl             the KL penalty to a reference: k1, abs, k2, k3, the straight-through variants, full; loss or reward
    kl_presets     every framework's KL setting as data: estimator, placement, ratio, clamps, default β
    kl_settings    KL settings by name, as the link and the command line write them
"""
