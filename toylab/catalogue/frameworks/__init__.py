"""One module per framework: its presets as data (``preset``), read from the framework's code at a stated commit.

    preset         what a preset is: the framework's configuration, the catalogue id it is closest to, what it equals
    verl           verl's RolloutCorrectionConfig presets (decoupled and bypass modes, rejection options)
    trl            TRL's vllm_importance_sampling_mode options
"""
