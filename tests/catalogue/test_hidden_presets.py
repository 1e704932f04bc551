"""Every routing-replay and version-handling preset against the lines of its framework that decide it.

QUOTES holds, for each preset, the framework's own lines (repository, commit, path, first and last line, the text
verbatim), copied from the fetched snapshots; ``python tests/catalogue/reference/verbatim.py --clone owner/name=PATH …``
checks every quote against a clone of its repository. What the lines mean is read by rules stated once:

- replay: R2 records the routing at the anchor's recomputation (a ``record``/``RECORD`` stage or action beside a
  replay one); R3 replays the rollout's routes (``routed_experts``, ``replay_forward`` of the rollout, or a flag that
  turns the rollout's replay on); the replay keeps the current scores at the replayed experts (``scores.gather``);
- versions: a stamp pinned per request is ``token``; one read after the response, ``tail``; one read when the rollout
  starts and put on every sample (or the staleness measured from the rollout's start), ``head``; a loss mask of zeros
  over the response so far, ``mask_stale``; ``v_proximal = current_version - 1`` and the interpolation, ``loglinear``.
"""

from pathlib import Path

import pytest

from toylab.catalogue.replay import REPLAY_PRESETS, REPLAYS
from toylab.catalogue.version_handling import VERSION_PRESETS
from toylab.engine.versions import PROXIES, STAMPS

