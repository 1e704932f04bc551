"""Lessons about the estimators on one toy: what W looks like, which corrections stay biased, how the variance
and the best threshold behave, and what a rollout log's reward means.
"""

import numpy as np

from toylab.analysis.diagnostics import diagnostics, sequence_chi2
from toylab.analysis.length import length_toy
from toylab.analysis.sweeps import best_thresholds, threshold_sweep
from toylab.engine.moments import baseline_value, exact_moments
from toylab.engine.recursion import exact_by_recursion, objective_by_recursion
from toylab.lessons.lesson import UNBIASED, Evidence, Lesson, Mark, controls, toy_of
from toylab.lessons.population import around
from toylab.state.query import ESTIMATORS_TAB, LENGTH_TAB, RATIOS_TAB, THRESHOLD_SWEEP_TAB, TRAINING_TAB
from toylab.training.loop import TrainingConfig, train


def weight_mostly_below_one(settings):
    """E_μ[W] = 1 and E_μ[log W] = −KL(μ‖π) < 0, so P_μ(W < 1) > ½."""
    toy = toy_of(settings)
    log_W = toy.log_W
    W = np.exp(log_W)
    numbers = {"E_μ[W]": float(toy.p_sampler @ W), "E_μ[log W]": float(toy.p_sampler @ log_W),
               "−KL(μ‖π)": -diagnostics(toy).kl_mu_pi, "P_μ(W < 1)": float(toy.p_sampler @ (W < 1)),
               "largest W": float(W.max())}
    holds = abs(numbers["E_μ[W]"] - 1) < 1e-9 and abs(numbers["E_μ[log W]"] - numbers["−KL(μ‖π)"]) < 1e-9 \
        and numbers["P_μ(W < 1)"] > 0.5
    marks = (Mark("sequence_W", f"W = 1 (log W = 0): P_μ(W < 1) = {numbers['P_μ(W < 1)']:.2f} of the sequences lie "
                                "to its left, down-weighted", 0.0),
             Mark("sequence_W", f"E_μ[log W] = −KL(μ‖π) = {numbers['E_μ[log W]']:.3f}", numbers["E_μ[log W]"]),
             Mark("sequence_W", f"the largest W = {numbers['largest W']:.3g}, of a sequence with μ-probability "
                                f"{float(toy.p_sampler[np.argmax(log_W)]):.2g}", float(log_W.max())))
    return Evidence(numbers, holds, marks)


def token_corrections_stay_biased(settings):
    """tok_is and tok_tis are biased at T ≥ 2 although positions are independent; seq_is is not."""
    toy = toy_of(settings)
    moments = {id: exact_moments(toy, id, settings.params(id), settings.baseline) for id in ("tok_is", "tok_tis", "seq_is")}
    bias = {id: m.rel_bias for id, m in moments.items()}
    numbers = {f"rel bias {id}": value for id, value in bias.items()}
    marks = tuple(Mark("bias_std", f"{id}: relative bias {bias[id]:.3f}" + (" — unbiased" if bias[id] < UNBIASED else ""),
                       bias[id], m.rel_std(settings.N)) for id, m in moments.items())
    return Evidence(numbers, bias["tok_is"] > 0.05 and bias["tok_tis"] > 0.05 and bias["seq_is"] < UNBIASED, marks)


LENGTH_EVIDENCE = (16, 32, 64)


def sequence_is_variance_explodes(settings):
    """At T = 16, 32, 64 on the Sequence length tab's toys (``length_toy``, exact by recursion): seq_is unbiased,
    and var(seq_is)/var(on_policy) growing with T, at T = 64 like (1 + χ²_seq)^κ with κ = log ratio / log(1 + χ²_seq)
    between ½ and 3/2: exponentially in T."""
    numbers, unbiased, ratios, marks = {}, True, [], []
    for T in LENGTH_EVIDENCE:
        toy = length_toy(T, settings.V, settings.mismatch, settings.seed)
        objective = objective_by_recursion(toy)
        seq_is, on_policy = (exact_by_recursion(toy, id, {}, settings.baseline, objective)
                             for id in ("seq_is", "on_policy"))
        ratio, growth = seq_is.var / on_policy.var, 1 + sequence_chi2(toy)
        numbers |= {f"T={T}: rel bias seq_is": seq_is.rel_bias, f"T={T}: var ratio seq_is/on_policy": ratio,
                    f"T={T}: 1 + χ²_seq": growth}
        marks.append(Mark("length_std_ratio", f"T = {T}: seq_is's std is {np.sqrt(ratio):.3g} × on-policy's "
                                              f"(1 + χ²_seq = {growth:.3g})", T, float(np.sqrt(ratio))))
        unbiased &= seq_is.rel_bias < UNBIASED
        ratios.append(ratio)
    kappa = np.log(ratios[-1]) / np.log(numbers[f"T={LENGTH_EVIDENCE[-1]}: 1 + χ²_seq"])
    numbers[f"κ at T={LENGTH_EVIDENCE[-1]}"] = float(kappa)
    holds = unbiased and all(np.diff(ratios) > 0) and 0.5 < kappa < 1.5
    return Evidence(numbers, bool(holds), tuple(marks))


