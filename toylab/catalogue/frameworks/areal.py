"""AReaL's decoupled loss with rejection sampling (actor.rejection_sampling), from its code.

  AReaL cbff54d645d2cd8ee1f1c358a82f3f473588433d (github.com/areal-project/AReaL, formerly inclusionAI/AReaL, whose
  4aef98d the presets were first read at: the rejection sampling is the same there but for binary_kl) —
  areal/api/cli_args.py (RejectionSamplingConfig, PPOActorConfig), areal/utils/functional/functional.py
  (apply_rejection_sampling, compute_binary_kl_divergence, ppo_actor_loss_fn), areal/utils/data.py
  (KLEstimator._compute_approx_kl), areal/trainer/ppo/actor.py (_apply_m2po_masking), docs/en/algorithms/
  grpo_series.md and examples/math/gsm8k_kpop.yaml (KPop). Frozen numbers from running that code:
  tests/catalogue/reference/areal/.

With use_decoupled_loss the proximal policy is the trainer's recomputed log-probs (π on the toy's step, so the PPO
ratio is 1) and the behaviour policy the inference engine's: rejection_sampling's weight behave_imp_weight = π/μ
per token (the geometric mean ρ_geo for level sequence with metric ratio) multiplies the loss, zeroed where the
token or sequence fails the metric's bounds (action mask: the loss mask loses it, but the loss still divides by
the original token count) or clamped (action clamp). With rejection_sampling None there is no weight at all.
The log ratio is taken in float32. metric binary_kl is KPop: the larger of the two Bernoulli KLs of the sampled
token's probability, both probabilities clamped to [10⁻⁸, 1 − 10⁻⁸].
"""

from toylab.catalogue.frameworks.factors import ratio_band
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMIT = "cbff54d"
METRICS = ("ratio", "kl_k1", "kl_k2", "kl_k3", "binary_kl")
STATISTICS = {"kl_k1": "log_ratio", "kl_k2": "k2", "kl_k3": "k3_reverse", "binary_kl": "binary_kl"}
SCOPES = {"sum": "seq_sum", "mean": "seq_mean", "max": "seq_max"}
FLOAT32 = "AReaL takes the log ratio in float32: its weights differ from these in the 7th digit"
K1_NOTE = ("cli_args' help calls kl_k1 = log(r) a \"forward KL unbiased estimator\"; with tokens drawn from the "
           "engine its mean is −KL(μ‖π)")
KPOP_NOTE = ("docs/en/algorithms/grpo_series.md says lower is not used with binary_kl; _check_bounds applies it "
             "(lower ≤ KL ≤ upper) when set; the docs' KL has no clamp, the code clamps both probabilities to "
             "[10⁻⁸, 1 − 10⁻⁸]")
K3_NOTE = ("name collision: kl_k3's help says k3 = r − log(r) − 1 (verl's and toylab's k3), but "
           "KLEstimator._compute_approx_kl negates the log ratio first: the code bounds 1/r − 1 + log r, the reverse "
           "(toylab's k3_reverse)")


def _optional_bound(text):
    """A bound that may be absent: "none" or a number."""
    if str(text).strip().lower() in ("none", ""):
        return None
    value = float(text)
    if value != value:
        raise ValueError("a bound must be a number or none")
    return value


def _params(level, action, upper=5.0):
    low = -1000.0 if action == "mask" else 1.001          # action clamp: metric ratio, whose upper AReaL keeps > 1
    params = {"upper": Param(upper, low, 1000.0, "rejection_sampling.upper: the metric's upper bound (AReaL refuses "
                                                 "upper ≤ 1 for the ratio metric)"),
              "lower": Param("none", help="rejection_sampling.lower: the metric's lower bound, or none",
                             parse=_optional_bound)}
    if action == "mask":
        params["metric"] = Param("ratio", help="ratio = π/μ, kl_k1 = log(π/μ), kl_k2 = ½ log²(π/μ), kl_k3 = μ/π − 1 + "
                                              "log(π/μ) (as coded), binary_kl = KPop's two-way Bernoulli KL",
                                 choices=METRICS)
    if level == "sequence":
        params["agg"] = Param("mean", help="the metric's sum, mean or max over the sequence (ratio: of log ratios; "
                                           "clamp: which ratio decides whether ρ_geo is clamped)",
                              choices=tuple(SCOPES))
    return params


