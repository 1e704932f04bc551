"""verl's rollout-correction presets (RolloutCorrectionConfig), under verl's names, from verl's code.

  verl 1dda039b9c6311889a9c9a26040677e1254814f9 (github.com/verl-project/verl, formerly volcengine/verl; the presets
  were first read at b178a3c, whose frozen numbers these reproduce: the rollout correction differs there only by the
  IcePop threshold of the two newest presets and 1dda039's check that a k1 "lower_upper" has lower ≤ upper) —
  verl/trainer/config/algorithm.py RolloutCorrectionConfig and its preset classmethods;
  verl/trainer/ppo/rollout_corr_helper.py compute_rollout_correction_and_rejection_mask (IS weights, rejection
  mask, SAFETY_BOUND = 20); verl/trainer/ppo/core_algos.py compute_policy_loss_vanilla,
  compute_policy_loss_reinforce, compute_policy_loss_bypass_mode. Frozen numbers from running that code:
  tests/catalogue/reference/verl/.

On the toy's single step the trainer's old policy is π. verl's decoupled mode (its PPO ratio π/π_old = 1 is
never clipped) and bypass mode with loss_type="reinforce" then both give c_t = IS weight × rejection mask;
bypass mode with loss_type="ppo_clip" gives PPO-clip against the sampler (family ppo_clip) × rejection mask, its
IS weights computed for metrics only. verl reads log ratios through its ±20 clamp and divides sequence means by
the token count + 10⁻⁸ (``engine.sequences``), and its rejection removes tokens from the loss mask; an IcePop
rollout_is_threshold "lower_upper" zeroes the weights outside [lower, upper] and leaves response_mask as it is.
"""

import math

from toylab.catalogue.aggregation import VERL_EPSILON
from toylab.catalogue.frameworks.factors import weights_only
from toylab.catalogue.frameworks.preset import Joined, Preset, Ref, Rules, with_code
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param
from toylab.text import quoted

COMMIT = "1dda039"
MEAN_EPSILON = VERL_EPSILON
VERL_CLAMP = 20.0
VERL_REJECTION_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
                          "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")


def verl_rejections(rollout_rs, rollout_rs_threshold):
    """[(option, lower, upper)] as verl parses rollout_rs and rollout_rs_threshold (_parse_rollout_rs_thresholds).

    Options are comma-separated, duplicates dropped; one threshold is shared by all options. A k1 option takes
    "lower_upper" (a single number u means lower = 1/u) and bounds −log ρ between log(lower) and log(upper);
    k2/k3 options take an upper bound only (lower None).
    """
    options = list(dict.fromkeys(option.strip() for option in str(rollout_rs).split(",") if option.strip()))
    unknown = [option for option in options if option not in VERL_REJECTION_OPTIONS]
    if not options or unknown:
        raise ValueError(f"rollout_rs must name options among {', '.join(VERL_REJECTION_OPTIONS)}, "
                         f"got {quoted(rollout_rs)}")
    if isinstance(rollout_rs_threshold, int | float):
        specs = [str(rollout_rs_threshold)]
    else:
        specs = [part.strip() for part in str(rollout_rs_threshold).split(",") if part.strip()]
    if len(specs) not in (1, len(options)):
        raise ValueError(f"rollout_rs_threshold needs one threshold or one per option, got {quoted(rollout_rs_threshold)}")
    return [(option, *_bounds(option, spec))
            for option, spec in zip(options, specs * len(options) if len(specs) == 1 else specs, strict=True)]


def _bounds(option, spec):
    """(lower, upper) of one option's threshold: "lower_upper" or u (lower = 1/u) for k1, an upper bound only
    (lower None) for the others."""
    if option.endswith("k1"):
        lower, _, upper = spec.partition("_") if "_" in spec else (None, "", spec)
        upper = _number(upper, option)
        lower = 1.0 / upper if lower is None else _number(lower, option)
        if lower > upper:                      # 1dda039 _parse_rollout_rs_thresholds refuses it (b178a3c did not)
            raise ValueError(f"thresholds for {option} must be lower ≤ upper, got {quoted(spec)}")
        return lower, upper
    if "_" in spec:
        raise ValueError(f"rollout_rs_threshold for {option} is a single upper bound, got {quoted(spec)}")
    return None, _number(spec, option)


