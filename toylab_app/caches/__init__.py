"""The page's cached computations, one module per tab group, and the bounds that keep the server's memory in check.

    cache            the toy, its exact moments, diagnostics and Monte Carlo (the first tabs)
    sweep_cache      the threshold, mismatch and length sweeps
    training_cache   the Training tab's runs and SGA view, and their time estimate
    experts_cache    the Experts & versions tab's routing and version analyses
    your_run_cache   a user's rollout log, keyed on its content hash, bounded by bytes and leased per session
    run_cache        a run's step summaries (several files or a zip), keyed on the files' content hash
    bounded_cache    a cache bounded by bytes, not entries, computing a value once for concurrent callers
    work_slots       at most a few large computations (and one log read) at once, over all sessions
"""
