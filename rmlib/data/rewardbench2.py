"""RewardBench 2 (`allenai/reward-bench-2`, split `test`, 1,865 records) as pairwise comparisons.

Record: `id` (a string, unique only within a subset), `prompt`, `chosen` (the correct
completions), `rejected` (the others), `num_correct`, `num_incorrect`, `total_completions`,
`models`, `subset` (Factuality, Precise IF, Math, Safety, Focus, Ties), `additional_metadata`
(null on Ties rows). A completion's index is its place in `chosen + rejected`, upstream's order
(the first `num_correct` are correct), so per-completion scores line up with upstream's lists.

The protocol for a pairwise judge (docs/benchmarks.md): each comparison sets a correct
completion against an incorrect one, so every pair has a true label. Best-of-4 subsets: the
correct completion against each of the three others (all cross pairs). Ties (3-26 correct among
15-38): a seeded round robin across the two classes, each completion against `ties_opponents`
of the other class (all cross pairs once that reaches the larger class), so a Ties record costs
at most ties_opponents x total_completions comparisons per order instead of
num_correct x num_incorrect (e.g. 26 x 12 = 312 for `tied:2`). The run's `inference` section
says which orders are judged; `rmlib.scoring.rewardbench2` turns the verdicts into one score per
completion and scores it with upstream's rule.
"""

from __future__ import annotations

import random
import re
from typing import Any

from rmlib.data._io import Drop, Row, collect, place, rows_for, user
from rmlib.data.pair import LoadResult, OnError, Pair
from rmlib.data.spec import SourceSpec

SOURCE = "rewardbench2"
SUBSETS: tuple[str, ...] = ("Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties")
TIES = "Ties"
TIES_ID = re.compile(r"(tied|ref):(\d+)")  # upstream's "sample_type:prompt_id"


def record_key(subset: str, rid: str) -> str:
    """A record's key: `id` repeats across subsets, `subset/id` does not."""
    return f"{subset}/{rid}"


def load_rewardbench2(
    path: str | None = None,
    *,
    hub_id: str,
    split: str,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    subsets: list[str] | tuple[str, ...] | None = None,
    ties_opponents: int = 2,
) -> LoadResult:
    """RewardBench 2's comparisons: id `"{subset}/{id}/{c}v{i}"` (correct completion c against
    incorrect completion i, indices in upstream's `chosen + rejected` order), the correct one
    placed by a seeded draw (seed, pair id); meta: group (the record key, kept whole by
    subsampling), record_id, better (c), worse (i), num_correct, total_completions.

    path: a parquet/JSON(L) file, a folder of the hub layout (`data/test-*.parquet`), or the
    hub id. subsets: the subsets to judge (None = all six; the others are dropped and counted).
    ties_opponents: how many completions of the other class each Ties completion meets (>= 1).
    """
    chosen = tuple(SUBSETS if subsets is None else subsets)
    if unknown := [s for s in chosen if s not in SUBSETS]:
        raise ValueError(f"{SOURCE}: unknown subsets {unknown}; valid: {list(SUBSETS)}")
    k = ties_opponents
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{SOURCE}: ties_opponents must be an integer >= 1, got {k!r}")
    where, rows = rows_for(path, hub_id=hub_id, split=split, config=config)
    result = LoadResult(SOURCE, where, split, [])
    return collect(result, rows, lambda row: _pairs(row, seed, chosen, ties_opponents), on_error)


def _pairs(row: Row, seed: int, subsets: tuple[str, ...], k: int) -> list[Pair]:
    subset = row.text("subset", kind="value")
    if subset not in SUBSETS:
        raise row.fail("subset", f"unknown RewardBench 2 subset {subset!r}", "value")
    rid = row.ident("id")
    correct, incorrect = _texts(row, "chosen"), _texts(row, "rejected")
    _check_counts(row, subset, rid, len(correct), len(incorrect))
    if subset not in subsets:
        raise Drop(f"subset {subset} not selected")
    query = row.text("prompt", kind="empty_prompt")
    key = record_key(subset, rid)
    texts = [*correct, *incorrect]
    nc = len(correct)
    if subset == TIES:
        matches = _round_robin(key, seed, nc, len(incorrect), k)
    else:
        matches = [(0, 1 + j) for j in range(len(incorrect))]
    out = []
    for c, i in matches:
        pid = f"{key}/{c}v{i}"
        r1, r2, label = place(pid, seed, texts[c], texts[i])
        meta = {
            "group": key,
            "record_id": rid,
            "better": c,
            "worse": i,
            "num_correct": nc,
            "total_completions": len(texts),
            "both_orders": True,  # the per-completion scores count both orders
        }
        out.append(Pair(pid, SOURCE, subset, user(query), r1, r2, label, meta))
    return out


