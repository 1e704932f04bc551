"""Routing replay: which routing the trainer computes a mixture of experts' log-probabilities under.

    off   the trainer routes with its own router at every forward: π_old at the anchor's recomputation, π_θ at each
          update with the routing its router gives then (a routing can change between updates)
    R2    the routing recorded when the anchor is recomputed (the trainer's own router at the anchor's weights),
          replayed in every update of the batch: verl router_replay.mode R2, slime/Miles --use-routing-replay
    R3    the engine's routing of each token, recorded at rollout and replayed at the anchor's recomputation and in
          every update: verl R3 with rollout.enable_rollout_routing_replay, slime/Miles --use-rollout-routing-replay,
          prime-rl trainer.enable_router_replay, NeMo-RL policy.router_replay.enabled

A replayed routing fixes which experts are picked; the gates are the trainer's current scores at them (the replay
keeps ``scores.gather(1, top_indices)``), so the router still learns through its gates. R2 needs a recomputed
anchor to record from: under the bypass anchor there is no recomputation (refused).
"""

REPLAYS = ("off", "R2", "R3")
