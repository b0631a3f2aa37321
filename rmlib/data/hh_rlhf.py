"""Anthropic HH-RLHF (`Anthropic/hh-rlhf`; the subset folder, e.g. "harmless-base", is the
`data_dir`, passed here as `config`; splits `train` and `test`).

Each row's `chosen` and `rejected` are whole dialogues "\\n\\nHuman: ...\\n\\nAssistant: ..." that
should differ only in the last assistant turn. The shared dialogue before it is the context, the
two last assistant turns the responses, placed by a seeded draw (seed, id).

Parsing: a turn starts at "\\n\\nHuman:" or "\\n\\nAssistant:" (or the text's start); turn texts
are stripped. Consecutive turns of one speaker are merged into one message, joined by a blank
line: upstream has a few dialogues whose last assistant turn runs on into a second "Assistant:"
segment (in harmless-base/test, 5 rows would otherwise not share their prefix). Rows whose two
dialogues still do not share the prefix raise DataError kind "prefix"; an empty last turn is an
empty response (harmless-base/test has 4 rows with an empty chosen answer).
"""

from __future__ import annotations

import re
from typing import Any

from rmlib.data._io import Row, collect, no_options, place, rows_for
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "hh-rlhf"
_TURN = re.compile(r"(?:^|\n\n)(Human|Assistant):")
_ROLE = {"Human": "user", "Assistant": "assistant"}


def load_hh_rlhf(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str,
    config_is_data_dir: bool,
    seed: int = 0,
    on_error: OnError = "raise",
    allow_empty: bool = True,
    **options: Any,
) -> LoadResult:
    """HH-RLHF pairs: id = row index, subset = the data_dir (config), meta: n_turns.

    path: a `.jsonl(.gz)` file, the repo folder (`<config>/<split>.jsonl.gz`), or the hub id.
    allow_empty: upstream has final assistant replies that are empty (harmless-base test: 4
    chosen ones, an assistant that says nothing preferred to a harmful answer). They are data,
    kept by default and tagged `meta["empty_response"]` ("chosen"/"rejected"); `rmlib data
    stats` counts them. False treats them as bad rows (raise or skip).
    hub_id, split, config, config_is_data_dir: the registry entry's (`rmlib.data.load` passes
    them, its defaults filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(
        path, hub_id=hub_id, split=split, config=config, config_is_data_dir=config_is_data_dir
    )
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: [_pair(row, config, seed, allow_empty)], on_error)


def parse_dialogue(text: str) -> list[dict[str, str]] | None:
    """Messages of a "\\n\\nHuman: ...\\n\\nAssistant: ..." dialogue, consecutive turns of one
    speaker merged; None when text comes before the first speaker tag."""
    parts = _TURN.split(text)
    if parts[0].strip():
        return None
    msgs: list[dict[str, str]] = []
    for tag, content in zip(parts[1::2], parts[2::2], strict=True):
        role, content = _ROLE[tag], content.strip()
        if msgs and msgs[-1]["role"] == role:
            msgs[-1]["content"] = f"{msgs[-1]['content']}\n\n{content}".strip()
        else:
            msgs.append({"role": role, "content": content})
    return msgs


def _dialogue(row: Row, field: str) -> list[dict[str, str]]:
    msgs = parse_dialogue(row.text(field))
    if not msgs or msgs[-1]["role"] != "assistant":
        raise row.fail(
            field,
            "expected a dialogue '\\n\\nHuman: ...\\n\\nAssistant: ...' ending "
            "with an assistant turn",
            "messages",
        )
    return msgs


def _pair(row: Row, config: str, seed: int, allow_empty: bool = True) -> Pair:
    chosen, rejected = _dialogue(row, "chosen"), _dialogue(row, "rejected")
    if chosen[:-1] != rejected[:-1]:
        raise row.fail(
            "rejected",
            "chosen and rejected do not share the dialogue before the last assistant turn",
            "prefix",
        )
    context = row.context("chosen", chosen[:-1])
    pid = str(row.ordinal)
    good = row.text("chosen", chosen[-1]["content"], allow_empty=allow_empty)
    bad = row.text("rejected", rejected[-1]["content"], allow_empty=allow_empty)
    r1, r2, label = place(pid, seed, good, bad)
    meta: dict[str, Any] = {"n_turns": len(chosen)}
    empty = [name for name, text in (("chosen", good), ("rejected", bad)) if not text.strip()]
    if empty:
        meta["empty_response"] = "+".join(empty)
    return Pair(pid, SOURCE, config, context, r1, r2, label, meta)