def _number(text, option):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"threshold {quoted(text)} for {option} is not a number") from None
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"thresholds for {option} must be positive, got {quoted(text)}")
    return value


def factors(config):
    """The Rules of a RolloutCorrectionConfig (+ actor clip ratios)."""
    ppo = config.get("bypass_mode", False) and config.get("loss_type", "ppo_clip") == "ppo_clip"
    factors = []
    if config.get("rollout_is") and not ppo:
        factors.append(is_weight(config["rollout_is"], config.get("rollout_is_threshold", 2.0)))
    if config.get("rollout_rs"):
        for option, lower, upper in verl_rejections(config["rollout_rs"], config.get("rollout_rs_threshold")):
            scope, _, statistic = option.rpartition("_")
            bounds = (math.log(lower), math.log(upper)) if statistic == "k1" else (None, upper)
            factors.append(("rs", {"statistic": statistic, "scope": scope, "lo": bounds[0], "hi": bounds[1]}))
    if ppo:
        factors.append(("ppo_clip", {"eps_low": config.get("clip_ratio_low", 0.2),
                                     "eps_high": config.get("clip_ratio_high", 0.2),
                                     "C_dual": config.get("clip_ratio_c", 3.0)}))
    return Rules(factors, VERL_CLAMP, True, mean_epsilon=MEAN_EPSILON)


def is_weight(level, threshold):
    """verl's IS weight (_parse_rollout_is_threshold): one number C truncates, min(ρ_t, C) or min(W, C); "lower_upper"
    is IcePop, the weight zeroed outside [lower, upper] with response_mask left as it is."""
    lower, _, upper = str(threshold).partition("_") if "_" in str(threshold) else ("", "", str(threshold))
    upper = _number(upper, f"rollout_is={level}")
    if not lower:
        return {"token": "tok_tis", "sequence": "seq_tis"}[level], {"C": upper}
    lower = _number(lower, f"rollout_is={level}")
    if lower > upper:
        raise ValueError(f"rollout_is_threshold lower bound {lower:g} is above its upper bound {upper:g}")
    if level == "token":
        return weights_only(("tok_mis", {"lo": lower, "hi": upper}))
    return weights_only(("seq_band", {"C_min": lower, "C_max": upper}))


# -- the table ---------------------------------------------------------------------------------------------

def _k1_threshold(value):
    """verl's "lower_upper" ratio bounds (or one number u: lower = 1/u), checked; returned as text."""
    verl_rejections("seq_mean_k1", value)
    return str(value)


IS_THRESHOLD = Param(2.0, 0.01, 1000.0, "verl rollout_is_threshold: upper truncation of the IS weight")
K3_THRESHOLD = Param(0.01, 1e-4, 100.0, "verl rollout_rs_threshold: upper bound on the mean k3 divergence")
CLIP = {"clip_ratio_low": Param(0.2, 0.0, 1.0, "verl actor clip_ratio_low: PPO clip 1 − ε_low"),
        "clip_ratio_high": Param(0.2, 0.0, 10.0, "verl actor clip_ratio_high: PPO clip 1 + ε_high"),
        "clip_ratio_c": Param(3.0, 1.01, 100.0, "verl actor clip_ratio_c: dual-clip bound for A < 0")}


def _ratio_bounds(default):
    return Param(default, help="verl rollout_rs_threshold 'lower_upper': k1 = −log ρ is kept between "
                               "log(lower) and log(upper), i.e. 1/upper ≤ ratio ≤ 1/lower", parse=_k1_threshold)


K1_NOTE = ("code bounds k1 = −log ρ by log(lower)..log(upper), keeping 1/upper ≤ ratio ≤ 1/lower; the docs "
           "(rollout_corr.md, rollout_corr_math.md §3.4) say lower ≤ ratio ≤ upper — equal only if lower·upper = 1")
TOKEN_TIS_NOTE = "; rollout_corr_math.md writes the token weights as ∏_t min(ρ_t, C), the code weights token t by min(ρ_t, C)"
BYPASS_NOTE = ("docs: bypass uses the rollout log-probs as old; at b178a3c dp_actor.update_policy replaced old_log_prob "
               "by the current log-probs when there was one mini-batch and one epoch, which then disabled every "
               "bypass correction (read, not run); 1dda039 has no dp_actor (verl#6067 moved to the engine workers, "
               "whose ppo_loss takes old_log_probs as the trainer set them)")
