"""Lessons about hidden variables: a mixture of experts' routing replay, and sequences spanning policy versions.

Each is a claim over its ``population`` of toys (30 seeds at the lesson's setting and at half and twice its
mismatch and at T = 4, tallied in shares.json), not about its one toy; where a part of it holds only sometimes the
text says how often, counted on that population. A check returns ``holds`` None where its claim does not apply (no
routing decision flips at any draw: the engine then routes as the trainer).
"""

from toylab.analysis.routing import routing_view
from toylab.analysis.versions import versions_view
from toylab.catalogue.updates import Update
from toylab.engine.experts import Experts
from toylab.engine.versions import Versions
from toylab.lessons.lesson import UNBIASED, Evidence, Lesson, controls, toy_of
from toylab.lessons.population import around
from toylab.state.query import EXPERTS_TAB
from toylab.training.history import history_of

BIASED = 1e-6                   # a relative bias above this is a bias, not rounding
MOVED = 0.05                    # one stamp moves the update's mean by more than this share of ‖∇J‖
STEP, LR = 20, 1.0              # θ_k of the version lessons: on_policy's 20th exact SGD step at lr 1 (the tab's default)


def replay_trades(settings):
    """Without replay sequence IS is unbiased for ∇J however the routings flip; with R3 it is biased: it follows the
    trainer under the engine's routing. Beside it, whether R3 lowers the KL the correction sees and seq_is's std, and
    whether its mean points nearer the served policy's gradient (parts that hold only sometimes)."""
    view = routing_view(toy_of(settings), Experts(), {"seq_is": {}}, settings.baseline, settings.N)
    rows = {row.replay: row for row in view.rows}
    off, r3 = rows["off"], rows["R3"]
    numbers = {"decisions flipped": float(view.flips.mean()), "tokens flipped": float(view.token_flips.mean()),
               "sequences flipped": view.sequence_flips, "KL off": view.kl["off"], "KL R3": view.kl["R3"],
               "seq_is rel bias off": off.rel_bias, "seq_is rel bias R3": r3.rel_bias,
               "seq_is rel std off": off.rel_std, "seq_is rel std R3": r3.rel_std,
               "seq_is cosine to ∇J_μ off": off.served_cosine, "seq_is cosine to ∇J_μ R3": r3.served_cosine}
    holds = None if view.sequence_flips == 0 else off.rel_bias < UNBIASED and r3.rel_bias > BIASED
    return Evidence(numbers, holds)


def sometimes_of_replay(settings):
    """The parts of the routing lesson that hold only sometimes, per toy: (KL falls, std falls, nearer ∇J_μ)."""
    numbers = replay_trades(settings).numbers
    return (numbers["KL R3"] < numbers["KL off"], numbers["seq_is rel std R3"] < numbers["seq_is rel std off"],
            numbers["seq_is cosine to ∇J_μ R3"] > numbers["seq_is cosine to ∇J_μ off"])


def stamps_mislead(settings):
    """With AReaL's log-linear π_prox (the decoupled loss, no rejection sampling: no behaviour weight) one stamp per
    sequence — the head's, or the tail's as before AReaL #1569 — moves the first update's mean more than MOVED·‖∇J‖ from
    the per-token truth; with the anchor recomputed no stamp is read, so none moves it (within UNBIASED)."""
    toy = toy_of(settings)
    history = history_of(toy, STEP, LR)
    found = {}
    for anchor in ("loglinear", "recompute"):
        view = versions_view(toy, Versions(switch="drawn"), 2, anchor, Update(), settings.selection(exact_only=True),
                             history, settings.baseline, settings.N)
        found[anchor] = {(row.stamp, row.masked): row.from_truth for row in view.rows if row.estimator == "naive"}
    loglinear, recompute = found["loglinear"], found["recompute"]
    numbers = {"loglinear: head stamp from the truth": loglinear[("head", False)],
               "loglinear: tail stamp from the truth": loglinear[("tail", False)],
               "recompute: head stamp from the truth": recompute[("head", False)],
               "recompute: tail stamp from the truth": recompute[("tail", False)]}
    holds = min(loglinear[("head", False)], loglinear[("tail", False)]) > MOVED \
        and max(recompute[("head", False)], recompute[("tail", False)]) < UNBIASED
    return Evidence(numbers, holds)