def _texts(row: Row, field: str) -> list[str]:
    v = row.get(field)
    if not isinstance(v, list | tuple):
        raise row.fail(field, f"expected a list of completions, got {type(v).__name__}", "type")
    return [row.text(f"{field}[{n}]", t) for n, t in enumerate(v)]


def _check_counts(row: Row, subset: str, rid: str, nc: int, ni: int) -> None:
    """The counts agree with the lists; best-of-4 rows have one correct completion; a Ties id is
    `tied:N` (several correct) or `ref:N` (one)."""
    for field, n in (
        ("num_correct", nc),
        ("num_incorrect", ni),
        ("total_completions", nc + ni),
    ):
        v = row.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or v != n:
            raise row.fail(field, f"{field} {v!r} disagrees with the lists ({n})", "value")
    if ni < 1:
        raise row.fail("rejected", "no incorrect completion", "value")
    if subset != TIES:
        if nc != 1:
            need = f"a {subset} record needs exactly 1 correct completion, got {nc}"
            raise row.fail("chosen", need, "value")
        return
    m = TIES_ID.fullmatch(rid)
    if m is None:
        raise row.fail("id", f"a Ties id is 'tied:N' or 'ref:N', got {rid!r}", "value")
    if (m.group(1) == "tied") != (nc > 1):
        need = "several correct completions" if m.group(1) == "tied" else "exactly 1 correct"
        raise row.fail("chosen", f"a {m.group(1)}: record needs {need}, got {nc}", "value")


def _round_robin(key: str, seed: int, nc: int, ni: int, k: int) -> list[tuple[int, int]]:
    """(correct, incorrect) index pairs: each completion meets min(k, other class) distinct ones
    of the other class, the classes shuffled by (seed, record) and matched cyclically, so the
    opponents spread evenly over the other class."""
    rng = random.Random(f"{seed}:{key}")
    cs, inc = list(range(nc)), list(range(nc, nc + ni))
    rng.shuffle(cs)
    rng.shuffle(inc)
    matches: set[tuple[int, int]] = set()
    for t, c in enumerate(cs):
        matches.update((c, inc[(t + s) % ni]) for s in range(min(k, ni)))
    for t, i in enumerate(inc):
        matches.update((cs[(t + s) % nc], i) for s in range(min(k, nc)))
    return sorted(matches)


def opponents_cost(num_correct: int, num_incorrect: int, k: int) -> int:
    """Comparisons (one order) a Ties record costs with `k` opponents per completion."""
    return len(_round_robin("", 0, num_correct, num_incorrect, k))


# The full set's records per subset (the hub card; docs/benchmarks.md).
SUBSET_SIZES: dict[str, int] = {
    "Factuality": 475,
    "Precise IF": 160,
    "Math": 183,
    "Safety": 450,
    "Focus": 495,
    "Ties": 102,
}
# (num_correct, num_incorrect) of the 22 Ties records of the shared sample
# (/work/shared/data/rewardbench2): the dry run's Ties cost per record is their mean.
SAMPLE_TIES: tuple[tuple[int, int], ...] = (
    (10, 12), (1, 21), (8, 11), (1, 18), (26, 12), (1, 37), (6, 11), (1, 16), (12, 11), (1, 22),
    (6, 13), (1, 18), (4, 11), (1, 14), (6, 10), (1, 15), (12, 11), (1, 18), (3, 14), (1, 14),
    (8, 11), (1, 14),
)  # fmt: skip


def set_pairs(options: dict[str, Any]) -> int:
    """Comparisons (one order) the full set makes with these loader options: 3 per best-of-4
    record; a Ties record the sample's mean round-robin cost at `ties_opponents`."""
    subsets = options.get("subsets") or SUBSETS
    k = int(options.get("ties_opponents", 2))
    n = sum(3 * SUBSET_SIZES[s] for s in subsets if s != TIES)
    if TIES in subsets:
        per = sum(opponents_cost(c, i, k) for c, i in SAMPLE_TIES) / len(SAMPLE_TIES)
        n += round(SUBSET_SIZES[TIES] * per)
    return n


# Its data-registry entry (`rmlib.data.registry` lists it): Ties' rule is not accuracy, so the
# official score is `rmlib.scoring.rewardbench2`'s.
SPEC = SourceSpec(
    SOURCE,
    load_rewardbench2,
    "allenai/reward-bench-2",
    "test",
    splits=("test",),
    doc="1,865 records: best-of-4 and Ties, judged as correct-vs-incorrect pairs",
    title="RewardBench 2",
    published_pairs=1_865,
    scoring=SOURCE,
    unit="prompts (Ties: tied/ref prompt pairs)",
    pairs_for=set_pairs,
    both_orders=True,
)
