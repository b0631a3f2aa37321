"""HelpSteer3-Preference (`nvidia/HelpSteer3`, config "preference", splits train / validation).

Columns: `domain` (general, stem, code, multilingual), `language`, `context` (list of
{role, content}, the last turn the user's), `response1`, `response2`, `overall_preference`
(int -3..3; negative = response 1 better, 0 = tie), `individual_preference`. The given order is
kept: label 1 if overall_preference < 0, 2 if > 0. Ties are dropped and counted by default
(some public loaders silently send them to response 2; this one never does).
"""

from __future__ import annotations

from typing import Any

from rmlib.config.errors import short
from rmlib.data._io import Drop, Row, collect, no_options, rows_for
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "helpsteer3"
PREFERENCE_RANGE = range(-3, 4)


def load_helpsteer3(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str,
    seed: int = 0,
    on_error: OnError = "raise",
    drop_ties: bool = True,
    **options: Any,
) -> LoadResult:
    """HelpSteer3 preference pairs: id = row index, subset = domain, meta: domain, language,
    overall_preference.

    path: a JSON(L)/parquet file, the repo folder (`preference/train.jsonl.gz`, or the
    `data/<split>-*` layout), or the hub id. drop_ties (default True): a tie is left out and
    counted in `dropped["tie"]`; with False a tie is bad input (it cannot be a pair with a
    label), raised or, with on_error="skip", counted as "bad label". seed is unused.
    hub_id, split, config: the registry entry's (`rmlib.data.load` passes them, its defaults
    filled in).
    """
    no_options(SOURCE, options)
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: [_pair(row, drop_ties)], on_error)


def _pair(row: Row, drop_ties: bool) -> Pair:
    pref = row.get("overall_preference")
    if isinstance(pref, bool) or not isinstance(pref, int) or pref not in PREFERENCE_RANGE:
        raise row.fail(
            "overall_preference", f"label {short(pref, 80)} not an integer in -3..3", "label"
        )
    context = row.context("context", row.messages("context"))
    r1, r2 = row.text("response1"), row.text("response2")
    if pref == 0:
        if drop_ties:
            raise Drop("tie")
        raise row.fail("overall_preference", "tie (0) cannot be a labelled pair", "label")
    domain = row.text("domain", kind="value")
    meta = {"domain": domain, "language": row.opt("language"), "overall_preference": pref}
    return Pair(str(row.ordinal), SOURCE, domain, context, r1, r2, 1 if pref < 0 else 2, meta)
