"""AReaL's decoupled loss with rejection sampling (actor.rejection_sampling), from its code.

  AReaL 4aef98d8d818af55b43621aaadba047ae10f4e77 — areal/api/cli_args.py (RejectionSamplingConfig, PPOActorConfig),
  areal/utils/functional/functional.py (apply_rejection_sampling, ppo_actor_loss_fn), areal/utils/data.py
  (KLEstimator._compute_approx_kl). Frozen numbers from running that code: tests/catalogue/frozen_areal.py.
  Issue 19 also names cbff54d (binary_kl): that commit is not in the snapshot the fetch tool holds.

With use_decoupled_loss the proximal policy is the trainer's recomputed log-probs (π on the toy's step, so the PPO
ratio is 1) and the behaviour policy the inference engine's: rejection_sampling's weight behave_imp_weight = π/μ
per token (the geometric mean ρ_geo for level sequence with metric ratio) multiplies the loss, zeroed where the
token or sequence fails the metric's bounds (action mask: the loss mask loses it, but the loss still divides by
the original token count) or clamped (action clamp). With rejection_sampling None there is no weight at all.
The log ratio is taken in float32.
"""

from toylab.catalogue.frameworks.factors import ratio_band
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules
from toylab.catalogue.weights import Param

COMMIT = "4aef98d"
METRICS = ("ratio", "kl_k1", "kl_k2", "kl_k3")
STATISTICS = {"kl_k1": "log_ratio", "kl_k2": "k2", "kl_k3": "k3_reverse"}
SCOPES = {"sum": "seq_sum", "mean": "seq_mean", "max": "seq_max"}
FLOAT32 = "AReaL takes the log ratio in float32: its weights differ from these in the 7th digit"
K1_NOTE = ("cli_args' help calls kl_k1 = log(r) a \"forward KL unbiased estimator\"; with tokens drawn from the "
           "engine its mean is −KL(μ‖π)")
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


def _params(level, action):
    low = -1000.0 if action == "mask" else 1.0            # action clamp: metric ratio, whose upper AReaL keeps > 1
    params = {"upper": Param(5.0, low, 1000.0, "rejection_sampling.upper: the metric's upper bound (AReaL refuses "
                                               "upper ≤ 1 for the ratio metric)"),
              "lower": Param("none", help="rejection_sampling.lower: the metric's lower bound, or none",
                             parse=_optional_bound)}
    if action == "mask":
        params["metric"] = Param("ratio", help="ratio = π/μ, kl_k1 = log(π/μ), kl_k2 = ½ log²(π/μ), kl_k3 = μ/π − 1 + "
                                                "log(π/μ) (as coded)", choices=METRICS)
    if level == "sequence" and action == "mask":
        params["agg"] = Param("mean", help="the metric's sum, mean or max over the sequence (ratio: of log ratios)",
                              choices=tuple(SCOPES))
    return params


def _row(level, action, base, equals, note=""):
    params = _params(level, action)
    config = {"use_decoupled_loss": True, "rejection_sampling.level": level, "rejection_sampling.action": action,
              **{f"rejection_sampling.{name}": Ref(name) for name in params}}
    text = f"actor.use_decoupled_loss=true, actor.rejection_sampling: {{level: {level}, action: {action}}}"
    notes = "; ".join(part for part in (note, FLOAT32) if part)
    return Preset(f"areal:{level}_{action}", text, f"rejection sampling, {level} {action}", config, base, equals,
                  params, notes, COMMIT)


PRESETS = [
    _row("token", "mask", "tok_mis", "ratio: ρ_t·1[lower ≤ ρ_t ≤ upper] (tok_mis at lower 0.5, upper 5); kl_k1: "
         "ρ_t·1[lower ≤ log ρ_t ≤ upper]; kl_k2: ρ_t·1[lower ≤ ½ log² ρ_t ≤ upper]; kl_k3: ρ_t·1[lower ≤ "
         "1/ρ_t − 1 + log ρ_t ≤ upper]", f"{K3_NOTE}; {K1_NOTE}"),
    _row("token", "clamp", "tok_tis", "tok_clip(C_min = lower or 0, C_max = upper): tok_tis(C = 5) at the defaults"),
    _row("sequence", "mask", "gspo_geo", "ratio: the weight is ρ_geo, kept when agg's ratio (mean: ρ_geo, sum: W, max: "
         "max_t ρ_t) is in [lower, upper]; kl metrics: ρ_t, kept when agg of the statistic is",
         "cli_args' RejectionSamplingConfig docstring says level=sequence with metric ratio uses the geometric "
         "mean; with agg sum or max the bounds apply to W or max_t ρ_t while the weight stays ρ_geo; " + K3_NOTE),
    _row("sequence", "clamp", "geo_clip", "geo_clip(C_min = lower or 0, C_max = upper): clamp(ρ_geo, lower, upper) "
         "(agg mean, the default)", "with agg sum or max, apply_rejection_sampling clamps ρ_geo only in the "
         "sequences whose W or max_t ρ_t is out of bounds; the preset is agg mean"),
    Preset("areal:m2_threshold", "actor.m2_threshold (use_decoupled_loss=true, rejection_sampling: null)", "M2PO",
           {"use_decoupled_loss": True, "rejection_sampling": None, "m2_threshold": Ref("m2_threshold")}, "naive",
           "m2po(m2_threshold, weight = naive): batch-coupled, Monte Carlo only; with rejection_sampling None the "
           "decoupled loss carries no behaviour weight",
           {"m2_threshold": Param(0.04, 1e-6, 100.0, "m2_threshold (examples/math/gsm8k_m2po.yaml: 0.04)")},
           "toylab's m2po family defaults its weight to ρ_t; AReaL applies behave_imp_weight only when "
           "rejection_sampling is set", COMMIT, batch=True),
]


def factors(config):
    """The Rules of an actor's rejection_sampling configuration."""
    level, action = config["rejection_sampling.level"], config["rejection_sampling.action"]
    lower, upper = config["rejection_sampling.lower"], config["rejection_sampling.upper"]
    if action == "clamp":
        clamp = "tok_clip" if level == "token" else "geo_clip"
        return Rules([(clamp, {"C_min": max(lower or 0.0, 0.0), "C_max": upper})])
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
    level, action = preset.id.partition(":")[2].split("_")
    if action == "clamp":
        ratio = r"\rho_t" if level == "token" else r"\rho_{geo}"
        return rf"c_t = \mathrm{{clamp}}({ratio}, \ell, u),\quad \ell, u:\ \texttt{{lower, upper}}"
    ratio = r"\rho_t" if level == "token" else r"\rho_{geo}"
    return (rf"c_t = {ratio}\,\mathbf 1[\ell\le m\le u],\ m = \text{{metric}}" +
            ("" if level == "token" else r"\text{ aggregated by agg}") + r",\quad \ell, u:\ \texttt{lower, upper}")