def _row(level, action, base, equals, note=""):
    params = _params(level, action)
    config = {"use_decoupled_loss": True, "rejection_sampling.level": level, "rejection_sampling.action": action,
              **{f"rejection_sampling.{key}": Ref(key) for key in params}}
    text = f"actor.use_decoupled_loss=true, actor.rejection_sampling: {{level: {level}, action: {action}}}"
    notes = "; ".join(part for part in (note, FLOAT32) if part)
    return Preset(f"areal:{level}_{action}", text, f"rejection sampling, {level} {action}", config, base, equals,
                  params, notes, COMMIT)


def _kpop():
    """KPop as AReaL's docs and gsm8k_kpop.yaml set it: level token, action mask, metric binary_kl, upper 2."""
    params = _params("token", "mask", upper=2.0)
    del params["metric"]
    config = {"use_decoupled_loss": True, "rejection_sampling.level": "token", "rejection_sampling.action": "mask",
              "rejection_sampling.metric": "binary_kl", **{f"rejection_sampling.{key}": Ref(key) for key in params}}
    text = "actor.use_decoupled_loss=true, actor.rejection_sampling: {level: token, action: mask, metric: binary_kl}"
    return Preset("areal:kpop", text, "KPop", config, "kpop",
                  "rs(binary_kl, token, hi = upper) × tok_is: ρ_t·1[max(KL_B(π_t‖μ_t), KL_B(μ_t‖π_t)) ≤ upper], "
                  "both probabilities clamped to [10⁻⁸, 1 − 10⁻⁸] (gsm8k_kpop.yaml: upper 2)", params,
                  f"{KPOP_NOTE}; {FLOAT32}", COMMIT)


PRESETS = [
    _row("token", "mask", "tok_mis", "ratio: ρ_t·1[lower ≤ ρ_t ≤ upper] (tok_mis at lower 0.5, upper 5); kl_k1: "
         "ρ_t·1[lower ≤ log ρ_t ≤ upper]; kl_k2: ρ_t·1[lower ≤ ½ log² ρ_t ≤ upper]; kl_k3: ρ_t·1[lower ≤ "
         "1/ρ_t − 1 + log ρ_t ≤ upper]; binary_kl: ρ_t·1[lower ≤ max(KL_B(π‖μ), KL_B(μ‖π)) ≤ upper]",
         f"{K3_NOTE}; {K1_NOTE}; {KPOP_NOTE}"),
    _kpop(),
    _row("token", "clamp", "tok_tis", "tok_clip(C_min = lower or 0, C_max = upper): tok_tis(C = 5) at the defaults"),
    _row("sequence", "mask", "gspo_geo", "ratio: the weight is ρ_geo, kept when agg's ratio (mean: ρ_geo, sum: W, max: "
         "max_t ρ_t) is in [lower, upper]; kl metrics: ρ_t, kept when agg of the statistic is",
         "cli_args' RejectionSamplingConfig docstring says level=sequence with metric ratio uses the geometric "
         "mean; with agg sum or max the bounds apply to W or max_t ρ_t while the weight stays ρ_geo; " + K3_NOTE),
    _row("sequence", "clamp", "geo_clip", "geo_clip(C_min = lower or 0, C_max = upper): clamp(ρ_geo, lower, upper) "
         "(agg mean, the default); agg sum or max: ρ_geo, clamped only in the sequences whose W or max_t ρ_t is "
         "outside [lower, upper]", "the docstring's \"clamp importance weight to bounds\" reads as every weight; with "
         "agg sum or max the sequences whose W or max_t ρ_t is in bounds keep an unclamped ρ_geo"),
    Preset("areal:m2_threshold", "actor.m2_threshold (use_decoupled_loss=true, rejection_sampling: null)", "M2PO",
           {"use_decoupled_loss": True, "rejection_sampling": None, "m2_threshold": Ref("m2_threshold")}, "naive",
           "m2po(m2_threshold, weight = naive): batch-coupled, Monte Carlo only; with rejection_sampling None the "
           "decoupled loss carries no behaviour weight",
           {"m2_threshold": Param(0.04, 1e-6, 100.0, "m2_threshold (examples/math/gsm8k_m2po.yaml: 0.04)")},
           "toylab's m2po family defaults its weight to ρ_t; AReaL applies behave_imp_weight only when "
           "rejection_sampling is set", COMMIT, batch=True),
]

