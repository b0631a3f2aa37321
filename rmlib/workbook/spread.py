"""A sweep's figures as a spread: what one run's numbers are worth next to the same run with
another seed.

`run_figures` flattens the figures a reader quotes from one run's metrics.json: per evaluated
model its accuracy with greedy, majority vote and ReflectRM on each benchmark (06's `methods`
table: both orders pooled), its stage-1 and reflection accuracy (06's summary), ReflectRM minus
majority, and the headline model's confidence AUC (06's map parameters). `spread` reduces a
sweep's runs to n, mean, min and max per figure: `rmlib sweep params/demo.yaml --over
run.seed=0,1,2` writes it as spread.csv beside comparison.csv.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

METHODS = ("greedy", "majority", "reflectrm")


def run_figures(metrics: dict[str, Any]) -> dict[str, float]:
    """The figures of one run (keys `model.benchmark.method`, `model.stage1_accuracy`,
    `model.reflection_accuracy`, `model.benchmark.reflectrm_minus_majority`,
    `confidence_auc`); a figure the run did not compute is left out."""
    quality = metrics.get("analysis_quality") or {}
    out: dict[str, float] = {}
    acc: dict[tuple[str, str, str], float] = {}
    for row in quality.get("methods") or []:
        if row.get("method") in METHODS and _number(row.get("accuracy")):
            key = (row["model"], row["benchmark"], row["method"])
            acc[key] = float(row["accuracy"])
            out[".".join(key)] = acc[key]
    for (model, bench, method), value in acc.items():
        if method == "reflectrm" and (model, bench, "majority") in acc:
            out[f"{model}.{bench}.reflectrm_minus_majority"] = value - acc[model, bench, "majority"]
    for row in quality.get("summary") or []:
        for name, field in (("stage1", "rollout_accuracy"), ("reflection", "reflection_accuracy")):
            if _number(row.get(field)):
                out[f"{row['model']}.{name}_accuracy"] = float(row[field])
    params = (metrics.get("reflection_map") or {}).get("parameters") or []
    if params and _number(params[0].get("confidence_auc")):
        out["confidence_auc"] = float(params[0]["confidence_auc"])
    return out


def spread(runs: pd.DataFrame, figures: list[str]) -> pd.DataFrame:
    """One row per figure: over the runs that have it, n, mean, min, max."""
    rows = []
    for name in figures:
        values = pd.to_numeric(runs[name], errors="coerce").dropna() if name in runs else []
        if len(values):
            rows.append(
                {
                    "figure": name,
                    "n_runs": len(values),
                    "mean": float(values.mean()),
                    "min": float(values.min()),
                    "max": float(values.max()),
                }
            )
    return pd.DataFrame(rows, columns=["figure", "n_runs", "mean", "min", "max"])


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
