"""Routing replay: which routing the trainer computes a mixture of experts' log-probabilities under, and each
framework's options for it as presets.

    off   the trainer routes with its own router at every forward: π_old at the anchor's recomputation, π_θ at each
          update with the routing its router gives then (a routing can change between updates)
    R2    the routing recorded when the anchor is recomputed (the trainer's own router at the anchor's weights),
          replayed in every update of the batch
    R3    the engine's routing of each token, recorded at rollout and replayed at the anchor's recomputation and in
          every update

A replayed routing fixes which experts are picked; the gates are the trainer's current scores at them (verl's
``RouterReplay.get_replay_topk`` and slime's replay stages return ``scores.gather(1, top_indices)``), so the router
still learns through its gates. R2 needs a recomputed anchor to record from: under the bypass anchor there is none
(refused). A preset (``REPLAY_PRESETS``) names a framework's option, the mode it sets and where its code does it, at a
commit; ``tests/catalogue/test_replay.py`` checks each row against the lines it quotes.
"""

from dataclasses import dataclass

REPLAYS = ("off", "R2", "R3")
CUSTOM = "custom"               # no preset: the replay mode as set


@dataclass(frozen=True)
class ReplayPreset:
    """A framework's routing-replay option: ``option`` as its configuration writes it, the ``replay`` mode it runs,
    ``repository`` at ``commit`` with ``code`` (file, function and lines) and ``note`` where its code and its
    documentation disagree or what could not be confirmed."""
    id: str
    option: str
    replay: str
    repository: str
    commit: str
    code: str
    note: str = ""

    @property
    def framework(self):
        return self.id.partition(":")[0]


VERL = ("volcengine/verl (verl-project/verl)", "1dda039")
SLIME = ("THUDM/slime", "624b824")
MILES = ("radixark/miles", "31f1ca9")

REPLAY_PRESETS = {preset.id: preset for preset in (
    ReplayPreset(
        "verl:R2", "actor_rollout_ref.actor.megatron.router_replay.mode=R2 (or actor.veomni.router_replay.mode)", "R2",
        *VERL,
        "verl/workers/engine/megatron/transformer_impl.py forward_backward_batch, lines 945-952 (REPLAY_FORWARD, "
        "and RECORD for a forward_only call in R2: compute_log_prob records, the update replays); "
        "verl/utils/megatron/router_replay_patch.py RouterReplay.get_replay_topk, lines 109-136",
        "The engine reads actor.<engine>.router_replay.mode (verl/workers/engine_workers.py lines 497-503); the "
        "top-level actor.router_replay.mode of actor.yaml (lines 319-334) is read only by the experimental "
        "separation trainer, and its comments still speak of 'record' and 'replay' modes, as do the Ascend docs "
        "(docs/ascend_tutorial/dev_guide/model_dev/parameter_and_metrics.md line 601: disabled, record, replay); the "
        "config refuses anything but disabled, R2, R3 (verl/workers/config/engine.py lines 70-72)."),
    ReplayPreset(
        "verl:R3", "actor_rollout_ref.actor.megatron.router_replay.mode=R3 with "
        "actor_rollout_ref.rollout.enable_rollout_routing_replay=True", "R3", *VERL,
        "verl/workers/engine/megatron/transformer_impl.py forward_step, lines 1295-1313 (the rollout's "
        "routed_experts set as the replay target, aligned by align_r3_router_replay_data); RouterReplay."
        "get_replay_topk lines 109-136",
        "R2 with enable_rollout_routing_replay is an error in verl/trainer/ppo/ray_trainer.py (lines 1603-1609) but "
        "silently drops the rollout's routes in verl/experimental/separation/ray_trainer.py (lines 537-542)."),
    ReplayPreset(
        "slime:use_routing_replay", "--use-routing-replay", "R2", *SLIME,
        "slime/backends/megatron_utils/actor.py train_actor, lines 474-481 (ROUTING_REPLAY_STAGE record while the "
        "anchor's log-probs are computed, by the old actor with --keep-old-actor) and 516 (replay_backward in "
        "training); slime/utils/routing_replay.py get_routing_replay_compute_topk, lines 171-204",
        "With --use-rollout-logprobs (the bypass anchor) no log-probs are recomputed and nothing is recorded: the "
        "toy refuses R2 under bypass; what slime then replays was not confirmed."),
    ReplayPreset(
        "slime:use_rollout_routing_replay", "--use-rollout-routing-replay", "R3", *SLIME,
        "slime/utils/arguments.py lines 2010-2011 (it sets use_routing_replay); slime/backends/megatron_utils/"
        "actor.py lines 430-431 (fill_routing_replay from the rollout) and 476-478 (replay_forward at the anchor's "
        "recomputation)"),
    ReplayPreset(
        "miles:use_routing_replay", "--use-routing-replay", "R2", *MILES,
        "miles/backends/megatron_utils/actor.py lines 520-531 (stage record, or replay_forward for a rollout "
        "replay) and 570 (replay_backward); miles/utils/arguments.py lines 1570-1574"),
    ReplayPreset(
        "miles:use_rollout_routing_replay", "--use-rollout-routing-replay", "R3", *MILES,
        "miles/utils/arguments.py lines 1576-1582 and 3472-3473 (it sets use_routing_replay)"),
    ReplayPreset(
        "miles:use_rollout_indexer_replay", "--use-rollout-indexer-replay", "R3", *MILES,
        "miles/utils/arguments.py lines 1590-1595 and 3482-3484 (it sets use_indexer_replay)",
        "Replays the sparse-attention indexer's top-k (DeepSeek-V3.2's token selection), not the experts: the same "
        "arithmetic, a top-k choice the engine makes and the trainer replays, on another table; the toy's one kind "
        "of top-k choice stands for it. The flag asserts context parallelism 1."),
    ReplayPreset(
        "prime_rl:enable_router_replay", "trainer.enable_router_replay=true", "R3", "PrimeIntellect-ai/prime-rl",
        "559b447",
        "packages/prime-rl-configs/src/prime_rl/configs/trainer.py line 637; configs/rl.py "
        "auto_setup_router_replay, lines 589-600 (turns on vLLM's enable_return_routed_experts); "
        "src/prime_rl/trainer/rl/train.py lines 349-360",
        "prime-rl's ratio is π_θ/μ (the bypass anchor): the replay applies to π_θ only."),
    ReplayPreset(
        "nemo_rl:router_replay", "policy.router_replay.enabled=true", "R3", "NVIDIA-NeMo/RL", "7ea279a",
        "docs/guides/router-replay.md (routes from vLLM replayed in the prev-logprob and training forwards); "
        "nemo_rl/algorithms/grpo.py lines 4132-4140 (refused with async GRPO over the data plane)"),
)}
REPLAY_IDS = (CUSTOM, *REPLAY_PRESETS)
