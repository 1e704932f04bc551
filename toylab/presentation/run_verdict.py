"""The words and the table of a rollout log's verdict: its bottom line, and the toy that matches it.

The library decides (``your_run.bottom_line``, ``your_run.matching``: statistics and tests); this module only
words what they found, each sentence tied to its statistic and written with its standard error
(``estimates.with_se``). What a sentence may say follows from the test it words: "tails" only from the shares beyond
``matching.TAIL_FROM`` (the bulk's shares and the χ² say "the bulk"); nothing "far more extreme" about sequence
weights whose sample ESS is NEGLIGIBLE_ESS or more.
"""

import pandas as pd

from toylab.presentation.estimates import estimate_text, with_se
from toylab.state.query import ESTIMATORS_TAB
from toylab.text import percent, significant
from toylab.your_run.bottom_line import NEGLIGIBLE_CHANGE, NEGLIGIBLE_ESS, NEGLIGIBLE_SHARE, SE_AWAY
from toylab.your_run.matching import CLOSE, TAIL_FROM, matching_estimate, shape_checks, shape_of
from toylab.your_run.statistics import SINGLE_SEQUENCE

VERDICT_WORDS = {"consistent": "consistent", "heavier": "the data's is above the toy's range",
                 "lighter": "the data's is below the toy's range", "cannot tell": "cannot tell at this sample size"}
RULE = (f"Negligible, by this page's rule: IS keeps {NEGLIGIBLE_ESS:.0%} of the batch or more, correcting moves the reward estimate by "
        f"less than {SE_AWAY:g} standard errors, and every selected estimator masks or clips under "
        f"{NEGLIGIBLE_SHARE:.0%} of the tokens and moves a token's weight by under {NEGLIGIBLE_CHANGE:g} on average (its upper end at {SE_AWAY:g} se). "
        "Each number is a sample estimate with its standard error.")


def _away(estimate):
    """'within 0.6 standard errors of 0' / '3.1 standard errors from 0'."""
    if not estimate.se:
        return "with no standard error"
    ratio = abs(estimate.value) / estimate.se
    return f"{'within' if ratio <= SE_AWAY else ''} {ratio:.2g} standard errors {'of' if ratio <= SE_AWAY else 'from'} 0".strip()


def bottom_line_text(line, rewards):
    """The bottom line in two or three sentences (Markdown): negligible or not, then the numbers it rests on — the
    weights' ESS, what correcting moves the reward estimate by, and the estimator that changes the gradient most —
    each with its standard error. RULE says the rule."""
    head = "**The mismatch is negligible here.**" if line.negligible else "**The mismatch is not negligible here.**"
    parts = [f"IS keeps {percent(line.ess_fraction)} of the batch (sample ESS)"]
    if line.correction is not None:
        parts.append(f"correcting moves the reward estimate by {estimate_text(line.correction, 2)} "
                     f"(IS {estimate_text(rewards.seq_is)}, logged {estimate_text(rewards.logged)}: {_away(line.correction)})")
    elif rewards is not None:
        parts.append("the IS estimate of the reward is beyond float64 (the weights W reach e^709)")
    if line.effects:
        first, more = line.effects[0], len(line.effects) - 1
        parts.append(f"{first.name} masks or clips {percent(first.tokens_affected)} of the tokens and moves a token's "
                     f"weight by {estimate_text(first.weight_change, 2)} on average"
                     + (f", the most of the {len(line.effects)} selected" if more else ""))
    return f"{head} " + "; ".join(parts) + "."


