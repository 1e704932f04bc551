"""The exact engine: the toy, its V**T sequences as a grid, and every estimator's exact moments.

    sampler        the sampler model: how an engine turns logits into μ (precision, temperature, top-k, top-p)
    toy            T positions over V tokens, trainer π and sampler μ; J, E_μ[r] and ∇J
    grid           the sequences as a grid: outer sums, position marginals, prefix sums
    split_grid     the grid as (first half) × (second half), for many tables at once
    counts         J, ∇J and the Hessian through the count of token 0 (O(T²))
    sequences      the two views a weight function reads: every sequence of the toy, or given sequences
    coefficients   the batch interface: any estimator's per-token coefficients on given sequences
    surrogate      an update's per-token surrogate sg(g(w))·L(r, A) on given sequences
    moments        exact mean and variance of every estimator in one O(M) pass
    recursion      factorising estimators' moments at any T, by dynamic programming over the count
    reference      the reference policy π_ref and the exact KLs between π and it, both ways, with their gradients
    kl_moments     a KL penalty's estimate of ∇KL on the engine's tokens: its exact mean and second moment
    experts        a mixture of experts split from θ: the trainer's routing and the engine's router error, gradients
    hidden         exact sums over sequences with hidden variables (a component per sequence, a value per token)
    versions       a sequence switching policy version, the stamps a framework logs, AReaL's log-linear π_prox
"""