SMALL_N, LARGE_N = 4, 4096


def best_threshold_depends_on_N(settings):
    """seq_tis's sweep: the lowest C has more bias and less spread than the highest, and the C with the lowest
    RMSE at N = 4 is smaller than at N = 4096."""
    toy = toy_of(settings)
    selection = {"seq_tis": settings.params("seq_tis")}
    small, large = (threshold_sweep(toy, selection, settings.baseline, N) for N in (SMALL_N, LARGE_N))
    lowest, highest = small[0], small[-1]
    best_small, best_large = (best_thresholds(rows)["seq_tis"]["threshold"] for rows in (small, large))
    numbers = {f"best C at N={SMALL_N}": best_small, f"best C at N={LARGE_N}": best_large,
               f"rel bias at C={lowest['threshold']:g}": lowest["rel_bias"],
               f"rel bias at C={highest['threshold']:g}": highest["rel_bias"],
               f"rel std at N={SMALL_N}, C={lowest['threshold']:g}": lowest["rel_std"],
               f"rel std at N={SMALL_N}, C={highest['threshold']:g}": highest["rel_std"]}
    holds = best_small < best_large and lowest["rel_bias"] > highest["rel_bias"] \
        and lowest["rel_std"] < highest["rel_std"]
    at_small = best_thresholds(small)["seq_tis"]
    edge = f" (the {at_small['edge']} edge of the range swept)" if at_small["edge"] else ""
    marks = (Mark("threshold_rmse", f"seq_tis at N = {SMALL_N}: the lowest RMSE is at C = {best_small:.3g}{edge}",
                  best_small, at_small["rel_rmse"]),
             Mark("threshold_rmse", f"at N = {LARGE_N:,} it moves up to C = {best_large:.3g}", best_large,
                  best_thresholds(large)["seq_tis"]["rel_rmse"]))
    return Evidence(numbers, holds, marks)


def baseline_shifts_uncorrected_means(settings):
    """mean(b = 0) − mean(b) = b·E_μ[Σ_t c_t s_t]: for naive exactly b·(μ_t − π_t) per row, nonzero under
    mismatch; also for tok_tis (clipped ρ); zero for tok_is and seq_is, since E_μ[ρ_t s_t] = E_π[s_t] = 0."""
    toy = toy_of(settings)
    b = baseline_value(toy, settings.baseline)
    shift = {id: exact_moments(toy, id, settings.params(id), "none").mean
             - exact_moments(toy, id, settings.params(id), settings.baseline).mean
             for id in ("naive", "tok_tis", "tok_is", "seq_is")}
    numbers = {"b": b} | {f"‖mean shift‖ {id}": float(np.linalg.norm(value)) for id, value in shift.items()}
    naive_identity = float(np.abs(shift["naive"] - b * (toy.mu - toy.pi)).max())
    numbers["max |naive shift − b(μ − π)|"] = naive_identity
    scale = float(np.linalg.norm(shift["naive"]))
    holds = naive_identity < 1e-12 and scale > 1e-3 and numbers["‖mean shift‖ tok_tis"] > 1e-3 * scale \
        and max(numbers["‖mean shift‖ tok_is"], numbers["‖mean shift‖ seq_is"]) < 1e-12
    shown = {id: exact_moments(toy, id, settings.params(id), settings.baseline) for id in ("naive", "tok_is")}
    marks = tuple(Mark("bias_std", f"{id}: b = {b:.3f} moves its mean by {numbers[f'‖mean shift‖ {id}']:.3g}"
                       if numbers[f"‖mean shift‖ {id}"] > 1e-12 else f"{id}: b does not move its mean",
                       m.rel_bias, m.rel_std(settings.N)) for id, m in shown.items())
    return Evidence(numbers, holds, marks)