CLIP_NOTE = "; verl's ActorConfig docstring calls clip_ratio_c a critic-loss ratio, the policy loss uses it as the dual clip"


def _verl(name, alias, base, equals, config, params=(), note=""):
    bypass = name.startswith("bypass")
    full = {"rollout_is": None, "rollout_rs": None, "bypass_mode": bypass,
            "loss_type": "reinforce" if name.startswith("bypass_pg") else "ppo_clip", **config}
    parameters = dict(params)
    if "ppo_clip" in name:
        parameters |= CLIP
        full |= {key: Ref(key) for key in CLIP}
    notes = "; ".join(part for part in (note, BYPASS_NOTE if bypass else "") if part)
    return Preset(f"verl:{name}", f"RolloutCorrectionConfig.{name}()", alias, full, base, equals, parameters, notes,
                  COMMIT)


def _geo(threshold_name="rs_threshold"):
    return {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": Ref(threshold_name)}


def _k3():
    return {"rollout_rs": "seq_mean_k3", "rollout_rs_threshold": Ref("rs_threshold")}


def _is(level, name="is_threshold"):
    return {"rollout_is": level, "rollout_is_threshold": Ref(name)}


def _icepop():
    return {"rollout_is": "token", "rollout_is_threshold": Joined(("threshold_lower", "threshold"))}


GEO = {"rs_threshold": _ratio_bounds("0.999_1.001")}
ICEPOP = {"threshold": Param(5.0, 1.0, 1000.0, "verl IcePop upper bound: token weights above it are zeroed"),
          "threshold_lower": Param(0.5, 0.001, 1.0, "verl IcePop lower bound: token weights below it are zeroed")}
ICEPOP_NOTE = ("the classmethods zero the weights and keep response_mask, so the masked tokens stay in token-mean's "
               "denominator, unlike rollout_rs; the k1 rejection bounds are still inverted in this version "
               "(compute_rollout_rejection_mask keeps log(lower) ≤ −log ρ ≤ log(upper))")
GEO_EQUALS = "geo_rs with lo = 1/upper, hi = 1/lower (rs: k1, seq_mean, lo = log lower, hi = log upper)"

PRESETS = [
    _verl("decoupled_token_is", "Token-TIS", "tok_tis", "tok_tis with C = threshold (differs where log ρ_t < −20)",
          _is("token", "threshold"), {"threshold": IS_THRESHOLD}),
    _verl("decoupled_seq_is", "Seq-TIS", "seq_tis", "seq_tis with C = threshold (differs where log W < −20)",
          _is("sequence", "threshold"), {"threshold": IS_THRESHOLD}),
    _verl("decoupled_seq_is_rs", "Seq-MIS", "seq_band",
          "min(W, is_threshold)·1[1/upper ≤ W ≤ 1/lower]; at the defaults seq_band(C_min = 0.5, C_max = 2), "
          "not seq_mis",
          {**_is("sequence"), "rollout_rs": "seq_sum_k1", "rollout_rs_threshold": Ref("rs_threshold")},
          {"is_threshold": IS_THRESHOLD, "rs_threshold": _ratio_bounds("0.5_2.0")},
          K1_NOTE + "; the math doc's table says Seq-MIS rejects ρ(τ) > C, the preset also rejects W < 0.5"),
    _verl("decoupled_geo_rs", "Geo-RS", "geo_rs", GEO_EQUALS, _geo(), GEO,
          K1_NOTE + "; rollout_corr_math.md lists it with a seq_max_k2 guard the code does not apply"),
    _verl("bypass_ppo_clip", "PPO-clip", "ppo_clip",
          "ppo_clip with eps_low = clip_ratio_low, eps_high = clip_ratio_high, C_dual = clip_ratio_c", {},
          note=CLIP_NOTE.removeprefix("; ")),
    _verl("bypass_ppo_clip_geo_rs", "PPO-clip + Geo-RS", "ppo_clip", "ppo_clip × geo_rs(1/upper, 1/lower)", _geo(), GEO,
          K1_NOTE + CLIP_NOTE),
    _verl("bypass_ppo_clip_k3_rs", "PPO-clip + K3-RS", "ppo_clip", "ppo_clip × k3_rs(delta = rs_threshold)", _k3(),
          {"rs_threshold": K3_THRESHOLD}, CLIP_NOTE.removeprefix("; ")),
    _verl("bypass_pg_is", "REINFORCE + Seq-TIS", "seq_tis", "verl:decoupled_seq_is (seq_tis, C = threshold)",
          _is("sequence", "threshold"), {"threshold": IS_THRESHOLD}),
    _verl("bypass_pg_geo_rs", "REINFORCE + Geo-RS", "geo_rs", "verl:decoupled_geo_rs; " + GEO_EQUALS, _geo(), GEO,
          K1_NOTE),
    _verl("decoupled_geo_rs_seq_tis", "Geo-RS-Seq-TIS", "geo_rs", "geo_rs(1/upper, 1/lower) × seq_tis(C = is_threshold)",
          {**_is("sequence"), **_geo()}, {"is_threshold": IS_THRESHOLD, **GEO}, K1_NOTE),
    _verl("decoupled_geo_rs_token_tis", "Geo-RS-Token-TIS", "geo_rs_tok_tis",
          "geo_rs_tok_tis with lo = 1/upper, hi = 1/lower, C = is_threshold",
          {**_is("token"), **_geo()}, {"is_threshold": IS_THRESHOLD, **GEO}, K1_NOTE + TOKEN_TIS_NOTE),
    _verl("bypass_pg_geo_rs_seq_tis", "REINFORCE + Geo-RS + Seq-TIS", "geo_rs", "verl:decoupled_geo_rs_seq_tis",
          {**_is("sequence"), **_geo()}, {"is_threshold": IS_THRESHOLD, **GEO}, K1_NOTE),
    _verl("bypass_pg_geo_rs_token_tis", "REINFORCE + Geo-RS + Token-TIS", "geo_rs_tok_tis",
          "verl:decoupled_geo_rs_token_tis", {**_is("token"), **_geo()}, {"is_threshold": IS_THRESHOLD, **GEO},
          K1_NOTE + TOKEN_TIS_NOTE),
    _verl("decoupled_k3_rs", "K3-RS", "k3_rs", "k3_rs with delta = rs_threshold", _k3(), {"rs_threshold": K3_THRESHOLD}),
    _verl("decoupled_k3_rs_seq_tis", "K3-RS-Seq-TIS", "k3_rs", "k3_rs(delta = rs_threshold) × seq_tis(C = is_threshold)",
          {**_is("sequence"), **_k3()}, {"is_threshold": IS_THRESHOLD, "rs_threshold": K3_THRESHOLD}),
    _verl("decoupled_k3_rs_token_tis", "K3-RS-Token-TIS", "k3_rs",
          "k3_rs(delta = rs_threshold) × tok_tis(C = is_threshold)", {**_is("token"), **_k3()},
          {"is_threshold": IS_THRESHOLD, "rs_threshold": K3_THRESHOLD}, TOKEN_TIS_NOTE.removeprefix("; ")),
    _verl("disabled", "metrics only", "naive", "naive", {}),
    _verl("decoupled_token_icepop", "Token-IcePop", "tok_mis",
          "tok_mis with lo = threshold_lower, hi = threshold (verl's ±20 clamp changes nothing with bounds inside "
          "[e^−20, e^20]); the masked tokens stay in response_mask", _icepop(), ICEPOP, ICEPOP_NOTE),
    _verl("bypass_pg_token_icepop", "REINFORCE + Token-IcePop", "tok_mis", "verl:decoupled_token_icepop", _icepop(),
          ICEPOP, ICEPOP_NOTE),
]

CLASSMETHODS = {"decoupled_token_is": 187, "decoupled_seq_is": 201, "decoupled_token_icepop": 215,
                "decoupled_seq_is_rs": 236, "decoupled_geo_rs": 261, "bypass_ppo_clip": 284,
                "bypass_ppo_clip_geo_rs": 303, "bypass_ppo_clip_k3_rs": 327, "bypass_pg_is": 352,
                "bypass_pg_token_icepop": 373, "bypass_pg_geo_rs": 399, "decoupled_geo_rs_seq_tis": 423,
                "decoupled_geo_rs_token_tis": 448, "bypass_pg_geo_rs_seq_tis": 473, "bypass_pg_geo_rs_token_tis": 501,
                "decoupled_k3_rs": 531, "decoupled_k3_rs_seq_tis": 557, "decoupled_k3_rs_token_tis": 582, "disabled": 608}
CODE = {name: f"verl/trainer/config/algorithm.py {line} (the classmethod); verl/trainer/ppo/rollout_corr_helper.py "
              "197–414 (compute_rollout_rejection_mask), 522–658 (compute_rollout_correction_weights); "
              "verl/trainer/ppo/core_algos.py " + ("2413–2548 (compute_policy_loss_bypass_mode)" if name.startswith("bypass")
                                                   else "1286–1378 (compute_policy_loss_vanilla)")
        for name, line in CLASSMETHODS.items()}
PRESETS = with_code(PRESETS, CODE)


# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

# actor.yaml: clip_ratio_low/high 0.2, clip_ratio_c 3.0; compute_policy_loss_vanilla clamps log r to ±20 before exp
VERL_PPO = {"eps_low": 0.2, "eps_high": 0.2, "dual_clip": 3.0, "clamp": VERL_CLAMP}
# legacy_data.yaml train_batch_size 1024 over actor.yaml ppo_mini_batch_size 256 (ray_trainer.py 1352–1353 multiplies
# both by rollout.n), ppo_epochs 1: four sequential updates per batch
MINIBATCHES = 4
ONE_STEP_OFF = "verl/experimental/one_step_off_policy (config/one_step_off_ppo_trainer.yaml 31: bypass_mode: True)"
FULLY_ASYNC = ("verl/experimental/fully_async_policy (config/fully_async_ppo_trainer.yaml: staleness_threshold 0.1, "
               "trigger_parameter_sync_step 4, require_batches 1; 98: bypass_mode: True)")
ASYNC_LAG_NOTE = ("one mini-batch per local step and a weight sync every trigger_parameter_sync_step = 4 steps: the "
                  "k-th local step of a cycle trains on samples of the weights synced k − 1 steps ago (0 … 3, in turn, "
                  "not at random; staleness_threshold 0.1 lets up to 10% more samples from before the sync in)")
VANILLA = "verl/trainer/ppo/core_algos.py compute_policy_loss_vanilla 1286–1378"
BYPASS = "verl/trainer/ppo/core_algos.py compute_policy_loss_bypass_mode 2413–2548"
UPDATES = [
    UpdatePreset("verl:decoupled", "algorithm.rollout_correction.bypass_mode=false, actor.policy_loss.loss_mode=vanilla",
                 Update("recompute", "ppo", VERL_PPO, MINIBATCHES), None, "verl", 0, commit=COMMIT,
                 code=VANILLA + "; ray_trainer.py 1570–1617 (old_log_probs recomputed once per batch)",
                 note="rollout_correction.yaml 6: rollout_is null, no correction by default; a correction preset "
                      "(verl:decoupled_*) multiplies the clipped loss by its detached weight (core_algos.py 1364–1365)"),
    UpdatePreset("verl:bypass", "algorithm.rollout_correction.bypass_mode=true, loss_type=ppo_clip",
                 Update("bypass", "ppo", VERL_PPO, MINIBATCHES), None, "verl", 0, commit=COMMIT,
                 code=BYPASS + "; rollout_corr_helper.py apply_bypass_mode 1109–1144 (old_log_probs = rollout_log_probs)"),
    UpdatePreset("verl:bypass_geo_rs", "RolloutCorrectionConfig.bypass_ppo_clip_geo_rs()",
                 Update("bypass", "ppo", VERL_PPO, MINIBATCHES, weights_at="current"), "verl:decoupled_geo_rs", "verl",
                 0, commit=COMMIT, code=BYPASS + " (2495–2507: the rejection mask of the current log-probs against "
                                                 "the rollout's, at every mini-batch)"),
    UpdatePreset("verl:bypass_pg_is", "RolloutCorrectionConfig.bypass_pg_is() (loss_type reinforce)",
                 Update("bypass", "reinforce", minibatches=MINIBATCHES, weights_at="current"), "verl:bypass_pg_is",
                 "verl", 0, commit=COMMIT,
                 code=BYPASS + "; compute_policy_loss_reinforce 2332–2411 (−A·log π·w, w = min(π_θ/μ, 2) of the "
                               "sequence, detached, recomputed at every mini-batch)"),
    UpdatePreset("verl:cispo", "actor.policy_loss.loss_mode=cispo",
                 Update("recompute", "cispo", {"eps_low": 0.2, "eps_high": 0.2, "clamp": VERL_CLAMP}, MINIBATCHES),
                 None, "verl", 0, commit=COMMIT, code="verl/trainer/ppo/core_algos.py compute_policy_loss_cispo 2047–2104",
                 note="clips both sides with clip_ratio_low/high (MiniMax-M1's CISPO has no lower bound)"),
    UpdatePreset("verl:one_step_off", ONE_STEP_OFF, Update("bypass", "ppo", VERL_PPO, MINIBATCHES), None, "verl", 1,
                 commit=COMMIT, code=BYPASS + "; one_step_off_policy/ray_trainer.py fit_step 323–403 (the next batch "
                                              "generated while this one trains)"),
    UpdatePreset("verl:fully_async", FULLY_ASYNC, Update("bypass", "ppo", VERL_PPO), None, "verl", 3, "uniform",
                 commit=COMMIT, code=BYPASS + "; fully_async_trainer.py _fit_update_local_step 676–688",
                 note=ASYNC_LAG_NOTE),
    UpdatePreset("verl:fully_async_decoupled", FULLY_ASYNC.replace("98: bypass_mode: True", "bypass_mode=false"),
                 Update("rollout", "ppo", VERL_PPO), None, "verl", 3, "uniform", commit=COMMIT,
                 code=VANILLA + "; fully_async_trainer.py _compute_old_log_prob 654–674 (old_log_prob recomputed "
                                "with the parameters of the cycle's first step)", note=ASYNC_LAG_NOTE),
]


# -- the coefficient in verl's symbols ----------------------------------------------------------------------

STATISTIC_LATEX = {"k1": r"(-\log\tilde\rho_t)", "k2": r"\tfrac12(\log\tilde\rho_t)^2", "k3": r"k_3(\tilde\rho_t)"}
SCOPE_LATEX = {"token": "{}", "seq_sum": r"\textstyle\sum_t {}", "seq_mean": r"\tfrac1T\textstyle\sum_t {}",
               "seq_max": r"\max_t {}"}
CLAMP_LATEX = r"\tilde\rho_t = e^{\mathrm{clip}(\log\rho_t,\,\pm20)},\ \tilde W = e^{\mathrm{clip}(\sum_t\log\rho_t,\,\pm20)}"


def latex(preset):
    """The preset's coefficient, its symbols named after verl's parameters (ρ̃, W̃: verl's ±20 clamp)."""
    config = preset.config
    parts, symbols = [], []
    ppo = config["bypass_mode"] and config["loss_type"] == "ppo_clip"
    if config["rollout_is"] and not ppo and isinstance(config["rollout_is_threshold"], Joined):
        parts.append(r"\tilde\rho_t\,\mathbf 1[\ell\le\tilde\rho_t\le u]")
        symbols.append(r"\ell, u:\ \texttt{threshold\_lower, threshold}")
    elif config["rollout_is"] and not ppo:
        parts.append(r"\min(\tilde\rho_t, C)" if config["rollout_is"] == "token" else r"\min(\tilde W, C)")
        symbols.append(r"C:\ \texttt{" + config["rollout_is_threshold"].name.replace("_", r"\_") + "}")
    if config["rollout_rs"]:
        scope, _, statistic = config["rollout_rs"].rpartition("_")
        value = SCOPE_LATEX[scope].format(STATISTIC_LATEX[statistic])
        parts.append(rf"\mathbf 1[\log\ell\le {value}\le\log u]" if statistic == "k1" else rf"\mathbf 1[{value}\le\delta]")
        symbols.append((r"\ell\_u" if statistic == "k1" else r"\delta") + r":\ \texttt{rs\_threshold}")
    if ppo:
        parts.append(r"\tilde\rho_t\,\mathbf 1[\tilde\rho_t\le 1+\varepsilon_h]\ (A\ge0),\ "
                     r"\tilde\rho_t\,\mathbf 1[1-\varepsilon_l\le\tilde\rho_t\le c]\ (A<0)")
        symbols.append(r"\varepsilon_l, \varepsilon_h, c:\ \texttt{clip\_ratio\_low, clip\_ratio\_high, clip\_ratio\_c}")
    if not parts:
        return "c_t = 1"
    return "c_t = " + r"\,".join(parts) + r"\quad " + r",\ ".join(symbols + [CLAMP_LATEX])
