"""Lessons about the fourth policy, the reference π_ref: what k3 in the loss follows, which ratio on the KL term the
engine needs, what low_var_kl's clamp cuts, and how β trades J for KL along a run.

Each check evaluates its lesson's qualitative claim on one setting (``Evidence.holds``); its numbers are that
setting's, quoted in the text as an example at seed 0. Each lesson claims it for its ``population`` (30 seeds at the
lesson's setting and at its neighbours), tallied in shares.json.
"""

from dataclasses import replace

import numpy as np

from toylab.analysis.kl_view import kl_table
from toylab.catalogue.kl import KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.engine.kl_moments import Tables, kl_moments, loss_derivative
from toylab.engine.reference import Reference
from toylab.engine.toy import make_toy
from toylab.lessons.lesson import Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.population import AT_SETTING, Group, Population, around
from toylab.state.query import ESTIMATORS_TAB, TRAINING_TAB
from toylab.training.loop import TrainingConfig, train

EXACT = 1e-12                       # an identity: equal to rounding, relative to ‖∇KL‖
NEAR, FAR = 1.0, 4.0                # π_ref's distances from θ₀
K3, K3_FLOWING = KLPenalty(1.0, "k3"), KLPenalty(1.0, "k3", ratio="current")


def _tables(settings, distance, on_policy=False, mismatch=None):
    toy = toy_of(settings) if mismatch is None else make_toy(*replace(settings, mismatch=mismatch).toy_key)
    log_ref = Reference(distance).log_probabilities(toy.theta, toy.seed, toy.sampler)
    return Tables.of(toy, log_ref, on_policy)


def view_marks(settings, distance, marked):
    """Marks at the KL view's points (its chart's exact (rel bias, rel std at N)) of ``marked``: ((setting, text), …)."""
    rows = {row["setting"]: row for row in kl_table(toy_of(settings), [name for name, _ in marked],
                                                    Reference(distance), settings.N)}
    return tuple(Mark("kl_bias_std", text, rows[name]["rel_bias"], rows[name]["rel_std"]) for name, text in marked)


def k3_follows_the_reverse_kl(settings):
    """On policy, at π_ref a distance NEAR away: k3 in the loss has mean ∇KL(π_ref‖π) exactly, a relative error
    above 0.1 against ∇KL(π‖π_ref), and k3 with a ratio whose gradient flows (π/sg(π)) has mean ∇KL(π‖π_ref)."""
    tables = _tables(settings, NEAR, on_policy=True)
    plain, flowing = kl_moments(K3, tables), kl_moments(K3_FLOWING, tables)
    numbers = {"k3: rel bias against ∇KL(π‖π_ref)": plain.rel_bias(),
               "k3: cosine to ∇KL(π‖π_ref)": plain.cosine(),
               "k3: rel error against ∇KL(π_ref‖π)": plain.rel_bias("reverse"),
               "k3 × π/sg(π): rel bias against ∇KL(π‖π_ref)": flowing.rel_bias()}
    holds = numbers["k3: rel error against ∇KL(π_ref‖π)"] < EXACT and numbers["k3: rel bias against ∇KL(π‖π_ref)"] \
        > 0.1 and numbers["k3 × π/sg(π): rel bias against ∇KL(π‖π_ref)"] < EXACT
    marks = view_marks(settings, NEAR, (("k3.loss", f"k3 in the loss: rel bias {plain.rel_bias():.2f}, on "
                                                    "∇KL(π_ref‖π) exactly"),
                                        ("k3.loss.current", "k3 × π/sg(π): on ∇KL(π‖π_ref)")))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds, marks)


ENGINE_RATIO = KLPenalty(1.0, "k3", ratio="engine")


def kl_ratio_needs_the_engine(settings):
    """On the engine's tokens at π_ref NEAR: TRL's use_bias_correction_kl (π/π_old, π_old the recomputed trainer) is
    biased (rel bias above 0.05) and more so at twice the mismatch; k3 × π/μ is exact at both. (NeMo-RL's π/μ, with
    its clamps, is among the numbers: its value clamp after the ratio can bind under mismatch.)"""
    numbers = {}
    for label, mismatch in (("", settings.mismatch), (" at twice the mismatch", 2 * settings.mismatch)):
        tables = _tables(settings, NEAR, mismatch=mismatch)
        numbers[f"TRL's π/π_old: rel bias{label}"] = kl_moments(
            KL_PRESETS["trl:grpo_bias_correction"].with_beta(1.0), tables).rel_bias()
        numbers[f"k3 × π/μ: rel bias{label}"] = kl_moments(ENGINE_RATIO, tables).rel_bias()
        numbers[f"NeMo-RL's π/μ, clamped: rel bias{label}"] = kl_moments(
            KL_PRESETS["nemo_rl:on_policy_kl_approximation"].with_beta(1.0), tables).rel_bias()
    trl = numbers["TRL's π/π_old: rel bias"]
    holds = 0.05 < trl < numbers["TRL's π/π_old: rel bias at twice the mismatch"] \
        and max(numbers["k3 × π/μ: rel bias"], numbers["k3 × π/μ: rel bias at twice the mismatch"]) < EXACT
    marks = view_marks(settings, NEAR, (("trl:grpo_bias_correction", f"TRL's π/π_old: rel bias {trl:.2f} on the "
                                                                     "engine's tokens"),
                                        ("k3.loss.engine", "k3 × π/μ: unbiased")))
    return Evidence({name: float(value) for name, value in numbers.items()}, holds, marks)


