"""Bootstrap intervals: resampled units (pair ids, prompts, items), stratified by the part
the official aggregate averages over, so every part stays present.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmlib.scoring.aggregate import Aggregate, json_number


@dataclass(frozen=True)
class CI:
    """A point estimate with its percentile bootstrap interval (arrays for vector statistics)."""

    estimate: Any
    low: Any
    high: Any
    n_boot: int
    alpha: float
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": json_number(self.estimate),
            "low": json_number(self.low),
            "high": json_number(self.high),
            "n_boot": self.n_boot,
            "alpha": self.alpha,
            "seed": self.seed,
        }


def bootstrap_ci(
    data: Sequence[float] | np.ndarray | Callable[[np.ndarray], Any],
    *,
    n_units: int | None = None,
    strata: Sequence[Any] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> CI:
    """Percentile bootstrap interval.

    `data` is either per-unit values (the statistic is their mean) or a scorer: a function of an
    index array into the units (0 … n_units-1, with repeats) returning the aggregate (a float or
    an array of floats), so an official aggregate is recomputed on each resample of pair ids.
    `strata` (one label per unit) resamples within each stratum, keeping its size. Resamples where
    the statistic is NaN are ignored. The same seed gives the same interval.
    """
    if callable(data):
        if n_units is None:
            raise ValueError("bootstrap_ci with a scorer needs n_units")
        scorer = data
    else:
        values = np.asarray(data, dtype=float)
        n_units = len(values)
        scorer = lambda idx: float(values[idx].mean()) if len(idx) else math.nan  # noqa: E731
    draws = _draws(n_units, strata, n_boot, np.random.default_rng(seed))
    estimate = np.asarray(scorer(np.arange(n_units)), dtype=float)
    stats = np.array([np.asarray(scorer(idx), dtype=float) for idx in draws])
    if n_boot == 0 or n_units == 0:
        low = high = np.full_like(estimate, math.nan)
    else:
        with np.errstate(all="ignore"):
            low, high = np.nanpercentile(stats, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    squeeze = (lambda a: float(a)) if estimate.ndim == 0 else (lambda a: np.asarray(a))
    return CI(squeeze(estimate), squeeze(low), squeeze(high), n_boot, alpha, seed)


def _draws(
    n: int, strata: Sequence[Any] | None, n_boot: int, rng: np.random.Generator
) -> Iterable[np.ndarray]:
    if strata is None:
        groups = [np.arange(n)]
    else:
        if len(strata) != n:
            raise ValueError("strata must give one label per unit")
        codes = pd.factorize(pd.Series(list(strata), dtype=object))[0]
        groups = [np.flatnonzero(codes == c) for c in range(codes.max() + 1)] if n else []
    for _ in range(n_boot):
        yield np.concatenate(
            [g[rng.integers(0, len(g), len(g))] for g in groups if len(g)] or [np.arange(0)]
        )


def scored(agg: Aggregate, *, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """An official aggregate's JSON-ready result: the headline score and its interval, and each
    named part's value and interval placed into the aggregate's details."""
    ci = bootstrap_ci(
        agg.fn, n_units=len(agg.units), strata=agg.strata, n_boot=n_boot, seed=seed, alpha=alpha
    )
    est, lo, hi = (
        np.atleast_1d(np.asarray(x, dtype=float)) for x in (ci.estimate, ci.low, ci.high)
    )
    intervals = {
        n: (json_number(e), [json_number(a), json_number(b)])
        for n, e, a, b in zip(agg.names, est, lo, hi, strict=True)
    }
    head = {"score": intervals[agg.names[0]][0], "ci": intervals[agg.names[0]][1]}  # ("score",)
    out = json.loads(json.dumps(agg.details, default=json_number))
    for path, (value, interval) in list(intervals.items())[1:]:
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node.update(score=value, ci=interval)
    return {**head, **out}