def comparison(match, statistics, sizes):
    """Sentences: where the match lands (on the KL estimate with the smaller standard error), whether the data's
    token χ² and tail shares are the toy's — a verdict only where the sample can tell, "tails" only from the shares
    beyond TAIL_FROM — and what the toy's shorter sequences mean for its sequence weights."""
    name, kl = matching_estimate(statistics)
    where = f"T = {match.T}, V = {match.V}, seed {match.seed}" + (
        "" if match.sampler.is_default else f", sampler {match.sampler.describe()}")
    data_kl = f"{name} = {with_se(kl.value, kl.se)}"
    other = statistics.k1 if name == "k3" else statistics.k3
    if name == "k3" and other.se is not None and kl.se:
        data_kl += f" (k3, not k1 = {with_se(other.value, other.se)}: its standard error is {other.se / kl.se:.3g}× smaller)"
    if match.clamped == "zero":
        lines = [f"The data's {data_kl} is not above 0: sampler and trainer agree within this sample, and the "
                 f"matching toy ({where}) has mismatch 0"
                 + (", where every estimator coincides." if match.sampler.is_default else
                    f", where its sampler model alone gives a per-token KL of {significant(match.toy_kl)}.")]
    elif match.clamped == "top":
        lines = [f"Even the page's largest mismatch, {match.mismatch:g}, gives the toy ({where}) a per-token KL of "
                 f"only {significant(match.top_kl)}, below the data's {data_kl}: the toy is clamped there and "
                 "understates this run's mismatch."]
    else:
        lines = [f"At mismatch {significant(match.mismatch, 4)} ± {significant(match.mismatch_se, 2)} the toy "
                 f"({where}) has the data's per-token KL, {data_kl}."]
    checks = shape_checks(match, statistics, sizes)
    for check in checks:
        text = (f"{check.quantity}: data {with_se(check.data.value, check.data.se)}, toy {significant(check.toy)} "
                f"({significant(check.toy_low)} to {significant(check.toy_high)} over the mismatches within "
                f"{CLOSE:g} se)")
        lines.append(f"{text}: {VERDICT_WORDS[check.verdict]}.")
    lines.append(_shape_sentence(shape_of(checks)))
    if statistics.k1.se is None:
        lines.append(f"— : {SINGLE_SEQUENCE}.")
    length = statistics.mean_length.value
    if length > 1.5 * match.T:
        extreme = statistics.ess_fraction < NEGLIGIBLE_ESS
        lines.append(f"The toy's sequences have {match.T} tokens, the data's {length:.0f} on average: its sequence-level "
                     "numbers (W, the ESS) are not the data's"
                     + (f"; the data's sequence weights are far more spread (sample ESS {percent(statistics.ess_fraction)})."
                        if extreme else f", though the data's sequence weights stay mild (sample ESS "
                                        f"{percent(statistics.ess_fraction)})."))
    return lines


def _shape_sentence(shape):
    tails = f"shares beyond |log ρ| = {TAIL_FROM:g} and more"
    if shape.tails in ("heavier", "lighter", "mixed"):
        how = f"{shape.tails} tails" if shape.tails != "mixed" else "tails heavier at some sizes, lighter at others"
        return (f"So the toy has this run's average mismatch but not its shape: the data's ratios have {how} ({tails}), "
                "so the toy's shares of clipped and masked tokens are only indicative.")
    if shape.bulk in ("heavier", "lighter", "mixed"):
        how = shape.bulk if shape.bulk != "mixed" else "different"
        return (f"So the toy has this run's average mismatch and, as far as this sample can tell, its tails ({tails}: "
                f"{'consistent' if shape.tails == 'same' else 'cannot tell'}); only the bulk of small ratios differs "
                f"({how} than the toy's: the token χ² or the share beyond 0.001).")
    if "same" in (shape.tails, shape.bulk):
        return "So per token the toy is a fair stand-in for this run, as far as this sample can tell."
    return "Whether the toy has this run's shape: cannot tell at this sample size."


def comparison_frame(match, statistics, sizes):
    """quantity, data (sample estimate), se, toy (exact at the matched mismatch), toy_low, toy_high (over the
    mismatches within CLOSE se), verdict: the data's and the toy's numbers side by side, never in one column."""
    name, kl = matching_estimate(statistics)
    rows = [{"quantity": f"per-token KL: data {name}, toy exact", "data": kl.value, "se": kl.se, "toy": match.toy_kl,
             "toy_low": match.toy_kl, "toy_high": match.toy_kl, "verdict": "matched"}]
    rows += [{"quantity": check.quantity, "data": check.data.value, "se": check.data.se, "toy": check.toy,
              "toy_low": check.toy_low, "toy_high": check.toy_high, "verdict": check.verdict}
             for check in shape_checks(match, statistics, sizes)]
    return pd.DataFrame(rows)


def open_match_label(match, statistics):
    """The matched toy's button: the toy as found (its mismatch unrounded) and how its per-token KL compares with the
    data's estimate."""
    name, kl = matching_estimate(statistics)
    compared = ("equal to" if match.clamped is None else "below" if match.clamped == "top" else "against")
    return (f"Open the {ESTIMATORS_TAB} tab at this toy (T = {match.T}, V = {match.V}, mismatch {significant(match.mismatch, 4)}): "
            f"its per-token KL {significant(match.toy_kl)}, {compared} the data's {name} {with_se(kl.value, kl.se)} →")
