"""The pipeline's two other distributions, and each framework's pipeline as a preset.

A real pipeline has three distributions per position (``engine.sampler``): what the engine samples from (μ_s), what
it logs as μ (μ_log, what a correction divides by) and what the trainer's recomputation scores (π):

    LOGGED   processed     μ_s: after temperature and top-k/top-p. vLLM's logprobs_mode "processed_logprobs"
                           (vllm 3e34265 vllm/v1/sample/sampler.py, ``Sampler.sample``: the log-probabilities
                           ``TopKTopPSampler`` returns after temperature and the top-k/top-p mask); slime's patched
                           SGLang (``renorm_logprob_over_top_p``) when it replays the nucleus
             raw           softmax of the engine's logits: before temperature and truncation. vLLM's default
                           "raw_logprobs" (``Sampler.__init__(self, logprobs_mode="raw_logprobs")``, docstring step
                           1a); SGLang with SGLANG_RETURN_ORIGINAL_LOGPROB
             temperature   softmax of the logits over τ: the temperature, no truncation. SGLang's default
                           (python/sglang/srt/layers/sampler.py ``Sampler.forward``: ``logits.div_(temperatures)``,
                           ``probs = softmax(logits)``, ``logprobs = torch.log(probs)``; top-k/top-p act in the draw
                           only)
    SCORED   plain         softmax(θ): the trainer's logits as they are
             temperature   softmax(θ/τ): the trainer divides its logits by the sampler's temperature
             keep_mask     softmax(θ/τ) over the tokens the sampler kept, renormalised (DeepSeek-V3.2, section 3.1,
                           "Keep Sampling Mask"; slime's top-p replay)

A framework's pipeline (``PIPELINES``) is data: which of each it uses, read from its code at a commit (the file and
function that decide it), and where its code and its documentation or history disagree. A pipeline preset sets the
two choices only; the sampler's temperature, top-k and top-p stay the user's, and any correction preset combines
with it. tests/catalogue/test_pipelines.py quotes, for every preset, the lines that decide its combination.
"""

from dataclasses import dataclass

LOGGED = ("processed", "raw", "temperature")
SCORED = ("plain", "temperature", "keep_mask")
CUSTOM = "custom"                 # no preset: the two choices as set


@dataclass(frozen=True)
class Pipeline:
    """One framework's pipeline: what its rollout logs (``logged``) and what its trainer scores (``scored``), from
    ``repository`` at ``commit``; ``logged_source``/``scored_source`` name the file, function and lines that decide
    each, ``notes`` where the code and the documentation (or the history) disagree. ``when_top_p_is_one``: the
    combination when top-p is off, for a pipeline whose choice depends on it (slime replays the top-p nucleus
    only when top-p < 1)."""
    id: str
    label: str
    repository: str
    commit: str
    engine: str
    logged: str
    scored: str
    logged_source: str
    scored_source: str
    notes: tuple = ()
    when_top_p_is_one: tuple | None = None

    def choices(self, top_p):
        """(logged, scored) at this top-p."""
        return self.when_top_p_is_one if self.when_top_p_is_one and top_p == 1 else (self.logged, self.scored)


VLLM_DEFAULT = ("vLLM's default logprobs_mode, \"raw_logprobs\" (vllm 3e34265 vllm/v1/sample/sampler.py, "
                "Sampler.__init__(self, logprobs_mode: LogprobsMode = \"raw_logprobs\"))")
SGLANG_DEFAULT = ("SGLang's default: Sampler.forward divides the logits by the temperature, takes their softmax as "
                  "probs and returns log(probs); top-k/top-p act inside _sample_from_probs, on the draw only (python/"
                  "sglang/srt/layers/sampler.py, quoted in slime 624b824 docker/patch/latest/sglang-top_p.patch, hunk "
                  "@@ -184,15 +193,45 @@)")