FUNCTIONAL = "areal/utils/functional/functional.py"
CODE = {"*": f"{FUNCTIONAL} 185–437 (apply_rejection_sampling), 452–596 (ppo_actor_loss_fn)",
        "kpop": f"{FUNCTIONAL} 248–258 (metric binary_kl), 440–450 (compute_binary_kl_divergence), 452–596 "
                "(ppo_actor_loss_fn)",
        "m2_threshold": "areal/trainer/ppo/actor.py 933–1014 (_apply_m2po_masking, _get_m2po_loss_mask)"}
PRESETS = with_code(PRESETS, CODE)


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

PPO = "areal/utils/functional/functional.py ppo_actor_loss_fn 452–596"
CISPO = "areal/utils/functional/functional.py cispo_loss_fn 678–793; actor.py grpo_loss_fn 576–597"
ANCHOR = "areal/trainer/ppo/actor.py _compute_advantages 229–242 (without use_decoupled_loss π_prox is μ)"
EXAMPLE = ("examples/math/gsm8k_grpo.yaml 28, 69–80: rollout.max_head_offpolicyness 2, actor.eps_clip 0.4, "
           "ppo_n_minibatches 1, recompute_logprob and use_decoupled_loss true, rejection_sampling {metric ratio, "
           "upper 5.0}")
LOGLINEAR_NOTE = ("prox_logp_method loglinear (actor.py compute_prox_logp_approximations 768–849) replaces π_prox by "
                  "log μ + α(log π_θ − log μ), α = (v_θ − 1 − v_μ)/(v_θ − v_μ) per token: an anchor that moves with "
                  "π_θ, not one of these")
UPDATES = [
    UpdatePreset("areal:default", "actor.use_decoupled_loss=false, recompute_logprob=false (PPOActorConfig defaults)",
                 Update("bypass", "ppo", {"eps_low": 0.2, "eps_high": 0.2}, minibatches=4), None, "areal", 0,
                 commit=COMMIT, code=f"{PPO}; {ANCHOR}; cli_args.py PPOActorConfig 1676–1697 (ppo_n_minibatches 4, "
                                     "eps_clip 0.2, c_clip None), 2502–2509 (max_head_offpolicyness 0)",
                 note="the defaults are AReaL's “naive PPO”: clipped against the engine's log-probs, no π_prox"),
    UpdatePreset("areal:decoupled", "actor.use_decoupled_loss=true, rejection_sampling={level token, action mask, "
                                    "metric ratio, upper 5.0} (examples/math/gsm8k_grpo.yaml)",
                 Update("recompute", "ppo", {"eps_low": 0.4, "eps_high": 0.4}), "areal:token_mask", "areal", 2,
                 "uniform", commit=COMMIT, code=f"{PPO}; {EXAMPLE}",
                 note="π_prox/μ multiplies the clipped loss only when rejection_sampling is set (since #1088, "
                      "bc9f009); use_decoupled_loss with rejection_sampling None (the field's default) warns and "
                      "applies no weight (cli_args.py 1941–1952); max_head_offpolicyness bounds the lag, the toy "
                      "draws it uniformly in 0 … 2; " + LOGLINEAR_NOTE),
    UpdatePreset("areal:cispo", "actor.use_cispo_loss=true, eps_clip=1.0, eps_clip_higher=4.0 (its help's "
                                "recommendation; eps_clip_higher None raises)",
                 Update("bypass", "cispo", {"eps_low": 1.0, "eps_high": 4.0}, minibatches=4), None, "areal", 0,
                 commit=COMMIT, code=CISPO),
    UpdatePreset("areal:cispo_decoupled", "actor.use_cispo_loss=true, eps_clip=1.0, eps_clip_higher=4.0, "
                                          "use_decoupled_loss=true, rejection_sampling as gsm8k_grpo.yaml",
                 Update("recompute", "cispo", {"eps_low": 1.0, "eps_high": 4.0}), "areal:token_mask", "areal", 2,
                 "uniform", commit=COMMIT, code=f"{CISPO}; {EXAMPLE}"),
]


