"""KL settings by name, as the page's link and the command line write them: a framework's preset, or a setting
spelled ESTIMATOR.PLACEMENT[.MODIFIER…].

    k3.loss                   k3 in the loss, no ratio            k3.loss.engine    … with the ratio π_θ/μ
    k1.reward                 k1 summed over the sequence into the reward (the advantage's correction: naive)
    k1.reward.to_go.seq_is    … summed from each token on, the advantage weighed by W (the Estimators tab only)
    verl:kl_loss              a framework's preset (``kl_presets``): its estimator, placement, ratio and clamps

A loss setting's modifier is a ratio (``kl.RATIOS``); a reward setting's are a sum (``kl.REWARD_SUMS``) and, where
the setting stands alone (the KL view of the Estimators tab, the exact table), the advantage's correction
(``engine.kl_moments.CORRECTIONS`` names them here: naive, tok_is, seq_is); in training the correction is the
estimator trained. ``parse`` returns the penalty at β = 1 (a preset: at its framework's default β) and the
correction, or a ValueError that names what is wrong.
"""

from toylab.catalogue.kl import KL_ESTIMATORS, PLACEMENTS, RATIOS, REWARD_SUMS, KLPenalty
from toylab.catalogue.kl_presets import KL_PRESETS
from toylab.text import quoted

CORRECTIONS = ("naive", "tok_is", "seq_is")
VIEW_SETTINGS = ("k1.loss", "k2.loss", "k3.loss", "k3.loss.current", "k3.loss.engine", "k1.loss.engine", "k3+.loss",
                 "full.loss", "k1.reward", "k1.reward.tok_is", "k1.reward.seq_is", "k1.reward.to_go", "k1.reward.token",
                 "k3.reward")
TRAINING_SETTINGS = ("k1.loss", "k2.loss", "k3.loss", "k3.loss.current", "k3.loss.anchor", "k3.loss.engine",
                     "k1.loss.engine", "k3+.loss", "full.loss", "k1.reward", "k1.reward.to_go", "k1.reward.token",
                     "k3.reward")


def parse(text, correction_allowed=True):
    """(KLPenalty, correction) of a setting's name; ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a KL setting is a preset (e.g. verl:kl_loss) or ESTIMATOR.PLACEMENT (e.g. k3.loss), got "
                         f"{quoted(text)}")
    text = text.strip()
    if ":" in text:
        if text not in KL_PRESETS:
            raise ValueError(f"{quoted(text)} is not a KL preset (known: {', '.join(KL_PRESETS)})")
        return KL_PRESETS[text].penalty, "naive"
    estimator, _, rest = text.partition(".")
    placement, _, modifiers = rest.partition(".")
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"{quoted(text)}: the estimator {quoted(estimator)} is not one of {', '.join(KL_ESTIMATORS)}")
    if placement not in PLACEMENTS:
        raise ValueError(f"{quoted(text)}: the placement must be one of {', '.join(PLACEMENTS)}, got "
                         f"{quoted(placement)}")
    fields, correction = {}, "naive"
    for modifier in filter(None, modifiers.split(".")):
        if placement == "loss" and modifier in RATIOS:
            fields["ratio"] = modifier
        elif placement == "reward" and modifier in REWARD_SUMS:
            fields["reward_sum"] = modifier
        elif placement == "reward" and modifier in CORRECTIONS and correction_allowed:
            correction = modifier
        else:
            allowed = RATIOS if placement == "loss" else REWARD_SUMS + (CORRECTIONS if correction_allowed else ())
            raise ValueError(f"{quoted(text)}: {quoted(modifier)} is not a modifier of a {placement} setting (one of "
                             f"{', '.join(allowed)})")
    return KLPenalty(1.0, estimator, placement, **fields), correction


def label(text):
    """A short description of a setting's name: the preset's option, or the penalty's."""
    if text in KL_PRESETS:
        return f"{text}: {KL_PRESETS[text].penalty.describe().rsplit(', β =', 1)[0]}"
    penalty, correction = parse(text)
    described = penalty.describe().rsplit(", β =", 1)[0]
    return described + ("" if penalty.placement == "loss" else f", advantage weighed by {correction}")
