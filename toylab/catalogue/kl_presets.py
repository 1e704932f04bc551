"""Every framework's KL to the reference as data: the estimator, where it goes, its ratio and clamps, and its β.

A ``KLPreset`` is one configuration of one framework read from its code at a commit: the ``penalty``
(``kl.KLPenalty``: estimator, placement, reward sum, ratio, clamps; its β the framework's default coefficient),
whether the framework applies it by default (``default_on``), which log-probabilities a reward penalty reads
(``reads``: the anchor's, as the toy evaluates it, or the engine's when the framework's default anchor is μ), where
its code computes it (``code``: file, function, lines at ``commit``) and ``note``, where its code and its
documentation disagree or a default surprises. A preset combines with the framework's correction, update and
pipeline presets: the toy takes β from the user, the rest from the row. Each row is checked token by token against
the framework's own code (tests/catalogue/reference/<framework>/kl_generate.py, test_framework_kl.py).
"""

from dataclasses import dataclass, replace

from toylab.catalogue.kl import KLPenalty

VERL, TRL, SLIME, MILES = ("1dda039b9c6311889a9c9a26040677e1254814f9", "f2cd57710ae345ea6428ae95363267fcf38a3dc8",
                           "624b824a898ab0ec1fcb4d373004c7f3852bf515", "31f1ca961a94cb860cec3b2dea34ec332bfa8f76")
OPENRLHF, AREAL, NEMO_RL = ("3c3be6234e0cb353e76bb8019947db9dfe99fca7", "cbff54d645d2cd8ee1f1c358a82f3f473588433d",
                            "7ea279abfbeb698b092856d0dab61e7cf39bc909")
ROLL, SKYRL, OPEN_INSTRUCT = ("8eb27cc2dc34c4d1310b169d9b86d339004d811a", "a9564572eb8e91076be43c1bd5e4615e3de17265",
                              "e6c3044aa6201c8bfa4573c1b03142af599e730d")


@dataclass(frozen=True)
class KLPreset:
    id: str
    option: str
    penalty: KLPenalty
    default_on: bool
    commit: str
    code: str
    reads: str = "anchor"
    note: str = ""

    @property
    def framework(self) -> str:
        return self.id.partition(":")[0]

    @property
    def default_beta(self) -> float:
        return self.penalty.beta

    def with_beta(self, beta: float) -> KLPenalty:
        """The preset's penalty at coefficient β."""
        return replace(self.penalty, beta=beta)


def loss(beta, estimator, ratio="none", log_ratio_clamp=None, value_clamp=None, held=False):
    return KLPenalty(beta, estimator, "loss", "sequence", ratio, log_ratio_clamp, value_clamp, held)


def reward(beta, estimator, reward_sum, log_ratio_clamp=None, value_clamp=None):
    return KLPenalty(beta, estimator, "reward", reward_sum, "none", log_ratio_clamp, value_clamp)


VERL_CLAMPS = dict(log_ratio_clamp=20.0, value_clamp=10.0)        # low_var_kl's, in kl_penalty_forward

