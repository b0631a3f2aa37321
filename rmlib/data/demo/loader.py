"""`load_demo`: the demo source's pairs, balanced over families and slots, split by a hash of each
query (one third to eval), seeded; the generators of each kind.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any

from rmlib.data.demo.arithmetic import gen_add, gen_mul, gen_sub
from rmlib.data.demo.constraint import gen_case, gen_list, gen_required_word, gen_words
from rmlib.data.demo.items import KINDS, DemoItem
from rmlib.data.demo.passage import gen_biography, gen_market, gen_museum
from rmlib.data.demo.refusal import gen_capital, gen_celsius, gen_scary, gen_synonym
from rmlib.data.pair import LoadResult, Pair

SOURCE = "demo"


FAMILIES: tuple[str, ...] = ("arithmetic", "constraint", "passage", "refusal")


DEFAULT_N: dict[str, int] = {"train": 64, "eval": 32}


EVAL_SHARE_MODULUS = 3  # a query whose hash is 0 mod 3 belongs to eval (one third)


MAX_DRAWS = 500  # draws per pair before giving up: the family's query space is exhausted


def load_demo(
    path: str | None = None,
    *,
    split: str = "train",
    n: int | None = None,
    seed: int = 0,
    families: list[str] | None = None,
    on_error: str = "raise",
    **options: Any,
) -> LoadResult:
    """Generate `n` demo pairs of `split` ("train" default 64, "eval" default 32).

    path: unused (the data is generated); must be None. on_error: accepted for the loader
    interface ("raise"/"skip"); generated rows cannot be bad. No other options exist.
    """
    if path is not None:
        raise ValueError(f"demo data is generated, it has no path (got {path!r})")
    if options:
        raise ValueError(f"load_demo: unknown options {sorted(options)}")
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    size = default_size(split)  # also validates split
    n = size if n is None else n
    fams = list(families) if families is not None else list(FAMILIES)
    check_families(fams)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pairs = _generate(split, n, seed, fams)
    return LoadResult(source=SOURCE, path="demo:generated", split=split, pairs=pairs, n_rows=n)


def check_families(families: Sequence[str]) -> list[str]:
    """Demo family names: known, at least one, each once (a family listed twice would draw its
    pairs twice as often); one ValueError saying which."""
    fams = list(families)
    if not fams:
        raise ValueError(f"no demo families: list at least one of {list(FAMILIES)}")
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown demo families {unknown}; choose from {list(FAMILIES)}")
    twice = sorted({f for f in fams if fams.count(f) > 1})
    if twice:
        raise ValueError(f"demo families listed twice: {twice}; list each once")
    return fams


def default_size(split: str = "train") -> int:
    """Number of pairs `load_demo` makes for `split` when n is not given."""
    if split not in DEFAULT_N:
        raise ValueError(f"demo split must be one of {list(DEFAULT_N)}, got {split!r}")
    return DEFAULT_N[split]


def split_of(query: str) -> str:
    """The split a query belongs to, by a hash of its text (independent of any seed)."""
    digest = int(hashlib.sha256(query.encode("utf-8")).hexdigest(), 16)
    return "eval" if digest % EVAL_SHARE_MODULUS == 0 else "train"


def _generate(split: str, n: int, seed: int, fams: list[str]) -> list[Pair]:
    counts = [n // len(fams) + (i < n % len(fams)) for i in range(len(fams))]
    toggle = random.Random(f"demo:{seed}:{split}:slots").choice((1, 2))
    per_family: list[list[Pair]] = []
    for fam, count in zip(fams, counts, strict=True):
        rng = random.Random(f"demo:{seed}:{split}:{fam}")
        labels = [1, 2] * (count // 2)
        if count % 2:
            labels.append(toggle)
            toggle = 3 - toggle
        rng.shuffle(labels)
        items = _draw_items(fam, count, split, rng)
        per_family.append(
            [
                _pair(fam, split, seed, j, it, lab)
                for j, (it, lab) in enumerate(zip(items, labels, strict=True))
            ]
        )
    return [p for group in _interleave(per_family) for p in group]


def _draw_items(fam: str, count: int, split: str, rng: random.Random) -> list[DemoItem]:
    """`count` items with distinct queries of `split`, kinds in round-robin.

    A kind whose queries of this split run out is skipped from then on (its share goes to the
    family's other kinds); when all are exhausted, a ValueError says to lower n.
    """
    kinds = list(KINDS[fam])
    seen: set[str] = set()
    items: list[DemoItem] = []
    j = 0
    while len(items) < count:
        if not kinds:
            raise ValueError(
                f"demo family {fam!r}: not enough distinct queries for {count} "
                f"pairs of split {split!r} ({len(items)} found); lower n"
            )
        kind = kinds[j % len(kinds)]
        item = _draw_one(kind, split, seen, rng)
        if item is None:
            kinds.remove(kind)
            continue
        seen.add(item.query)
        items.append(item)
        j += 1
    return items


def _draw_one(kind: str, split: str, seen: set[str], rng: random.Random) -> DemoItem | None:
    for _ in range(MAX_DRAWS):
        item = _GENERATORS[kind](rng)
        if item.query not in seen and split_of(item.query) == split:
            return item
    return None


def _interleave(groups: list[list[Pair]]) -> list[list[Pair]]:
    longest = max((len(g) for g in groups), default=0)
    return [[g[i] for g in groups if i < len(g)] for i in range(longest)]


def _pair(fam: str, split: str, seed: int, j: int, item: DemoItem, label: int) -> Pair:
    r1, r2 = (item.good, item.bad) if label == 1 else (item.bad, item.good)
    return Pair(
        id=f"{split}-s{seed}/{fam}/{j:04d}",
        source=SOURCE,
        subset=fam,
        context=({"role": "user", "content": item.query},),
        response1=r1,
        response2=r2,
        label=label,
        meta={"family": fam, "kind": item.kind, "seed": seed, "split": split, **item.facts},
    )


_GENERATORS: dict[str, Callable[[random.Random], DemoItem]] = {
    "add": gen_add,
    "sub": gen_sub,
    "mul": gen_mul,
    "word_count": gen_words,
    "case": gen_case,
    "required_word": gen_required_word,
    "list": gen_list,
    "passage_market": gen_market,
    "passage_museum": gen_museum,
    "passage_biography": gen_biography,
    "refusal_capital": gen_capital,
    "refusal_celsius": gen_celsius,
    "refusal_synonym": gen_synonym,
    "refusal_scary_harmless": gen_scary,
}
