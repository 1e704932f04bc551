"""Every pipeline preset against the lines of its framework that decide it.

QUOTES holds, for each preset, the framework's own lines (repository commit, path, first and last line, the text
verbatim), copied from the fetched snapshots; ``python tests/catalogue/reference/verbatim.py --clone owner/name=PATH …``
checks every quote against a clone of its preset's repository (all 42 verbatim on 2026-12-04).
What the lines mean is read by two rules, stated once:

- logged: ``processed_logprobs`` in the rollout's engine arguments, or slime's request for the top-p nucleus
  (``return_top_p_token_ids``), is ``processed``; an engine built or called without either logs its engine's
  default — vLLM's ``raw_logprobs`` (VLLM_DEFAULT), SGLang's log-probabilities after the temperature
  (SGLANG_DEFAULT) —, i.e. ``raw`` or ``temperature``;
- scored: a division of the trainer's logits by a temperature is ``temperature``, and a mask over the rollout's
  (or its own) kept tokens on top of it ``keep_mask``; a log-softmax of the logits as they are is ``plain``.

Each preset's combination must be what its quoted lines give under these rules. tests/catalogue/
test_pipeline_engines.py checks the rules' meaning — that vLLM's processed and raw log-probabilities, SGLang's
default and slime's renormalisation, and the trainers' recomputations are the toy's three choices — against numbers
from running those engines' and trainers' code.
"""

import re
from pathlib import Path

import pytest

from toylab.catalogue.pipelines import LOGGED, PIPELINES, SCORED

VLLM_DEFAULT = ("vllm-project/vllm", "3e342658b2e9c85a30a54d19e64e5ad77b8a26a6", "vllm/v1/sample/sampler.py",
                '    def __init__(self, logprobs_mode: LogprobsMode = "raw_logprobs"):')
SGLANG_DEFAULT = ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "docker/patch/latest/sglang-top_p.patch",
                  # SGLang's Sampler.forward, the context and removed lines of the hunk @@ -184,15 +193,45 @@
                  "                 logits[:] = torch.softmax(logits, dim=-1)\n"
                  "                 probs = logits\n"
                  "-                    logprobs = (\n"
                  "-                        logprobs_via_logsoftmax_kernel\n"
                  "-                        if logprobs_via_logsoftmax_kernel is not None\n"
                  "-                        else torch.log(probs)\n"
                  "-                    )")
ENGINE_DEFAULT = {"vLLM": "raw", "SGLang": "temperature", "SGLang, patched": "temperature"}

