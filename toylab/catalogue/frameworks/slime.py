"""slime's and Miles' rollout corrections, under their argument names, from their code (Miles is slime's fork).

  slime 624b824a898ab0ec1fcb4d373004c7f3852bf515 — slime/utils/arguments.py (--use-tis, --tis-clip,
  --tis-clip-low, --custom-tis-function-path), slime/backends/megatron_utils/loss.py (vanilla_tis_function,
  icepop_function, policy_loss_function), examples/train_infer_mismatch_helper/mis.py (compute_mis_weights) and
  mis.yaml (its settings). Miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 — the same functions in
  miles/backends/training_utils/loss_hub/corrections.py and examples/infra_features/train_infer_mismatch_helper/.
  Frozen numbers from running that code: tests/catalogue/reference/slime/ and miles/ (generate.py, numbers.json).

--use-tis alone multiplies each token's loss by clamp(ρ_t, tis_clip_low, tis_clip) (no log-ratio clamp);
icepop_function (--custom-tis-function-path …loss.icepop_function) by ρ_t·1[tis_clip_low ≤ ρ_t ≤ tis_clip]; both
leave the loss mask as it is. mis.py (--custom-tis-function-path …mis.compute_mis_weights_with_cp, settings from
--custom-config-path mis.yaml) computes the ratio at tis_level token (ρ_t), sequence (W) or geometric (ρ_geo)
through a ±20 clamp, truncates, clips or masks it (tis_mode), rejects by rs_level bounds and vetoes any sequence
with a token below rs_veto_threshold; its rejections leave the loss mask, but slime divides each sequence by its
original token count (rollout_mask_sums), not by the tokens kept. The PPO ratio is against the trainer's old
log-probs: 1 on the toy's step.
"""

from toylab.catalogue.frameworks.factors import ratio_band
from toylab.catalogue.frameworks.preset import Preset, Ref, Rules
from toylab.catalogue.updates import Update, UpdatePreset
from toylab.catalogue.weights import Param

COMMITS = {"slime": "624b824", "miles": "31f1ca9"}
LOSS_FILE = {"slime": "slime.backends.megatron_utils.loss", "miles": "miles.backends.training_utils.loss_hub.corrections"}
MIS_FILE = {"slime": "examples.train_infer_mismatch_helper.mis",
            "miles": "examples.infra_features.train_infer_mismatch_helper.mis"}
SAFETY_BOUND = 20.0
SCOPES = {"token": "token", "sequence": "seq_sum", "geometric": "seq_mean"}
WEIGHTS = {("truncate", "token"): "tok_tis", ("truncate", "sequence"): "seq_tis", ("truncate", "geometric"): "geo_tis",
           ("clip", "token"): "tok_clip", ("clip", "sequence"): "seq_clip", ("clip", "geometric"): "geo_clip",
           ("mask", "token"): "tok_is", ("mask", "sequence"): "seq_is", ("mask", "geometric"): "gspo_geo"}

CLIP = {"tis_clip": Param(2.0, 0.01, 1000.0, "--tis-clip: upper bound on ρ_t"),
        "tis_clip_low": Param(0.0, 0.0, 1.0, "--tis-clip-low: lower bound on ρ_t")}


def _mis_params(lower, upper):
    return {"tis_mode": Param("truncate", help="mis.yaml tis_mode: truncate (min), clip (clamp) or mask (reject)",
                              choices=("truncate", "clip", "mask")),
            "tis_lower_bound": Param(lower, 0.0, 1.0, "mis.yaml tis_lower_bound: clip/mask lower bound, and the "
                                                      "rejection's unless rs_lower_bound is set"),
            "tis_upper_bound": Param(upper, 1.0, 1000.0, "mis.yaml tis_upper_bound: the upper bound of the weight "
                                                         "and of the rejection"),
            "use_rs": Param("true", help="mis.yaml use_rs: reject at the same level by the same bounds",
                            choices=("true", "false")),
            "rs_veto_threshold": Param(1e-4, 0.0, 1.0, "mis.yaml rs_veto_threshold: reject a sequence with any "
                                                       "ρ_t below it (0: no veto; only with use_rs)")}