def logged_reward_is_not_J(settings):
    """E_μ[r] (what a rollout log averages) differs from J = E_π[r] under mismatch; marked where naive's training
    log (the Training tab's default run) is furthest from J."""
    toy = toy_of(settings)
    numbers = {"J = E_π[r]": toy.J, "E_μ[r] (logged)": toy.logged_reward}
    run = train(toy, {"naive": settings.params("naive")}, settings.baseline, TrainingConfig())["naive"]
    step = int(np.argmax(np.abs(run.logged_reward - run.J)))
    marks = (Mark("training_logged", f"step {step}: naive's log shows E_μ[r] = {run.logged_reward[step]:.3f}", step,
                  float(run.logged_reward[step])),
             Mark("training_logged", f"while the trainer's objective is J = E_π[r] = {run.J[step]:.3f}", step,
                  float(run.J[step])))
    return Evidence(numbers, abs(toy.J - toy.logged_reward) > 0.1 * toy.J, marks)


SEVERAL = 4


def two_sequence_ratios(settings):
    """W and ρ_geo = W^(1/T) differ: E_μ[W] = 1 but E_μ[ρ_geo] < 1 (Jensen), log W spreads T times wider, and a cap
    at 2 binds W more than SEVERAL times as often as ρ_geo."""
    toy = toy_of(settings)
    p, log_W = toy.p_sampler, toy.log_W
    spread = float(np.sqrt(p @ (log_W - p @ log_W) ** 2))
    numbers = {"E_μ[W]": float(p @ np.exp(log_W)), "E_μ[ρ_geo]": float(p @ np.exp(log_W / toy.T)),
               "P_μ(W > 2)": float(p @ (log_W > np.log(2))), "P_μ(ρ_geo > 2)": float(p @ (log_W / toy.T > np.log(2))),
               "sd of log W": spread, "sd of log ρ_geo": spread / toy.T}
    holds = abs(numbers["E_μ[W]"] - 1) < 1e-9 and numbers["E_μ[ρ_geo]"] < 1 - 1e-3 \
        and numbers["P_μ(W > 2)"] > SEVERAL * numbers["P_μ(ρ_geo > 2)"]
    marks = (Mark("sequence_W", f"W = 2: P_μ(W > 2) = {numbers['P_μ(W > 2)']:.3f}", float(np.log(2))),
             Mark("sequence_geo", f"ρ_geo = 2: P_μ(ρ_geo > 2) = {numbers['P_μ(ρ_geo > 2)']:.3g}", float(np.log(2))))
    return Evidence(numbers, holds, marks)


