"""The catalogue: every estimator as formulas and data, evaluated on whatever sequences it is given.

Nothing here knows the toy: a weight function reads a view of sequences (``engine.sequences``) and returns the
factors of its per-token coefficient. Bottom to top:

    weights        what a weight function returns (Weights) and what a threshold is (Param)
    aggregation    how a batch's per-token losses become one gradient (verl's and TRL's loss modes)
    corrections    the core catalogue: naive, tok_is, tok_tis, tok_mis, prefix_is, seq_is, … and the batch-coupled ones
    families       parametrised families: rejection by a statistic, two-sided clips and masks, PPO-clip, opsm, tis_bn
    frameworks/    one module per framework: its presets as rows of data, its rules, its formulas
    presets        every framework's presets in one table
    estimators     the registry: id → formula, source, thresholds, colour and weight function
"""
