"""The registry: every estimator id, its formula, source, thresholds and colour, and the weight function it runs.

A single sampled sequence y gives the gradient estimate ĝ(y) = Σ_t (c_t(y)·A(y) + d[t, y_t])·s_t with A = r(y) − b,
s_t = onehot(y_t) − π_t and d an additive penalty's term (0 for most). Every exact estimator's coefficient
factorises as

    c_t(y) = sequence(y) · token_{k(y)}[t, y_t] · ∏_{s<t} carry[s, y_s],   k(y) the sequence's token class

which is what makes its exact moments O(M) (``engine.moments``). The weight functions live below the registry:
the core catalogue in ``corrections``, the parametrised families in ``families``, the framework presets as data
in ``frameworks/`` (ids ``<framework>:<option>``, with the framework's parameter names). The families
added for the other frameworks live in ``ratio_bounds`` (geometric weights, token outliers, veto),
``probability_masks`` (DPPO, KPop, the TV mask), ``loss_shapes`` (an additive penalty, TOPR, VESPO) and
``second_moment`` (M2PO). The registry is the one place that looks an id up, so a family that multiplies another
estimator's weight (``weight``) and a preset that combines several are evaluated here.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from toylab.catalogue import (
    corrections,
    families,
    loss_shapes,
    presets,
    probability_masks,
    ratio_bounds,
    second_moment,
)
from toylab.catalogue.weights import Param, Weights, combine
from toylab.text import quoted


@dataclass(frozen=True, kw_only=True)
class Estimator:
    id: str
    label: str
    latex: str
    source: str
    weights: Any = None               # exact: f(stats, **params) -> Weights
    params: dict = field(default_factory=dict)
    batch_estimate: Any = None        # batch-coupled: f(batch_sums, **params) -> (R, K, T, V) estimates
    on_policy: bool = False           # sampled from π instead of μ
    colour: str = "#777777"
    framework: str | None = None      # the framework of a preset ("verl", "slime", …)
    batch_weights: Any = None         # batch-coupled, on a given batch: f(sequences, **params) -> (c, kept, d)
    undefined: str = ""               # batch-coupled: where its estimate is undefined (NaN in Monte Carlo), and why

    @property
    def exact(self):
        return self.weights is not None


# -- what only the registry can evaluate: weights that name other ids ---------------------------------------

def estimator_weights(stats, estimator_id):
    """The named exact estimator's Weights at its default thresholds."""
    if estimator_id == "naive":
        return Weights()
    return ESTIMATORS[estimator_id].weights(stats, **resolve_params(estimator_id))


def weight_coefficients(sequences, weight):
    """grpo and rloo on a given batch: (c, kept, d) of their ``weight`` (the advantages given are the centred ones)."""
    weights = estimator_weights(sequences, weight)
    return (*sequences.assemble(weights), sequences.additive(weights))


def m2po_coefficients(sequences, m2_threshold, weight):
    """m2po on a given batch: its ``weight``'s (c, kept, d) on the tokens M2PO keeps in this batch, 0 elsewhere."""
    coefficient, kept, additive = weight_coefficients(sequences, weight)
    m2_kept = second_moment.m2po_kept(sequences, m2_threshold)
    return np.where(m2_kept, coefficient, 0.0), kept & m2_kept, np.where(m2_kept, additive, 0.0)


def chained(mask):
    """A mask family times the weight of the exact estimator its ``weight`` parameter names, so masks chain."""
    def weights(stats, weight="naive", **params):
        return combine(mask(stats, **params), estimator_weights(stats, weight))
    weights.__doc__ = mask.__doc__
    return weights


