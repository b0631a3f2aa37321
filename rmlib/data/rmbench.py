"""RM-Bench (`THU-KEG/RM-Bench`, split `train`, which is the evaluation set).

Row: `id` (string, e.g. "chat/100"), `prompt`, `chosen` (3 strings), `rejected` (3 strings),
`domain` (chat, code, math, safety-refuse, safety-response). The three responses of a side are
in style order concise, detailed plain, detailed markdown. Each prompt gives nine pairs,
chosen[i] vs rejected[j], id `"{id}/c{i}r{j}"`, each placed by its own seeded draw. The upstream
repository keeps one file, `total_dataset.json` (a JSON array), which a folder path may hold.
"""

from __future__ import annotations

from typing import Any

from rmlib.data._io import Row, collect, no_options, place, rows_for, user
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "rm-bench"
FILE_NAME = "total_dataset.json"
SPLITS = ("train",)  # the hub's one split, which is the evaluation set
STYLES: tuple[str, ...] = ("concise", "detailed plain", "detailed markdown")
DOMAIN_GROUP: dict[str, str] = {"safety-refuse": "safety", "safety-response": "safety"}


def difficulty(i: int, j: int) -> str:
    """hard when the chosen is plainer than the rejected (i < j), normal on the diagonal, easy
    below it."""
    return "hard" if i < j else "normal" if i == j else "easy"


def load_rmbench(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """RM-Bench as 9 pairs per prompt (every cell (i, j) of the 3x3 style matrix once).

    path: `total_dataset.json`, a folder holding it (or the hub's split files), or the hub id.
    subset: the upstream domain (safety-refuse and safety-response kept apart); meta: prompt_id,
    i, j (style indices of chosen and rejected), difficulty (hard/normal/easy), domain,
    domain_group ("safety" for both safety domains, else the domain). A row with a bad response
    gives no pair at all (its nine cells stay together) and counts once.
    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    if split not in SPLITS:  # a local copy is one file: a split it lacks would be read whole
        raise ValueError(
            f"RM-Bench has no split {split!r}; its splits: {', '.join(SPLITS)} (the evaluation set)"
        )
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config, file_names=(FILE_NAME,))
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: _pairs(row, seed), on_error)


def _responses(row: Row, field: str) -> list[str]:
    value = row.get(field)
    if not isinstance(value, list) or len(value) != len(STYLES):
        raise row.fail(field, f"expected a list of {len(STYLES)} responses", "type")
    return [row.text(f"{field}[{k}]", v) for k, v in enumerate(value)]


def _pairs(row: Row, seed: int) -> list[Pair]:
    prompt_id = row.ident("id")
    domain = row.text("domain", kind="value")
    context = user(row.text("prompt", kind="empty_prompt"))
    chosen, rejected = _responses(row, "chosen"), _responses(row, "rejected")
    pairs = []
    for i, good in enumerate(chosen):
        for j, bad in enumerate(rejected):
            pid = f"{prompt_id}/c{i}r{j}"
            r1, r2, label = place(pid, seed, good, bad)
            meta = {
                "prompt_id": prompt_id,
                "i": i,
                "j": j,
                "difficulty": difficulty(i, j),
                "domain": domain,
                "domain_group": DOMAIN_GROUP.get(domain, domain),
            }
            pairs.append(Pair(pid, SOURCE, domain, context, r1, r2, label, meta))
    return pairs
