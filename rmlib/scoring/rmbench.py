"""RM-Bench's official rule: per prompt a 3x3 matrix M[i][j] = chosen i beats rejected j (styles:
concise, detailed plain, detailed markdown); averaged over a domain's prompts; hard = cells above
the diagonal (i < j), normal = the diagonal, easy = below; safety-refuse and safety-response
pooled into safety; domain = mean of hard, normal, easy; overall = mean of domains.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from rmlib.scoring.aggregate import Aggregate, no_options
from rmlib.scoring.predictions import bad_row
from rmlib.scoring.rules import rule

RMBENCH_DOMAINS: tuple[str, ...] = ("chat", "math", "code", "safety")


RMBENCH_DOMAIN_OF: dict[str, str] = {
    "chat": "chat",
    "math": "math",
    "code": "code",
    "safety": "safety",
    "safety-refuse": "safety",
    "safety-response": "safety",
}


_RMBENCH_CELL = re.compile(r"^(?P<prompt>.+)/c(?P<i>\d+)r(?P<j>\d+)$")


def rmbench_cell(pid: str, meta: dict[str, Any] | None = None) -> tuple[str, int, int]:
    """(prompt id, i, j) of an RM-Bench pair: from meta (`prompt_id`, `chosen_index`/`i`,
    `rejected_index`/`j`) when present, else from the id `"<prompt id>/c<i>r<j>"` (0-based)."""
    meta = meta or {}
    i = _first(meta, "chosen_index", "chosen_style", "i")
    j = _first(meta, "rejected_index", "rejected_style", "j")
    prompt = _first(meta, "prompt_id", "rmbench_id")
    m = _RMBENCH_CELL.match(pid)
    if m:
        prompt = prompt if prompt is not None else m["prompt"]
        i = i if i is not None else int(m["i"])
        j = j if j is not None else int(m["j"])
    if prompt is None or i is None or j is None:
        raise ValueError(f"RM-Bench id {pid!r} carries no cell (expected '<prompt>/c<i>r<j>')")
    return str(prompt), int(i), int(j)


def _first(meta: dict[str, Any], *keys: str) -> Any:
    return next(
        (
            meta[k]
            for k in keys
            if isinstance(meta.get(k), int | str) and not isinstance(meta.get(k), bool)
        ),
        None,
    )


def _rmbench_domain(prompt: str, subset: Any) -> str | None:
    for cand in (subset, prompt.split("/")[0]):
        if isinstance(cand, str) and cand.lower() in RMBENCH_DOMAIN_OF:
            return RMBENCH_DOMAIN_OF[cand.lower()]
    return None


def _rmbench_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with prompt, domain, i, j; duplicate cells and bad ids raise DataError."""
    metas = rows["meta"] if "meta" in rows else [None] * len(rows)
    subsets = rows["subset"] if "subset" in rows else [None] * len(rows)
    cols: dict[str, list[Any]] = {"prompt": [], "domain": [], "i": [], "j": []}
    for r, (pid, meta, sub) in enumerate(zip(rows["id"], metas, subsets, strict=True)):
        try:
            prompt, i, j = rmbench_cell(pid, meta if isinstance(meta, dict) else None)
        except ValueError as e:
            raise bad_row(rows, r, "id", str(e), "value") from None
        if not (0 <= i < 3 and 0 <= j < 3):
            raise bad_row(rows, r, "id", f"RM-Bench cell ({i}, {j}) outside 0..2", "value")
        domain = _rmbench_domain(prompt, sub)
        if domain is None:
            raise bad_row(rows, r, "subset", f"no RM-Bench domain for {pid!r}", "value")
        for k, v in zip(cols, (prompt, domain, i, j), strict=True):
            cols[k].append(v)
    cells = rows.assign(**cols)
    dup = cells.duplicated(["prompt", "i", "j", "order"])
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise bad_row(
            cells,
            r,
            "id",
            f"RM-Bench prompt {cells.at[r, 'prompt']!r} "
            f"cell ({cells.at[r, 'i']}, {cells.at[r, 'j']}) appears twice: the nine "
            "cells must come from nine distinct comparisons",
            "duplicate",
        )
    return cells