def check(config):
    """RejectionSamplingConfig.__post_init__ (areal/api/cli_args.py 1627–1660): lower ≤ upper; for the ratio metric
    upper > 1 and lower > 0; for kl_k2 and kl_k3 upper > 0 (binary_kl, which it refuses outright, is let through
    here as apply_rejection_sampling computes it)."""
    if config.get("rejection_sampling") is None and "rejection_sampling.level" not in config:
        return
    lower, upper = config["rejection_sampling.lower"], config["rejection_sampling.upper"]
    metric = config.get("rejection_sampling.metric", "ratio")
    if lower is not None and lower > upper:
        raise ValueError(f"AReaL refuses lower = {lower:g} above upper = {upper:g}")
    if metric == "ratio" and upper <= 1.0:
        raise ValueError(f"AReaL refuses upper = {upper:g} ≤ 1 for the ratio metric")
    if metric == "ratio" and lower is not None and lower <= 0:
        raise ValueError(f"AReaL refuses lower = {lower:g} ≤ 0 for the ratio metric")
    if metric in ("kl_k2", "kl_k3") and upper <= 0:
        raise ValueError(f"AReaL refuses upper = {upper:g} ≤ 0 for {metric}")


def factors(config):
    """The Rules of an actor's rejection_sampling configuration."""
    level, action = config["rejection_sampling.level"], config["rejection_sampling.action"]
    lower, upper = config["rejection_sampling.lower"], config["rejection_sampling.upper"]
    if action == "clamp":
        bounds = {"C_min": max(lower or 0.0, 0.0), "C_max": upper}
        if level == "token":
            return Rules([("tok_clip", bounds)])
        return Rules([("geo_clip", {**bounds, "decided_by": config["rejection_sampling.agg"]})])
    metric = config["rejection_sampling.metric"]
    scope = "token" if level == "token" else SCOPES[config["rejection_sampling.agg"]]
    if metric == "ratio":
        weight = ("tok_is", {}) if level == "token" else ("gspo_geo", {})
        return Rules([weight, ratio_band(scope, lower, upper)])
    band = ("rs", {"statistic": STATISTICS[metric], "scope": scope, "lo": lower, "hi": upper})
    return Rules([("tok_is", {}), band])


def batch_family(config):
    """areal:m2_threshold is the m2po family with no behaviour weight (rejection_sampling None)."""
    return "m2po", {"m2_threshold": config["m2_threshold"], "weight": "naive"}


def latex(preset):
    if preset.batch:
        return r"c_t = \mathbf 1[t\ \text{kept by M2PO}],\quad \tau:\ \texttt{m2\_threshold}"
    if preset.id == "areal:kpop":
        return (r"c_t = \rho_t\,\mathbf 1[\max(\mathrm{KL_B}(\pi_t\|\mu_t), \mathrm{KL_B}(\mu_t\|\pi_t))\le u],\quad "
                r"u:\ \texttt{upper}")
    level, action = preset.id.partition(":")[2].split("_")
    if action == "clamp":
        ratio = r"\rho_t" if level == "token" else r"\rho_{geo}"
        return rf"c_t = \mathrm{{clamp}}({ratio}, \ell, u),\quad \ell, u:\ \texttt{{lower, upper}}"
    ratio = r"\rho_t" if level == "token" else r"\rho_{geo}"
    return (rf"c_t = {ratio}\,\mathbf 1[\ell\le m\le u],\ m = \text{{metric}}" +
            ("" if level == "token" else r"\text{ aggregated by agg}") + r",\quad \ell, u:\ \texttt{lower, upper}")
