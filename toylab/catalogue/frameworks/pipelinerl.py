"""PipelineRL's update, from its code: one ratio π_θ/μ against the logged log-probs, in-flight weight updates.

  PipelineRL 58d393458625ad63ed539f2dcd072c85700c557f (github.com/ServiceNow/PipelineRL, its newest stored snapshot)
  — pipelinerl/finetune/rl/__init__.py RLConfig and rl_step; conf/finetune/base.yaml, grpo.yaml; conf/base.yaml.
  Frozen numbers from running that code: tests/catalogue/reference/pipelinerl/.

rl_step's old_logprobs are the actor's: the log-probs vLLM logged while sampling (finetune/data.py 146–151), so its
ratio is π_θ/μ and there is no recomputed π_old (the bypass anchor). The trainer uses each sample once, one optimizer
step every gradient_accumulation_passes samples. PipelineRL has no correction presets: it is here for its updates
only (``update_presets`` gathers it beside the frameworks of ``presets``).
"""

from toylab.catalogue.updates import Update, UpdatePreset

COMMIT = "58d3934"
STEP = "pipelinerl/finetune/rl/__init__.py rl_step 259–309 (ratio 259–261, ppo 298–303, reinforce 304–309)"
CONFIG = ("conf/finetune/base.yaml 100–108 (policy_loss reinforce, epsilon_low/high 0.02), 45 "
          "(gradient_accumulation_passes 1024: one step per batch, each sample once); conf/base.yaml 106 (max_lag null)")
LAG_NOTE = ("max_lag null: no bound on the lag, and in-flight weight updates give the tokens of one sequence μ's of "
            "several versions, which one lag per batch does not model; with max_lag set, finetune_loop.py 679–683 "
            "counts older samples but trains on them, and the actor (actor.py 510–552) delays new rollouts")
UPDATES = [
    UpdatePreset("pipelinerl:reinforce", "conf/finetune/base.yaml (rl.policy_loss reinforce)",
                 Update("bypass", "cispo", {"eps_low": 1.0, "eps_high": 0.02}), None, None, 0, commit=COMMIT,
                 code=f"{STEP}; {CONFIG}",
                 note="“reinforce” is a truncated IS: sg(clamp(π_θ/μ, 0, 1 + epsilon_high))·A·log π_θ, CISPO's form "
                      "with no lower bound; RLConfig's code defaults (policy_loss ppo, epsilon 0.2) differ from the "
                      "yaml the launcher loads; " + LAG_NOTE),
    UpdatePreset("pipelinerl:ppo", "conf/finetune/grpo.yaml (rl.policy_loss ppo, epsilon_low/high 0.02 from base.yaml)",
                 Update("bypass", "ppo", {"eps_low": 0.02, "eps_high": 0.02}), None, None, 0, commit=COMMIT,
                 code=f"{STEP}; conf/finetune/grpo.yaml 6–7; {CONFIG}", note=LAG_NOTE),
]
