"""PPE human preference (`lmarena-ai/PPE-Human-Preference-V1`, split `test`).

Columns: `question_id`, `model_a`, `model_b`, `winner` ("model_a", "model_b" or a tie value such
as "tie" / "tie (bothbad)"), `prompt` (a string), `response_1` (model_a's), `response_2`
(model_b's), `language`, `conv_metadata`, category flags. The given order is kept: label 1 if
winner == "model_a". How earlier turns of multi-turn rows fold into `prompt` is undocumented
(unsure): `prompt` is taken as one user turn; a list of {role, content} messages is accepted too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rmlib.data._io import Drop, Row, collect, no_options, rows_for, user
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "ppe"
LABELS: dict[str, int] = {"model_a": 1, "model_b": 2}


def load_ppe(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    drop_ties: bool = True,
    **options: Any,
) -> LoadResult:
    """PPE pairs: id = question_id (a repeat gets "#2", "#3", ...), subset = language,
    meta: model_a, model_b, winner, language.

    drop_ties (default True): a winner starting with "tie" is left out and counted in
    `dropped["tie"]`; with False it is bad input ("bad label"). seed is unused.
    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    seen: Counter[str] = Counter()
    result = LoadResult(SOURCE, where, split, [])
    return collect(
        result, rows, lambda row: [_pair(row, drop_ties, seen)], on_error, id_field="question_id"
    )


def _context(row: Row) -> tuple[dict[str, str], ...]:
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return row.context("prompt", row.messages("prompt"))
    return user(row.text("prompt", kind="empty_prompt"))


def _pair(row: Row, drop_ties: bool, seen: Counter[str]) -> Pair:
    winner = row.get("winner")
    is_tie = isinstance(winner, str) and winner.lower().startswith("tie")
    context = _context(row)
    r1, r2 = row.text("response_1"), row.text("response_2")
    if is_tie and drop_ties:
        raise Drop("tie")
    label = row.label("winner", LABELS)
    qid = row.ident("question_id")
    seen[qid] += 1
    pid = qid if seen[qid] == 1 else f"{qid}#{seen[qid]}"
    language = row.opt_text("language", "unknown")
    meta = {
        "model_a": row.opt("model_a"),
        "model_b": row.opt("model_b"),
        "winner": winner,
        "language": language,
    }
    return Pair(pid, SOURCE, language, context, r1, r2, label, meta)