MIS_NOTE = ("README: the sequence level rejects by a “mean IS weight”, the code by the product W; it lists "
            "tis_mode truncate and clip, the code also masks; it says the veto is independent of IS/RS settings, the "
            "code vetoes only when use_rs is on; mis.yaml's tis_batch_normalize: true (normalising the weights by "
            "their batch mean, the rejected tokens' included) is batch-coupled and not part of the preset")


CODE = {"slime": {"use_tis": "slime/backends/megatron_utils/loss.py 884–905 (vanilla_tis_function)",
                  "icepop": "slime/backends/megatron_utils/loss.py 908–931 (icepop_function)",
                  "mis": "examples/train_infer_mismatch_helper/mis.py 150–307 (compute_mis_weights: the log ratio at "
                         "each level 192–200, its clamp 222 and 250, the veto 82–100)"},
        "miles": {"use_tis": "miles/backends/training_utils/loss_hub/corrections.py 7–32 (vanilla_tis_function)",
                  "icepop": "miles/backends/training_utils/loss_hub/corrections.py 35–62 (icepop_function)",
                  "mis": "examples/infra_features/train_infer_mismatch_helper/mis.py 151–308 (compute_mis_weights: the "
                         "log ratio at each level 193–201, its clamp 223 and 251, the veto 83–101)"}}


def _rows(framework):
    commit, loss_file, mis_file = COMMITS[framework], LOSS_FILE[framework], MIS_FILE[framework]

    def row(option, alias, config, base, equals, params, note=""):
        code = CODE[framework].get(option, CODE[framework]["mis"])
        return Preset(f"{framework}:{option}", option_text(option, config, loss_file, mis_file), alias, config, base,
                      equals, params, note, commit, code=code)

    def mis(level, lower, upper, base, equals):
        config = {"use_tis": True, "custom_tis_function_path": f"{mis_file}.compute_mis_weights_with_cp",
                  "tis_level": level, "rs_level": level, "tis_mode": Ref("tis_mode"),
                  "tis_lower_bound": Ref("tis_lower_bound"), "tis_upper_bound": Ref("tis_upper_bound"),
                  "use_rs": Ref("use_rs"), "rs_lower_bound": None, "rs_upper_bound": None,
                  "rs_veto_threshold": Ref("rs_veto_threshold"), "tis_batch_normalize": False}
        name = "mis" if level == "token" else f"mis_{level}"
        return row(name, f"MIS, {level} level", config, base, equals, _mis_params(lower, upper), MIS_NOTE)

    return [
        row("use_tis", "TIS (vanilla_tis_function)",
            {"use_tis": True, "tis_clip": Ref("tis_clip"), "tis_clip_low": Ref("tis_clip_low"),
             "custom_tis_function_path": None}, "tok_tis",
            "tok_clip(C_min = tis_clip_low, C_max = tis_clip); tok_tis(C = tis_clip) at tis_clip_low 0", dict(CLIP)),
        row("icepop", "IcePop (icepop_function)",
            {"use_tis": True, "tis_clip": Ref("tis_clip"), "tis_clip_low": Ref("tis_clip_low"),
             "custom_tis_function_path": f"{loss_file}.icepop_function"}, "tok_mis",
            "tok_mis(lo = tis_clip_low, hi = tis_clip); the masked tokens stay in the loss mask", dict(CLIP)),
        mis("token", 0.5, 2.0, "tok_tis",
            "truncate: tok_tis(C = tis_upper_bound) × rs(token band) × veto; at mis.yaml's settings min(ρ_t, 2)"
            "·1[0.5 ≤ ρ_t ≤ 2]·1[every ρ_t ≥ 10⁻⁴]"),
        mis("sequence", 0.5, 2.0, "seq_tis",
            "truncate: seq_tis(C = tis_upper_bound) × 1[lower ≤ W ≤ upper] × veto: at the defaults seq_band(0.5, 2)"
            " × veto"),
        mis("geometric", 0.9999, 1.0001, "geo_tis",
            "truncate: geo_tis(C = tis_upper_bound) × 1[lower ≤ ρ_geo ≤ upper] × veto; clip: geo_clip; mask: "
            "gspo_geo × the band (mis.yaml's comment: 0.9999 and 1.0001 at this level)"),
    ]


