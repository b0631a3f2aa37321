"""Position bias of one method's predictions: correct in both orders (the paper's positional
consistency), flip rate, first-slot win rate, accuracy by order, JudgeBench's sign rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlib.scoring.bootstrap import bootstrap_ci
from rmlib.scoring.predictions import validate_predictions


def consistency(
    predictions: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> dict[str, Any]:
    """Position bias of one method's predictions (both orders of each pair where present).

    both_correct: share of pairs (with both orders) right in both (the paper's positional
    consistency; a failure is not right); flip_rate: among pairs with both verdicts parsed, the
    share whose chosen response changes with the order (same slot number both times);
    first_slot_win_rate: share of parsed verdicts that are 1; sign_rule_accuracy: JudgeBench's
    rule; parse_failure_rate and truncation_rate (if a `truncated_prompt` column exists) over rows.
    Where only some pairs were judged swapped (inference.swapped_pairs), every rate reads those
    pairs' rows only (`paired_rows`): the same pairs in both orders, so slot 1 is right as often
    as slot 2.
    """
    df = validate_predictions(predictions)
    if df["label"].isna().any():
        raise ValueError("consistency() needs labels: attach the benchmark's pairs first")
    if df["method"].nunique() > 1:
        raise ValueError("consistency() takes one method's predictions; group by 'method' first")
    df = paired_rows(df)
    parsed = df["verdict"].dropna().astype(int)
    g = df[df["order"] == "given"].set_index("id")
    s = df[df["order"] == "swapped"].set_index("id")
    both = g.index.intersection(s.index)
    g, s = g.loc[both], s.loc[both]
    right_g = (g["verdict"] == g["label"]).fillna(False).to_numpy(dtype=bool)
    right_s = (s["verdict"] == s["label"]).fillna(False).to_numpy(dtype=bool)
    both_right = (right_g & right_s).astype(float)
    both_parsed = (g["verdict"].notna() & s["verdict"].notna()).to_numpy()
    flips = g["verdict"].to_numpy()[both_parsed] == s["verdict"].to_numpy()[both_parsed]
    votes = [
        np.where(d["verdict"].isna().to_numpy(), 0, np.where(r, 1, -1))
        for d, r in ((g, right_g), (s, right_s))
    ]
    sign = (votes[0] + votes[1]) > 0
    out = {
        "n_pairs_both_orders": len(both),
        "both_correct": bootstrap_ci(both_right, n_boot=n_boot, seed=seed, alpha=alpha).to_dict(),
        "flip_rate": _rate(flips.astype(float)),
        "n_flip_eligible": int(both_parsed.sum()),
        "first_slot_win_rate": _rate((parsed == 1).to_numpy(dtype=float)),
        "n_parsed": len(parsed),
        "sign_rule_accuracy": _rate(sign.astype(float)),
        "accuracy_by_order": {
            o: _rate((d["verdict"] == d["label"]).fillna(False).to_numpy(dtype=float))
            for o, d in df.groupby("order", sort=True)
        },
        "parse_failure_rate": _rate(df["verdict"].isna().to_numpy(dtype=float)),
        "n_rows": len(df),
        "truncation_rate": (
            _rate(df["truncated_prompt"].astype(bool).to_numpy(dtype=float))
            if "truncated_prompt" in df
            else None
        ),
    }
    return out


def paired_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the pairs judged in both orders; every row when no pair was judged swapped."""
    swapped = set(df.loc[df["order"] == "swapped", "id"])
    if not swapped:
        return df
    return df[df["id"].isin(swapped)].reset_index(drop=True)


def _rate(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None
