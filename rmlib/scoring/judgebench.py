"""JudgeBench's official rule: each order scores +1 if right, -1 if wrong, 0 on a failure; a pair
is correct if the sum is positive; per category (knowledge, reasoning, math, coding) and
overall.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlib.data.judgebench import category_of
from rmlib.data.pair import DataError
from rmlib.scoring.aggregate import Aggregate, failure_counts, group_means, no_options
from rmlib.scoring.predictions import PREDICTIONS, bad_row
from rmlib.scoring.rules import lacks, rule

JUDGEBENCH_CATEGORIES: tuple[str, ...] = ("knowledge", "reasoning", "math", "coding")


def judgebench_category(source: str) -> str | None:
    """JudgeBench `source` (mmlu-pro-<subject>, livebench-reasoning, livebench-math,
    livecodebench) → knowledge / reasoning / math / coding, by the loader's own map
    (`rmlib.data.judgebench.category_of`); a category name maps to itself; None if
    unrecognised."""
    s = source.lower()
    return s if s in JUDGEBENCH_CATEGORIES else category_of(s)


def judgebench_pair_scores(df: pd.DataFrame) -> pd.DataFrame:
    """Per pair id: the sum of its orders' votes (+1 right, -1 wrong, 0 failure) and `correct`
    (sum > 0), with the number of orders judged."""
    vote = np.where(
        df["verdict"].isna(),
        0,
        np.where(df["verdict"].fillna(0).astype(int) == df["label"].astype(int), 1, -1),
    )
    g = df.assign(vote=vote).groupby("id", sort=True)
    out = g.agg(total=("vote", "sum"), n_orders=("order", "nunique"))
    if "subset" in df:
        out["subset"] = g["subset"].first()
    out["correct"] = out["total"] > 0
    return out.reset_index()


def _judgebench_correct(df: pd.DataFrame) -> np.ndarray:
    """McNemar's per-unit correctness: the sign rule per pair id."""
    return judgebench_pair_scores(df)["correct"].to_numpy(dtype=bool)


@rule(
    "judgebench",
    reads_all_orders=True,
    order_note="both (sign rule)",
    failure_note="n/a (sign rule: a failure votes 0)",
    needs_pairs=lacks("subset"),
    pair_correct=_judgebench_correct,
)
def judgebench_aggregate(df: pd.DataFrame, **opts: Any) -> Aggregate:
    no_options("judgebench", opts)
    if "subset" not in df:
        raise DataError(
            PREDICTIONS,
            None,
            "subset",
            "JudgeBench needs each row's source "
            "(subset) for its category: pass the benchmark pairs",
            "missing",
        )
    cats = []
    for r, s in enumerate(df["subset"]):
        c = judgebench_category(str(s)) if s is not None else None
        if c is None:
            raise bad_row(df, r, "subset", f"unknown JudgeBench source {s!r}", "value")
        cats.append(c)
    df = df.assign(category=cats)
    pairs = judgebench_pair_scores(df)
    pairs["category"] = df.groupby("id", sort=True)["category"].first().to_numpy()
    present = [c for c in JUDGEBENCH_CATEGORIES if c in set(pairs["category"])]
    codes = np.array([present.index(c) for c in pairs["category"]])
    vals = pairs["correct"].to_numpy(dtype=float)

    def fn(idx: np.ndarray) -> np.ndarray:
        return np.array([vals[idx].mean(), *group_means(vals[idx], codes[idx], len(present))])

    details = {
        "n": len(pairs),
        "rule": "per order +1 right, -1 wrong, 0 failure; correct if sum > 0",
        "n_single_order": int((pairs["n_orders"] < 2).sum()),
        "partial": len(present) < len(JUDGEBENCH_CATEGORIES),
        "missing_categories": [c for c in JUDGEBENCH_CATEGORIES if c not in present],
        "categories": {
            c: {
                "n": int((codes == k).sum()),
                "n_parse_failures": int(df.loc[df["category"] == c, "verdict"].isna().sum()),
            }
            for k, c in enumerate(present)
        },
        **failure_counts(df),
    }
    return Aggregate(
        list(pairs["id"]),
        [("score",), *[("categories", c) for c in present]],
        fn,
        list(codes),
        details,
    )
