"""RMB (GitHub `Zhou-Zoey/RMB-Reward-Model-Benchmark`, folder `RMB_dataset/`). No official hub
copy, so a path is required.

GitHub layout: `Pairwise_set/Harmlessness/{S1..S11,multi}.json`,
`Pairwise_set/Helpfulness/<Category>/<Scenario>.json` (file names contain spaces) and the same
under `BoN_set/`. Each file is a JSON array. Pairwise records: `pair_uid`, `conversation_input`
(list of {role, content, language}), `chosen` {llm_name, answer}, `reject` {llm_name, answer}
(note: "reject", not "rejected"), `category_path`. Best-of-N records: `bon_uid`,
`conversation_input`, `bon_best` {llm_name, answer}, `loser_list` [{llm_name, answer}, ...],
`category_path`. A BoN item becomes one pair per loser (id "{bon_uid}/{k}", meta `bon_uid`) so
metrics can require all of an item's pairs to be right.

Placement: RMB stores no order (chosen/reject), so the better response is placed by a seeded
draw per pair id, as for RewardBench; the benchmark's "given" order would put it first always.

The third-party hub mirror `dd101bb/RMB_dataset` (splits `pairwise`/`bon`, columns `uid,
conversation, responses, preferred_index, category_path, split_type`) is read tolerantly (unsure:
its format could not be checked): pass its hub id as path, or a local copy of its files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmlib.config.errors import short
from rmlib.data._io import (
    Drop,
    Row,
    chain_files,
    collect,
    hub_rows,
    is_hub_id,
    no_options,
    place,
    split_files,
)
from rmlib.data.pair import LoadResult, OnError, Pair

SOURCE = "rmb"
MIRROR_HUB_ID = "dd101bb/RMB_dataset"  # third-party, unsure
SETS: tuple[str, ...] = ("pairwise", "bon")
SET_FOLDERS: dict[str, str] = {"pairwise_set": "pairwise", "bon_set": "bon"}
GOALS: tuple[str, ...] = ("helpfulness", "harmlessness")


def load_rmb(
    path: str | None = None,
    *,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """RMB pairs. split: "both" (the registry's default), "pairwise" or "bon" (which sets to
    read).

    path: the `RMB_dataset/` folder (or a sub-folder, or one .json file), a local copy of the
    mirror's split files, or the mirror's hub id. subset: "{set}/{goal}" (e.g. "bon/harmlessness");
    meta: set, goal, category_path, category (the path below the goal), scenario, language,
    chosen_model, rejected_model; BoN pairs add bon_uid, loser_index, n_losers.
    """
    no_options(SOURCE, options)
    if split != "both" and split not in SETS:
        raise ValueError(f"rmb split must be one of {['both', *SETS]}, got {split!r}")
    if path is None:
        raise ValueError(
            "rmb has no official hub copy: pass the GitHub RMB_dataset/ folder or "
            f"a file of it with --path FILE_OR_DIR (or the mirror {MIRROR_HUB_ID})"
        )
    sets = SETS if split == "both" else (split,)
    rows, hints = _rows(str(path), sets, config)
    result = LoadResult(SOURCE, str(path), split, [])
    return collect(
        result,
        rows,
        lambda row: _pairs(row, sets, hints.get(row.file), seed),
        on_error,
        id_field=("pair_uid", "bon_uid", "uid"),
    )


# ---------------------------------------------------------------- finding the rows


def _set_of_path(parts: tuple[str, ...]) -> str | None:
    return next((SET_FOLDERS[p.lower()] for p in parts if p.lower() in SET_FOLDERS), None)


def _rows(
    path: str, sets: tuple[str, ...], config: str | None
) -> tuple[Iterator[Row], dict[str, str]]:
    """Rows and, per file, the set its location names (None when it names none)."""
    p = Path(path).expanduser()
    if p.is_file():
        return chain_files([p]), {}
    if p.is_dir():
        files = sorted(p.rglob("*.json"), key=lambda f: f.relative_to(p).as_posix())
        if files:  # GitHub layout: keep the files of the chosen sets (or of no known set)
            keep = [f for f in files if _set_of_path(f.resolve().parts) in (None, *sets)]
            return chain_files(keep), {}
        per_set = {s: split_files(p, s, config) for s in sets}  # a copy of the mirror's files
        hints = {str(f): s for s, fs in per_set.items() for f in fs}
        return chain_files([f for fs in per_set.values() for f in fs]), hints
    if is_hub_id(path):
        rows = [(s, hub_rows(path, split=s, config=config)) for s in sets]
        hints = {f"{path}[{config + ':' if config else ''}{s}]": s for s in sets}
        return (r for _, it in rows for r in it), hints
    raise FileNotFoundError(f"no such file or directory: {path}")


# ---------------------------------------------------------------- records → pairs


def _pairs(row: Row, sets: tuple[str, ...], hint: str | None, seed: int) -> list[Pair]:
    data = row.data if isinstance(row.data, dict) else {}
    if "pair_uid" in data or "reject" in data:
        kind = "pairwise"
    elif "bon_uid" in data or "bon_best" in data or "loser_list" in data:
        kind = "bon"
    elif "preferred_index" in data or "responses" in data:
        return _mirror(row, sets, hint, seed)
    else:
        raise row.fail(
            None,
            "unrecognised RMB record (expected pair_uid/chosen/reject, "
            "bon_uid/bon_best/loser_list, or the mirror's uid/responses/"
            "preferred_index)",
            "value",
        )
    if kind not in sets:
        raise Drop(f"{kind} record outside split")
    context = row.context("conversation_input", row.messages("conversation_input"))
    if kind == "pairwise":
        best, losers = _answer(row, "chosen"), [_answer(row, "reject")]
        uid = row.ident("pair_uid")
    else:
        best, losers, uid = _answer(row, "bon_best"), _losers(row), row.ident("bon_uid")
    base = _base_meta(row, kind, row.opt("category_path"), row.opt("conversation_input"))
    return _build(uid, kind, context, best, losers, base, seed)


def _answer(row: Row, field: str, value: Any = None) -> tuple[str, Any]:
    """(answer text, llm_name) of a {llm_name, answer} response (a plain string is accepted)."""
    v = row.get(field) if value is None else value
    if isinstance(v, str):
        return row.text(field, v), None
    if not isinstance(v, dict):
        raise row.fail(field, f"expected {{llm_name, answer}}, got {type(v).__name__}", "type")
    return row.text(f"{field}.answer", v.get("answer")), v.get("llm_name")


def _losers(row: Row) -> list[tuple[str, Any]]:
    value = row.get("loser_list")
    if not isinstance(value, list) or not value:
        raise row.fail("loser_list", "expected a non-empty list of responses", "type")
    return [_answer(row, f"loser_list[{k}]", v) for k, v in enumerate(value)]


def _base_meta(row: Row, kind: str, category_path: Any, conversation: Any) -> dict[str, Any]:
    cat_parts = tuple(str(category_path).split("/")) if category_path else ()
    file_parts = Path(row.file).with_suffix("").parts
    goal = next((p.lower() for p in (*cat_parts, *file_parts) if p.lower() in GOALS), None)
    if goal is None:
        raise row.fail(
            "category_path",
            f"cannot tell helpfulness from harmlessness in {short(category_path, 120)}",
            "value",
        )
    idx = [p.lower() for p in cat_parts].index(goal) if goal in map(str.lower, cat_parts) else -1
    category = "/".join(cat_parts[idx + 1 :]) if idx >= 0 else ""
    last = conversation[-1] if isinstance(conversation, list) and conversation else {}
    return {
        "set": kind,
        "goal": goal,
        "category_path": category_path,
        "category": category,
        "scenario": cat_parts[-1] if cat_parts else Path(row.file).stem,
        "language": last.get("language") if isinstance(last, dict) else None,
    }


def _build(
    uid: str,
    kind: str,
    context: tuple[dict[str, str], ...],
    best: tuple[str, Any],
    losers: list[tuple[str, Any]],
    base: dict[str, Any],
    seed: int,
) -> list[Pair]:
    subset = f"{kind}/{base['goal']}"
    pairs = []
    for k, (text, model) in enumerate(losers):
        pid = uid if kind == "pairwise" else f"{uid}/{k}"
        r1, r2, label = place(pid, seed, best[0], text)
        meta = {**base, "chosen_model": best[1], "rejected_model": model}
        if kind == "bon":
            meta |= {"bon_uid": uid, "loser_index": k, "n_losers": len(losers)}
        pairs.append(Pair(pid, SOURCE, subset, context, r1, r2, label, meta))
    return pairs


def _mirror(row: Row, sets: tuple[str, ...], hint: str | None, seed: int) -> list[Pair]:
    """A record of the hub mirror (unsure): uid, conversation, responses, preferred_index."""
    responses = row.get("responses")
    if not isinstance(responses, list) or len(responses) < 2:
        raise row.fail("responses", "expected a list of at least 2 responses", "type")
    best_at = row.get("preferred_index")
    if (
        isinstance(best_at, bool)
        or not isinstance(best_at, int)
        or not (0 <= best_at < len(responses))
    ):
        raise row.fail(
            "preferred_index", f"label {short(best_at, 80)} not an index of responses", "label"
        )
    stated = str(row.opt("split_type") or "").lower()
    kind = stated if stated in SETS else hint or ("pairwise" if len(responses) == 2 else "bon")
    if kind not in sets:
        raise Drop(f"{kind} record outside split")
    conv = row.get("conversation")
    msgs = (
        row.messages("conversation")
        if isinstance(conv, list)
        else ({"role": "user", "content": row.text("conversation", kind="empty_prompt")},)
    )
    context = row.context("conversation", msgs)
    answers = [_answer(row, f"responses[{k}]", v) for k, v in enumerate(responses)]
    losers = [a for k, a in enumerate(answers) if k != best_at]
    base = _base_meta(row, kind, row.opt("category_path"), conv)
    return _build(row.ident("uid"), kind, context, answers[best_at], losers, base, seed)
