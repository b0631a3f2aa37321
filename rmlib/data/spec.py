"""`SourceSpec`: one data source's facts, in one place. A loader module may define its own entry
(`SPEC`) beside its loader; `rmlib.data.registry` lists the entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmlib.data.pair import LoadResult


@dataclass(frozen=True)
class SourceSpec:
    """One source and its facts, in one place: how to load it (its loader function, hub id,
    defaults) and, for a benchmark, its display name, published size, official scoring rule
    (`rmlib.scoring`), what that rule's n counts, and whether it is one of the paper's four
    accuracy benchmarks (its Table 1). Adding a benchmark: a loader, its rule, this entry."""

    name: str
    loader: Callable[..., LoadResult]
    hub_id: str | None  # passed to the loader as hub_id when set
    default_split: str | None
    default_config: str | None = None
    path_required: bool = False
    splits: tuple[str, ...] = ()
    doc: str = ""
    title: str = ""  # display name ("" = the source name); the paper's spelling for its own
    published_pairs: int | None = None  # benchmarks.md: the size when the data is not here
    scoring: str = "accuracy"  # the official rule's name in rmlib.scoring
    unit: str = "pairs"  # what the rule's n counts
    paper_accuracy: bool = False  # one of the paper's accuracy benchmarks (Table 1)
    config_is_data_dir: bool = False  # the hub's config is a folder (load_dataset's data_dir)
    # the pairs a set makes from its loader options, when that is not its published size (the
    # dry run's count where the data is not here)
    pairs_for: Callable[[dict[str, Any]], int] | None = None
    both_orders: bool = False  # its protocol judges every pair in both orders

    @property
    def label(self) -> str:
        return self.title or self.name