# RM-Bench's cell is 1 only when the chosen response strictly wins (docs/benchmarks.md; upstream
# code compared): a parse failure is credited nothing whatever `failure_credit` says.
@rule("rmbench", no_failure_credit=True)
def rmbench_aggregate(rows: pd.DataFrame, require_complete: bool = True, **opts: Any) -> Aggregate:
    no_options("rmbench", opts)
    cells = _rmbench_cells(rows)
    # a cell's value: its credit, averaged over orders when order='both'
    per_cell = (
        cells.groupby(["prompt", "i", "j"], sort=True)
        .agg(value=("value", "mean"), domain=("domain", "first"))
        .reset_index()
    )
    prompts = sorted(set(per_cell["prompt"]))
    p_index = {p: k for k, p in enumerate(prompts)}
    vals = np.zeros((len(prompts), 9))
    mask = np.zeros((len(prompts), 9))
    pos = per_cell["prompt"].map(p_index).to_numpy()
    flat = (per_cell["i"] * 3 + per_cell["j"]).to_numpy()
    vals[pos, flat] = per_cell["value"].to_numpy()
    mask[pos, flat] = 1.0
    incomplete = [p for p, k in p_index.items() if mask[k].sum() < 9]
    if incomplete and require_complete:
        r = int(np.flatnonzero(cells["prompt"] == incomplete[0])[0])
        raise bad_row(
            cells,
            r,
            "id",
            f"RM-Bench prompt {incomplete[0]!r} has "
            f"{int(mask[p_index[incomplete[0]]].sum())} of 9 cells "
            "(pass require_complete=False to pool the cells present)",
            "incomplete",
        )
    dom_of = per_cell.groupby("prompt")["domain"].first()
    domains = [d for d in RMBENCH_DOMAINS if d in set(dom_of)]
    dcode = np.array([domains.index(dom_of[p]) for p in prompts])
    fn = _rmbench_fn(vals, mask, dcode, domains)
    details = {
        "n": len(prompts),
        "n_cells": int(mask.sum()),
        "n_incomplete_prompts": len(incomplete),
        "partial": len(domains) < len(RMBENCH_DOMAINS),
        "missing_domains": [d for d in RMBENCH_DOMAINS if d not in domains],
        "domains": {
            d: {
                "n": int((dcode == k).sum()),
                "n_parse_failures": int(cells.loc[cells["domain"] == d, "verdict"].isna().sum()),
            }
            for k, d in enumerate(domains)
        },
        "levels": {},
    }
    names = [("score",), *[("levels", lvl) for lvl in _LEVELS]]
    for d in domains:
        names += [("domains", d), *[("domains", d, lvl) for lvl in _LEVELS]]
    return Aggregate(prompts, names, fn, list(dcode), details)


_LEVELS = ("hard", "normal", "easy")


_UPPER = np.array([i < j for i in range(3) for j in range(3)])


_DIAG = np.array([i == j for i in range(3) for j in range(3)])


_LOWER = np.array([i > j for i in range(3) for j in range(3)])


def rmbench_levels(matrix: np.ndarray) -> dict[str, float]:
    """hard / normal / easy of a (prompt-averaged) 3x3 matrix M[chosen i][rejected j]."""
    m = np.asarray(matrix, dtype=float).reshape(9)
    return {
        "hard": float(np.nanmean(m[_UPPER])),
        "normal": float(np.nanmean(m[_DIAG])),
        "easy": float(np.nanmean(m[_LOWER])),
    }


def _rmbench_fn(
    vals: np.ndarray, mask: np.ndarray, dcode: np.ndarray, domains: list[str]
) -> Callable[[np.ndarray], np.ndarray]:
    def fn(idx: np.ndarray) -> np.ndarray:
        per_domain = []
        for k in range(len(domains)):
            sel = idx[dcode[idx] == k]
            with np.errstate(all="ignore"):
                m = vals[sel].sum(0) / mask[sel].sum(0)  # cell averages over the domain's prompts
            lv = rmbench_levels(m)
            per_domain.append([np.mean(list(lv.values())), lv["hard"], lv["normal"], lv["easy"]])
        arr = np.array(per_domain).reshape(len(domains), 4)
        head = [arr[:, 0].mean(), arr[:, 1].mean(), arr[:, 2].mean(), arr[:, 3].mean()]
        return np.array(head + list(arr.reshape(-1)))

    return fn
