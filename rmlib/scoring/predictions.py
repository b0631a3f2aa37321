"""Predictions tables: loading (jsonl, parquet), checking and normalising columns, and
attaching a benchmark's pairs (labels, subsets, meta) to them. Bad rows are located DataErrors.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlib.data._io import data_bytes, jsonl_rows
from rmlib.data.pair import DataError, Pair

# scoring rule per source name of rmlib.data (other sources: plain accuracy)
PREDICTIONS = "<predictions>"


def load_predictions(path: str | Path) -> pd.DataFrame:
    """Read a predictions file (.jsonl or .parquet) and validate it row by row.

    Required: `id`, `verdict` (1, 2 or null). `order` (given/swapped) defaults to 'given' when
    the column is absent; `method` to 'default'. Optional `label` (1/2), `subset`. A bad value
    raises DataError naming the file, the 0-based row and the field.
    """
    path = Path(path)
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix == ".parquet":
        return validate_predictions(_read_parquet(path), str(path))
    if suffix not in (".jsonl", ".json", ".jsonl.gz"):
        raise DataError(str(path), None, None, "predictions must be .jsonl or .parquet", "format")
    df = _read_jsonl(path)
    try:
        return validate_predictions(df, str(path))
    except DataError as e:  # rows of a JSON-lines file are named by their 1-based line
        raise DataError(e.file, e.row, e.field, e.reason, e.kind, line=True) from None


def _read_parquet(path: Path) -> pd.DataFrame:
    raw = data_bytes(path)  # a DataError of its own: not an unreadable parquet file
    try:
        return pd.read_parquet(io.BytesIO(raw))
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataError(str(path), None, None, f"unreadable parquet file ({e})", "read") from None


def _read_jsonl(path: Path) -> pd.DataFrame:
    """The records of a JSON-lines file (the loaders' reader: BOM, CRLF, located errors), with
    `_row` = each record's 0-based line index, so later errors name the line."""
    records, lines = [], []
    for row in jsonl_rows(path):
        if row.error is not None:
            raise row.error
        if not isinstance(row.data, dict):
            raise row.fail(None, "each line must be a JSON object", "json")
        records.append(row.data)
        lines.append(row.index)
    if not records:
        raise DataError(str(path), None, None, "no predictions (empty file)", "empty_file")
    return pd.DataFrame(records).assign(_row=lines)


def validate_predictions(df: pd.DataFrame, file: str = PREDICTIONS) -> pd.DataFrame:
    """The predictions table with checked, normalised columns (see `load_predictions`)."""
    for col in ("id", "verdict"):
        if col not in df.columns:
            raise DataError(file, None, col, f"required column '{col}' is missing", "missing")
    out = df.copy().reset_index(drop=True)
    if "_row" not in out:  # the row in the file, for errors raised after regrouping
        out["_row"] = np.arange(len(out))
    at = [int(r) for r in out["_row"]]  # errors name the record's place in the file
    out["id"] = [_check_id(v, file, at[r]) for r, v in enumerate(out["id"])]
    orders = out["order"] if "order" in out else pd.Series(["given"] * len(out))
    out["order"] = [_check_order(v, file, at[r]) for r, v in enumerate(orders)]
    out["verdict"] = pd.array(
        [_check_choice(v, file, at[r], "verdict", True) for r, v in enumerate(out["verdict"])],
        dtype="Int64",
    )
    labels = out["label"] if "label" in out else pd.Series([None] * len(out))
    out["label"] = pd.array(
        [_check_choice(v, file, at[r], "label", True) for r, v in enumerate(labels)],
        dtype="Int64",
    )
    methods = out["method"] if "method" in out else pd.Series(["default"] * len(out))
    out["method"] = [
        _check_str(v, file, at[r], "method") or "default" for r, v in enumerate(methods)
    ]
    if "subset" in out:
        out["subset"] = [_check_str(v, file, at[r], "subset") for r, v in enumerate(out["subset"])]
    dup = out.duplicated(["method", "id", "order"])
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise DataError(
            file,
            at[r],
            "id",
            f"duplicate prediction for id {out.at[r, 'id']!r}, order "
            f"{out.at[r, 'order']!r}, method {out.at[r, 'method']!r}",
            "duplicate",
        )
    return out


def bad_row(rows: pd.DataFrame, r: int, field: str, reason: str, kind: str = "value") -> DataError:
    """A DataError for row r of `rows`, located at the row of the original predictions table."""
    row = int(rows["_row"].iloc[r]) if "_row" in rows else r
    return DataError(PREDICTIONS, row, field, reason, kind)


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _check_id(v: Any, file: str, r: int) -> str:
    if _missing(v) or (isinstance(v, str) and not v.strip()):
        raise DataError(file, r, "id", "id is missing", "missing")
    if isinstance(v, float | np.floating) and v.is_integer():
        v = int(v)  # a column of integer ids with a gap reads back as floats
    if isinstance(v, bool | np.bool_) or not isinstance(v, str | int | np.integer):
        raise DataError(file, r, "id", f"id must be a string or an integer, got {v!r}", "value")
    return str(v)


def _check_order(v: Any, file: str, r: int) -> str:
    if v not in ("given", "swapped"):
        raise DataError(file, r, "order", f"order must be 'given' or 'swapped', got {v!r}", "value")
    return v


def _check_choice(v: Any, file: str, r: int, field: str, nullable: bool) -> int | None:
    if _missing(v):
        if nullable:
            return None
        raise DataError(file, r, field, f"{field} is missing", "missing")
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float | np.integer | np.floating)
        or (float(v) not in (1.0, 2.0))
    ):
        raise DataError(file, r, field, f"{field} must be 1, 2 or null, got {v!r}", "value")
    return int(v)


