"""The KL view's DataFrame and the sentences under it: the library's rows (``analysis.kl_view``), arranged.

A number that is undefined (∇KL = 0, or a zero mean) is missing (NaN); ``broken_by_the_engine`` reads each row's rel
bias on policy and under μ to say which estimators are exact on policy and biased on the engine's tokens, and which
stay exact.
"""

import math

import pandas as pd

from toylab.text import UNDEFINED

COLUMNS = ["setting", "label", "weight", "cosine", "rel_bias", "rel_std", "rel_rmse", "reverse_cosine",
           "on_policy_rel_bias"]
EXACT_BELOW = 1e-9                  # a rel bias below this is an identity's 0 (rounding)


def kl_view_frame(rows):
    """One row per KL setting, None as NaN; the cosines as text ('—' where undefined)."""
    frame = pd.DataFrame([{name: (math.nan if row[name] is None else row[name]) for name in COLUMNS}
                          for row in rows], columns=COLUMNS)
    for name in ("cosine", "reverse_cosine"):
        frame[name] = [UNDEFINED if math.isnan(value) else f"{value:+.4f}" for value in frame[name]]
    return frame


def broken_by_the_engine(rows):
    """(exact on policy and biased under μ: [(setting, rel bias)], exact under μ too: [setting]) of the rows whose
    numbers are defined."""
    broken, kept = [], []
    for row in rows:
        on_policy, engine = row["on_policy_rel_bias"], row["rel_bias"]
        if on_policy is None or engine is None or on_policy > EXACT_BELOW:
            continue
        (kept.append(row["setting"]) if engine <= EXACT_BELOW else broken.append((row["setting"], engine)))
    return broken, kept


def engine_sentence(rows):
    """'Exact on policy, biased on the engine's tokens: k2.loss (rel bias 1.01), …. Exact on both: …' (or None)."""
    broken, kept = broken_by_the_engine(rows)
    parts = []
    if broken:
        parts.append("Exact on policy but biased on the engine's tokens here: "
                     + ", ".join(f"{setting} (rel bias {bias:.3g})" for setting, bias in broken) + ".")
    if kept:
        parts.append("Exact on policy and on the engine's tokens: " + ", ".join(kept) + ".")
    return " ".join(parts) or None


PLACEMENTS = ("in the loss", "in the reward")


def kl_scatter_frame(rows):
    """One point per setting whose numbers are defined: (rel bias, rel std at N), its placement for the colour."""
    points = [{"setting": row["setting"], "label": row["label"], "weight": row["weight"],
               "placement": PLACEMENTS[row["placement"] != "loss"], "rel_bias": row["rel_bias"],
               "rel_std": row["rel_std"], "rel_rmse": row["rel_rmse"]}
              for row in rows if row["rel_bias"] is not None and row["rel_std"] is not None]
    return pd.DataFrame(points, columns=["setting", "label", "weight", "placement", "rel_bias", "rel_std", "rel_rmse"])