LESSONS = (
    Lesson("weight_below_one",
           "The sequence weight W = π(y)/μ(y) averages exactly 1 over the sampler, yet most sequences get "
           "W < 1: E_μ[log W] = −KL(μ‖π) < 0, and a few rare sequences carry huge weights.",
           controls(("seq_is", "seq_tis")), RATIOS_TAB, weight_mostly_below_one,
           claim="W = π(y)/μ(y) averages exactly 1, yet most sequences lie left of W = 1 (1): E_μ[log W] = −KL < 0 (2), "
                 "and a rare few carry huge weights (3).",
           predicate="E_μ[W] = 1 and E_μ[log W] = −KL(μ‖π) (within 1e-9), and P_μ(W < 1) > ½",
           population=around(1.0, ("T", 4))),
    Lesson("token_bias",
           "Token-level corrections (tok_is, tok_tis) stay biased even though the positions are independent: "
           "the reward couples the positions, so reweighting each token by its own ρ_t (rather than the "
           "sequence by W) misses the other tokens' mismatch.",
           controls(("naive", "tok_is", "tok_tis", "seq_is")), ESTIMATORS_TAB, token_corrections_stay_biased,
           claim="Token-level corrections stay biased, tok_is (1) and tok_tis (2), though the positions are "
                 "independent; sequence IS (3) is unbiased.",
           predicate="tok_is and tok_tis biased by over 5 % of ‖∇J‖, seq_is unbiased (below 1e-9)",
           population=around(1.0, ("T", 4))),
    Lesson("seq_is_variance",
           "Sequence-level IS is unbiased at every length, but its variance grows like "
           "(1 + χ²_t)^T = 1 + χ²_seq: exponentially in T.",
           controls(("on_policy", "tok_is", "tok_tis", "seq_is"), mismatch=0.5), LENGTH_TAB,
           sequence_is_variance_explodes,
           claim="Sequence IS is unbiased at every length, but its spread grows exponentially in T: against "
                 "on-policy's, at T = 16 (1), 32 (2) and 64 (3).",
           predicate="at T = 16, 32, 64: seq_is unbiased, var(seq_is)/var(on_policy) rising with T and at T = 64 "
                     "between (1 + χ²_seq)^½ and (1 + χ²_seq)^1.5",
           population=around(0.5, ("V", 3))),
    Lesson("threshold_depends_on_N",
           "Truncation and masking trade bias for variance: a lower threshold adds bias and removes spread. "
           "So the best threshold depends on the batch size N: small batches want aggressive truncation, large "
           "ones a much higher threshold.",
           controls(("seq_tis",), N=SMALL_N), THRESHOLD_SWEEP_TAB, best_threshold_depends_on_N,
           view={"threshold_panel": "rmse", "compare_N": LARGE_N},
           claim=f"The best threshold depends on the batch size: at seed 0, seq_tis's lowest RMSE is at C = 1 for "
                 f"N = {SMALL_N} (1), at C = 26.6 for N = {LARGE_N:,} (2).",
           predicate="seq_tis's best C at N = 4 below its best at N = 4,096; the lowest C more biased and less spread "
                     "than the highest",
           population=around(1.0, ("T", 4))),
    Lesson("baseline_shift",
           "Under mismatch a baseline changes the mean of naive and truncated token-level estimators, because "
           "E_μ[s_t] = μ_t − π_t ≠ 0; it leaves tok_is and seq_is alone, whose weights make E[ρ_t s_t] = 0.",
           controls(("naive", "tok_is", "tok_tis", "seq_is"), baseline="logged"), ESTIMATORS_TAB,
           baseline_shifts_uncorrected_means, view={"compare_baseline": "none"},
           claim="A baseline moves the mean of naive (1) and tok_tis under mismatch, not of tok_is (2) or seq_is: "
                 "hollow, b = 0; filled, b = E_μ[r].",
           predicate="the baseline moves naive's mean by exactly b·(μ − π) ≠ 0 and tok_tis's too, not tok_is's or "
                     "seq_is's",
           population=around(1.0, ("T", 4))),
    Lesson("logged_reward",
           "The mean reward a rollout log shows is E_μ[r], the sampler's, not the objective J = E_π[r] the "
           "trainer climbs; under mismatch they differ, by over 10 % of J at most toys (at half the "
           "mismatch, at 26 of 30).",
           controls(("naive", "seq_is")), TRAINING_TAB, logged_reward_is_not_J,
           claim="A rollout log shows E_μ[r] (1), the sampler's mean reward, not J = E_π[r] (2), the objective the "
                 "trainer climbs.",
           predicate="|E_μ[r] − J| over 10 % of J",
           population=around(1.0, ("T", 4), stated={"half": 26})),
    Lesson("sequence_ratio_names",
           "\"Sequence ratio\" means W = ∏_t ρ_t in verl's and TRL's sequence modes but ρ_geo = W^(1/T) in "
           "GSPO: the same words, very different numbers: E_μ[W] = 1 but E_μ[ρ_geo] < 1, and W exceeds 2 at least "
           f"{SEVERAL} times as often as ρ_geo.",
           controls(("seq_tis", "geo_rs", "gspo_geo")), RATIOS_TAB, two_sequence_ratios,
           claim="\"Sequence ratio\" is W in verl and TRL but ρ_geo = W^(1/T) in GSPO: P(W > 2) (1) is several times "
                 "P(ρ_geo > 2) (2).",
           predicate="E_μ[W] = 1, E_μ[ρ_geo] < 0.999, P_μ(W > 2) over 4 × P_μ(ρ_geo > 2)",
           population=around(1.0, ("T", 4))),
)