def _check_str(v: Any, file: str, r: int, field: str) -> str | None:
    if _missing(v):
        return None
    if not isinstance(v, str):
        raise DataError(file, r, field, f"{field} must be a string, got {v!r}", "value")
    return v


def attach_pairs(
    pred: pd.DataFrame, pairs: Iterable[Pair], file: str = PREDICTIONS
) -> pd.DataFrame:
    """Fill `label` and `subset` (and a `meta` column) from the benchmark's pairs.

    A row matches the pair with its id and order, or the other order's pair (label flipped).
    Ids with no pair raise one DataError (how many, the first few); a row whose own label
    disagrees with the data (e.g. placed with another seed) raises DataError.
    """
    by_key: dict[tuple[str, str], Pair] = {(p.id, p.order): p for p in pairs}
    out = pred.copy()
    rows = out["_row"] if "_row" in out else range(len(out))
    _check_known_ids(by_key, out, rows, file)
    labels, subsets, metas = [], [], []
    for r, pid, order, lab in zip(rows, out["id"], out["order"], out["label"], strict=True):
        label, pair = _pair_label(by_key, pid, order)
        assert pair is not None  # _check_known_ids
        if not _missing(lab) and int(lab) != label:
            raise DataError(
                file,
                int(r),
                "label",
                f"label {lab} disagrees with the benchmark "
                f"data ({label}) for id {pid!r}, order {order!r}",
                "label_mismatch",
            )
        labels.append(label)
        subsets.append(pair.subset)
        metas.append(pair.meta)
    out["label"] = pd.array(labels, dtype="Int64")
    if "subset" not in out or out["subset"].isna().any():
        out["subset"] = subsets
    out["meta"] = metas
    return out


SHOWN_IDS = 3  # unknown ids a message lists


def _check_known_ids(
    by_key: dict[tuple[str, str], Pair], pred: pd.DataFrame, rows: Iterable[Any], file: str
) -> None:
    """All ids unknown to the benchmark data in one line: a score over made-up ids is no score."""
    known = {pid for pid, _ in by_key}
    unknown = [(int(r), pid) for r, pid in zip(rows, pred["id"], strict=True) if pid not in known]
    if not unknown:
        return
    ids = list(dict.fromkeys(pid for _, pid in unknown))
    shown = ", ".join(repr(pid) for pid in ids[:SHOWN_IDS])
    if len(ids) > SHOWN_IDS:
        shown += ", ..."
    n_ids = pred["id"].nunique()
    raise DataError(
        file,
        unknown[0][0],
        "id",
        f"{len(ids)} of {n_ids} ids are not in the benchmark data: {shown}",
        "unknown_id",
    )


def _pair_label(
    by_key: dict[tuple[str, str], Pair], pid: str, order: str
) -> tuple[int, Pair | None]:
    if (pid, order) in by_key:
        p = by_key[(pid, order)]
        return p.label, p
    other = "swapped" if order == "given" else "given"
    if (pid, other) in by_key:
        p = by_key[(pid, other)]
        return 3 - p.label, p
    return 0, None