QUOTES = [
    ('verl', 'logged', 'b178a3cd56f58b2d502255daba591e92833930a7', 'verl/trainer/config/rollout/rollout.yaml', (76, 77),
     '# logprobs mode for rollout logprobs\nlogprobs_mode: processed_logprobs'),
    ('verl', 'logged', 'b178a3cd56f58b2d502255daba591e92833930a7', 'verl/workers/rollout/vllm_rollout/vllm_async_server.py', (277, 277),
     '            "logprobs_mode": self.config.logprobs_mode,'),
    ('verl', 'scored', 'b178a3cd56f58b2d502255daba591e92833930a7', 'verl/workers/actor/dp_actor.py', (368, 368),
     '                    logits.div_(temperature)'),
    ('verl_before_4755', 'logged', 'b16e0488a1a0c1c7879117a7ae878f23c8d210b0', 'verl/workers/rollout/vllm_rollout/vllm_async_server.py', (291, 312),
     '        args = {\n            "dtype": self.config.dtype,\n            "load_format": self.config.load_format,\n            "skip_tokenizer_init": False,\n            "trust_remote_code": self.model_config.trust_remote_code,\n            "max_model_len": self.config.max_model_len,\n            "max_num_seqs": self.config.max_num_seqs,\n            "enable_chunked_prefill": self.config.enable_chunked_prefill,\n            "max_num_batched_tokens": self.config.max_num_batched_tokens,\n            "enable_prefix_caching": self.config.enable_prefix_caching,\n            "enable_sleep_mode": self.config.enable_sleep_mode,\n            "disable_custom_all_reduce": True,\n            "enforce_eager": self.config.enforce_eager,\n            "gpu_memory_utilization": self.config.gpu_memory_utilization,\n            "disable_log_stats": self.config.disable_log_stats,\n            "tensor_parallel_size": self.config.tensor_model_parallel_size,\n            "seed": self.config.get("seed", 0),\n            "override_generation_config": json.dumps(override_generation_config),\n            "quantization": quantization,\n            "hf_overrides": hf_overrides,\n            **engine_kwargs,\n        }'),
    ('verl_before_4755', 'scored', 'b16e0488a1a0c1c7879117a7ae878f23c8d210b0', 'verl/workers/actor/dp_actor.py', (298, 298),
     '                    logits.div_(temperature)'),
    ('trl_colocate', 'logged', 'f2cd57710ae345ea6428ae95363267fcf38a3dc8', 'trl/generation/vllm_generation.py', (364, 365),
     '                # Important so temperature scaling/logit tweaking affects the TIS log probs\n                logprobs_mode="processed_logprobs",'),
    ('trl_colocate', 'scored', 'f2cd57710ae345ea6428ae95363267fcf38a3dc8', 'trl/trainer/grpo_trainer.py', (1517, 1519),
     '            # Divide logits by sampling temperature.\n            # See https://huggingface.co/blog/the_n_implementation_details_of_rlhf_with_ppo#policy-training-implementation-details\n            logits.div_(self.temperature)'),
    ('trl_server', 'logged', 'f2cd57710ae345ea6428ae95363267fcf38a3dc8', 'trl/scripts/vllm_serve.py', (360, 361),
     '        # Important so temperature scaling/logit tweaking affects the TIS log probs\n        logprobs_mode="processed_logprobs",'),
    ('trl_server', 'scored', 'f2cd57710ae345ea6428ae95363267fcf38a3dc8', 'trl/trainer/grpo_trainer.py', (1517, 1519),
     '            # Divide logits by sampling temperature.\n            # See https://huggingface.co/blog/the_n_implementation_details_of_rlhf_with_ppo#policy-training-implementation-details\n            logits.div_(self.temperature)'),
    ('trl_colocate_before_4163', 'logged', 'e5d437ed768851ad54ed0639068bab3e3046b985', 'trl/trainer/grpo_trainer.py', (537, 552),
     '                self.llm = LLM(\n                    model=model.name_or_path,\n                    tensor_parallel_size=args.vllm_tensor_parallel_size,\n                    gpu_memory_utilization=self.vllm_gpu_memory_utilization,\n                    max_num_seqs=self.args.per_device_train_batch_size\n                    * self.vllm_tensor_parallel_size\n                    * self.args.steps_per_generation,\n                    max_model_len=max_model_len,\n                    distributed_executor_backend="external_launcher",\n                    # Feed identical seed for tp groups to ensure sampling results are the same across workers\n                    seed=self.accelerator.process_index // self.vllm_tensor_parallel_size,\n                    # Latest vLLM v1 memory profiler is misled by the high default value (i.e., 32768) - thinking there\'s not enough memory\n                    max_num_batched_tokens=4096,\n                    model_impl=self.args.vllm_model_impl,\n                    enable_sleep_mode=self.args.vllm_enable_sleep_mode,\n                )'),
    ('trl_colocate_before_4163', 'scored', 'e5d437ed768851ad54ed0639068bab3e3046b985', 'trl/trainer/grpo_trainer.py', (846, 848),
     '            # Divide logits by sampling temperature.\n            # See https://huggingface.co/blog/the_n_implementation_details_of_rlhf_with_ppo#policy-training-implementation-details\n            logits = logits / self.temperature'),
    ('trl_server_before_4873', 'logged', '16b090302b8fd408870baa7452b5c3a29e03c346', 'trl/scripts/vllm_serve.py', (347, 363),
     '    llm = LLM(\n        model=script_args.model,\n        revision=script_args.revision,\n        tensor_parallel_size=script_args.tensor_parallel_size,\n        gpu_memory_utilization=script_args.gpu_memory_utilization,\n        enforce_eager=script_args.enforce_eager,\n        dtype=script_args.dtype,\n        # Automatic Prefix Caching caches the KV cache of existing queries, so that a new query can\n        # directly reuse the KV cache if it shares the same prefix with one of the existing queries.\n        # This is particularly useful here because we generate completions from the same prompts.\n        enable_prefix_caching=script_args.enable_prefix_caching,\n        kv_cache_dtype=script_args.kv_cache_dtype,\n        max_model_len=script_args.max_model_len,\n        worker_extension_cls="trl.scripts.vllm_serve.WeightSyncWorkerExtension",\n        trust_remote_code=script_args.trust_remote_code,\n        model_impl=script_args.vllm_model_impl,\n    )'),
    ('trl_server_before_4873', 'scored', '16b090302b8fd408870baa7452b5c3a29e03c346', 'trl/trainer/grpo_trainer.py', (1025, 1027),
     '            # Divide logits by sampling temperature.\n            # See https://huggingface.co/blog/the_n_implementation_details_of_rlhf_with_ppo#policy-training-implementation-details\n            logits = logits / self.temperature'),
    ('prime_rl', 'logged', '559b44772e471d1538537b8805cc77f3824a5e64', 'packages/prime-rl-configs/src/prime_rl/configs/inference.py', (611, 613),
     '        # Default `logprobs_mode` to `processed_logprobs`\n        if not hasattr(namespace, "logprobs_mode"):\n            namespace.logprobs_mode = "processed_logprobs"'),
    ('prime_rl', 'scored', '559b44772e471d1538537b8805cc77f3824a5e64', 'src/prime_rl/trainer/rl/train.py', (440, 442),
     '                # Per-token temperature scaling: temperatures is [batch, seq], logits is [batch, seq, vocab]\n                scaled_logits = logits / temperatures.unsqueeze(-1)\n                out["logprobs"] = selective_log_softmax(scaled_logits, labels)'),
    ('skyrl', 'logged', 'a9564572eb8e91076be43c1bd5e4615e3de17265', 'skyrl/backends/skyrl_train/inference_servers/utils.py', (86, 121),
     '    ie_cfg = cfg.generator.inference_engine\n    overrides = dict(\n        model=cfg.trainer.policy.model.path,\n        tensor_parallel_size=ie_cfg.tensor_parallel_size,\n        pipeline_parallel_size=ie_cfg.pipeline_parallel_size,\n        dtype=ie_cfg.model_dtype,\n        data_parallel_size=ie_cfg.data_parallel_size,\n        seed=cfg.trainer.seed,\n        gpu_memory_utilization=ie_cfg.gpu_memory_utilization,\n        enable_prefix_caching=ie_cfg.enable_prefix_caching,\n        enforce_eager=ie_cfg.enforce_eager,\n        max_num_batched_tokens=ie_cfg.max_num_batched_tokens,\n        enable_expert_parallel=ie_cfg.expert_parallel_size > 1,\n        max_num_seqs=ie_cfg.max_num_seqs,\n        # Sleep mode is required for colocated (offload/backload each step) and also when\n        # non-colocated weight sync opts into offloading the KV cache around the sync.\n        enable_sleep_mode=cfg.trainer.placement.colocate_all or ie_cfg.offload_kv_for_weight_sync,\n        enable_return_routed_experts=ie_cfg.enable_return_routed_experts,\n        weight_transfer_config=WeightTransferConfig(\n            backend=get_transfer_strategy(ie_cfg.weight_sync_backend, cfg.trainer.placement.colocate_all),\n        ),\n        worker_extension_cls=VLLM_NEW_INFERENCE_WORKER_EXTENSION_CLS,\n        # NOTE (sumanthrh): We set generation config to be vLLM so that the generation behaviour of the server is same as using the vLLM Engine APIs directly\n        generation_config="vllm",\n        # NOTE: vllm expects a list entry for served_model_name\n        served_model_name=(\n            [cfg.generator.inference_engine.served_model_name]\n            if cfg.generator.inference_engine.served_model_name\n            else None\n        ),\n        language_model_only=ie_cfg.language_model_only,\n        mm_processor_cache_gb=0,\n        kv_cache_metrics=True,\n        # models with custom modeling code (MiMo, Qwen3.5, DeepSeek-V3, ...) require it to load.\n        # Overridable via generator.inference_engine.engine_init_kwargs.trust_remote_code below.\n        trust_remote_code=True,'),
    ('skyrl', 'scored', 'a9564572eb8e91076be43c1bd5e4615e3de17265', 'skyrl/backends/skyrl_train/workers/model_wrapper.py', (333, 334),
     '        logits_BSV = output["logits"]\n        logits_BSV.div_(temperature)'),
    ('ms_swift', 'logged', '3602360a562313afbf2ef6065fdf61f271a2c5b9', 'swift/rlhf_trainers/rollout_mixin.py', (499, 499),
     "        logprobs_mode = 'processed_logprobs' if self.vllm_version_ge_0_10_2 else None"),
    ('ms_swift', 'scored', '3602360a562313afbf2ef6065fdf61f271a2c5b9', 'swift/rlhf_trainers/grpo_trainer.py', (1570, 1571),
     '        logits = logits[:, -(logits_to_keep + 1):-1, :]\n        logits.div_(self.temperature)'),
    ('open_instruct', 'logged', 'e6c3044aa6201c8bfa4573c1b03142af599e730d', 'open_instruct/vllm_utils.py', (1284, 1284),
     '                logprobs_mode="processed_logprobs",'),
    ('open_instruct', 'scored', 'e6c3044aa6201c8bfa4573c1b03142af599e730d', 'open_instruct/grpo_utils.py', (559, 560),
     '    logits = getattr(output, "logits", output)\n    logits = logits / temperature'),
    ('open_instruct_before_1678', 'scored', '94a17b99a7704d62e17d36a9a01d909081924d1f', 'open_instruct/grpo_utils.py', (512, 513),
     '    logits = getattr(output, "logits", output)\n    logits = logits / temperature'),
    ('slime', 'logged', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/rollout/sglang_rollout.py', (106, 107),
     '        if args.rollout_top_p != 1.0:\n            self.sampling_params["custom_params"] = {"return_top_p_token_ids": True}'),
    ('slime', 'scored', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/backends/megatron_utils/loss.py', (541, 543),
     '    rollout_temperature = getattr(args, "rollout_temperature", 1.0)\n    if rollout_temperature != 1.0:\n        logits = logits / rollout_temperature'),
    ('slime', 'scored', '624b824a898ab0ec1fcb4d373004c7f3852bf515', 'slime/backends/megatron_utils/loss.py', (557, 568),
     '    top_p_keep_mask = None\n    if top_p_token_ids is not None and top_p_token_offsets is not None:\n        top_p_keep_mask = _build_topp_keep_mask(\n            T,\n            logits.size(-1),\n            device,\n            top_p_token_ids,\n            top_p_token_offsets,\n            total_lengths,\n            response_lengths,\n            args.allgather_cp,\n        )'),
    ('miles', 'logged', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/rollout/sglang_rollout.py', (175, 178),
     '    payload = {\n        "sampling_params": sampling_params,\n        "return_logprob": True,\n    }'),
    ('miles', 'scored', '31f1ca961a94cb860cec3b2dea34ec332bfa8f76', 'miles/backends/training_utils/loss_hub/logit_processors.py', (55, 56),
     '    if logits.size(-1) > 1 and args.rollout_temperature > 0 and args.rollout_temperature != 1.0:\n        logits = logits.div(args.rollout_temperature)'),
    ('nemo_rl', 'logged', '7ea279abfbeb698b092856d0dab61e7cf39bc909', 'examples/configs/grpo_math_1B.yaml', (415, 415),
     '      logprobs_mode: processed_logprobs'),
    ('nemo_rl', 'logged', '7ea279abfbeb698b092856d0dab61e7cf39bc909', 'nemo_rl/models/generation/vllm/vllm_worker.py', (599, 601),
     '        logprobs_mode = self.cfg["vllm_cfg"].get("logprobs_mode")\n        if logprobs_mode is not None:\n            llm_kwargs["logprobs_mode"] = logprobs_mode'),
    ('nemo_rl', 'scored', '7ea279abfbeb698b092856d0dab61e7cf39bc909', 'nemo_rl/models/policy/workers/dtensor_policy_worker.py', (565, 578),
     '    def _apply_temperature_scaling(self, logits: torch.Tensor) -> torch.Tensor:\n        if self.sampling_params is not None and self.sampling_params.temperature != 1.0:\n            logits.div_(self.sampling_params.temperature)\n        return logits\n\n    def _apply_top_k_top_p_filtering(self, logits: torch.Tensor) -> torch.Tensor:\n        """Apply top-k and top-p filtering to the logits locally when TP is disabled."""\n        if need_top_k_or_top_p_filtering(self.sampling_params):\n            logits, _ = apply_top_k_top_p(\n                logits,\n                top_k=self.sampling_params.top_k,\n                top_p=self.sampling_params.top_p,\n            )\n        return logits'),
    ('areal', 'logged', '4aef98d8d818af55b43621aaadba047ae10f4e77', 'examples/math/gsm8k_grpo.yaml', (22, 22),
     '  backend: "sglang:d4p1t1"'),
    ('areal', 'logged', '4aef98d8d818af55b43621aaadba047ae10f4e77', 'areal/engine/sglang_remote.py', (69, 74),
     '        payload = {\n            "input_ids": req.input_ids.copy(),\n            "image_data": req.image_data,  # ImageObject or str\n            "sampling_params": sample_params,\n            "return_logprob": True,\n            "stream": False,'),
    ('areal', 'scored', '4aef98d8d818af55b43621aaadba047ae10f4e77', 'areal/utils/functional/vocab_parallel.py', (23, 26),
     'def _gather_logprobs_entropy(\n    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0\n):\n    log_probs = torch.nn.functional.log_softmax(logits.float() / temperature, dim=-1)'),
    ('areal_vllm', 'logged', '4aef98d8d818af55b43621aaadba047ae10f4e77', 'areal/engine/vllm_remote.py', (53, 63),
     '            "top_p": gconfig.top_p,\n            "top_k": gconfig.top_k,\n            "max_tokens": gconfig.max_new_tokens,\n            "temperature": 0.0 if gconfig.greedy else gconfig.temperature,\n            "stop_token_ids": stop_token_ids,\n            "ignore_eos": gconfig.ignore_eos,\n            "skip_special_tokens": gconfig.skip_special_tokens,\n            "return_tokens_as_token_ids": True,\n            "logprobs": 0,\n            "use_beam_search": gconfig.use_beam_search,\n            "stream": False,'),
    ('areal_vllm', 'scored', '4aef98d8d818af55b43621aaadba047ae10f4e77', 'areal/utils/functional/vocab_parallel.py', (23, 26),
     'def _gather_logprobs_entropy(\n    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0\n):\n    log_probs = torch.nn.functional.log_softmax(logits.float() / temperature, dim=-1)'),
    ('roll', 'logged', '8eb27cc2dc34c4d1310b169d9b86d339004d811a', 'roll/distributed/strategy/vllm_strategy.py', (72, 72),
     '        vllm_config = copy.deepcopy(self.worker_config.strategy_args.strategy_config)'),
    ('roll', 'logged', '8eb27cc2dc34c4d1310b169d9b86d339004d811a', 'roll/distributed/strategy/vllm_strategy.py', (144, 144),
     '        self.model = await create_async_llm(resource_placement_groups=self.worker_config.resource_placement_groups, **vllm_config)'),
    ('roll', 'scored', '8eb27cc2dc34c4d1310b169d9b86d339004d811a', 'roll/utils/functionals.py', (214, 218),
     'def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:\n    logits = logits.float()\n    log_probs = F.log_softmax(logits, dim=-1)\n    log_probs_labels = log_probs.gather(dim=-1, index=labels.unsqueeze(-1))\n    return log_probs_labels.squeeze(-1)'),
    ('roll_sglang', 'logged', '8eb27cc2dc34c4d1310b169d9b86d339004d811a', 'roll/distributed/strategy/sglang_strategy.py', (294, 302),
     '        return_logprob = sampling_params.pop("return_logprob", False)\n\n        if all(not x for x in image_data):\n            image_data = None\n        if all(not x for x in video_data):\n            video_data = None\n\n        sglang_outputs = await self.model.engine.async_generate(\n            input_ids=prompt_token_ids, image_data=image_data, video_data=video_data, sampling_params=sampling_params, return_logprob=return_logprob'),
    ('roll_sglang', 'scored', '8eb27cc2dc34c4d1310b169d9b86d339004d811a', 'roll/utils/functionals.py', (214, 218),
     'def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:\n    logits = logits.float()\n    log_probs = F.log_softmax(logits, dim=-1)\n    log_probs_labels = log_probs.gather(dim=-1, index=labels.unsqueeze(-1))\n    return log_probs_labels.squeeze(-1)'),
    ('openrlhf', 'logged', '3c3be6234e0cb353e76bb8019947db9dfe99fca7', 'openrlhf/cli/train_ppo_ray.py', (78, 78),
     '            "processed_logprobs" if args.algo.advantage.is_correction_enable else None,'),
    ('openrlhf', 'scored', '3c3be6234e0cb353e76bb8019947db9dfe99fca7', 'openrlhf/models/utils.py', (139, 141),
     'def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:\n    if temperature != 1.0:\n        logits.div_(temperature)'),
]
TEMPERATURE_DIVISION = re.compile(r"(/|div_?\()\s*[\w.]*temperatures?\b")