def preset_weights(preset, stats, **params):
    """A framework preset's Weights: its configuration turned into factors (registry ids with parameters) by the
    framework's own rules, each evaluated through the framework's log-ratio clamp (of each token, or of a
    sequence's sum) and the 10⁻⁸ its sequence means may add to the token count; a factor whose mask only zeroes
    a weight keeps the masked tokens in the loss mask (``frameworks.preset.Rules``)."""
    rules = presets.rules(preset, params)
    view = stats
    if rules.clamp is not None or rules.mean_epsilon:
        bound = math.inf if rules.clamp is None else rules.clamp
        view = stats.clamped(bound, rules.mean_epsilon, rules.clamp_sums)
    return combine(*(_factor_weights(view, rules.rejections_leave_loss_mask, *factor) for factor in rules.factors))


def _preset_estimator(preset, row):
    """A preset's registry entry: exact through its factors, or batch-coupled as the family its framework names."""
    if not preset.batch:
        return Estimator(**row, weights=partial(preset_weights, preset))

    def through_family(function):
        def run(batch, **params):
            family, arguments = presets.batch_family(preset, params)
            return getattr(ESTIMATORS[family], function)(batch, **arguments)
        return run
    return Estimator(**row, batch_estimate=through_family("batch_estimate"), batch_weights=through_family("batch_weights"))


def _factor_weights(view, masks_leave_loss, estimator_id, params, leaves_loss_mask=None):
    weights = ESTIMATORS[estimator_id].weights(view, **params)
    removes = masks_leave_loss if leaves_loss_mask is None else leaves_loss_mask
    return weights if removes else weights.without_rejection()


# -- the registry ---------------------------------------------------------------------------------------

def _threshold(default, low, high, help):
    return Param(float(default), float(low), float(high), help)


C_TOKEN = _threshold(2, 1, 100, "per-token ratio cap C")
C_SEQUENCE = _threshold(2, 1, 1000, "sequence ratio cap C")
C_TOKEN_MAX = _threshold(2, 1, 100, "upper ratio bound C_max")
C_SEQUENCE_MAX = _threshold(2, 1, 1000, "upper bound C_max on W")
BOUND_PAIRS = (("lo", "hi"), ("C_min", "C_max"), ("clip_min", "clip_max"), ("lower", "upper"))
WEIGHT_CHOICE = Param("naive", help="the exact estimator whose weight multiplies the centred reward")

