"""What every official rule shares: the aggregate as a function of resampled units, the failure
credit, order selection, plain accuracy (LLMBar, HH-RLHF, the demo, anything else; per subset
too) and the JSON-ready numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmlib.scoring.rules import rule


@dataclass
class Aggregate:
    """An official aggregate as a function of resampled units (pair ids, prompts, items).

    `fn(idx)` returns one value per entry of `names` (the first is the headline; each other is
    the path of a part in `details`, e.g. ("domains", "chat", "hard")) for units
    `idx`; `strata` keeps each part's units within it when resampling.
    """

    units: list[str]
    names: list[tuple[str, ...]]
    fn: Callable[[np.ndarray], np.ndarray]
    strata: list[Any] | None
    details: dict[str, Any]


def select_order(df: pd.DataFrame, order: str) -> pd.DataFrame:
    if order not in ("given", "swapped", "both"):
        raise ValueError(f"order must be 'given', 'swapped' or 'both', got {order!r}")
    rows = df if order == "both" else df[df["order"] == order]
    if rows.empty:
        raise ValueError(
            f"no predictions in order {order!r} (orders present: "
            f"{sorted(set(df['order']))}); pass order='swapped' or 'both'"
        )
    return rows.reset_index(drop=True)


def credited(rows: pd.DataFrame, credit: float) -> np.ndarray:
    """Per prediction row (`verdict`, `label`): 1 right, 0 wrong, `credit` for a parse failure
    (verdict null). The one failure-credit rule of official scores and analysis tables alike."""
    failed = rows["verdict"].isna().to_numpy()
    right = (rows["verdict"].fillna(0).astype(int) == rows["label"].astype(int)).to_numpy()
    return np.where(failed, credit, right.astype(float))


def failure_counts(rows: pd.DataFrame) -> dict[str, Any]:
    n_fail = int(rows["verdict"].isna().sum())
    return {
        "n_rows": len(rows),
        "n_parse_failures": n_fail,
        "parse_failure_rate": n_fail / len(rows) if len(rows) else None,
    }


def unit_means(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per pair id: its value averaged over its orders (order='both'), and its subset."""
    spec: dict[str, Any] = {"value": ("value", "mean")}
    if "subset" in rows:
        spec["subset"] = ("subset", "first")
    return rows.groupby("id", sort=True).agg(**spec).reset_index()


def part_stats(rows: pd.DataFrame, key: str) -> dict[str, dict[str, Any]]:
    return {
        str(k): {"n": int(g["id"].nunique()), "n_parse_failures": int(g["verdict"].isna().sum())}
        for k, g in rows.groupby(key, sort=True)
    }


@rule("accuracy")
def accuracy_aggregate(rows: pd.DataFrame, **opts: Any) -> Aggregate:
    """Plain accuracy over pairs, with per-subset accuracies when there are several subsets."""
    no_options("accuracy", opts)
    units = unit_means(rows)
    vals = units["value"].to_numpy()
    subsets = units["subset"].fillna("").astype(str).to_numpy() if "subset" in units else None
    names_sub = sorted(set(subsets)) if subsets is not None and len(set(subsets)) > 1 else []
    codes = np.array([names_sub.index(s) for s in subsets]) if names_sub else None

    def fn(idx: np.ndarray) -> np.ndarray:
        out = [vals[idx].mean() if len(idx) else math.nan]
        if codes is not None:
            out.extend(group_means(vals[idx], codes[idx], len(names_sub)))
        return np.array(out)

    details: dict[str, Any] = {"n": len(units)}
    if names_sub:
        details["subsets"] = part_stats(rows.assign(subset=rows["subset"].fillna("")), "subset")
    return Aggregate(
        list(units["id"]),
        [("score",), *[("subsets", s) for s in names_sub]],
        fn,
        list(subsets) if names_sub else None,
        details,
    )


def group_means(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    sums = np.bincount(codes, weights=values, minlength=k)
    counts = np.bincount(codes, minlength=k)
    with np.errstate(all="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), math.nan)


def no_options(rule: str, opts: dict[str, Any]) -> None:
    if opts:
        raise TypeError(f"{rule} scoring takes no option(s) {sorted(opts)}")


def json_number(x: Any) -> Any:
    """JSON-ready number: numpy scalars to Python, NaN to None."""
    if isinstance(x, np.ndarray):
        return [json_number(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    return x
