"""JudgeBench (`ScalerLab/JudgeBench`, splits `gpt` (350) and `claude` (270)).

Row: `pair_id`, `original_id`, `source` (mmlu-pro-<subject>, livebench-reasoning,
livebench-math, livecodebench), `question`, `response_model`, `response_A`, `response_B`,
`label` ("A>B" or "B>A" only). The benchmark's given order is kept (label 1 for "A>B").
"""

from __future__ import annotations

from typing import Any

from rmlib.data._io import Row, collect, no_options, rows_for, user
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "judgebench"
LABELS: dict[str, int] = {"A>B": 1, "B>A": 2}


def category_of(source: str) -> str | None:
    """knowledge (mmlu-pro-*), reasoning, math (livebench-*), coding (livecodebench); None if
    unknown. The category list itself is `rmlib.scoring.judgebench.JUDGEBENCH_CATEGORIES`."""
    s = source.lower()
    if s.startswith("mmlu-pro"):
        return "knowledge"
    for prefix, cat in (
        ("livebench-reasoning", "reasoning"),
        ("livebench-math", "math"),
        ("livecodebench", "coding"),
    ):
        if s.startswith(prefix):
            return cat
    return None


def load_judgebench(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """JudgeBench pairs in the given order: id = pair_id, subset = category (knowledge,
    reasoning, math, coding), meta: source, category, original_id, response_model.

    path: a JSONL file, a folder of the hub layout (`data/<split>-00000-of-00001.jsonl`), or the
    hub id. `seed` is unused (the order is the benchmark's).
    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    return collect(
        LoadResult(SOURCE, where, split, []),
        rows,
        lambda row: [_pair(row)],
        on_error,
        id_field="pair_id",
    )


def _pair(row: Row) -> Pair:
    source = row.text("source", kind="value")
    category = category_of(source)
    if category is None:
        raise row.fail("source", f"unknown JudgeBench source {source!r}", "value")
    meta = {
        "source": source,
        "category": category,
        "original_id": row.opt("original_id"),
        "response_model": row.opt("response_model"),
    }
    return Pair(
        row.ident("pair_id"),
        SOURCE,
        category,
        user(row.text("question", kind="empty_prompt")),
        row.text("response_A"),
        row.text("response_B"),
        row.label("label", LABELS),
        meta,
    )
