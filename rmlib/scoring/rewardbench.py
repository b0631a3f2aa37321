"""RewardBench's official rule: accuracy per subset; a section is the mean of its subsets'
accuracies weighted by subset size (the official sizes), math-prm weighing 984 (= the six hep-*
subsets together); the score is the plain mean of the four sections.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rmlib.data import rewardbench as rewardbench_data
from rmlib.data.pair import DataError
from rmlib.scoring.aggregate import Aggregate, group_means, no_options, part_stats, unit_means
from rmlib.scoring.predictions import PREDICTIONS, bad_row
from rmlib.scoring.rules import lacks, rule

# The official subset map and sizes live with the loader (one source of truth).
REWARDBENCH_SECTIONS: dict[str, tuple[str, ...]] = rewardbench_data.SECTIONS


# Section weights: the official subset sizes of `filtered`, except that math-prm (447 pairs)
# weighs 984 = the six hep-* subsets together, so math and code are half of Reasoning each.
REWARDBENCH_WEIGHTS: dict[str, float] = rewardbench_data.section_weights()


REWARDBENCH_SECTION_OF: dict[str, str] = {
    s: sec for sec, subsets in REWARDBENCH_SECTIONS.items() for s in subsets
}


def rewardbench_score(
    subset_accuracy: dict[str, float], weights: dict[str, float] | None = None
) -> dict[str, Any]:
    """Sections and score from per-subset accuracies (the official weighting).

    Subsets absent from `subset_accuracy` are left out of their section (weights renormalised)
    and listed; a section with no subset is missing and the score is the mean of the present
    sections, flagged `partial`.
    """
    weights = weights or REWARDBENCH_WEIGHTS
    sections: dict[str, float] = {}
    for sec, subsets in REWARDBENCH_SECTIONS.items():
        present = [
            s for s in subsets if s in subset_accuracy and not math.isnan(subset_accuracy[s])
        ]
        if present:
            w = np.array([weights[s] for s in present], dtype=float)
            sections[sec] = float(np.dot(w, [subset_accuracy[s] for s in present]) / w.sum())
    missing_subsets = [s for s in REWARDBENCH_SECTION_OF if s not in subset_accuracy]
    missing_sections = [s for s in REWARDBENCH_SECTIONS if s not in sections]
    score = float(np.mean(list(sections.values()))) if sections else math.nan
    return {
        "score": score,
        "sections": sections,
        "partial": bool(missing_subsets),
        "missing_subsets": missing_subsets,
        "missing_sections": missing_sections,
    }


@rule("rewardbench", needs_pairs=lacks("subset"))
def rewardbench_aggregate(rows: pd.DataFrame, weights: str = "official", **opts: Any) -> Aggregate:
    no_options("rewardbench", opts)
    if "subset" not in rows:
        raise DataError(
            PREDICTIONS,
            None,
            "subset",
            "RewardBench needs each row's subset (in the file, or pass the benchmark pairs)",
            "missing",
        )
    for r, s in enumerate(rows["subset"]):
        if s not in REWARDBENCH_SECTION_OF:
            raise bad_row(rows, r, "subset", f"unknown RewardBench subset {s!r}", "value")
    units = unit_means(rows)
    subsets = sorted(set(units["subset"]), key=list(REWARDBENCH_SECTION_OF).index)
    codes = np.array([subsets.index(s) for s in units["subset"]])
    vals = units["value"].to_numpy()
    w = _rewardbench_weights(weights, units)

    full = rewardbench_score(
        dict(zip(subsets, group_means(vals, codes, len(subsets)), strict=True)), w
    )
    sections = list(full["sections"])

    def fn(idx: np.ndarray) -> np.ndarray:  # strata = subsets: every subset stays present
        acc = dict(zip(subsets, group_means(vals[idx], codes[idx], len(subsets)), strict=True))
        res = rewardbench_score(acc, w)
        return np.array(
            [res["score"], *[res["sections"][s] for s in sections], *[acc[s] for s in subsets]]
        )

    details = {
        "n": len(units),
        "weights": weights,
        "partial": full["partial"],
        "missing_subsets": full["missing_subsets"],
        "missing_sections": full["missing_sections"],
        "sections": {
            s: {"n": int(units["subset"].isin(REWARDBENCH_SECTIONS[s]).sum())} for s in sections
        },
        "subsets": part_stats(rows, "subset"),
    }
    names = [("score",), *[("sections", s) for s in sections], *[("subsets", s) for s in subsets]]
    return Aggregate(list(units["id"]), names, fn, list(units["subset"]), details)


def _rewardbench_weights(mode: str, units: pd.DataFrame) -> dict[str, float]:
    if mode == "official":
        return dict(REWARDBENCH_WEIGHTS)
    if mode != "observed":
        raise ValueError(f"weights must be 'official' or 'observed', got {mode!r}")
    # observed sizes; math-prm still weighs as the hep-* subsets present together
    n = units["subset"].value_counts().to_dict()
    return rewardbench_data.section_weights({s: int(n.get(s, 0)) for s in REWARDBENCH_WEIGHTS})
