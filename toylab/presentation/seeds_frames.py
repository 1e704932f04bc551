"""The DataFrames behind a seeds view: one exact number per (toy, estimator) over a population of toys that differ in
their seed alone (``analysis.seeds``), the current toy among them, and each toy's ranking of the estimators by it.
Arranged here, never re-derived: the numbers are the library's, the ranks ``seeds.ranks`` of them.
"""

import numpy as np
import pandas as pd

from toylab.analysis.seeds import ranks

COLUMNS = ["estimator", "seed", "value", "rank", "current"]


def strip_frame(values, current, lowest_first=True):
    """One row per (toy, estimator) of ``values`` ({seed: {id: number}}, ids in registry order): the number, its rank
    among that toy's estimators (``seeds.ranks``) and whether the toy is the current one (seed ``current``)."""
    rows = []
    for seed, numbers in values.items():
        ranked = ranks(numbers, lowest_first)
        rows += [{"estimator": id, "seed": seed, "value": value, "rank": ranked[id], "current": seed == current}
                 for id, value in numbers.items()]
    return pd.DataFrame(rows, columns=COLUMNS)


def rank_table(frame):
    """One row per estimator: its number and rank on the current toy, on how many toys it ranks the same and first,
    its median rank, and how many toys there are."""
    toys = frame["seed"].nunique()
    here = frame[frame["current"]].set_index("estimator")
    rows = []
    for id, rows_of in frame.groupby("estimator", sort=False):
        rank = int(here.loc[id, "rank"])
        rows.append({"estimator": id, "value": float(here.loc[id, "value"]), "rank": rank,
                     "same_rank": int((rows_of["rank"] == rank).sum()), "first": int((rows_of["rank"] == 1).sum()),
                     "median_rank": float(np.median(rows_of["rank"])), "toys": toys})
    return pd.DataFrame(rows, columns=["estimator", "value", "rank", "same_rank", "first", "median_rank", "toys"])


def same_order(frame):
    """(how many toys rank the estimators exactly as the current toy does — every estimator's rank the same —, how
    many toys)."""
    order = {seed: dict(zip(rows["estimator"], rows["rank"], strict=True)) for seed, rows in frame.groupby("seed")}
    here = order[frame.loc[frame["current"], "seed"].iloc[0]]
    return sum(ranked == here for ranked in order.values()), len(order)


def order_text(frame):
    """The current toy's ranking in words, best first: '1 tok_tis · 2 tok_is, tok_mis · 4 naive' (ties share a rank)."""
    here = frame[frame["current"]].sort_values("rank", kind="stable")
    return " · ".join(f"{rank} {', '.join(rows['estimator'])}" for rank, rows in here.groupby("rank", sort=True))


def seeds_text(frame):
    """The population's seeds in words (``seeds.seeds_around``): '0–29', or '37 and 0–28'."""
    seeds = list(dict.fromkeys(frame["seed"]))
    return f"0–{len(seeds) - 1}" if seeds == list(range(len(seeds))) else f"{seeds[0]} and 0–{len(seeds) - 2}"
