"""What the analysis tables share: pooled rates with pair-resampling intervals, Wilson intervals,
JSON-ready records, interval formatting, the paper's row order, the wide-interval rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rmlib import scoring
from rmlib.data import PAPER_ACCURACY, SOURCES, unit_of
from rmlib.data.pair import Pair
from rmlib.reflect import METHODS
from rmlib.run.folder import RunFolder

PAPER_BENCHMARKS: tuple[str, ...] = PAPER_ACCURACY  # by scoring rule (the data registry's)


# What a wide interval means for the report and the notebooks: any 95 % interval wider than this
# (in accuracy, 0.2 = 20 points) gets an honest note that the sample is too small to rank methods.
WIDE_INTERVAL = 0.20


def methods_in(df: pd.DataFrame) -> list[str]:
    """The methods present in a table, in the order of `rmlib.reflect.METHODS`."""
    present = set(df["method"])
    return [m for m in METHODS if m in present] + sorted(present - set(METHODS))


def pairs_by_source(run: RunFolder) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in run.pairs("pairs_eval"):
        out.setdefault(p.source, []).append(p)
    return out


def pooled_rate(
    values: Sequence[float] | np.ndarray,
    groups: Sequence[Any],
    *,
    n_boot: int,
    seed: int,
) -> tuple[float, float, float]:
    """Pooled mean of `values` with a bootstrap interval that resamples whole groups (pairs).

    Rows of one pair (both orders, N samples) are not independent: resampling pairs keeps them
    together. Returns (estimate, low, high); NaN for no rows.
    """
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    codes, uniq = pd.factorize(pd.Series(list(groups), dtype=object))
    sums = np.bincount(codes, weights=v, minlength=len(uniq))
    counts = np.bincount(codes, minlength=len(uniq)).astype(float)

    def scorer(idx: np.ndarray) -> float:
        c = counts[idx].sum()
        return float(sums[idx].sum() / c) if c else math.nan

    ci = scoring.bootstrap_ci(scorer, n_units=len(uniq), n_boot=n_boot, seed=seed)
    return float(ci.estimate), float(ci.low), float(ci.high)


def wilson(k: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95 % interval of a proportion k/n (NaN for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows (numpy scalars as Python numbers, NaN and NA as None)."""
    return [{str(k): _json(v) for k, v in r.items()} for r in df.to_dict("records")]


def _json(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def ci_bounds(ci: Any) -> tuple[float, float]:
    if not ci or ci[0] is None or ci[1] is None:
        return math.nan, math.nan
    return float(ci[0]), float(ci[1])


def unit_suffix(bench: str) -> str:
    """' prompts' / ' items' where a benchmark's official n counts something other than pairs."""
    unit = unit_of(bench).split(" ")[0]
    return "" if unit == "pairs" else f" {unit}"


def rule_label(rule: str) -> str:
    """The display name of the registry's benchmark with this scoring rule."""
    return next((s.label for s in SOURCES.values() if s.scoring == rule), rule)


def fmt_ci(score: Any, low: Any, high: Any, digits: int = 1) -> str:
    """'62.5 [50.0, 75.0]' in percent; '–' when there is no score."""
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return "–"
    s = f"{100 * score:.{digits}f}"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return s
    return f"{s} [{100 * low:.{digits}f}, {100 * high:.{digits}f}]"


def wide_intervals(table: pd.DataFrame, width: float = WIDE_INTERVAL) -> pd.DataFrame:
    """Rows of a table (score/accuracy with ci_low, ci_high) whose interval is wider than
    `width`: the numbers the notebooks and the report flag as too uncertain to rank."""
    if table.empty or "ci_low" not in table:
        return table.iloc[0:0]
    return table[(table["ci_high"] - table["ci_low"]) > width]
