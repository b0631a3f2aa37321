"""Skywork-Reward-Preference-80K-v0.2 (`Skywork/Skywork-Reward-Preference-80K-v0.2`, split
`train`): `chosen` and `rejected` are whole message lists sharing a prefix; the last assistant
turn differs. The shared prefix is the context; the chosen turn is placed by a seeded draw.
"""

from __future__ import annotations

from typing import Any

from rmlib.data._io import Row, collect, no_options, place, rows_for
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "skywork"


def load_skywork(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """Skywork pairs: id = row index, subset = `source` (upstream origin; "unknown" if absent),
    meta: source. Rows whose lists do not share the prefix before a final assistant turn raise
    DataError kind "prefix".

    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: [_pair(row, seed)], on_error)


def _pair(row: Row, seed: int) -> Pair:
    chosen, rejected = row.messages("chosen"), row.messages("rejected")
    if chosen[-1]["role"] != "assistant" or rejected[-1]["role"] != "assistant":
        raise row.fail(
            "chosen" if chosen[-1]["role"] != "assistant" else "rejected",
            "last message must be the assistant's response",
            "messages",
        )
    if chosen[:-1] != rejected[:-1]:
        raise row.fail(
            "rejected",
            "chosen and rejected do not share the messages before the last assistant turn",
            "prefix",
        )
    context = row.context("chosen", chosen[:-1])
    pid = str(row.ordinal)
    r1, r2, label = place(
        pid,
        seed,
        row.text("chosen", chosen[-1]["content"]),
        row.text("rejected", rejected[-1]["content"]),
    )
    source = row.opt_text("source", "unknown")
    return Pair(pid, SOURCE, source, context, r1, r2, label, {"source": source})
