"""What the analysis notebook reads back from a run's tables: majority of the first k samples,
analysis quality (rollout, reflection, winner, anchor and final accuracy), calibration bins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rmlib.reflect.rules import majority_vote, pair_rng
from rmlib.reflect.settings import TieBreak


def prefers_correct(reflections: pd.DataFrame) -> pd.Series:
    """Per stage-2 call, whether its outcome sides with the correct critique, by the vote's own
    rule: the call's `other_wins` (which already applies `inference.reflection_failure` to a call
    that did not parse: by default the anchor wins, method.md §4), so the reflection table of
    notebook 06, the vote and the map of `rmlib.analysis.simulation` count a failed call alike.
    Defined (else NA) only where exactly one of the two critiques is correct (method.md §6)."""
    other = reflections["other_wins"].astype(bool)
    i_ok = reflections["i_correct"].astype(bool)
    a_ok = reflections["anchor_correct"].astype(bool)
    picked = (other & i_ok) | (~other & a_ok)
    return picked.astype("boolean").where(i_ok != a_ok, pd.NA)


def majority_at_k(
    rollouts: pd.DataFrame,
    ks: Sequence[int] = (1, 2, 4, 8),
    tie_break: TieBreak = "first",
    seed: int = 0,
) -> pd.DataFrame:
    """Majority vote of each pair's first k samples, for each k: accuracy as N grows (§6).

    Returns a predictions table (method 'majority@k', plus column k). A k larger than a pair's
    sample count raises: the curve would silently flatten otherwise.
    """
    rows: list[dict[str, Any]] = []
    for key, g in rollouts.groupby("key", sort=False):
        g = g.sort_values("sample")
        choices = [None if pd.isna(c) else int(c) for c in g["choice"]]
        first = g.iloc[0]
        for k in ks:
            if k > len(choices):
                raise ValueError(f"majority@{k}: pair {key} has only {len(choices)} samples")
            rng = pair_rng(seed, str(key), f"majority_tie@{k}")
            verdict = majority_vote(choices[:k], tie_break, rng)
            rows.append(
                {
                    "key": key,
                    "id": first["id"],
                    "source": first["source"],
                    "subset": first["subset"],
                    "order": first["order"],
                    "label": first["label"],
                    "method": f"majority@{k}",
                    "k": k,
                    "verdict": verdict,
                    "correct": verdict == first["label"],
                    "parse_failure": verdict is None,
                }
            )
    return pd.DataFrame(rows)


def analysis_quality(
    rollouts: pd.DataFrame,
    reflections: pd.DataFrame,
    predictions: pd.DataFrame,
    n_bins: int = 5,
) -> dict[str, Any]:
    """How analysis quality drives accuracy (method.md §6), from one run's tables.

    rollout_accuracy: share of parsed stage-1 verdicts that are right; reflection_accuracy: how
    often a reflection prefers the correct critique where exactly one of the two is correct
    (`prefers_correct`: a failed call counts as the vote counts it); winner_accuracy: share of
    the real method's winners whose verdict is right; anchor/final accuracy from the
    predictions; calibration: parsed rollouts in `n_bins` confidence quantile bins (mean
    confidence, accuracy, n).
    """
    parsed = rollouts[rollouts["choice"].notna()]
    real = reflections[reflections["method"] == "reflectrm"] if len(reflections) else reflections
    informative = prefers_correct(real).dropna() if len(real) else pd.Series(dtype=bool)
    winners = real[real["other_wins"].astype(bool)] if len(real) else real
    by_method = predictions.groupby("method")["correct"].mean().to_dict()
    return {
        "rollout_accuracy": _mean_or_none(parsed["correct"]),
        "n_parsed_rollouts": len(parsed),
        "reflection_accuracy": _mean_or_none(informative),
        "n_informative_reflections": len(informative),
        "winner_accuracy": _mean_or_none(winners["i_correct"]) if len(winners) else None,
        "n_winners": len(winners),
        "anchor_accuracy": by_method.get("anchor"),
        "final_accuracy": by_method.get("reflectrm"),
        "calibration": calibration_table(parsed, n_bins).to_dict("records"),
    }


def calibration_table(parsed_rollouts: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Parsed rollouts in confidence quantile bins: mean confidence, accuracy, count per bin."""
    cols = ["bin", "confidence", "accuracy", "n"]
    conf = parsed_rollouts["confidence"].replace(-math.inf, np.nan)
    ok = conf.notna()
    if not ok.any():
        return pd.DataFrame(columns=cols)
    bins = pd.qcut(conf[ok].rank(method="first"), q=min(n_bins, int(ok.sum())), labels=False)
    df = pd.DataFrame(
        {
            "bin": bins,
            "confidence": conf[ok],
            "correct": parsed_rollouts.loc[ok, "correct"].astype(float),
        }
    )
    out = (
        df.groupby("bin")
        .agg(confidence=("confidence", "mean"), accuracy=("correct", "mean"), n=("correct", "size"))
        .reset_index()
    )
    return out[cols]


def _mean_or_none(x: pd.Series) -> float | None:
    return float(x.astype(float).mean()) if len(x) else None
