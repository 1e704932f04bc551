"""Analysis built on the engine: diagnostics, Monte Carlo, sweeps, lengths and one position repeated.

    diagnostics    KL(μ‖π), χ²_seq, ESS and the exact ratio distributions
    montecarlo     sampled batches; every estimator's error per batch size
    stratified     Monte Carlo moments stratified by the count of token 0, for any T
    sweeps         a threshold or the mismatch swept with the rest held
    length         how the problem scales with T, from 1 to 256
    repeated       one position repeated T times: W capped falls with T, its geometric mean does not
    seeds          the population a view's takeaway is read over: the current toy among 30 seeds, and ranks
    kl_view        each KL setting's estimate of ∇KL(π‖π_ref) on the engine's tokens, against the true gradient
    routing        a mixture of experts' routing mismatch: each correction with replay off, R2 and R3, flip rates
    versions       sequences spanning two policy versions: each way of logging them against the per-token truth
"""