def quoted(preset, side):
    return "\n".join(text for id, quoted_side, _, _, _, text in QUOTES if (id, quoted_side) == (preset, side))


def logged_by(text, engine):
    """The logged choice the rollout's quoted lines give (see the module docstring)."""
    if "processed_logprobs" in text or '"return_top_p_token_ids": True' in text:
        return "processed"
    assert "raw_logprobs" not in text and "RETURN_ORIGINAL_LOGPROB" not in text
    return ENGINE_DEFAULT[engine]


def scored_by(text):
    """The scored choice the trainer's quoted lines give (see the module docstring)."""
    tempered = bool(TEMPERATURE_DIVISION.search(text))
    masked = "keep_mask" in text or "top_k_top_p" in text
    assert tempered or "log_softmax(logits" in text
    return "keep_mask" if tempered and masked else "temperature" if tempered else "plain"


def test_each_quote_spans_its_stated_lines():
    """verbatim.py compares a quote with lines first to last of its file: a quote must hold that many lines."""
    for preset, side, commit, path, (first, last), text in QUOTES:
        assert first <= last and len(text.split("\n")) == last - first + 1, (preset, side, path)
        assert preset in PIPELINES and side in ("logged", "scored") and len(commit) == 40


def test_the_engines_defaults_are_quoted():
    assert 'logprobs_mode: LogprobsMode = "raw_logprobs"' in VLLM_DEFAULT[3]
    assert "torch.softmax(logits" in SGLANG_DEFAULT[3] and "torch.log(probs)" in SGLANG_DEFAULT[3]


