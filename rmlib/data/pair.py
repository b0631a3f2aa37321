"""The judged pair: one record type shared by every loader, prompt, store and metric.

A `Pair` is a conversation context (role/content messages, the last one the user's query) and two
candidate responses, with the human label (1 or 2: which response is better). `order` says whether
the responses are in the benchmark's given order or swapped; `id` names the underlying comparison,
so both orders of one pair share it and metrics can line them up.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Order = Literal["given", "swapped"]
OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class Pair:
    id: str
    source: str
    subset: str
    context: tuple[dict[str, str], ...]
    response1: str
    response2: str
    label: int
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    order: Order = "given"

    def __post_init__(self) -> None:
        if self.label not in (1, 2):
            raise ValueError(f"pair {self.id}: label must be 1 or 2, got {self.label!r}")
        if not self.context or self.context[-1].get("role") != "user":
            raise ValueError(f"pair {self.id}: context must end with a user message")

    @property
    def query(self) -> str:
        """The final user turn."""
        return self.context[-1]["content"]

    @property
    def key(self) -> str:
        """Identity of this pair in this order (`id` plus order), unique within a source."""
        return f"{self.source}:{self.id}:{self.order}"

    def swapped(self) -> Pair:
        """The same comparison with the responses exchanged (label follows the better one)."""
        return replace(
            self,
            response1=self.response2,
            response2=self.response1,
            label=3 - self.label,
            order="swapped" if self.order == "given" else "given",
        )

    def to_row(self) -> dict[str, Any]:
        """A flat row for parquet/jsonl tables (context and meta as JSON strings)."""
        return {
            "key": self.key,
            "id": self.id,
            "source": self.source,
            "subset": self.subset,
            "order": self.order,
            "context": json.dumps(list(self.context), ensure_ascii=False),
            "response1": self.response1,
            "response2": self.response2,
            "label": self.label,
            "meta": json.dumps(self.meta, ensure_ascii=False, default=str),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Pair:
        return cls(
            id=str(row["id"]),
            source=row["source"],
            subset=row["subset"],
            context=tuple(json.loads(row["context"])),
            response1=row["response1"],
            response2=row["response2"],
            label=int(row["label"]),
            meta=json.loads(row["meta"]) if row.get("meta") else {},
            order=row.get("order", "given"),
        )


def group_of(pair: Pair) -> str:
    """Pairs that must stay together when subsampling: an RM-Bench prompt's nine cells, an RMB
    best-of-N item's loser pairs. Everything else is its own group."""
    return str(
        pair.meta.get("group") or pair.meta.get("bon_uid") or pair.meta.get("prompt_id") or pair.id
    )


def subsample(pairs: Sequence[Pair], n: int, seed: int | str) -> list[Pair]:
    """About n pairs drawn at random by whole groups, in their original order."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(group_of(p), []).append(i)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    keep: list[int] = []
    for g in order:
        if len(keep) >= n:
            break
        keep.extend(groups[g])
    return [pairs[i] for i in sorted(keep)]


def both_orders(
    pairs: Iterable[Pair], swapped_pairs: int | None = None, seed: int = 0
) -> list[Pair]:
    """Each pair followed by its swapped twin (the paper's positional-consistency protocol).

    swapped_pairs: only a seeded draw of about this many pairs of each source (whole groups, as
    `subsample`) gets its twin; the rest stay in the given order. The paper's Table 5 takes all
    of JudgeBench and 1,000 pairs of each other benchmark while Table 1 scores the full sets in
    the given order: one run serves both, and the given order is judged once. A pair whose
    protocol needs both orders (`meta["both_orders"]`, e.g. RewardBench 2's comparisons, whose
    per-completion scores count both) always gets its twin.
    """
    pairs = list(pairs)
    if swapped_pairs is None:
        twinned = {p.key for p in pairs}
    else:
        by_source: dict[str, list[Pair]] = {}
        for p in pairs:
            by_source.setdefault(p.source, []).append(p)
        twinned = {
            p.key
            for source, group in by_source.items()
            # a seed of its own per source: adding a benchmark does not redraw the others
            for p in subsample(group, swapped_pairs, f"swapped:{seed}:{source}")
        }
    out: list[Pair] = []
    for p in pairs:
        twin = p.key in twinned or p.meta.get("both_orders") is True
        out.extend((p, p.swapped()) if twin else (p,))
    return out


class DataError(ValueError):
    """Bad input, located: file, row (0-based record index) and field.

    line: the file is line-oriented (JSON lines), so the message names the 1-based line, as
    editors, `sed -n Np` and Python's own JSON errors count them; otherwise (parquet, a JSON
    array) it names the record's 0-based row index.
    """

    def __init__(
        self,
        file: str,
        row: int | None,
        field: str | None,
        reason: str,
        kind: str,
        *,
        line: bool = False,
    ):
        self.file, self.row, self.field, self.reason, self.kind = file, row, field, reason, kind
        self.line = line
        where = file
        if row is not None:
            where += f", line {row + 1}" if line else f", row {row}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {reason}")


@dataclass
class LoadResult:
    """What a loader returns: the pairs, plus everything it did not turn into a pair, counted.

    `skipped` counts bad rows by reason (only with on_error="skip"); `dropped` counts rows left out
    by a documented rule (e.g. ties in HelpSteer3/PPE). Nothing leaves a loader uncounted.
    """

    source: str
    path: str
    split: str | None
    pairs: list[Pair]
    skipped: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    n_rows: int = 0

    def stats(self) -> dict[str, Any]:
        """The summary `rmlib data stats` prints."""
        n = len(self.pairs)
        subsets = Counter(p.subset for p in self.pairs)
        ones = sum(p.label == 1 for p in self.pairs)
        return {
            "source": self.source,
            "path": self.path,
            "split": self.split,
            "n_rows": self.n_rows,
            "n_pairs": n,
            "subsets": dict(sorted(subsets.items())),
            "label_balance": {"response1_better": ones, "share": round(ones / n, 4) if n else None},
            # valid but empty responses (HH-RLHF has some by design): shown, never silent
            "n_empty_responses": sum(
                not p.response1.strip() or not p.response2.strip() for p in self.pairs
            ),
            "n_skipped": sum(self.skipped.values()),
            "skipped_reasons": dict(self.skipped),
            "n_dropped": sum(self.dropped.values()),
            "dropped_reasons": dict(self.dropped),
        }