def option_text(option, config, loss_file, mis_file):
    if option == "use_tis":
        return "--use-tis --tis-clip --tis-clip-low"
    if option == "icepop":
        return f"--use-tis --custom-tis-function-path {loss_file}.icepop_function"
    return (f"--use-tis --custom-tis-function-path {mis_file}.compute_mis_weights_with_cp, mis.yaml with tis_level "
            f"= rs_level = {config['tis_level']}")


PRESETS = _rows("slime") + _rows("miles")



# -- the update: PPO ratio, correction, updates per batch, staleness ------------------------------------------

POLICY_LOSS = {"slime": "slime/backends/megatron_utils/loss.py policy_loss_function 934–1173 (old log-probs 965, "
                        "985–986; TIS 1050–1078) and slime/utils/ppo_utils.py compute_policy_loss 125–148",
               "miles": "miles/backends/training_utils/loss_hub/losses.py policy_loss_function 62–396 (old log-probs "
                        "95–136; TIS 230–261) and math_utils.py compute_policy_loss 254–277 (log r clamped to ±20, "
                        "float32: _safe_exp_neg_ppo_kl 18–32)"}
UPDATE_NOTE = ("U = rollout_batch_size × n_samples_per_prompt / global_batch_size, one pass (no epochs); neither "
               "has a default (scripts/run-qwen3-4B.sh: 32 × 8 / 256 = 1; the quick-start docs call "
               "num_steps_per_rollout's default 1, the argument's default is None)")
ASYNC = {"slime": "train_async.py 32–40 (the next rollout starts before this one trains; update_weights_interval 1)",
         "miles": "train_async.py 73–81"}
KEEP_OLD = {"slime": "slime/backends/megatron_utils/actor.py 460 (the old_actor computes log_probs), 643–652 (the "
                     "queue rollout_actor → old_actor at each weight update)",
            "miles": "miles/backends/megatron_utils/actor.py 522, 797–806"}


def _updates(framework):
    commit, code = COMMITS[framework], POLICY_LOSS[framework]
    clip = {"eps_low": 0.2, "eps_high": 0.2, **({"clamp": SAFETY_BOUND} if framework == "miles" else {})}
    rows = [
        UpdatePreset(f"{framework}:default", "--eps-clip 0.2 (--eps-clip-high, --eps-clip-c unset), train.py",
                     Update("recompute", "ppo", clip), None, framework, 0, commit=commit, code=code,
                     note=UPDATE_NOTE + "; --use-tis multiplies the clipped loss by the detached min(π_old/μ, 2)"),
        UpdatePreset(f"{framework}:use_rollout_logprobs", "--use-rollout-logprobs",
                     Update("bypass", "ppo", clip), None, framework, 0, commit=commit, code=code, note=UPDATE_NOTE),
        UpdatePreset(f"{framework}:async", "train_async.py", Update("recompute", "ppo", clip), None, framework, 1,
                     commit=commit, code=f"{code}; {ASYNC[framework]}",
                     note="the old log-probs are the current actor's: the whole lag sits in π_old/μ, corrected only "
                          "with --use-tis" + ("; train_async.py asserts a correction flag only with a critic "
                                              "(arguments.py validate_async_off_policy_correction 3591–3609, "
                                              "whose docstring speaks of async PPO in general)"
                                              if framework == "miles" else "")),
        UpdatePreset(f"{framework}:async_keep_old_actor", "train_async.py --keep-old-actor",
                     Update("rollout", "ppo", clip), None, framework, 1, commit=commit,
                     code=f"{code}; {ASYNC[framework]}; {KEEP_OLD[framework]}"),
    ]
    if framework == "slime":
        rows.append(UpdatePreset("slime:cispo", "--advantage-estimator cispo --eps-clip 1.0 --eps-clip-high 4.0",
                                 Update("recompute", "cispo", {"eps_low": 1.0, "eps_high": 4.0}), None, "slime", 0,
                                 commit=commit, code="slime/utils/ppo_utils.py compute_cispo_loss 152–171; "
                                                     "loss.py 1035–1036",
                                 note="arguments.py 1879–1885 warns when --eps-clip < 1 (the default 0.2 keeps a "
                                      "lower bound 0.8)"))
    return rows


