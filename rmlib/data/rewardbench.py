"""RewardBench (`allenai/reward-bench`, split `filtered`): loader and the official subset map.

Columns: `prompt` (one user turn), `chosen`, `chosen_model`, `rejected`, `rejected_model`,
`subset`, `id` (int; unique only with the subset). There is no label column: the chosen response
is always the better one, so each pair places it in slot 1 or 2 by a seeded draw that depends
only on (seed, pair id) (`rmlib.data._io.place`).

The constants below are the official section map and sizes of the `filtered` split; metrics may
import them (one source of truth for the subset → section mapping).
"""

from __future__ import annotations

from typing import Any

from rmlib.data._io import Row, collect, no_options, place, rows_for, user
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "rewardbench"

SECTIONS: dict[str, tuple[str, ...]] = {
    "Chat": (
        "alpacaeval-easy",
        "alpacaeval-length",
        "alpacaeval-hard",
        "mt-bench-easy",
        "mt-bench-med",
    ),
    "Chat Hard": (
        "mt-bench-hard",
        "llmbar-natural",
        "llmbar-adver-neighbor",
        "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut",
        "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous",
        "refusals-offensive",
        "xstest-should-refuse",
        "xstest-should-respond",
        "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
SECTION_OF: dict[str, str] = {sub: sec for sec, subs in SECTIONS.items() for sub in subs}

# Official per-subset sizes of the `filtered` split (2,985 pairs in all).
SUBSET_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100,
    "alpacaeval-length": 95,
    "alpacaeval-hard": 95,
    "mt-bench-easy": 28,
    "mt-bench-med": 40,
    "mt-bench-hard": 37,
    "llmbar-natural": 100,
    "llmbar-adver-neighbor": 134,
    "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47,
    "llmbar-adver-manual": 46,
    "refusals-dangerous": 100,
    "refusals-offensive": 100,
    "xstest-should-refuse": 154,
    "xstest-should-respond": 250,
    "donotanswer": 136,
    "math-prm": 447,
    "hep-cpp": 164,
    "hep-go": 164,
    "hep-java": 164,
    "hep-js": 164,
    "hep-python": 164,
    "hep-rust": 164,
}


def section_weights(counts: dict[str, int] | None = None) -> dict[str, float]:
    """Per-subset weights inside a section: the subset size, except that math-prm weighs as much
    as the hep-* subsets together (984 with the official sizes), so math and code are half of
    Reasoning each."""
    counts = dict(SUBSET_COUNTS if counts is None else counts)
    hep = sum(n for s, n in counts.items() if s.startswith("hep-"))
    weights = {s: float(n) for s, n in counts.items()}
    if "math-prm" in weights and hep:
        weights["math-prm"] = float(hep)
    return weights


def load_rewardbench(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """RewardBench pairs: id `"{subset}/{id}"`, chosen placed by a seeded draw (seed, id).

    path: a parquet/JSON(L) file, a folder of the hub layout (`data/filtered-*.parquet`), or the
    hub id (default). split: "filtered" (the registry's default) or "raw". meta: section (None
    for a subset outside the official map, e.g. in `raw`), chosen_model, rejected_model,
    upstream_id.
    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: [_pair(row, seed)], on_error)


def _pair(row: Row, seed: int) -> Pair:
    subset = row.text("subset", kind="value")
    upstream = row.get("id")
    pid = f"{subset}/{row.ident('id')}"
    query = row.text("prompt", kind="empty_prompt")
    r1, r2, label = place(pid, seed, row.text("chosen"), row.text("rejected"))
    meta = {
        "section": SECTION_OF.get(subset),
        "chosen_model": row.opt("chosen_model"),
        "rejected_model": row.opt("rejected_model"),
        "upstream_id": upstream,
    }
    return Pair(pid, SOURCE, subset, user(query), r1, r2, label, meta)
