"""Data sources: the `SOURCES` registry and `load(source, path=None, ...) -> LoadResult`.

Each source's loader reads the hub by its id (users' machines) or a local file/folder of the
hub's layout (`path`), and returns `Pair`s plus counts of skipped and dropped rows. The registry
(`rmlib.data.registry`) holds each source's facts and its loader function, and `load` hands the
loader those facts; this package re-exports it. Loaders import their heavy libraries
(`datasets`, `pyarrow`) only when reading, so `import rmlib.data` stays cheap.
"""

from __future__ import annotations

from rmlib.data._io import HubUnavailable
from rmlib.data.pair import DataError, LoadResult, OnError, Pair
from rmlib.data.registry import (
    ALIASES,
    PAPER_ACCURACY,
    SOURCES,
    SourceSpec,
    find_source,
    get_source,
    label_of,
    load,
    unit_of,
)

__all__ = [
    "SOURCES",
    "SourceSpec",
    "load",
    "get_source",
    "find_source",
    "label_of",
    "unit_of",
    "PAPER_ACCURACY",
    "ALIASES",
    "Pair",
    "LoadResult",
    "DataError",
    "HubUnavailable",
    "OnError",
]