_ENTRIES = [
    Estimator(
        id="on_policy",
        label="on-policy (y ~ π)",
        latex=r"\hat g = (r(y)-b)\sum_t s_t,\quad y\sim\pi",
        source="the reference: a sampler that equals the trainer",
        weights=corrections.no_correction,
        on_policy=True,
        colour="#7F7F7F",
    ),
    Estimator(
        id="naive",
        label="naive (no correction)",
        latex=r"\hat g = (r(y)-b)\sum_t s_t,\quad y\sim\mu",
        source="REINFORCE on sampler rollouts, no correction",
        weights=corrections.no_correction,
        colour="#D55E00",
    ),
    Estimator(
        id="tok_is",
        label="token IS",
        latex=r"c_t = \rho_t",
        source="per-token ratio, PPO-like",
        weights=corrections.token_is,
        colour="#E69F00",
    ),
    Estimator(
        id="tok_tis",
        label="token TIS",
        latex=r"c_t = \min(\rho_t, C)",
        source="truncated IS (Yao et al. 2025); verl rollout_is=token (up to its ±20 log-ratio clamp); TRL "
               "token_truncate; slime --tis-clip",
        weights=corrections.token_tis,
        params={"C": C_TOKEN},
        colour="#56B4E9",
    ),
    Estimator(
        id="tok_mis",
        label="token MIS (IcePop)",
        latex=r"c_t = \rho_t\,\mathbf 1[\mathrm{lo}\le\rho_t\le\mathrm{hi}]",
        source="IcePop (Ring-1T, 2025); TRL token_mask",
        weights=corrections.token_mis,
        params={"lo": _threshold(0.5, 0.01, 1, "lower ratio bound"),
                "hi": _threshold(5, 1, 100, "upper ratio bound")},
        colour="#009E73",
    ),
    Estimator(
        id="prefix_is",
        label="prefix IS (per-decision)",
        latex=r"c_t = \prod_{s\le t}\rho_s",
        source="per-decision IS (Precup et al. 2000): the causal weight of an autoregressive model",
        weights=corrections.prefix_is,
        colour="#999933",
    ),
    Estimator(
        id="seq_is",
        label="sequence IS",
        latex=r"c_t = W = \prod_t \rho_t",
        source="sequence-level IS: unbiased",
        weights=corrections.sequence_is,
        colour="#0072B2",
    ),
    Estimator(
        id="seq_tis",
        label="sequence TIS",
        latex=r"c_t = \min(W, C)",
        source="verl rollout_is=sequence (up to its ±20 clamp of log W); TRL sequence_truncate",
        weights=corrections.sequence_tis,
        params={"C": C_SEQUENCE},
        colour="#CC79A7",
    ),
    Estimator(
        id="seq_mis",
        label="sequence MIS",
        latex=r"c_t = W\,\mathbf 1[W\le C]",
        source="Li et al. 2025 (Seq-MIS); TRL sequence_mask (its default C = 3)",
        weights=corrections.sequence_mis,
        params={"C": C_SEQUENCE},
        colour="#AA4499",
    ),
    Estimator(
        id="geo_rs",
        label="geometric rejection",
        latex=r"c_t = \mathbf 1[\mathrm{lo}\le\rho_{geo}\le\mathrm{hi}],\ "
              r"\rho_{geo}=W^{1/T}",
        source="Li et al. 2025 (Geo-RS), as verl's docs state it; verl's seq_mean_k1 code "
               "keeps 1/hi ≤ ρ_geo ≤ 1/lo (verl:decoupled_geo_rs)",
        weights=corrections.geometric_rs,
        params={"lo": _threshold(0.5, 0.01, 1, "lower bound on ρ_geo"),
                "hi": _threshold(2, 1, 100, "upper bound on ρ_geo")},
        colour="#785EF0",    # violet: the teal #44AA99 was ΔE 9.6 from tok_mis,
    ),
    Estimator(
        id="geo_rs_tok_tis",
        label="geometric rejection + token TIS",
        latex=r"c_t = \mathbf 1[\mathrm{lo}\le\rho_{geo}\le\mathrm{hi}]\,\min(\rho_t, C)",
        source="verl decoupled_geo_rs_token_tis as documented (its code: verl:decoupled_geo_rs_token_tis)",
        weights=corrections.geometric_rs_token_tis,
        params={"lo": _threshold(0.5, 0.01, 1, "lower bound on ρ_geo"),
                "hi": _threshold(2, 1, 100, "upper bound on ρ_geo"), "C": C_TOKEN},
        colour="#117733",
    ),
    Estimator(
        id="k3_rs",
        label="k3 rejection",
        latex=r"c_t = \mathbf 1\big[\tfrac1T\sum_t k_3(\rho_t)\le\delta\big],\ "
              r"k_3(\rho)=\rho-1-\log\rho",
        source="verl seq_mean_k3 rejection",
        weights=corrections.k3_rs,
        params={"delta": _threshold(0.01, 1e-4, 10, "bound on the mean k3 divergence")},
        colour="#DDCC77",
    ),
    Estimator(
        id="trm",
        label="trust-region mask",
        latex=r"c_t = \mathbf 1[\max_t|\log\rho_t|\le\varepsilon]",
        source="Trust Region Masking (2025)",
        weights=corrections.trust_region_mask,
        params={"eps": _threshold(0.5, 0.01, 10, "bound on max |log ρ_t|")},
        colour="#CC6677",
    ),
    Estimator(
        id="gspo_geo",
        label="GSPO geometric ratio",
        latex=r"c_t = \rho_{geo} = W^{1/T}",
        source="GSPO's geometric-mean sequence ratio (unclipped)",
        weights=corrections.gspo_geometric,
        colour="#6699CC",
    ),
    Estimator(
        id="rs",
        label="rejection by a statistic",
        latex=r"c_t = w_t\,\mathbf 1[\mathrm{lo}\le \mathrm{stat}\le\mathrm{hi}],\ \mathrm{stat}\in\{k_1=-\log\rho_t,\ "
              r"k_2=\tfrac12(\log\rho_t)^2,\ k_3=\rho_t-1-\log\rho_t,\ \log\rho_t\}",
        source="verl rollout_rs (token_k*, seq_sum_k*, seq_mean_k*, seq_max_k*): the statistic per token or its "
               "sum/mean/max over the sequence, between lo and hi (log_ratio: the ratio reading lo = log C_low); "
               "w = the weight of any exact estimator, so rejections chain",
        weights=chained(families.rejection_mask),
        params={"statistic": Param("k1", help="k1 = −log ρ, k2 = ½(log ρ)², k3 = ρ − 1 − log ρ, log_ratio = log ρ",
                                   choices=families.REJECTION_STATISTICS),
                "scope": Param("token", help="per token, or the sequence's sum / mean / max of the statistic",
                               choices=families.REJECTION_SCOPES),
                "lo": _threshold(-0.5, -1000, 1000, "lower bound on the statistic"),
                "hi": _threshold(0.5, -1000, 1000, "upper bound on the statistic"),
                "weight": Param("naive", help="the exact estimator whose weight the rejection multiplies")},
        colour="#332288",
    ),
    Estimator(
        id="tok_clip",
        label="two-sided token truncation",
        latex=r"c_t = \mathrm{clamp}(\rho_t, C_{\min}, C_{\max})",
        source="TRL token_truncate with vllm_importance_sampling_clip_min",
        weights=families.token_clip,
        params={"C_min": _threshold(0.5, 0, 1, "lower ratio bound C_min"), "C_max": C_TOKEN_MAX},
        colour="#77AADD",
    ),
    Estimator(
        id="seq_clip",
        label="two-sided sequence truncation",
        latex=r"c_t = \mathrm{clamp}(W, C_{\min}, C_{\max})",
        source="TRL sequence_truncate with vllm_importance_sampling_clip_min",
        weights=families.sequence_clip,
        params={"C_min": _threshold(0.5, 0, 1, "lower bound C_min on W"), "C_max": C_SEQUENCE_MAX},
        colour="#EE8866",
    ),
    Estimator(
        id="seq_band",
        label="two-sided sequence mask",
        latex=r"c_t = W\,\mathbf 1[C_{\min}\le W\le C_{\max}]",
        source="TRL sequence_mask with vllm_importance_sampling_clip_min; verl decoupled_seq_is_rs at its defaults",
        weights=families.sequence_band,
        params={"C_min": _threshold(0.5, 0, 1, "lower bound C_min on W"), "C_max": C_SEQUENCE_MAX},
        colour="#882255",
    ),
    Estimator(
        id="ppo_clip",
        label="PPO-clip against the sampler",
        latex=r"c_t = \rho_t\,\mathbf 1[\rho_t\le 1+\varepsilon_{high}]\ (A\ge0),\quad "
              r"\rho_t\,\mathbf 1[1-\varepsilon_{low}\le\rho_t\le C_{dual}]\ (A<0)",
        source="the gradient of verl's PPO loss with the sampler as old policy (bypass mode, loss_type=ppo_clip), "
               "dual clip included",
        weights=families.ppo_clip,
        params={"eps_low": _threshold(0.2, 0, 1, "ε_low: ratios below 1 − ε_low are clipped when A < 0"),
                "eps_high": _threshold(0.2, 0, 10, "ε_high: ratios above 1 + ε_high are clipped when A ≥ 0"),
                "C_dual": _threshold(3, 1.01, 100, "dual clip: ratios above it are clipped when A < 0")},
        colour="#EE7733",
    ),
    Estimator(
        id="opsm",
        label="off-policy sequence mask (DeepSeek-V3.2)",
        latex=r"c_t = w_t\,\mathbf 1\big[A\ge0\ \text{or}\ \tfrac1T\sum_t(\log\mu_t-\log\pi_t)\le\delta\big]",
        source="DeepSeek-V3.2 (2025); TRL off_policy_mask_threshold (times its IS weight w)",
        weights=chained(families.off_policy_mask),
        params={"delta": _threshold(0.05, -10, 10, "δ: drop a sequence with A < 0 whose mean log μ − log π is above it"),
                "weight": Param("naive", help="the exact estimator whose weight the mask multiplies")},
        colour="#BBCC33",
    ),
    Estimator(
        id="geo_tis",
        label="geometric TIS",
        latex=r"c_t = \min(\rho_{geo}, C),\ \rho_{geo} = W^{1/T}",
        source="truncated IS at the geometric level: slime tis_level=geometric (truncate), ROLL weight_type=geometric, "
               "ms-swift sequence_truncate (geometric, unlike TRL's)",
        weights=ratio_bounds.geometric_tis,
        params={"C": _threshold(2, 1, 100, "cap C on ρ_geo")},
        colour="#4477AA",
    ),
    Estimator(
        id="geo_clip",
        label="geometric clamp",
        latex=r"c_t = \mathrm{clamp}(\rho_{geo}, C_{\min}, C_{\max})",
        source="two-sided truncation at the geometric level: slime tis_level=geometric with tis_mode=clip, AReaL "
               "rejection_sampling level=sequence, metric=ratio, action=clamp",
        weights=ratio_bounds.geometric_clip,
        params={"C_min": _threshold(0.5, 0, 1, "lower bound C_min on ρ_geo"),
                "C_max": _threshold(2, 1, 100, "upper bound C_max on ρ_geo")},
        colour="#66CCEE",
    ),
    Estimator(
        id="outlier_rs",
        label="token-outlier sequence rejection",
        latex=r"c_t = \mathbf 1[\mathrm{lo}\le\rho_s\le\mathrm{hi}\ \text{for every } s]",
        source="SkyRL outlier_token_is_threshold_low/_high: a sequence with any token ratio outside [lo, hi] is "
               "rejected (lo·hi need not be 1)",
        weights=ratio_bounds.outlier_rejection,
        params={"lo": _threshold(1e-4, 0, 1, "lower bound on every token's ratio (0: none)"),
                "hi": _threshold(100, 1, 1e6, "upper bound on every token's ratio")},
        colour="#BB5566",
    ),
    Estimator(
        id="veto",
        label="catastrophic-token veto",
        latex=r"c_t = \mathbf 1[\rho_s\ge C_v\ \text{for every } s]",
        source="slime rs_veto_threshold: a sequence with any token ratio below C_v is rejected",
        weights=ratio_bounds.veto,
        params={"C_v": _threshold(1e-4, 1e-12, 1, "veto threshold C_v on every token's ratio")},
        colour="#994455",
    ),
    Estimator(
        id="dppo",
        label="DPPO trust-region mask",
        latex=r"c_t = \rho_t\,\mathbf 1[\Delta p_t\le\delta_{high}]\ (A>0),\quad "
              r"\rho_t\,\mathbf 1[\Delta p_t\ge-\delta_{low}]\ (A\le0),\ \Delta p_t=\pi_t(y_t)-\mu_t(y_t)",
        source="DPPO's binary-TV mask in probability space: prime-rl's default loss (dppo_mask_low/high), SkyRL "
               "policy_loss_type=dppo (dppo_type binary_tv, or binary_kl: the Bernoulli KL(μ‖π) above δ where Δp "
               "moves with A)",
        weights=probability_masks.dppo,
        params={"delta_low": _threshold(0.2, 0, 1, "δ_low: a token whose probability fell by more gets no gradient "
                                                   "when A ≤ 0"),
                "delta_high": _threshold(0.2, 0, 1, "δ_high: a token whose probability rose by more gets no gradient "
                                                    "when A > 0"),
                "dppo_type": Param("binary_tv", help="binary_tv bounds Δp; binary_kl bounds the Bernoulli KL(μ‖π)",
                                   choices=probability_masks.DPPO_TYPES)},
        colour="#228833",
    ),
    Estimator(
        id="kpop",
        label="KPop token rejection",
        latex=r"c_t = \mathbf 1[\max(\mathrm{KL_B}(\pi_t\|\mu_t), \mathrm{KL_B}(\mu_t\|\pi_t))\le\delta]",
        source="KPop: the Bernoulli KL of the sampled token's probability, both ways (verl PR #6800 rollout_rs="
               "binary_kl, after AReaL's KPop)",
        weights=probability_masks.kpop,
        params={"delta": _threshold(0.01, 1e-6, 10, "bound δ on the larger Bernoulli KL")},
        colour="#AA3377",
    ),
    Estimator(
        id="tv_mask",
        label="TV-divergence mask (VACO)",
        latex=r"c_t = w_t\,\big(1-\mathbf 1\big[\tfrac1T\sum_s|\rho_s-1|\notin[\mathrm{lo},\mathrm{hi}]\big]\,"
              r"\mathbf 1[\mathrm{sign}(\log\rho_t)\,A>0]\big)",
        source="open-instruct rho_mask_tv_divergence (VACO): in a sequence whose mean |ρ_t − 1| is out of bounds, the "
               "tokens whose update would widen the gap get no gradient; times its weight w",
        weights=chained(probability_masks.tv_mask),
        params={"lo": _threshold(0, 0, 1, "lower bound on the mean |ρ_t − 1| (0: none)"),
                "hi": _threshold(0.5, 0, 100, "upper bound on the mean |ρ_t − 1|"),
                "weight": Param("naive", help="the exact estimator whose weight the mask multiplies")},
        colour="#CCBB44",
    ),
    Estimator(
        id="k2_penalty",
        label="squared log-ratio penalty",
        latex=r"\hat g = \sum_t \big(w_t\,(r(y)-b) - 2\tau\log\rho_t\big)\,s_t",
        source="prime-rl kl_tau·(log π − log μ)² added to the loss (Kimi-K2.5's KL loss): a gradient term that does "
               "not depend on A; times its weight w",
        weights=chained(loss_shapes.squared_log_ratio_penalty),
        params={"tau": _threshold(1e-3, 0, 10, "τ (prime-rl kl_tau)"),
                "weight": Param("naive", help="the exact estimator whose weight multiplies the advantage")},
        colour="#004488",
    ),
    Estimator(
        id="topr",
        label="TOPR (tapered off-policy)",
        latex=r"c_t = w_+\ (A>0),\quad w_-\min(\rho_t, 1)\ (A\le0)",
        source="TOPR (Le Roux et al. 2025); ROLL pg_variant=topr (topr_positive_weight, topr_negative_weight)",
        weights=loss_shapes.topr,
        params={"positive_weight": _threshold(1, 0, 10, "w₊: the weight of a sequence with A > 0"),
                "negative_weight": _threshold(1, 0, 10, "w₋: the weight of a sequence with A ≤ 0, times min(ρ_t, 1)")},
        colour="#DDAA33",
    ),
    Estimator(
        id="vespo",
        label="VESPO gamma weight",
        latex=r"c_t = e^{\lambda} w^{k} e^{-\lambda w},\ w = \prod_t r_t,\ (k, \lambda) = (k_+, \lambda_+)\ "
              r"(A\ge0),\ (k_-, \lambda_-)\ (A<0)",
        source="TRL loss_type=vespo (vespo_k_pos, vespo_lambda_pos, vespo_k_neg, vespo_lambda_neg): a smooth sequence "
               "weight of w, the product of TRL's token_truncate or token_mask ratios r_t",
        weights=loss_shapes.vespo,
        params={"k_pos": _threshold(2, 0, 20, "k for A ≥ 0 (power of w)"),
                "lambda_pos": _threshold(3, 1e-4, 20, "λ for A ≥ 0 (decay in w)"),
                "k_neg": _threshold(3, 0, 20, "k for A < 0 (power of w)"),
                "lambda_neg": _threshold(2, 1e-4, 20, "λ for A < 0 (decay in w)"),
                "mode": Param("token_truncate", help="r_t = clamp(ρ_t, clip_min, clip_max) or ρ_t masked outside them",
                              choices=loss_shapes.VESPO_MODES),
                "clip_min": _threshold(0, 0, 1000, "TRL vllm_importance_sampling_clip_min (0: none)"),
                "clip_max": _threshold(3, 0.01, 1000, "TRL vllm_importance_sampling_clip_max")},
        colour="#EE6677",
    ),
    Estimator(
        id="gspo_clip",
        label="GSPO-clip against the sampler",
        latex=r"c_t = \rho_{geo}\,\mathbf 1[\rho_{geo}\le 1+\varepsilon_{high}]\ (A\ge0),\quad "
              r"\rho_{geo}\,\mathbf 1[1-\varepsilon_{low}\le\rho_{geo}\le C_{dual}]\ (A<0)",
        source="PPO's clipped surrogate on the geometric sequence ratio ρ_geo against the sampler: OpenRLHF "
               "policy_loss_type=gspo with its vLLM IS correction (clip_eps_low/high, dual_clip)",
        weights=loss_shapes.gspo_clip,
        params={"eps_low": _threshold(0.2, 0, 1, "ε_low: ρ_geo below 1 − ε_low is clipped when A < 0"),
                "eps_high": _threshold(0.2, 0, 10, "ε_high: ρ_geo above 1 + ε_high is clipped when A ≥ 0"),
                "C_dual": _threshold(100, 1.01, 1000, "dual clip: ρ_geo above it is clipped when A < 0 (100: off)")},
        colour="#117799",
    ),
    Estimator(
        id="seq_snis",
        label="self-normalised sequence IS",
        latex=r"\hat g_N = \frac{\sum_i W_i A_i \sum_t s_{i,t}}{\sum_i W_i}",
        source="self-normalised importance sampling",
        batch_estimate=corrections.self_normalised_is,
        batch_weights=corrections.self_normalised_coefficients,
        colour="#88CCEE",
    ),
    Estimator(
        id="grpo",
        label="group-mean baseline (GRPO)",
        latex=r"\hat g_N = \tfrac1N\sum_i c_{i}\,(r_i-\bar r)\,\sum_t s_{i,t}",
        source="GRPO (Shao et al. 2024): advantage r_i minus the batch mean, times any weight above",
        batch_estimate=corrections.group_mean_baseline,
        batch_weights=weight_coefficients,
        params={"weight": WEIGHT_CHOICE},
        colour="#997700",
    ),
    Estimator(
        id="rloo",
        label="leave-one-out baseline (RLOO)",
        latex=r"\hat g_N = \tfrac1N\sum_i c_{i}\,\big(r_i-\tfrac{1}{N-1}\sum_{j\ne i}r_j\big)\sum_t s_{i,t}",
        source="RLOO (Ahmadian et al. 2024): advantage r_i minus the mean of the others",
        batch_estimate=corrections.leave_one_out_baseline,
        batch_weights=weight_coefficients,
        params={"weight": WEIGHT_CHOICE},
        colour="#EE99AA",
        undefined="at N = 1: its baseline is the mean of the other N − 1 rewards, and there are none",
    ),
    Estimator(
        id="tis_bn",
        label="batch-normalised truncated IS",
        latex=r"\hat g_N = \tfrac1N\sum_i \frac{w_{i,t}}{\bar w}\,A_i\,s_{i,t},\ w = \min(\rho_t, C)\ "
              r"\text{or}\ \min(W, C)",
        source="verl rollout_is_batch_normalize: truncated IS weights divided by their "
               "batch mean (over tokens or sequences)",
        batch_estimate=families.batch_normalised_tis,
        batch_weights=families.batch_normalised_coefficients,
        params={"level": Param("token", help="normalise token weights min(ρ_t, C) or sequence weights min(W, C)",
                               choices=families.IS_LEVELS), "C": C_TOKEN},
        colour="#44BB99",
    ),
    Estimator(
        id="m2po",
        label="M2PO second-moment mask",
        latex=r"c_t = w_t\,\mathbf 1[t\ \text{kept}],\ \text{the fewest tokens of largest }(\log\rho_t)^2"
              r"\text{ masked so that the batch's mean is below } \tau",
        source="AReaL M2PO (m2_threshold): masks the batch's tokens of largest (log ρ)² until the mean of the rest is "
               "below the threshold; times its weight w (AReaL's decoupled loss: ρ_t)",
        batch_estimate=second_moment.m2po_estimate,
        batch_weights=m2po_coefficients,
        params={"m2_threshold": _threshold(0.04, 1e-6, 100, "threshold τ on the batch's mean (log ρ)²"),
                "weight": Param("tok_is", help="the exact estimator whose weight the kept tokens carry")},
        colour="#AAAA00",
    ),
]