LOW_VAR_KL = KL_PRESETS["verl:kl_loss"].with_beta(1.0)


def clamp_binds(tables):
    """Tokens where low_var_kl's value clamp (k3 ≤ 10) or its ±20 log-ratio clamp holds the gradient."""
    x = np.where(tables.kept, tables.log_pi - tables.log_ref, 0.0)
    with np.errstate(over="ignore"):
        value = np.expm1(-np.clip(x, -20, 20)) + np.clip(x, -20, 20)
    return tables.kept & ((value > 10) | (np.abs(x) > 20))


def low_var_kl_clamp(settings):
    """The claim where the clamp binds at π_ref FAR (elsewhere it does not apply), on the engine's tokens: there
    low_var_kl's mean gradient is unclamped k3's less exactly the clamped tokens' terms (within EXACT), and at π_ref
    NEAR the clamp binds on no token and leaves the mean gradient as k3's (within EXACT)."""
    numbers = {}
    for label, distance in (("near", NEAR), ("far", FAR)):
        tables = _tables(settings, distance)
        binds = clamp_binds(tables)
        clamped, plain = kl_moments(LOW_VAR_KL, tables), kl_moments(K3, tables)
        cut = np.where(binds, loss_derivative(K3, tables), 0.0)
        m = tables.mu * cut
        removed = (m - tables.pi * m.sum(axis=-1, keepdims=True)) * tables.scale
        numbers[f"{label}: tokens clamped"] = int(binds.sum())
        numbers[f"{label}: change of the mean gradient, relative"] = \
            float(np.linalg.norm(clamped.mean - plain.mean) / np.linalg.norm(plain.mean))
        numbers[f"{label}: off the clamped tokens' terms, relative"] = \
            float(np.linalg.norm(clamped.mean - (plain.mean - removed)) / np.linalg.norm(plain.mean))
    holds = None if numbers["far: tokens clamped"] == 0 else numbers["near: tokens clamped"] == 0 \
        and numbers["near: change of the mean gradient, relative"] < EXACT \
        and numbers["far: off the clamped tokens' terms, relative"] < EXACT
    clamped_mark, plain_mark = view_marks(settings, FAR, (("verl:kl_loss", "verl's low_var_kl, clamped"),
                                                          ("k3.loss", "k3 unclamped: its relative bias")))
    return Evidence(numbers, holds, (clamped_mark, replace(plain_mark, y=None)))   # the two points nearly meet: k3's
    #                                                                              as a rule at its bias


BETAS = (0.0, 0.1, 0.3, 1.0)
TRADE = TrainingConfig(steps=50, lr=1.0, optimizer="sgd", mode="expected")
SHOWN_BETA = 0.3


def beta_trades_j_for_kl(settings):
    """After TRADE's steps, for on_policy with the whole KL (full: the exact gradient of J − β·KL(π‖π_ref)) and for
    tok_tis with k1 in the reward: the final J and the final KL(π‖π_ref) both fall as β grows through BETAS."""
    toy = toy_of(settings)
    finals = {}
    for estimator, setting in (("on_policy", "full"), ("tok_tis", "k1")):
        for beta in BETAS:
            penalty = KLPenalty(beta, setting, "loss" if setting == "full" else "reward")
            run = train(toy, {estimator: {}}, settings.baseline, replace(TRADE, kl=penalty))[estimator]
            finals[estimator, beta] = (float(run.J[-1]), float(run.kl_ref[-1]))
    falls = all(np.all(np.diff([finals[estimator, beta][part] for beta in BETAS]) < 0)
                for estimator in ("on_policy", "tok_tis") for part in (0, 1))
    numbers = {f"{estimator}, β = {beta:g}: final {name}": finals[estimator, beta][part]
               for estimator in ("on_policy", "tok_tis") for beta in (0.0, SHOWN_BETA, 1.0)
               for part, name in ((0, "J"), (1, "KL(π‖π_ref)"))}
    J, kl = finals["on_policy", SHOWN_BETA]
    marks = (Mark("training_J", f"β = {SHOWN_BETA:g}: on_policy ends at J = {J:.3f} (at β = 0: "
                                f"{finals['on_policy', 0.0][0]:.3f})", TRADE.steps, J),
             Mark("training_kl_ref", f"… and KL(π‖π_ref) = {kl:.3f} (at β = 0: {finals['on_policy', 0.0][1]:.3f})",
                  TRADE.steps, kl))
    return Evidence(numbers, falls, marks)