QUOTES = [
    ('verl:R2', 'volcengine/verl', '1dda039b9c6311889a9c9a26040677e1254814f9', 'verl/workers/engine/megatron/transformer_impl.py', (947, 952),
     '        if enable_routing_replay:\n            # Set to REPLAY mode: for R3 mode or actor update phase in R2 mode\n            RouterReplay.set_global_router_replay_action(RouterReplayAction.REPLAY_FORWARD)\n            if forward_only and self.engine_config.router_replay.mode == "R2":\n                # In R2 mode, forward_only calls (e.g., compute_log_probs) need to record routing information\n                RouterReplay.set_global_router_replay_action(RouterReplayAction.RECORD)'),
    ('verl:R2', 'volcengine/verl', '1dda039b9c6311889a9c9a26040677e1254814f9', 'verl/utils/megatron/router_replay_patch.py', (133, 136),
     '                    f"native={tuple(native_indices.shape)}, mask={tuple(replay_mask.shape)}"\n                )\n            indices = torch.where(replay_mask.to(scores.device).bool().unsqueeze(-1), indices, native_indices)\n        return scores.gather(1, indices), indices'),
    ('verl:R3', 'volcengine/verl', '1dda039b9c6311889a9c9a26040677e1254814f9', 'verl/workers/engine/megatron/transformer_impl.py', (1299, 1303),
     '        if RouterReplayHelper.is_replay_forward_action(self.tf_config, vp_rank):\n            layers_topk_idx = model_inputs["routed_experts"]\n            replay_mask = None\n            if self.engine_config.router_replay.mode == "R3":\n                layers_topk_idx = align_r3_router_replay_data(layers_topk_idx, input_ids)'),
    ('slime:use_routing_replay', 'THUDM/slime', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/backends/megatron_utils/actor.py', (476, 480),
     '                    if self.args.use_routing_replay:\n                        if self.args.use_rollout_routing_replay:\n                            os.environ["ROUTING_REPLAY_STAGE"] = "replay_forward"\n                        else:\n                            os.environ["ROUTING_REPLAY_STAGE"] = "record"'),
    ('slime:use_routing_replay', 'THUDM/slime', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/utils/routing_replay.py', (199, 203),
     '                top_indices = ROUTING_REPLAY.pop_backward()\n                assert (\n                    top_indices.shape[0] == scores.shape[0] and top_indices.shape[1] == topk\n                ), f"top_indices shape {top_indices.shape} does not match scores shape {scores.shape} and topk {topk}"\n                probs = scores.gather(1, top_indices)'),
    ('slime:use_rollout_routing_replay', 'THUDM/slime', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/utils/arguments.py', (2010, 2011),
     '    if args.use_rollout_routing_replay:\n        args.use_routing_replay = True'),
    ('miles:use_routing_replay', 'radixark/miles', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/backends/megatron_utils/actor.py', (526, 531),
     '                    for m in all_replay_managers:\n                        if m.enabled:\n                            if self._use_rollout_replay(m):\n                                m.stage = "replay_forward"\n                            else:\n                                m.stage = "record"'),
    ('miles:use_rollout_routing_replay', 'radixark/miles', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/utils/arguments.py', (3472, 3473),
     '    if args.use_rollout_routing_replay:\n        args.use_routing_replay = True'),
    ('miles:use_rollout_indexer_replay', 'radixark/miles', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/utils/arguments.py', (3482, 3484),
     '    if args.use_rollout_indexer_replay:\n        args.use_indexer_replay = True\n        assert args.context_parallel_size == 1, "indexer replay does not support context parallelism yet"'),
    ('prime_rl:enable_router_replay', 'PrimeIntellect-ai/prime-rl', '559b44772e471d1538537b8805cc77f3824a5e64', 'src/prime_rl/trainer/rl/train.py', (349, 353),
     '            routed_experts = (\n                micro_batch["routed_experts"].to("cuda") if micro_batch["routed_experts"] is not None else None\n            )\n\n            if routed_experts is None and config.enable_router_replay:'),
    ('nemo_rl:router_replay', 'NVIDIA-NeMo/RL', '7ea279abfbeb698b092856d0dab61e7cf39bc909', 'docs/guides/router-replay.md', (3, 6),
     "Router Replay, or R3, records MoE router choices made during rollout generation\nand replays those choices in Megatron forward passes. This keeps each generated\ntoken's expert assignment consistent across rollout, logprob, and training\nstages. Without replay, two valid router implementations can choose different"),
    ('areal:per_token', 'areal-project/AReaL', 'cbff54d645d2cd8ee1f1c358a82f3f473588433d', 'areal/infra/remote_inf_engine.py', (1037, 1039),
     '            accumulated_versions.extend(\n                [request_version] * len(gen_result.output_tokens)\n            )'),
    ('areal:before_1569', 'areal-project/AReaL', '6c0f9521e1f01d66864665644f83f9e2015ce327', 'areal/infra/remote_inf_engine.py', (982, 984),
     '            accumulated_versions.extend(\n                [self.get_version()] * len(gen_result.output_tokens)\n            )'),
    ('areal:loglinear', 'areal-project/AReaL', 'cbff54d645d2cd8ee1f1c358a82f3f473588433d', 'areal/trainer/ppo/actor.py', (795, 795),
     '    v_proximal = current_version - 1'),
    ('areal:loglinear', 'areal-project/AReaL', 'cbff54d645d2cd8ee1f1c358a82f3f473588433d', 'areal/trainer/ppo/actor.py', (829, 831),
     '            approximations[PROX_APPROX_METHOD_LOGLINEAR] = old_logp + alpha * (\n                logprobs - old_logp\n            )'),
    ('slime:partial_rollout', 'THUDM/slime', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/utils/arguments.py', (457, 466),
     '            parser.add_argument(\n                "--partial-rollout",\n                action="store_true",\n                default=False,\n                help=(\n                    "Whether to use partial rollout. "\n                    "If set, the unfinished samples during dynamic sampling will be recycled back to data buffer. "\n                    "This is useful for long responses."\n                ),\n            )'),
    ('slime:mask_offpolicy_in_partial_rollout', 'THUDM/slime', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/rollout/sglang_rollout.py', (231, 233),
     '    # mask previous off-policy generation for partial rollout\n    if args.partial_rollout and args.mask_offpolicy_in_partial_rollout and sample.response_length > 0:\n        sample.loss_mask = [0] * sample.response_length'),
    ('miles:mask_offpolicy_in_partial_rollout', 'radixark/miles', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/rollout/sglang_rollout.py', (286, 288),
     '    # mask previous off-policy generation for partial rollout\n    if args.partial_rollout and args.mask_offpolicy_in_partial_rollout and sample.response_length > 0:\n        sample.loss_mask = [0] * sample.response_length'),
    ('prime_rl:max_off_policy_steps', 'PrimeIntellect-ai/prime-rl', '559b44772e471d1538537b8805cc77f3824a5e64', 'src/prime_rl/orchestrator/utils.py', (67, 67),
     '    total = max(0, (training_step - 1) - policy.start)'),
    ('pipelinerl:model_version', 'ServiceNow/PipelineRL', '58d393458625ad63ed539f2dcd072c85700c557f', 'pipelinerl/actor.py', (186, 186),
     '            model_version = trainer_state.propagated_weight_version'),
    ('pipelinerl:model_version', 'ServiceNow/PipelineRL', '58d393458625ad63ed539f2dcd072c85700c557f', 'pipelinerl/actor.py', (216, 216),
     '                sample.metadata["model_version"] = model_version'),
]

REPLAY_EVIDENCE = {"R2": ("record", "RECORD"), "R3": ("routed_experts", "replay_forward", "use_rollout_", "R3")}
STAMP_EVIDENCE = {"token": ("request_version",), "tail": ("[self.get_version()] * len",),
                  "head": ("model_version = trainer_state.propagated_weight_version", "policy.start")}