def mask_trades(settings):
    """Masking the stale prefix lowers sequence IS's std and raises its bias (the anchor recomputed): its tokens still
    set the reward but give no gradient."""
    toy = toy_of(settings)
    view = versions_view(toy, Versions(switch="drawn"), 2, "recompute", Update(), settings.selection(exact_only=True),
                         history_of(toy, STEP, LR), settings.baseline, settings.N)
    rows = {row.masked: row for row in view.rows if row.estimator == "seq_is" and row.stamp == "token"}
    numbers = {"seq_is rel bias kept": rows[False].rel_bias, "seq_is rel bias masked": rows[True].rel_bias,
               "seq_is rel std kept": rows[False].rel_std, "seq_is rel std masked": rows[True].rel_std}
    holds = rows[True].rel_std < rows[False].rel_std and rows[True].rel_bias > rows[False].rel_bias
    return Evidence(numbers, holds)


VERSION_VIEW = {"versions_switch": "drawn", "versions_lag": 2}

LESSONS = (
    Lesson("replay_trades_unbiasedness",
           "Routing replay takes the flips out of the ratio and puts them into the gradient: at the tab's default "
           "mixture (top-2 of 4 experts in 2 layers, a router error that flips about one decision in ten), sequence IS "
           "without replay is unbiased for ∇J however the routings flip, while with R3 — the engine's routing "
           "replayed — it follows the trainer under the engine's routing and is biased for ∇J, at every toy of its "
           "population where some decision flips. What R3 buys only sometimes: a smaller KL(μ‖π_old) and a smaller "
           "spread of sequence IS (at 25 and 21 of the 29 toys here), and a mean nearer the served policy's gradient "
           "(29 of 29).",
           controls(("seq_is", "tok_is", "tok_tis", "seq_tis"), mismatch=0.5), EXPERTS_TAB, replay_trades,
           claim="R3 replays the engine's routing: sequence IS, unbiased for ∇J without replay, becomes biased — the "
                 "price of taking routing flips out of the ratio.",
           predicate="where some routing decision flips: seq_is's relative bias for ∇J below 1e-9 without replay and "
                     "above 1e-6 with R3",
           population=around(0.5, ("T", 4))),
    Lesson("one_stamp_misleads_loglinear",
           "A version stamp is read only by an anchor built from versions: with AReaL's log-linear π_prox, α = (s − "
           "1)/s per token, one stamp per sequence — its head's, or its tail's as AReaL stamped before #1569 — gives "
           "some tokens the wrong lag and moves the first update's mean more than 5 % of ‖∇J‖ from the per-token "
           "truth, while with π_prox recomputed no stamp is read and none moves it.",
           controls(("naive",), mismatch=0.3), EXPERTS_TAB, stamps_mislead,
           view=VERSION_VIEW | {"versions_anchor": "loglinear"},
           claim="With AReaL's log-linear π_prox, one stamp per sequence moves the update's mean over 5 % of ‖∇J‖ from "
                 "the per-token truth; recomputed, nothing.",
           predicate="log-linear π_prox: the head's and the tail's stamp each move naive's mean over 5 % of ‖∇J‖ from "
                     "per-token versions; π_prox recomputed: neither moves it (1e-9)",
           population=around(0.3, ("T", 4))),
    Lesson("masked_prefix_trades_bias_for_variance",
           "Masking the stale prefix (slime's --mask-offpolicy-in-partial-rollout) trades bias for variance: the "
           "prefix's tokens still set the reward but give no gradient, so sequence IS's spread falls and its bias "
           "rises, with π_old recomputed.",
           controls(("seq_is", "tok_is"), mismatch=0.3), EXPERTS_TAB, mask_trades,
           view=VERSION_VIEW | {"versions_anchor": "recompute"},
           claim="Masking the stale prefix lowers sequence IS's spread and raises its bias: the prefix sets the reward "
                 "but gives no gradient.",
           predicate="π_old recomputed, per-token versions: masking the stale prefix lowers seq_is's relative std and "
                     "raises its relative bias",
           population=around(0.3, ("T", 4))),
)
