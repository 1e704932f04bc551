"""The frames of the Experts & versions tab: arranging ``analysis.routing`` and ``analysis.versions`` results.

    flip_frame        flip rates as the layers or the experts grow (one row per value and measure)
    replay_frame      each estimator under each replay mode: relative bias, std at N, cosines to ∇J and ∇J_μ
    versions_frame    each estimator under each way of logging versions: relative bias, std, distance to the truth
    replay_presets_frame, version_presets_frame   the frameworks' presets: option, mode, code at a commit
"""

import pandas as pd

from toylab.catalogue.replay import REPLAY_PRESETS
from toylab.catalogue.version_handling import VERSION_PRESETS

FLIP_MEASURES = {"decision": "a decision (layer, position)", "token": "a token (some layer)",
                 "sequence": "a sequence (somewhere)"}
MODE_NAMES = {("token", False): "per-token versions (truth)", ("head", False): "one stamp: head",
              ("tail", False): "one stamp: tail", ("token", True): "stale prefix masked"}


def flip_frame(rows, axis):
    """flip_curve's rows (value, per decision, per token, per sequence) → one row per value and measure."""
    return pd.DataFrame([{axis: value, "measure": FLIP_MEASURES[name], "rate": rate}
                         for value, *rates in rows for name, rate in zip(FLIP_MEASURES, rates, strict=True)])


def replay_frame(view):
    """One row per estimator and replay mode of a RoutingView, its KL in each row."""
    return pd.DataFrame([{"estimator": row.estimator, "replay": row.replay, "rel_bias": row.rel_bias,
                          "rel_std": row.rel_std, "cosine": row.cosine, "served_cosine": row.served_cosine,
                          "served_rel_bias": row.served_rel_bias, "kl": view.kl[row.replay]} for row in view.rows])


def versions_frame(view):
    """One row per estimator and mode of a VersionsView."""
    return pd.DataFrame([{"estimator": row.estimator, "mode": MODE_NAMES[(row.stamp, row.masked)],
                          "rel_bias": row.rel_bias, "rel_std": row.rel_std, "cosine": row.cosine,
                          "from_truth": row.from_truth} for row in view.rows])


def replay_presets_frame():
    return pd.DataFrame([{"preset": preset.id, "option": preset.option, "replay": preset.replay,
                          "code": f"{preset.repository} {preset.commit}: {preset.code}", "note": preset.note}
                         for preset in REPLAY_PRESETS.values()])


def version_presets_frame():
    return pd.DataFrame([{"preset": preset.id, "option": preset.option, "stamp": preset.stamp,
                          "masked": "yes" if preset.mask_stale else "no", "π_prox": preset.prox,
                          "η": "none" if preset.eta is None else str(preset.eta),
                          "code": f"{preset.repository} {preset.commit}: {preset.code}", "note": preset.note}
                         for preset in VERSION_PRESETS.values()])