ESTIMATORS = {estimator.id: estimator for estimator in _ENTRIES}
ESTIMATORS |= {row["id"]: _preset_estimator(preset, row) for preset, row in
               presets.registry_rows({id: estimator.colour for id, estimator in ESTIMATORS.items()})}
EXACT_IDS = tuple(id for id, estimator in ESTIMATORS.items() if estimator.exact)
PRESET_IDS = tuple(id for id, estimator in ESTIMATORS.items() if estimator.framework)
BASELINES = ("none", "logged", "true")


def resolve_params(estimator_id: str, overrides: Mapping[str, object] | None = None) -> dict[str, Any]:
    """The estimator's parameters: defaults updated by ``overrides``; ValueError names what is wrong."""
    if estimator_id not in ESTIMATORS:
        raise ValueError(f"unknown estimator {quoted(estimator_id)}; known: {', '.join(ESTIMATORS)}")
    spec = ESTIMATORS[estimator_id].params
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(spec)
    if unknown:
        known = ", ".join(spec) or "none"
        raise ValueError(f"{estimator_id} has no parameter {quoted(sorted(unknown)[0])} (its parameters: {known})")
    params = {name: param.default for name, param in spec.items()} | overrides
    for name, value in params.items():
        params[name] = _checked(estimator_id, name, spec[name], value)
    for low, high in BOUND_PAIRS:
        if low in params and high in params and params[low] is not None and params[low] > params[high]:
            raise ValueError(f"{estimator_id}: {low} = {params[low]:g} is above {high} = {params[high]:g}")
    if estimator_id in presets.BY_ID:
        try:
            presets.check(presets.BY_ID[estimator_id], params)
        except ValueError as error:
            raise ValueError(f"{estimator_id}: {error}") from None
    return params


def checked_param(estimator_id, name, value):
    """One parameter's value checked against its own range or choices, not against its pair (a link may move both
    ends of a band past each other's default); ValueError names what is wrong."""
    return _checked(estimator_id, name, ESTIMATORS[estimator_id].params[name], value)


def _checked(estimator_id, name, param, value):
    if param.choices is not None:
        if value not in param.choices:
            raise ValueError(f"{estimator_id}.{name} must be one of {', '.join(param.choices)}, got {quoted(value)}")
        return value
    if param.parse is not None:
        try:
            return param.parse(value)
        except ValueError as error:
            raise ValueError(f"{estimator_id}.{name} = {quoted(value)}: {error}") from None
    if isinstance(param.default, str):
        if value not in EXACT_IDS or ESTIMATORS[value].on_policy:
            raise ValueError(f"{estimator_id}.{name} must name an exact estimator on sampler rollouts, "
                             f"got {quoted(value)}")
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{estimator_id}.{name} must be a number, got {quoted(value)}") from None
    if not param.low <= number <= param.high:
        raise ValueError(f"{estimator_id}.{name} = {number:g} is outside [{param.low:g}, {param.high:g}]")
    return number