PIPELINES = {p.id: p for p in (
    Pipeline(
        "verl", "verl (vLLM rollout)", "volcengine/verl", "b178a3c", "vLLM", "processed", "temperature",
        "verl/trainer/config/rollout/rollout.yaml line 77 (logprobs_mode: processed_logprobs; "
        "verl/workers/config/rollout.py line 167 the same default), passed to vLLM by "
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer.launch_server, line 277 "
        "(\"logprobs_mode\": self.config.logprobs_mode)",
        "verl/workers/actor/dp_actor.py DataParallelPPOActor._forward_micro_batch, lines 259 and 368 "
        "(logits.div_(temperature), the rollout's temperature from meta_info)",
        ("processed_logprobs became the default in 7a82f2e (verl#4755, 2026-01-01); before it verl logged vLLM's "
         "raw log-probabilities (preset verl_before_4755).",
         "The documentation does not mention logprobs_mode; the config comment reads \"logprobs mode for rollout "
         "logprobs\".",
         "The trainer applies no top-k/top-p: with them the trainer's π keeps mass the sampler never draws.")),
    Pipeline(
        "verl_before_4755", "verl before #4755", "volcengine/verl", "b16e048", "vLLM", "raw", "temperature",
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServerBase.launch_server (lines 291-312: no "
        "logprobs_mode in the engine's arguments): " + VLLM_DEFAULT,
        "verl/workers/actor/dp_actor.py DataParallelPPOActor._forward_micro_batch, lines 213 and 298 "
        "(logits.div_(temperature))",
        ("b16e048 is the parent of 7a82f2e (verl#4755), which made processed_logprobs the default.",)),
    Pipeline(
        "trl_colocate", "TRL (vllm_mode=colocate)", "huggingface/trl", "f2cd577", "vLLM", "processed", "temperature",
        "trl/generation/vllm_generation.py VLLMGeneration._init_vllm, line 365 (LLM(..., "
        "logprobs_mode=\"processed_logprobs\"), \"Important so temperature scaling/logit tweaking affects the TIS "
        "log probs\")",
        "trl/trainer/grpo_trainer.py GRPOTrainer._get_per_token_logps_and_entropies, line 1519 "
        "(logits.div_(self.temperature))",
        ("Since e086f07 (trl#4163, the fix of trl#4159); before it the colocated vLLM logged raw log-probabilities "
         "(preset trl_colocate_before_4163).",)),
    Pipeline(
        "trl_server", "TRL (vllm_mode=server, trl vllm-serve)", "huggingface/trl", "f2cd577", "vLLM", "processed",
        "temperature",
        "trl/scripts/vllm_serve.py llm_worker, line 361 (LLM(..., logprobs_mode=\"processed_logprobs\"))",
        "trl/trainer/grpo_trainer.py GRPOTrainer._get_per_token_logps_and_entropies, line 1519 "
        "(logits.div_(self.temperature))",
        ("trl vllm-serve logs processed log-probabilities since 0a881bc (trl#4873, 2026-01-22); before it, raw "
         "(preset trl_server_before_4873).",
         "A server started with plain `vllm serve` (the async GRPO documentation, docs/source/async_grpo_trainer.md "
         "line 67) logs processed log-probabilities only with --logprobs-mode processed_logprobs, which those docs "
         "pass; without it, vLLM's raw default.")),
    Pipeline(
        "trl_colocate_before_4163", "TRL colocate before #4163", "huggingface/trl", "e5d437e", "vLLM", "raw",
        "temperature",
        "trl/trainer/grpo_trainer.py GRPOTrainer.__init__, lines 537-552 (LLM(...) without logprobs_mode): "
        + VLLM_DEFAULT,
        "trl/trainer/grpo_trainer.py GRPOTrainer._get_per_token_logps_and_entropies, line 848 "
        "(logits = logits / self.temperature)",
        ("e5d437e is the parent of e086f07 (trl#4163). trl#4159 reports a first-token importance ratio of 2 at "
         "temperature 0.6 with this pipeline.",)),
    Pipeline(
        "trl_server_before_4873", "TRL server before #4873", "huggingface/trl", "16b0903", "vLLM", "raw",
        "temperature",
        "trl/scripts/vllm_serve.py llm_worker, lines 347-363 (LLM(...) without logprobs_mode): " + VLLM_DEFAULT,
        "trl/trainer/grpo_trainer.py GRPOTrainer._get_per_token_logps_and_entropies, line 1027 "
        "(logits = logits / self.temperature)",
        ("16b0903 is the parent of 0a881bc (trl#4873, \"Logprob drift in vLLM serving mode (compared to colocate "
         "mode)\").",)),
    Pipeline(
        "prime_rl", "prime-rl", "PrimeIntellect-ai/prime-rl", "559b447", "vLLM", "processed", "temperature",
        "packages/prime-rl-configs/src/prime_rl/configs/inference.py InferenceConfig.to_namespace, lines 611-613 "
        "(namespace.logprobs_mode = \"processed_logprobs\" unless set)",
        "src/prime_rl/trainer/rl/train.py train, line 441 (scaled_logits = logits / temperatures.unsqueeze(-1), "
        "per-token sampling temperatures)",
        ("225fdb4 (prime-rl#697, 2025-08-08) removed a division of the raw log-probabilities by the temperature and "
         "patched vLLM 0.10.0's sampler, whose processed_logprobs were taken before the temperature; the patch is "
         "gone at 559b447, where vLLM's processed_logprobs include it.",)),
    Pipeline(
        "skyrl", "SkyRL", "NovaSky-AI/SkyRL", "a956457", "vLLM", "raw", "temperature",
        "skyrl/backends/skyrl_train/inference_servers/utils.py build_vllm_cli_args, lines 59-159 (the engine's "
        "arguments set no logprobs_mode): " + VLLM_DEFAULT,
        "skyrl/backends/skyrl_train/workers/model_wrapper.py HFModelWrapper.forward, line 334 "
        "(logits_BSV.div_(temperature)); skyrl/train/config/config.py lines 1737-1738 copy the sampling temperature "
        "to trainer.algorithm.temperature",
        ("The documentation does not mention the log-probability mode; engine_init_kwargs.logprobs_mode can set it.",)),
    Pipeline(
        "ms_swift", "ms-swift", "modelscope/ms-swift", "3602360", "vLLM", "processed", "temperature",
        "swift/rlhf_trainers/rollout_mixin.py RolloutTrainerMixin._prepare_vllm_engine, line 499 (logprobs_mode = "
        "'processed_logprobs' if vLLM ≥ 0.10.2); server mode: swift/pipelines/infer/rollout.py get_infer_engine, "
        "line 815",
        "swift/rlhf_trainers/grpo_trainer.py GRPOTrainer._get_logps_via_local_forward, line 1571 "
        "(logits.div_(self.temperature))",
        ("Its rollout top-k/top-p defaults are off (top_k = -1, top_p = 1.0) since e9d04a5 (ms-swift#8442, "
         "2026-03-27; before: top_k 50, top_p 0.9): with them on, the trainer's π keeps mass the sampler never "
         "draws. Below vLLM 0.10.2 logprobs_mode is None: vLLM's raw default.",)),
    Pipeline(
        "open_instruct", "open-instruct", "allenai/open-instruct", "e6c3044", "vLLM", "processed", "temperature",
        "open_instruct/vllm_utils.py create_vllm_engines, line 1284 (logprobs_mode=\"processed_logprobs\")",
        "open_instruct/grpo_utils.py forward_for_logprobs, line 560 (logits = logits / temperature)",
        ("Since 716f275 (open-instruct#1678, 2026-05-12); before it, vLLM's raw default (preset "
         "open_instruct_before_1678).",)),
    Pipeline(
        "open_instruct_before_1678", "open-instruct before #1678", "allenai/open-instruct", "94a17b9", "vLLM", "raw",
        "temperature",
        "open_instruct/vllm_utils.py create_vllm_engines (no logprobs_mode): " + VLLM_DEFAULT,
        "open_instruct/grpo_utils.py forward_for_logprobs, line 513 (logits = logits / temperature)",
        ("94a17b9 is the parent of 716f275 (open-instruct#1678).",)),
    Pipeline(
        "slime", "slime (SGLang with its top-p patch)", "THUDM/slime", "624b824", "SGLang, patched", "processed",
        "keep_mask",
        "slime/rollout/sglang_rollout.py GenerateState.__init__, lines 106-107 (custom_params "
        "{\"return_top_p_token_ids\": True} when rollout_top_p != 1.0); docker/patch/latest/sglang-top_p.patch "
        "renorm_logprob_over_top_p renormalises the log-probabilities over the nucleus (top-k, top-p and min-p "
        "kept, the sampled token forced in) and returns its token ids",
        "slime/backends/megatron_utils/loss.py get_log_probs_and_entropy, lines 543 (logits = logits / "
        "rollout_temperature) and 559-578 (_build_topp_keep_mask over the rollout's nucleus, passed as "
        "log_prob_keep_mask to calculate_log_probs_and_entropy)",
        ("The mask and the renormalised log-probabilities need slime's SGLang patch (its Docker image); an unpatched "
         "SGLang returns no nucleus and get_rollout_top_p_logprob_kwargs raises.",
         "With top-p = 1 no nucleus is requested: SGLang's default log-probabilities (the temperature, no "
         "truncation), and the trainer scores softmax(θ/τ) unmasked, even with top-k on.",
         "SGLang's nucleus (the patch's _top_p_keep_mask_sorted) applies top-k and top-p jointly to the full "
         "distribution (rank < k, mass before the token ≤ p); the toy's sampler is vLLM's, top-p after top-k's "
         "renormalisation: with both on SGLang can keep more tokens (tests/catalogue/test_pipeline_engines.py), "
         "with top-k off they differ only on ties at the edge.",
         "The documentation does not describe the top-p replay."),
        when_top_p_is_one=("temperature", "temperature")),
    Pipeline(
        "miles", "Miles (SGLang)", "radixark/miles", "31f1ca9", "SGLang", "temperature", "temperature",
        "miles/rollout/sglang_rollout.py (\"return_logprob\": True, no SGLANG_RETURN_ORIGINAL_LOGPROB): "
        + SGLANG_DEFAULT,
        "miles/backends/training_utils/loss_hub/logit_processors.py get_responses, lines 55-56 "
        "(logits = logits.div(args.rollout_temperature))",
        ("Miles carries no top-p patch: the logged μ has the temperature and no truncation, the trainer no mask.",)),
    Pipeline(
        "nemo_rl", "NeMo-RL", "NVIDIA-NeMo/RL", "7ea279a", "vLLM", "processed", "keep_mask",
        "examples/configs/grpo_math_1B.yaml line 415 (vllm_cfg.logprobs_mode: processed_logprobs), passed by "
        "nemo_rl/models/generation/vllm/vllm_worker.py BaseVllmGenerationWorker._load_model, lines 599-601",
        "nemo_rl/models/policy/workers/dtensor_policy_worker.py _apply_temperature_scaling (lines 565-567, "
        "logits.div_(temperature)) and _apply_top_k_top_p_filtering (lines 570-576: the generation's top-k/top-p "
        "applied to the trainer's own logits); nemo_rl/algorithms/utils.py mask_out_neg_inf_logprobs masks the "
        "tokens outside the trainer's own set from the loss",
        ("NeMo-RL's trainer truncates its own tempered logits with the generation's top-k/top-p: the toy's "
         "keep_mask restricts π to the sampler's kept set, the same set whenever the sampler's and the trainer's "
         "logits order the tokens alike at the cut (always at mismatch 0 without rounding); where they differ "
         "NeMo-RL drops the token from the loss (mask_out_neg_inf_logprobs).",
         "nemo_rl/models/generation/vllm/config.py lines 58-61 say \"RL policy recomputation uses raw model logits\"; "
         "the policy worker divides them by the temperature and truncates them.",
         "Without vllm_cfg.logprobs_mode vLLM's raw default applies; the example configs set processed_logprobs.")),
    Pipeline(
        "areal", "AReaL (SGLang)", "inclusionAI/AReaL", "4aef98d", "SGLang", "temperature", "temperature",
        "areal/engine/sglang_remote.py line 73 (\"return_logprob\": True), the examples' rollout backend "
        "\"sglang:…\" (examples/math/gsm8k_grpo.yaml line 22): " + SGLANG_DEFAULT,
        "areal/utils/functional/vocab_parallel.py _gather_logprobs_entropy, line 26 "
        "(log_softmax(logits.float() / temperature)), with the rollout temperature "
        "(areal/engine/fsdp_engine.py line 1925)",
        ("With rollout.backend \"vllm:…\" the log-probabilities are vLLM's raw default (preset areal_vllm).",)),
    Pipeline(
        "areal_vllm", "AReaL (vLLM)", "inclusionAI/AReaL", "4aef98d", "vLLM", "raw", "temperature",
        "areal/engine/vllm_remote.py line 61 (\"logprobs\": 0, no logprobs_mode anywhere in AReaL): " + VLLM_DEFAULT,
        "areal/utils/functional/vocab_parallel.py _gather_logprobs_entropy, line 26 "
        "(log_softmax(logits.float() / temperature))"),
    Pipeline(
        "roll", "ROLL (vLLM)", "alibaba/ROLL", "8eb27cc", "vLLM", "raw", "plain",
        "roll/distributed/strategy/vllm_strategy.py VllmStrategy.initialize, lines 70-144 (the engine built from "
        "strategy_config, no logprobs_mode): " + VLLM_DEFAULT,
        "roll/utils/functionals.py log_probs_from_logits, lines 214-218 (log_softmax(logits.float()), no "
        "temperature), called by roll/distributed/strategy/strategy.py op_compute_log_probs",
        ("The trainer applies no temperature while the examples sample at 0.99 (examples/qwen2.5-7B-rlvr_megatron/"
         "rlvr_config.yaml lines 142-146, top_p 0.99, top_k 100).",
         "With the SGLang strategy the log-probabilities are SGLang's default, the temperature (preset "
         "roll_sglang).")),
    Pipeline(
        "roll_sglang", "ROLL (SGLang)", "alibaba/ROLL", "8eb27cc", "SGLang", "temperature", "plain",
        "roll/distributed/strategy/sglang_strategy.py (SGLang engine, no SGLANG_RETURN_ORIGINAL_LOGPROB): "
        + SGLANG_DEFAULT,
        "roll/utils/functionals.py log_probs_from_logits, lines 214-218 (no temperature)"),
    Pipeline(
        "openrlhf", "OpenRLHF", "OpenRLHF/OpenRLHF", "3c3be62", "vLLM", "processed", "temperature",
        "openrlhf/cli/train_ppo_ray.py train, line 78 (\"processed_logprobs\" if "
        "args.algo.advantage.is_correction_enable), set by openrlhf/trainer/ray/vllm_engine.py "
        "create_vllm_engines, lines 295-296",
        "openrlhf/models/utils.py log_probs_from_logits, lines 139-141 (logits.div_(temperature)), with the rollout "
        "temperature (openrlhf/trainer/ray/ppo_actor.py line 524)",
        ("Without the correction enabled no logprobs_mode is set (vLLM's raw default), and the rollout's "
         "log-probabilities are not used.",)),
)}
PIPELINE_IDS = (CUSTOM, *PIPELINES)