@pytest.mark.parametrize("preset", list(PIPELINES))
def test_each_preset_is_what_its_framework_s_lines_give(preset):
    pipeline = PIPELINES[preset]
    assert pipeline.logged in LOGGED and pipeline.scored in SCORED
    commits = {commit for id, _, commit, _, _, _ in QUOTES if id == preset}
    assert commits and all(commit.startswith(pipeline.commit) for commit in commits)
    assert scored_by(quoted(preset, "scored")) == pipeline.scored
    logged = quoted(preset, "logged")
    if logged:
        assert logged_by(logged, pipeline.engine) == pipeline.logged
    else:                                   # a framework whose engine call sets nothing: its engine's default
        assert pipeline.logged == ENGINE_DEFAULT[pipeline.engine]
    for _, _, _, path, _, _ in (quote for quote in QUOTES if quote[0] == preset):
        assert path in pipeline.logged_source + pipeline.scored_source


def test_slime_replays_the_nucleus_only_with_top_p_below_one():
    """slime 624b824: the nucleus is requested only when rollout_top_p != 1.0; without it SGLang logs its default
    and the trainer builds no keep mask (top_p_token_ids is None)."""
    slime = PIPELINES["slime"]
    assert "if args.rollout_top_p != 1.0:" in quoted("slime", "logged")
    assert "if top_p_token_ids is not None" in quoted("slime", "scored")
    assert slime.choices(0.9) == ("processed", "keep_mask")
    assert slime.choices(1.0) == (ENGINE_DEFAULT["SGLang"], scored_by(quoted("slime", "scored").split("top_p_keep_mask")[0]))
    assert all(PIPELINES[id].choices(1.0) == PIPELINES[id].choices(0.5) for id in PIPELINES if id != "slime")


def test_docs_frameworks_table_is_the_presets():
    """docs/frameworks.md's pipeline table names every preset with its commit and choices."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "frameworks.md").read_text()
    rows = {cells[0]: cells for line in text.splitlines() if line.startswith("| ")
            for cells in [[cell.strip() for cell in line.strip("|").split("|")]] if cells[0] in PIPELINES}
    assert rows.keys() == PIPELINES.keys()
    for id, pipeline in PIPELINES.items():
        _, _, commit, _, logged, scored = rows[id]
        assert commit.endswith(pipeline.commit) and logged.startswith(pipeline.logged)
        assert scored.startswith(pipeline.scored)