UPDATES = _updates("slime") + _updates("miles")


def check(config):
    """mis.py's clip and mask assert lower < upper (lines 125, 140), and the rejection runs mask (line 254)."""
    if "tis_level" not in config:
        return
    uses_bounds = config["tis_mode"] in ("clip", "mask") or config["use_rs"] == "true"
    if uses_bounds and not config["tis_lower_bound"] < config["tis_upper_bound"]:
        raise ValueError(f"mis.py asserts tis_lower_bound < tis_upper_bound, got {config['tis_lower_bound']:g} and "
                         f"{config['tis_upper_bound']:g}")


def factors(config):
    """The Rules of slime's --use-tis configuration: mis.py clamps the sum (or mean) of a sequence's raw log
    ratios, not each token before it (compute_log_ratio, mis.py lines 192–198; the clamp at 222 and 250)."""
    path = config["custom_tis_function_path"] or ""
    if path.endswith("compute_mis_weights_with_cp"):
        return Rules(mis_factors(config), SAFETY_BOUND, True, clamp_sums=True)
    low, high = config["tis_clip_low"], config["tis_clip"]
    if path.endswith("icepop_function"):
        return Rules([("tok_mis", {"lo": low, "hi": high})], None, False)
    return Rules([("tok_clip", {"C_min": low, "C_max": high})], None, False)


def mis_factors(config):
    """compute_mis_weights: the weight at tis_level by tis_mode, the rs_level band, the veto."""
    level, mode = config["tis_level"], config["tis_mode"]
    lower, upper = config["tis_lower_bound"], config["tis_upper_bound"]
    weight = WEIGHTS[(mode, level)]
    bounds = {"truncate": {"C": upper}, "clip": {"C_min": lower, "C_max": upper}, "mask": {}}[mode]
    factors = [(weight, bounds)]
    if mode == "mask":
        factors.append(ratio_band(SCOPES[level], lower, upper))
    if config["use_rs"] == "true":
        factors.append(ratio_band(SCOPES[config["rs_level"]], config["rs_lower_bound"] or lower,
                                  config["rs_upper_bound"] or upper))
        if config["rs_veto_threshold"]:
            factors.append(("veto", {"C_v": config["rs_veto_threshold"]}))
    return factors


RATIO = {"token": r"\rho_t", "sequence": "W", "geometric": r"\rho_{geo}"}


def latex(preset):
    config = preset.config
    if "tis_level" not in config:
        if (config["custom_tis_function_path"] or "").endswith("icepop_function"):
            return r"c_t = \rho_t\,\mathbf 1[C_{low}\le\rho_t\le C],\quad C_{low}, C:\ \texttt{tis\_clip\_low, tis\_clip}"
        return r"c_t = \mathrm{clamp}(\rho_t, C_{low}, C),\quad C_{low}, C:\ \texttt{tis\_clip\_low, tis\_clip}"
    ratio = RATIO[config["tis_level"]]
    return (rf"c_t = w({ratio})\,\mathbf 1[\ell\le {ratio}\le u]\,\mathbf 1[\min_s\rho_s\ge v],\ "
            rf"w = \min({ratio}, u)\ \text{{(truncate)}},\ \mathrm{{clamp}}({ratio}, \ell, u)\ \text{{(clip)}},\ "
            rf"{ratio}\ \text{{(mask)}},\quad \ell, u, v:\ \texttt{{tis\_lower\_bound, tis\_upper\_bound, "
            r"rs\_veto\_threshold}}")
