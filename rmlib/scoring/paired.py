"""Two methods on the same pairs: the difference of their official scores with a paired bootstrap
interval, and the exact McNemar test on per-pair correctness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from rmlib.data.pair import Pair
from rmlib.scoring.aggregate import json_number
from rmlib.scoring.bootstrap import bootstrap_ci
from rmlib.scoring.predictions import attach_pairs, validate_predictions
from rmlib.scoring.rules import get_rule
from rmlib.scoring.score import aggregate, scoring_of


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: the discordant counts b, c under Binomial(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_comparison(
    pred_a: pd.DataFrame,
    pred_b: pd.DataFrame,
    *,
    benchmark: str | None = None,
    pairs: Iterable[Pair] | None = None,
    failure_credit: float = 0.0,
    order: str = "given",
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    **opts: Any,
) -> dict[str, Any]:
    """A − B on the same pairs: the difference of the (official, when `benchmark` is given)
    aggregate with a paired bootstrap interval (the same resampled pair ids for both), and an
    exact McNemar test on per-pair correctness (failures count as wrong).

    Only pairs (id, order) present in both are compared; their count is reported.
    """
    a, b = (validate_predictions(x.assign(method="m")) for x in (pred_a, pred_b))
    if pairs is not None:
        pairs = list(pairs)
        a, b = attach_pairs(a, pairs), attach_pairs(b, pairs)
    common = a.merge(b[["id", "order"]], on=["id", "order"])[["id", "order"]]
    a = a.merge(common, on=["id", "order"]).sort_values(["id", "order"]).reset_index(drop=True)
    b = b.merge(common, on=["id", "order"]).sort_values(["id", "order"]).reset_index(drop=True)
    if not (a["label"].astype(int).to_numpy() == b["label"].astype(int).to_numpy()).all():
        raise ValueError("the two prediction sets disagree on labels for the same pairs")
    rule = scoring_of(benchmark) if benchmark else "accuracy"
    agg_a = aggregate(a, rule, failure_credit=failure_credit, order=order, **opts)
    agg_b = aggregate(b, rule, failure_credit=failure_credit, order=order, **opts)
    if agg_a.units != agg_b.units:
        raise ValueError("the two prediction sets do not cover the same units")
    diff = bootstrap_ci(
        lambda idx: agg_a.fn(idx)[0] - agg_b.fn(idx)[0],
        n_units=len(agg_a.units),
        strata=agg_a.strata,
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
    )
    ra, rb = (_right(x, rule, order) for x in (a, b))
    only_a, only_b = int((ra & ~rb).sum()), int((~ra & rb).sum())
    return {
        "scoring": rule,
        "n_units": len(agg_a.units),
        "n_rows": int(len(ra)),
        "n_dropped": {"a": len(pred_a) - len(a), "b": len(pred_b) - len(b)},
        "a": json_number(agg_a.fn(np.arange(len(agg_a.units)))[0]),
        "b": json_number(agg_b.fn(np.arange(len(agg_b.units)))[0]),
        "difference": json_number(diff.estimate),
        "ci": [json_number(diff.low), json_number(diff.high)],
        "mcnemar": {
            "a_right_b_wrong": only_a,
            "a_wrong_b_right": only_b,
            "p_value": mcnemar_exact(only_a, only_b),
        },
        "bootstrap": {"n_boot": n_boot, "seed": seed, "alpha": alpha},
    }


def _right(df: pd.DataFrame, rule: str, order: str) -> np.ndarray:
    """Per-unit correctness for McNemar: the rule's own (`Rule.pair_correct`: JudgeBench's sign
    rule per pair id), else per row of the scored order(s); a failure is wrong."""
    own = get_rule(rule).pair_correct
    if own is not None:
        return own(df)
    rows = df if order == "both" else df[df["order"] == order]
    return (rows["verdict"] == rows["label"]).fillna(False).to_numpy(dtype=bool)