LESSONS = (
    Lesson("k3_follows_the_reverse_kl",
           "On policy, k3 in the loss (GRPO's penalty, TRL's and verl's default) does not follow the gradient of the KL "
           "it estimates: its mean gradient is exactly ∇KL(π_ref‖π), the other direction, 0.45 away from ∇KL(π‖π_ref) "
           "in relative error at seed 0, for example, with π_ref at distance 1 (above 0.1 at 119 of the 120 toys of "
           "its population). A ratio whose gradient "
           "flows, 1 in value — NeMo-RL's exp(log π − sg(log π)), TRL's use_bias_correction_kl on policy — makes it "
           "∇KL(π‖π_ref) exactly.",
           controls(("on_policy", "naive"), mismatch=0.0), ESTIMATORS_TAB, k3_follows_the_reverse_kl,
           {"kl_view": True, "kl_distance": NEAR},
           claim="On policy k3 in the loss follows ∇KL(π_ref‖π), not ∇KL(π‖π_ref) (1); a ratio with its gradient, "
                 "1 in value, fixes it (2).",
           predicate="on policy at π_ref distance 1: k3's mean gradient is ∇KL(π_ref‖π) within 1e-12 and over 0.1 "
                     "off ∇KL(π‖π_ref) (relative); k3 × π/sg(π)'s is ∇KL(π‖π_ref) within 1e-12",
           population=Population((AT_SETTING, Group("at T = 4", (("T", 4),)), Group("at V = 3", (("V", 3),)),
                                  Group("at T = 8, V = 2", (("T", 8), ("V", 2)))))),
    Lesson("kl_ratio_needs_the_engine",
           "TRL's use_bias_correction_kl multiplies k3 by π_θ/π_old, but its π_old is the trainer's recomputation, "
           "not the engine's μ: on the engine's tokens the KL gradient keeps a bias that grows with the mismatch "
           "(at seed 0, for example, 0.42 at mismatch 0.3 and 0.80 at 0.6), while dividing by μ (NeMo-RL's "
           "use_on_policy_kl_approximation, until its value clamp after the ratio binds) is exact at any mismatch.",
           controls(("on_policy", "naive"), mismatch=0.3), ESTIMATORS_TAB, kl_ratio_needs_the_engine,
           {"kl_view": True, "kl_distance": NEAR, "kl_frameworks": True},
           claim="π/π_old on the KL term corrects staleness, not the engine: biased under μ (1), more at more "
                 "mismatch; π/μ is exact (2).",
           predicate="at π_ref distance 1, on μ's tokens: TRL's π/π_old k3 biased by over 0.05 (relative), more at "
                     "twice the mismatch; k3 × π/μ unbiased within 1e-12 at both",
           population=around(0.3, ("T", 4))),
    Lesson("low_var_kl_clamp",
           "verl's low_var_kl (SkyRL's and NeMo-RL's default too) clamps k3 at 10, so a token whose probability has "
           "fallen below π_ref/11 loses its pull back towards π_ref: with π_ref at distance 1 the clamp binds on no "
           "toy, at distance 4 on 17 of 30 (at T = 4 on 11 of 30), where the mean gradient loses exactly those tokens' "
           "terms (3 % of it at seed 0, for example).",
           controls(("on_policy", "naive"), mismatch=0.3), ESTIMATORS_TAB, low_var_kl_clamp,
           {"kl_view": True, "kl_distance": FAR, "kl_frameworks": True},
           claim="low_var_kl's clamp (1) cuts the pull k3 keeps (2) on tokens π has abandoned: never near π_ref, on "
                 "17 of 30 toys at distance 4.",
           predicate="where the clamp binds at π_ref distance 4: low_var_kl's mean gradient is k3's less exactly the "
                     "clamped tokens' terms (1e-12); at distance 1 no token clamped",
           population=around(0.3, ("T", 4))),
    Lesson("beta_trades_j_for_kl",
           "β trades reward for staying near the reference: on each of the 120 toys of its population, a larger β "
           "ends the run lower in both J and KL(π‖π_ref) — on_policy with the exact KL gradient ends 50 steps at J = "
           "0.34 and KL = 0.61 at β = 0.3 against 0.97 and 5.1 at β = 0 at seed 0, for example — and so does tok_tis "
           "with k1 in the reward.",
           controls(("on_policy", "naive", "tok_tis"), mismatch=0.3), TRAINING_TAB, beta_trades_j_for_kl,
           {"train_kl": "full.loss", "train_beta": SHOWN_BETA, "train_steps": TRADE.steps},
           claim="A larger β ends lower in J (1) and in KL(π‖π_ref) (2): on all 120 toys of its population.",
           predicate="after 50 steps, for on_policy with the exact KL gradient and tok_tis with k1 in the reward: "
                     "final J and KL(π‖π_ref) each strictly fall over β = 0, 0.1, 0.3, 1",
           population=around(0.3, ("T", 4))),
)
