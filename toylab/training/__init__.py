"""Training: gradient ascent on θ with each estimator's gradient, and the one-step SGA view.

    loop           the training loop, expected (exact) or sampled (Monte Carlo), many toys at once, and its summaries
    policies       three policies in one update: the engine's stale μ, the anchor π_old, U updates of a batch
    exact          the exact quantities of many θ at once: J, ∇J, each estimator's mean and its marginals by reward
    toy_rows       many toys at once, one θ per row: the loop's toys at one step
    optimizers     SGD and Adam on arrays of any shape
    sga            how much one step θ + lr·ĝ_N is expected to improve J
    staleness      J at every step against the engine's lag, for PPO centred on μ, decoupled and recompute (and a
                   cap on w), what a reader takes from it, and over a population
    staleness_evidence  the staleness view's population, frozen at the page's defaults and the lesson's setting
    cost           a run's seconds and peak memory, estimated before it starts
    reference_term a KL penalty to π_ref in an update: in the loss, per update; in the reward, per drawn token
    reward_penalty a reward penalty in expected mode: each token's own advantage, every row enumerated
    mixtures       training whose batches carry hidden variables: routing draws, version switches (expected mode)
    history        the versions a version-switch analysis reads: on_policy's exact run
"""
