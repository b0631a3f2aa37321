"""The official scoring rules, registered where each is defined (`@rule(name, ...)`, as
lm-evaluation-harness registers its metrics): a rule's name is a data-registry entry's
`scoring`, and everything the scoring code must know about a rule is a field of its `Rule`, so
no scoring module tests a benchmark's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


def never(df: pd.DataFrame) -> bool:
    """A rule that needs nothing beyond id, order, verdict and label."""
    return False


def lacks(*columns: str) -> Callable[[pd.DataFrame], bool]:
    """The table lacks one of `columns` (absent, or null in some row): the pairs must fill it."""

    def check(df: pd.DataFrame) -> bool:
        return any(c not in df or df[c].isna().any() for c in columns)

    return check


@dataclass(frozen=True)
class Rule:
    """One official rule and what the scoring code needs to know about it.

    `aggregate(rows, **opts) -> Aggregate`. `reads_all_orders`: the rule gets every order's
    rows as they are (no order selected, no failure credit: the rule says how it treats a
    failure in `failure_note`, and the result's order is `order_note`); otherwise it gets the
    selected order's rows with a `value` column (1 right, 0 wrong, the credit for a failure).
    `no_failure_credit`: the official score credits a parse failure nothing, whatever is asked.
    `needs_pairs(table)`: the predictions table lacks what the rule reads (the benchmark's pairs
    must be attached). `pair_correct(table)`: per-unit correctness for McNemar when it is not a
    row's verdict against its label. `score_file(path, data_path, load_options, **opts)`: a
    file of the rule's own kind (not a predictions file) scored as a whole, or None when the
    file is a predictions file.
    """

    name: str
    aggregate: Callable[..., Any]
    reads_all_orders: bool = False
    order_note: str | None = None
    failure_note: str | None = None
    no_failure_credit: bool = False
    needs_pairs: Callable[[pd.DataFrame], bool] = never
    pair_correct: Callable[[pd.DataFrame], np.ndarray] | None = None
    score_file: Callable[..., dict[str, Any] | None] | None = None


RULES: dict[str, Rule] = {}


def rule(name: str, **facts: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated aggregate as the official rule `name` (facts: `Rule`'s fields)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in RULES:
            raise ValueError(f"scoring rule {name!r} is registered twice")
        RULES[name] = Rule(name, fn, **facts)
        return fn

    return register


def get_rule(name: str) -> Rule:
    """The registered rule `name` (an unknown name is a programming error: one line)."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(
            f"no scoring rule {name!r}; registered: {', '.join(sorted(RULES))}"
        ) from None
