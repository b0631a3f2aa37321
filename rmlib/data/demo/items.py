"""What every demo family generates (an item: query, better and worse response, its kind and the
facts that make the better one checkable), the kinds of each family, and the table reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DemoItem:
    query: str
    good: str
    bad: str
    kind: str
    facts: dict[str, Any]


def table_rows(text: str, n_cols: int) -> list[list[str]]:
    """Rows of a `|`-separated text table; an indented line continues the row above it, and only
    the first n_cols - 1 bars separate cells (the last cell may contain bars)."""
    rows: list[str] = []
    for line in text.strip("\n").splitlines():
        if line.startswith(" ") and rows:
            rows[-1] += " " + line.strip()
        else:
            rows.append(line.strip())
    return [[c.strip() for c in row.split("|", n_cols - 1)] for row in rows]


KINDS: dict[str, list[str]] = {
    "arithmetic": ["add", "sub", "mul"],
    "constraint": ["word_count", "case", "required_word", "list"],
    "passage": ["passage_market", "passage_museum", "passage_biography"],
    "refusal": ["refusal_capital", "refusal_celsius", "refusal_synonym", "refusal_scary_harmless"],
}