def quotes_of(preset_id):
    return [quote for quote in QUOTES if quote[0] == preset_id]


@pytest.mark.parametrize("preset", list(REPLAY_PRESETS.values()) + list(VERSION_PRESETS.values()),
                         ids=lambda preset: preset.id)
def test_every_preset_quotes_its_framework_at_its_commit(preset):
    quotes = quotes_of(preset.id)
    assert quotes, f"{preset.id} quotes none of its framework's lines"
    for _, repository, commit, path, (first, last), text in quotes:
        assert repository.split("/")[1].lower() in preset.repository.lower()
        assert commit.startswith(preset.commit), f"{preset.id}: {commit} is not {preset.commit}"
        assert path in preset.code, f"{preset.id} does not name {path}"
        assert last - first + 1 == len(text.splitlines())


@pytest.mark.parametrize("preset", list(REPLAY_PRESETS.values()), ids=lambda preset: preset.id)
def test_each_replay_preset_s_mode_is_what_its_lines_do(preset):
    assert preset.replay in REPLAYS
    text = "\n".join(quote[-1] for quote in quotes_of(preset.id))
    assert any(word in text for word in REPLAY_EVIDENCE[preset.replay]), preset.id


@pytest.mark.parametrize("preset", list(VERSION_PRESETS.values()), ids=lambda preset: preset.id)
def test_each_version_preset_is_what_its_lines_do(preset):
    assert preset.stamp in STAMPS and preset.prox in PROXIES
    text = "\n".join(quote[-1] for quote in quotes_of(preset.id))
    if preset.mask_stale:
        assert "loss_mask = [0] * sample.response_length" in text
    elif preset.prox == "loglinear":
        assert "v_proximal = current_version - 1" in text and "alpha * (" in text
    elif preset.id.startswith("slime:"):
        assert "--partial-rollout" in text            # no version recorded: the stamp is immaterial
    else:
        assert any(word in text for word in STAMP_EVIDENCE[preset.stamp]), preset.id


def test_the_replay_keeps_the_current_scores_at_the_replayed_experts():
    """What the toy's replayed gates are: softmax of the trainer's own scores over the experts replayed."""
    text = "\n".join(quote[-1] for quote in QUOTES)
    assert "scores.gather(1, indices)" in text and "scores.gather(1, top_indices)" in text


DOCS = Path(__file__).resolve().parents[2] / "docs" / "experts.md"
FRAMEWORK_ROWS = {"verl": "verl", "slime": "slime", "miles": "Miles", "prime_rl": "prime-rl", "nemo_rl": "NeMo-RL",
                  "areal": "AReaL", "pipelinerl": "PipelineRL"}


def docs_rows():
    """{framework as docs/experts.md's table names it: its row} of the frameworks' table."""
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith("| ") and " (" in line.split("|")[1]]
    return {line.split("|")[1].split(" (")[0].strip(): line for line in rows}


NAMED = {"verl:R2": "router_replay.mode", "verl:R3": "enable_rollout_routing_replay",
         "slime:use_routing_replay": "--use-routing-replay", "slime:use_rollout_routing_replay": "--use-rollout-routing-replay",
         "miles:use_routing_replay": "--use-routing-replay", "miles:use_rollout_routing_replay": "--use-rollout-routing-replay",
         "miles:use_rollout_indexer_replay": "--use-rollout-indexer-replay", "prime_rl:enable_router_replay":
         "trainer.enable_router_replay", "nemo_rl:router_replay": "policy.router_replay.enabled",
         "areal:per_token": "#1569", "areal:before_1569": "6c0f952", "areal:loglinear": "prox_logp_method=loglinear",
         "slime:partial_rollout": "--partial-rollout", "slime:mask_offpolicy_in_partial_rollout":
         "--mask-offpolicy-in-partial-rollout", "miles:mask_offpolicy_in_partial_rollout":
         "--mask-offpolicy-in-partial-rollout", "prime_rl:max_off_policy_steps": "max_off_policy_steps",
         "pipelinerl:model_version": "model_version"}


@pytest.mark.parametrize("preset", list(REPLAY_PRESETS.values()) + list(VERSION_PRESETS.values()),
                         ids=lambda preset: preset.id)
def test_docs_table_names_each_preset_s_framework_commit_and_option(preset):
    """docs/experts.md's table has a row for the preset's framework at its commit that names its option."""
    row = docs_rows()[FRAMEWORK_ROWS[preset.framework]]
    assert preset.commit in row and NAMED[preset.id] in row, (preset.id, row[:80])
    assert set(NAMED) == set(REPLAY_PRESETS) | set(VERSION_PRESETS)
