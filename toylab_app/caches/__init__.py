"""The page's cached computations, one module per tab group, and the bounds that keep the server's memory in check.

    cache            the toy, its exact moments, diagnostics and Monte Carlo (the first tabs)
    sweep_cache      the threshold, mismatch and length sweeps
    training_cache   the Training tab's runs and SGA view, and their time estimate
    seeds_cache      the seeds views: a tab's takeaway over 30 toys, and what it would cost
    experts_cache    the Experts & versions tab's routing and version analyses
    your_run_cache   a user's rollout log, keyed on its content hash, bounded by bytes and leased per session
    run_cache        a run's step summaries (several files or a zip), keyed on the files' content hash
    kept             what the page shows (charts prepared, tables, captions), kept for every session by the parameters
                     that made it: a second session's identical press builds nothing
    ahead            the kept pictures of the mismatch slider's positions beside a run's, made while the server is idle
    bounded_cache    a cache bounded by bytes, not entries, computing a value once for concurrent callers
    work_slots       at most a few large computations (and one log read) at once, over all sessions
"""
