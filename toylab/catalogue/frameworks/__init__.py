"""One module per framework: its presets as data (``preset``), read from the framework's code at a stated commit.

    preset         what a preset is: the framework's configuration, the catalogue id it is closest to, what it equals
    factors        the registry factors several frameworks share (ratio bands, the any-token veto, weights-only marks)
    verl           verl's RolloutCorrectionConfig presets (decoupled and bypass modes, rejection options, IcePop)
    trl            TRL's vllm_importance_sampling_mode options
    slime          slime's and Miles' --use-tis, icepop_function and mis.py (token, sequence, geometric levels)
    skyrl          SkyRL's off_policy_correction (TIS, sequence, outlier and token masks), dppo and rollout_is losses
    openrlhf       OpenRLHF's vLLM IS correction (tis, icepop, seq-mask-tis) and GSPO against the sampler
    nemo_rl        NeMo-RL's importance-sampling correction (tis, icepop, seq-mask-tis, sequence level)
    areal          AReaL's decoupled loss with rejection_sampling (token/sequence, mask/clamp, ratio and KL metrics)
    roll           ROLL's train_infer_correction (IS weights, ratio and diff filters) and TOPR
    prime_rl       prime-rl's default loss (DPPO binary-TV + squared log-ratio penalty) and its IPO loss
    ms_swift       ms-swift's rollout_importance_sampling_mode (token and geometric sequence modes)
    open_instruct  open-instruct's use_rho_correction and rho masks
    pipelinerl     PipelineRL's update only (its ratio against the logged log-probs; no correction presets)

Each module may list ``UPDATES``: its update presets (``toylab.catalogue.updates``), gathered by ``update_presets``.
"""