KL_PRESETS = {preset.id: preset for preset in (
    KLPreset("verl:kl_loss", "actor.use_kl_loss=True (kl_loss_type low_var_kl, kl_loss_coef 0.001)",
             loss(0.001, "k3", **VERL_CLAMPS), False, VERL,
             "verl/workers/utils/losses.py ppo_loss 131–142; verl/trainer/ppo/core_algos.py kl_penalty 2187–2212, "
             "kl_penalty_forward 2215–2250; verl/trainer/config/actor/actor.yaml 103–116",
             note="actor.yaml: 'True for GRPO', but the default is false; the KL loss gets no rollout-IS weight "
                  "(only pg_loss does)"),
    KLPreset("verl:kl_loss_k1", "actor.use_kl_loss=True, kl_loss_type=k1 (or kl)", loss(0.001, "k1"), False, VERL,
             "verl/trainer/ppo/core_algos.py kl_penalty_forward 2215–2250"),
    KLPreset("verl:kl_loss_k2", "actor.use_kl_loss=True, kl_loss_type=k2 (or mse)", loss(0.001, "k2"), False, VERL,
             "verl/trainer/ppo/core_algos.py kl_penalty_forward 2215–2250"),
    KLPreset("verl:kl_loss_abs", "actor.use_kl_loss=True, kl_loss_type=abs", loss(0.001, "abs"), False, VERL,
             "verl/trainer/ppo/core_algos.py kl_penalty_forward 2215–2250"),
    KLPreset("verl:kl_loss_k3+", "actor.use_kl_loss=True, kl_loss_type=k3+ (low_var_kl's value, k2's gradient)",
             loss(0.001, "k3+", **VERL_CLAMPS), False, VERL,
             "verl/trainer/ppo/core_algos.py kl_penalty 2187–2212",
             note="kl_loss_type 'full' raises NotImplementedError (kl_penalty_forward 2246–2248), though actor.yaml "
                  "and AlgoConfig list it"),
    KLPreset("verl:kl_loss_k1+", "actor.use_kl_loss=True, kl_loss_type=k1+ (k1's value, k2's gradient)",
             loss(0.001, "k1+"), False, VERL, "verl/trainer/ppo/core_algos.py kl_penalty 2187–2212"),
    KLPreset("verl:kl_loss_abs+", "actor.use_kl_loss=True, kl_loss_type=abs+ (|log ratio|'s value, k2's gradient)",
             loss(0.001, "abs+"), False, VERL, "verl/trainer/ppo/core_algos.py kl_penalty 2187–2212"),
    KLPreset("verl:kl_in_reward", "algorithm.use_kl_in_reward=True (kl_penalty kl, kl_ctrl fixed 0.001), GRPO's "
             "outcome advantage", reward(0.001, "k1", "sequence"), False, VERL,
             "verl/trainer/ppo/ray_trainer.py apply_kl_penalty 78–117 (at old_log_probs); core_algos.py "
             "compute_grpo_outcome_advantage 268–331 (token rewards summed)",
             note="kl_ctrl.type adaptive (Ziegler et al.'s controller) is not modelled; with adv_estimator "
                  "reinforce_plus_plus the penalty is a return to go"),
    KLPreset("trl:grpo", "GRPOConfig(beta > 0) (beta default 0.0; DeepSeek-R1's 0.001 named in its help)",
             loss(0.0, "k3"), False, TRL,
             "trl/trainer/grpo_trainer.py _compute_loss 3066–3076, 3120–3121; grpo_config.py 671",
             note="the vLLM importance-sampling ratio multiplies the policy loss before the KL term is added: the KL "
                  "term is not corrected for the engine"),
    KLPreset("trl:grpo_bias_correction", "GRPOConfig(beta > 0, use_bias_correction_kl=True)",
             loss(0.0, "k3", ratio="anchor"), False, TRL,
             "trl/trainer/grpo_trainer.py _compute_loss 3066–3076; grpo_config.py 962–969 (PR #4638)",
             note="coef_1 = π_θ/π_old with π_old the trainer's recomputation (or per_token_logps.detach()), not "
                  "vLLM's μ: the ratio corrects stale updates, not the engine; PR #6503 (merged after f2cd577) makes "
                  "it the default"),
    KLPreset("trl:rloo", "RLOOConfig(beta=0.05): k1 of the old log-probs summed into the reward",
             reward(0.05, "k1", "sequence"), True, TRL, "trl/trainer/rloo_trainer.py _generate_and_score_completions 1525–1535; rloo_config.py 494"),
    KLPreset("slime:kl_loss", "--use-kl-loss --kl-loss-coef β (kl-loss-type k1 by default; coef default 0.0)",
             loss(0.0, "k1"), False, SLIME,
             "slime/backends/megatron_utils/loss.py policy_loss_function 1116–1130; slime/utils/ppo_utils.py "
             "compute_approx_kl 12–51; slime/utils/arguments.py 934–995"),
    KLPreset("slime:kl_loss_low_var_kl", "--use-kl-loss --kl-loss-type low_var_kl",
             loss(0.0, "k3", value_clamp=10.0), False, SLIME, "slime/utils/ppo_utils.py compute_approx_kl 12–51",
             note="unlike verl's low_var_kl, no clamp of the log ratio: only the value, after the ratio"),
    KLPreset("slime:unbiased_kl", "--use-kl-loss --kl-loss-type low_var_kl --use-unbiased-kl",
             loss(0.0, "k3", ratio="anchor", value_clamp=10.0), False, SLIME,
             "slime/backends/megatron_utils/loss.py 1116–1130 (importance_ratio = exp(log_probs − old_log_probs)); "
             "ppo_utils.py compute_approx_kl 12–51",
             note="the ratio's denominator is old_log_probs: the recomputed π_old, or the engine's with "
                  "--use-rollout-logprobs"),
    KLPreset("slime:kl_in_reward_reinforce_pp", "--kl-coef β --advantage-estimator reinforce_plus_plus",
             reward(0.0, "k1", "to_go"), False, SLIME,
             "slime/backends/megatron_utils/loss.py compute_advantages_and_returns 743–795; ppo_utils.py "
             "get_reinforce_plus_plus_returns 371–445",
             note="--kl-coef is documented as reward shaping, but with the default advantage estimator grpo "
                  "get_grpo_returns (361–368) ignores the KL: the coefficient does nothing (slime #397)"),
    KLPreset("slime:kl_in_reward_reinforce_pp_baseline", "--kl-coef β --advantage-estimator "
             "reinforce_plus_plus_baseline", reward(0.0, "k1", "token"), False, SLIME,
             "slime/utils/ppo_utils.py get_reinforce_plus_plus_baseline_advantages 448–475"),
    KLPreset("miles:kl_loss_low_var_kl", "--use-kl-loss --kl-loss-type low_var_kl",
             loss(0.0, "k3", log_ratio_clamp=20.0, value_clamp=10.0), False, MILES,
             "miles/backends/training_utils/loss_hub/math_utils.py _safe_clamp_log_ratio 18–28, compute_approx_kl "
             "139–180; losses.py 314–334",
             note="the log-ratio clamp (±20, non-finite values sent to it) is Miles' own; slime's low_var_kl has none"),
    KLPreset("miles:unbiased_kl", "--use-kl-loss --kl-loss-type low_var_kl --use-unbiased-kl",
             loss(0.0, "k3", ratio="anchor", log_ratio_clamp=20.0, value_clamp=10.0), False, MILES,
             "miles/backends/training_utils/loss_hub/losses.py 314–334; math_utils.py compute_approx_kl 139–180",
             note="the ratio keeps its gradient where the log ratio is clamped (NeMo-RL detaches it there)"),
    KLPreset("miles:kl_in_reward_reinforce_pp_baseline", "--kl-coef β --advantage-estimator "
             "reinforce_plus_plus_baseline", reward(0.0, "k1", "token"), False, MILES,
             "miles/backends/training_utils/loss_hub/math_utils.py get_reinforce_plus_plus_baseline_advantages "
             "510–537",
             note="as in slime, grpo's get_grpo_returns (436–443) ignores --kl-coef"),
    KLPreset("openrlhf:kl_in_reward", "default: --algo.kl.init_coef 0.01, --algo.kl.estimator k1, KL in the reward "
             "(a return to go in the REINFORCE family)", reward(0.01, "k1", "to_go", value_clamp=10.0), True,
             OPENRLHF,
             "openrlhf/models/utils.py compute_approx_kl 64–95, compute_reward 98–126; "
             "trainer/ppo_utils/experience_maker.py 205–212, 276–303, get_cumulative_returns 380–412; cli/train_ppo_ray.py 417–428",
             note="every estimator's value is clamped to ±10, k1's too; the default advantage estimator is gae (a "
                  "critic), which the toy does not model: to go is its λ = γ = 1, zero-value case"),
    KLPreset("openrlhf:kl_loss", "--algo.kl.use_loss --algo.kl.estimator k3", loss(0.01, "k3", value_clamp=10.0),
             False, OPENRLHF, "openrlhf/trainer/ray/ppo_actor.py 319–337; openrlhf/models/utils.py 64–95",
             note="the help of --algo.kl.estimator says k2 as a loss is 'nearly equivalent to k1'; on policy k2's "
                  "gradient is ∇KL(π‖π_ref) and k1's mean gradient is 0"),
    KLPreset("areal:kl_in_reward", "actor.kl_ctl 0.1 (default) with a ref model configured (ref default None: "
             "off), kl_estimator k1", reward(0.1, "k1", "to_go", value_clamp=10.0), False, AREAL,
             "areal/utils/data.py KLEstimator 1640–1698; areal/trainer/ppo/actor.py _compute_advantages 178–323; areal/trainer/ppo/gae.py 10–37; "
             "areal/api/cli_args.py 1734–1775; areal/trainer/rl_trainer.py 205", reads="engine",
             note="the KL is read at old_logp, the engine's log-probs unless recompute_logprob (AReaL's default "
                  "anchor is μ); GAE with discount = gae_lambda = 1 and no critic is a return to go"),
    KLPreset("nemo_rl:kl_loss", "default: loss_fn.reference_policy_kl_penalty 0.01, reference_policy_kl_type k3, "
             "kl_input_clamp_value 20, kl_output_clamp_value 10",
             loss(0.01, "k3", ratio="current", log_ratio_clamp=20.0, value_clamp=10.0, held=True), True, NEMO_RL,
             "nemo_rl/algorithms/loss/loss_functions.py ClippedPGLossFn 468–517; nemo_rl/algorithms/utils.py "
             "calculate_kl 42–101; loss_functions.py 128–153",
             note="the weight exp(log π − sg(log π)) is 1 in value and carries the score-function gradient: on "
                  "policy the term follows ∇KL(π‖π_ref), not k3's ∇KL(π_ref‖π)"),
    KLPreset("nemo_rl:on_policy_kl_approximation", "loss_fn.use_on_policy_kl_approximation=True",
             loss(0.01, "k3", ratio="engine", log_ratio_clamp=20.0, value_clamp=10.0, held=True), False, NEMO_RL,
             "nemo_rl/algorithms/loss/loss_functions.py 468–517 (kl_importance_weights = exp(curr − generation))"),
    KLPreset("nemo_rl:kl_in_reward_reinforce_pp", "loss_fn.use_kl_in_reward=True with the Reinforce++ advantage",
             reward(0.01, "k3", "token", log_ratio_clamp=20.0, value_clamp=10.0), False, NEMO_RL,
             "nemo_rl/algorithms/advantage_estimator.py ReinforcePlusPlusAdvantageEstimator.compute_advantage 248–259"),
    KLPreset("roll:kl_loss", "use_kl_loss=True, kl_loss_coef β (default 0; k3 hard-coded)",
             loss(0.0, "k3", value_clamp=10.0), False, ROLL,
             "roll/pipeline/rlvr/actor_pg_worker.py 118–154; roll/utils/functionals.py compute_approx_kl 181–211; "
             "roll/configs/base_config.py 563–569"),
    KLPreset("roll:token_level_kl", "add_token_level_kl=True (kl_penalty kl, init_kl_coef 0.2), reinforce/grpo "
             "returns", reward(0.2, "k1", "to_go"), False, ROLL,
             "roll/utils/functionals.py compute_token_reward 615–647, compute_reinforce_return 488–499; "
             "base_config.py 527–538",
             note="kl_penalty 'full' computes Σ_t π(y_t)·log(π(y_t)/π_ref(y_t)) over the sequence from the sampled "
                  "tokens' log-probs, not the vocabulary's KL"),
    KLPreset("skyrl:kl_loss", "default: trainer.algorithm.use_kl_loss=True, kl_estimator_type k3, kl_loss_coef 0.001",
             loss(0.001, "k3", log_ratio_clamp=20.0, value_clamp=10.0), True, SKYRL,
             "skyrl/backends/skyrl_train/workers/worker.py 1069–1080; skyrl/backends/skyrl_train/utils/ppo_utils.py "
             "compute_approx_kl 88–126; skyrl/train/config/config.py 828–836"),
    KLPreset("skyrl:kl_in_reward", "use_kl_in_reward=True, use_kl_loss=False (k3, GRPO's outcome advantage)",
             reward(0.001, "k3", "sequence", log_ratio_clamp=20.0, value_clamp=10.0), False, SKYRL,
             "skyrl/train/trainer.py apply_reward_kl_penalty 1409–1464; ppo_utils.py compute_grpo_outcome_advantage 1344–1394"),
    KLPreset("open_instruct:kl_loss", "default: beta 0.05, kl_estimator 2 (k3 as expm1(−x) + x)",
             loss(0.05, "k3", log_ratio_clamp=40.0), True, OPEN_INSTRUCT,
             "open_instruct/grpo_utils.py compute_grpo_loss 504–538, open_instruct/grpo_fast.py 701–718; open_instruct/model_utils.py estimate_kl "
             "793–818; grpo_utils.py 104, 134",
             note="the log ratio is clamped to ±40 for every estimator (no value clamp)"),
    KLPreset("open_instruct:kl_estimator_3", "kl_estimator 3: ratio × k1",
             loss(0.05, "k1", ratio="anchor", log_ratio_clamp=40.0), False, OPEN_INSTRUCT,
             "open_instruct/model_utils.py estimate_kl 793–818 (ratio = exp(new − old))"),
)}

NO_KL_FRAMEWORKS = {
    "prime_rl": "no KL to a reference in its RL loss; its ref_kl loss type (on-policy distillation, "
                "src/prime_rl/trainer/rl/loss.py ref_kl_loss_fn 199–244 at 559b447) is the distillation objective",
    "pipelinerl": "not read for this issue",
}
