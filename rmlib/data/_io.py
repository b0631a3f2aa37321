"""Shared reading and validation for the loaders: files, hub-layout folders, the hub itself.

Every loader turns upstream rows into `Pair`s through the same three steps:

1. `rows_for(path, hub_id=..., split=..., config=...)` yields `Row`s (file, 0-based row index,
   data) from a local file (JSON array, JSONL, .jsonl.gz, parquet), a local folder in the hub's
   layout (`data/<split>-00000-of-00001.<ext>`, `<config>/<split>.jsonl.gz`, ...), or the hub
   through `datasets.load_dataset` (users' machines only; offline it fails fast with one line).
2. A per-source `make(row)` validates the row with `Row`'s helpers (which raise `DataError`
   naming file, row and field) and returns its pairs, or raises `Drop(reason)` for a row left out
   by a documented rule (e.g. a tie).
3. `collect(...)` runs `make` over the rows: with on_error="raise" the first bad row raises; with
   "skip" bad rows are counted in `LoadResult.skipped` by reason. Nothing is dropped silently.
   A row repeating an earlier row's pair id is a bad row; a load with no records at all raises.

A JSON-lines file is decoded line by line: a broken or non-UTF-8 line is one located bad row.
A record nested deeper than MAX_JSON_DEPTH levels (upstream data nests a few; Python's own JSON
reader fails past its recursion limit) is one located bad row too (file, line or row, and the
field holding the deep value), in a JSON-lines file and a JSON array alike.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmlib.config.errors import short
from rmlib.data.pair import DataError, LoadResult, OnError, Pair
from rmlib.reads import DATA_LIMIT, UnreadableInput, read_bytes

DATA_SUFFIXES: tuple[str, ...] = (".parquet", ".jsonl", ".jsonl.gz", ".json", ".json.gz")
ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_MISSING = object()

# Count key in LoadResult.skipped for each DataError kind (field-specific where it helps).
_SKIP_KEYS: dict[str, str] = {
    "missing": "missing field '{field}'",
    "empty": "empty response",
    "empty_prompt": "empty prompt",
    "label": "bad label",
    "type": "bad type in field '{field}'",
    "json": "broken JSON",
    "prefix": "no shared prefix",
    "messages": "bad messages in field '{field}'",
    "value": "bad value in field '{field}'",
    "duplicate": "duplicate id",
    "encoding": "not UTF-8",
    "nesting": "nested too deeply",
}

# Upstream records nest a few levels (a conversation's messages, RMB's answers): deeper is no data
# a loader reads, and past Python's recursion limit no JSON reader, repr or writer copes with it.
MAX_JSON_DEPTH = 64


class HubUnavailable(RuntimeError):
    """The Hugging Face hub could not be reached (offline, no network): one line, with the fix."""

    def __init__(self, hub_id: str, cause: BaseException | None = None):
        self.hub_id = hub_id
        why = ""
        if cause is not None:
            detail = _first_line(cause)
            why = f" {type(cause).__name__}: {detail[:120]}" if detail else type(cause).__name__
        super().__init__(
            f"cannot load {hub_id!r} from the Hugging Face hub (offline?{why}): "
            "pass a local copy with --path FILE_OR_DIR (path=... in Python)"
        )


class Drop(Exception):
    """Raised by a row builder for a row left out by a documented rule (counted in `dropped`)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


# ---------------------------------------------------------------- rows and validation


@dataclass(frozen=True)
class Row:
    """One upstream record and where it came from (for error messages)."""

    file: str
    index: int  # 0-based record index in `file` (for JSONL: the line number minus one)
    data: Any
    ordinal: int = 0  # running index over all files of the load (stable ids)
    error: DataError | None = None  # set when the record itself could not be read
    line: bool = False  # `file` is JSON lines: errors name the 1-based line

    def fail(self, field: str | None, reason: str, kind: str) -> DataError:
        return DataError(self.file, self.index, field, reason, kind, line=self.line)

    def get(self, field: str) -> Any:
        """A required field: present and not null."""
        if not isinstance(self.data, dict):
            raise self.fail(None, f"row is not an object (got {type(self.data).__name__})", "type")
        value = self.data.get(field)
        if value is None:
            raise self.fail(field, f"missing field '{field}'", "missing")
        return value

    def opt(self, field: str, default: Any = None) -> Any:
        return self.data.get(field, default) if isinstance(self.data, dict) else default

    def ident(self, field: str) -> str:
        """A required id: a non-empty string or an integer (a list or a float is no id)."""
        v = self.get(field)
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        if not isinstance(v, str):
            raise self.fail(
                field, f"expected a string or integer id, got {type(v).__name__}", "type"
            )
        return self.text(field, v, kind="value")

    def opt_text(self, field: str, default: str) -> str:
        """An optional string (e.g. a subset name): `default` when absent, else a string."""
        v = self.opt(field)
        return default if v is None or v == "" else self.text(field, v, kind="value")

    def text(
        self, field: str, value: Any = _MISSING, *, kind: str = "empty", allow_empty: bool = False
    ) -> str:
        """A non-empty string: a response by default; kind="empty_prompt" for a query, "value"
        for any other field. allow_empty: an empty string is valid data here (HH-RLHF)."""
        v = self.get(field) if value is _MISSING else value
        if v is None:
            raise self.fail(field, f"missing field '{field}'", "missing")
        if not isinstance(v, str):
            raise self.fail(field, f"expected a string, got {type(v).__name__}", "type")
        if not v.strip() and not allow_empty:
            reason = {"empty": "empty response", "empty_prompt": "empty prompt"}.get(
                kind, f"empty field '{field}'"
            )
            raise self.fail(field, reason, kind)
        return self._encodable(field, v)

    def _encodable(self, field: str, v: str) -> str:
        """A string JSON decoded from an escaped lone surrogate (`"\\ud800"`) is no text: the
        tokenizer (and any UTF-8 writer) fails on it later with no line named; refused here."""
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise self.fail(
                field,
                f"holds a lone surrogate U+{ord(v[e.start]):04X} at character {e.start} (an "
                "escaped \\uD800-\\uDFFF without its pair): not text",
                "encoding",
            ) from None
        return v

    def label(self, field: str, allowed: dict[Any, int], value: Any = _MISSING) -> int:
        """Map an upstream label to 1/2; anything outside `allowed` is a bad label."""
        v = self.get(field) if value is _MISSING else value
        hashable = isinstance(v, str | int | float) and not isinstance(v, bool)
        if not hashable or v not in allowed:
            raise self.fail(
                field, f"label {short(v, 80)} not in {sorted(allowed, key=str)}", "label"
            )
        return allowed[v]

    def messages(self, field: str, value: Any = _MISSING) -> tuple[dict[str, str], ...]:
        """A non-empty list of {role, content} messages, normalised to exactly those two keys."""
        v = self.get(field) if value is _MISSING else value
        if not isinstance(v, list | tuple) or not v:
            raise self.fail(
                field, "expected a non-empty list of {role, content} messages", "messages"
            )
        out = []
        for k, m in enumerate(v):
            role = m.get("role") if isinstance(m, dict) else None
            content = m.get("content") if isinstance(m, dict) else None
            if not isinstance(role, str) or role.lower() not in ROLES:
                raise self.fail(f"{field}[{k}].role", f"bad role {short(role, 80)}", "messages")
            if not isinstance(content, str):
                raise self.fail(
                    f"{field}[{k}].content", "message content must be a string", "messages"
                )
            self._encodable(f"{field}[{k}].content", content)
            out.append({"role": role.lower(), "content": content})
        return tuple(out)

    def context(self, field: str, msgs: Sequence[dict[str, str]]) -> tuple[dict[str, str], ...]:
        """A judged context: ends with a non-empty user turn."""
        if not msgs or msgs[-1]["role"] != "user":
            raise self.fail(field, "context must end with a user message", "messages")
        self.text(field, msgs[-1]["content"], kind="empty_prompt")
        return tuple(msgs)


def user(content: str) -> tuple[dict[str, str], ...]:
    """A one-turn context."""
    return ({"role": "user", "content": content},)


def skip_reason(err: DataError) -> str:
    """The count key of a skipped row in LoadResult.skipped."""
    return _SKIP_KEYS.get(err.kind, err.kind).format(field=err.field)


def place(pid: str, seed: int, chosen: str, rejected: str) -> tuple[str, str, int]:
    """Seeded slot of the better response: depends only on (seed, pair id), so taking a subset
    of the data or reordering it never changes a pair's placement. Returns (r1, r2, label)."""
    if random.Random(f"{seed}:{pid}").random() < 0.5:
        return chosen, rejected, 1
    return rejected, chosen, 2


def check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


def no_options(source: str, options: dict[str, Any]) -> None:
    if options:
        raise ValueError(f"{source}: unknown options {sorted(options)}")


def collect(
    result: LoadResult,
    rows: Iterable[Row],
    make: Callable[[Row], Iterable[Pair]],
    on_error: OnError,
    id_field: str | Sequence[str] = "id",
) -> LoadResult:
    """Build pairs row by row into `result`, counting every row that gives none.

    A row whose pair id an earlier row already gave is bad input (ids key the store, the
    orders' twins and scoring): `id_field` is the upstream field errors name (several: the first
    the row has)."""
    check_on_error(on_error)
    first_at: dict[str, tuple[str, str]] = {}  # pair id -> (file, line or row) that gave it
    for row in rows:
        result.n_rows += 1
        try:
            if row.error is not None:
                raise row.error
            pairs = list(make(row))
            _check_new_ids(row, pairs, first_at, id_field)
            result.pairs.extend(pairs)
        except Drop as d:
            result.dropped[d.reason] += 1
        except DataError as e:
            if on_error == "raise":
                raise
            result.skipped[skip_reason(e)] += 1
    if result.n_rows == 0:  # an empty file is no benchmark: never a silent zero
        raise DataError(result.path, None, None, "no records (empty file)", "empty_file")
    return result


def _check_new_ids(
    row: Row,
    pairs: Sequence[Pair],
    first_at: dict[str, tuple[str, str]],
    id_field: str | Sequence[str],
) -> None:
    """Refuse a row that repeats a pair id; else remember where its ids came from."""
    for p in pairs:
        if p.id in first_at:
            file, where = first_at[p.id]
            fields = (id_field,) if isinstance(id_field, str) else tuple(id_field)
            field = next((f for f in fields if row.opt(f) is not None), fields[0])
            first = where if file == row.file else f"{file}, {where}"
            raise row.fail(
                field, f"duplicate id {short(p.id, 120)} (first at {first})", "duplicate"
            )
    where = f"line {row.index + 1}" if row.line else f"row {row.index}"
    first_at.update((p.id, (row.file, where)) for p in pairs)


# ---------------------------------------------------------------- files


def is_data_file(p: Path) -> bool:
    return p.is_file() and p.name.endswith(DATA_SUFFIXES)


def _stem(name: str) -> str:
    for suf in sorted(DATA_SUFFIXES, key=len, reverse=True):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def read_file(path: Path, *, start: int = 0) -> Iterator[Row]:
    """Rows of one local file; `start` offsets `Row.ordinal`. An unreadable file raises
    DataError (row None); a broken JSON line becomes a Row carrying its error."""
    name, file = path.name, str(path)
    if name.endswith(".parquet"):
        records: Iterable[Any] = _read_parquet(path)
    elif name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        yield from jsonl_rows(path, start)
        return
    elif name.endswith((".json", ".json.gz")):
        records = _read_json(path)
        if records is None:  # the hub also names JSON-lines files .json
            yield from jsonl_rows(path, start)
            return
    else:
        raise DataError(
            file,
            None,
            None,
            "unsupported file type (expected .json, .jsonl, .jsonl.gz or .parquet)",
            "read",
        )
    for i, rec in enumerate(records):
        if isinstance(rec, DataError):  # a record read apart from a too-deep one (_read_json)
            yield Row(file, i, None, start + i, error=rec)
        else:
            yield Row(file, i, rec, start + i)


def data_bytes(path: Path) -> bytes:
    """The whole file (a .gz decompressed), a regular file under rmlib.reads.DATA_LIMIT: a
    device or a link to one is refused, never read whole."""
    try:
        return read_bytes(path, "data file", DATA_LIMIT)
    except UnreadableInput as e:
        raise DataError(str(path), None, None, e.reason, "read") from None
    except OSError as e:
        raise DataError(str(path), None, None, f"unreadable file ({e})", "read") from None


def _decode(raw: bytes, file: str, index: int | None = None) -> str:
    """UTF-8 text (a leading byte-order mark of Windows exports dropped); bad bytes raise a
    DataError naming the line (`index`: the line's 0-based index, else counted in `raw`)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        row = index if index is not None else raw[: e.start].count(b"\n")
        raise DataError(
            file, row, None, f"not UTF-8 text (byte 0x{raw[e.start]:02x})", "encoding", line=True
        ) from None


def _read_parquet(path: Path) -> list[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = data_bytes(path)  # a DataError of its own: not an unreadable parquet file
    try:
        return pq.read_table(pa.BufferReader(raw)).to_pylist()
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataError(str(path), None, None, f"unreadable parquet file ({e})", "read") from None


def _read_json(path: Path) -> list[Any] | None:
    """A JSON array's records; None when the file is JSON lines after all. A record nested too
    deeply is a DataError in the list (one located bad row), the others read."""
    raw = data_bytes(path)
    lines = raw.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"{")
    try:
        text = _decode(raw, str(path))
    except DataError:
        if lines:  # JSON lines with a bad byte: the line reader makes it one located bad row
            return None
        raise
    try:
        data = json.loads(text)
    except RecursionError:  # past the depth check (a lower recursion limit): read apart
        if lines:
            return None
        return _records_apart(raw.removeprefix(b"\xef\xbb\xbf"), str(path))
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and text.lstrip().startswith("{"):
            return None
        raise DataError(
            str(path),
            None,
            None,
            f"broken JSON at line {e.lineno} column {e.colno}: {e.msg}",
            "json",
        ) from None
    if not isinstance(data, list):
        raise DataError(
            str(path),
            None,
            None,
            f"expected a JSON array of records, got {type(data).__name__}",
            "type",
        )
    for i, record in enumerate(data):  # parsed, but nested deeper than any record: a bad row
        deep, key = _deep_field(record)
        if deep:
            data[i] = _nesting_error(str(path), i, key, line=False)
    return data


def jsonl_rows(path: Path, start: int = 0) -> Iterator[Row]:
    """The records of a JSON-lines file as `Row`s (BOM, CRLF and gzip handled; a broken line is a
    Row carrying its located error): the project's one JSON-lines reader."""
    file = str(path)
    raw = data_bytes(path).removeprefix(b"\xef\xbb\xbf")
    n = 0
    # bytes.splitlines: LF, CRLF and CR ends, as universal newlines; each line decoded alone so a
    # bad byte is one located bad row (counted under on_error="skip"), not a lost file
    for i, line in enumerate(raw.splitlines()):
        if not line.strip():
            continue
        try:
            try:
                record = json.loads(_decode(line, file, i))
            except RecursionError:  # past Python's recursion limit: located by a byte scan
                deep = _too_deep(line)
                raise _nesting_error(file, i, deep[2] if deep else None, line=True) from None
            if line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH:  # else it cannot be deep
                deep, key = _deep_field(record)
                if deep:
                    raise _nesting_error(file, i, key, line=True)
        except DataError as err:
            yield Row(file, i, None, start + n, error=err, line=True)
        except json.JSONDecodeError as e:
            err = DataError(file, i, None, f"broken JSON line ({e.msg})", "json", line=True)
            yield Row(file, i, None, start + n, error=err, line=True)
        else:
            yield Row(file, i, record, start + n, line=True)
        n += 1


# a JSON string (its escapes included) and an object's key: what the depth scan skips and names
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_JSON_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:')


def _depths(raw: bytes) -> Any:
    """The bracket depth after each byte of JSON text (strings blanked, so a bracket inside one
    does not count), as a numpy array."""
    import numpy as np

    blank = _JSON_STRING.sub(lambda m: b'"' + b" " * (len(m.group()) - 2) + b'"', raw)
    codes = np.frombuffer(blank, dtype=np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int32)
    step -= np.isin(codes, (ord("]"), ord("}"))).astype(np.int32)
    return np.cumsum(step), codes


def _too_deep(raw: bytes, *, records: bool = False) -> tuple[int, int, str | None] | None:
    """Where JSON text nests a record deeper than MAX_JSON_DEPTH: (byte offset, record index
    (a JSON array's, else 0), the record's top-level key holding the deep value); None when it
    does not. `records`: the text is an array of records (one level more)."""
    limit = MAX_JSON_DEPTH + (1 if records else 0)
    if raw.count(b"[") + raw.count(b"{") <= limit:  # the common case, without numpy
        return None
    import numpy as np

    depth, codes = _depths(raw)
    over = np.flatnonzero(depth > limit)
    if not over.size:
        return None
    at = int(over[0])
    base = 1 if records else 0  # depth at which the records' own brackets open
    index = int(np.count_nonzero((codes[:at] == ord(",")) & (depth[:at] == base))) if records else 0
    key = None
    for m in _JSON_KEY.finditer(raw, 0, at):
        if depth[m.start()] == base + 1:  # a key of the record itself
            key = m.group(1).decode("utf-8", "replace")
    return at, index, _field_name(key)


def _deep_field(record: Any) -> tuple[bool, str | None]:
    """Whether a parsed record nests deeper than MAX_JSON_DEPTH levels (the record itself is
    level 1), and under which of its top-level keys (None: not an object)."""
    stack: list[tuple[Any, int, str | None]] = [(record, 1, None)]
    while stack:
        value, depth, key = stack.pop()
        if isinstance(value, dict):
            children = value.items()
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            return True, _field_name(key)
        for k, child in children:
            if isinstance(child, dict | list):
                top = (str(k) if isinstance(value, dict) else None) if depth == 1 else key
                stack.append((child, depth + 1, top))
    return False, None


def _field_name(key: str | None) -> str | None:
    return key if key is None or len(key) <= 60 else key[:57] + "..."


def _nesting_error(file: str, row: int, field: str | None, *, line: bool) -> DataError:
    return DataError(
        file,
        row,
        field,
        f"nested deeper than {MAX_JSON_DEPTH} levels (no benchmark record does)",
        "nesting",
        line=line,
    )


def _records_apart(raw: bytes, file: str) -> list[Any]:
    """A JSON array read record by record (its depth-1 commas split it): a record nested too
    deeply becomes its located DataError, every other record is read."""
    import numpy as np

    depth, codes = _depths(raw)
    opens = np.flatnonzero((codes == ord("[")) & (depth == 1))
    if not opens.size:
        raise DataError(file, None, None, "expected a JSON array of records", "type")
    # a comma between records, and the array's closing bracket
    ends = np.flatnonzero(
        ((codes == ord(",")) & (depth == 1)) | ((codes == ord("]")) & (depth == 0))
    )
    bounds = [int(opens[0])] + [int(e) for e in ends if e > opens[0]]
    out: list[Any] = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        chunk = raw[a + 1 : b]
        if not chunk.strip():
            continue
        deep = _too_deep(chunk)
        if deep is not None:
            out.append(_nesting_error(file, i, deep[2], line=False))
            continue
        try:
            out.append(json.loads(_decode(chunk, file)))
        except (json.JSONDecodeError, DataError) as e:
            reason = e.msg if isinstance(e, json.JSONDecodeError) else e.reason
            out.append(DataError(file, i, None, f"broken JSON record ({reason})", "json"))
    return out


def split_files(root: Path, split: str | None, config: str | None) -> list[Path]:
    """The data files of `split` in a local folder of the hub's layout.

    Looked up in order: `<config>/`, `data/<config>/`, `<config>/data/` (when a config is given),
    then `data/` and the folder itself; a file belongs to the split when its name is `<split>.<ext>`
    or starts with `<split>-` (e.g. `data/filtered-00000-of-00001.parquet`). With split None, a
    folder holding data files of one split only is read whole.
    """
    dirs = [root / config, root / "data" / config, root / config / "data"] if config else []
    dirs += [root / "data", root]
    for d in dirs:
        if not d.is_dir():
            continue
        files = sorted(f for f in d.iterdir() if is_data_file(f))
        if split is None:
            hits = files
        else:
            hits = [
                f for f in files if _stem(f.name) == split or _stem(f.name).startswith(split + "-")
            ]
        if hits:
            return hits
    where = f"config {config!r}, " if config else ""
    raise FileNotFoundError(
        f"no data files for {where}split {split!r} under {root} (expected "
        f"e.g. data/{split}-00000-of-00001.parquet or {split}.jsonl)"
    )


def is_hub_id(path: str) -> bool:
    return bool(_HUB_ID.match(path)) and not Path(path).expanduser().exists()


def chain_files(files: Sequence[Path]) -> Iterator[Row]:
    """Rows of several files with a running ordinal."""
    n = 0
    for f in files:
        for row in read_file(f, start=n):
            n += 1
            yield row


def rows_for(
    path: str | None,
    *,
    hub_id: str,
    split: str | None,
    config: str | None,
    config_is_data_dir: bool = False,
    file_names: Sequence[str] = (),
) -> tuple[str, Iterator[Row]]:
    """(path as recorded, rows) for a local file, a local hub-layout folder or a hub id.

    `file_names`: single files the upstream repo keeps at its root (e.g. RM-Bench's
    `total_dataset.json`), tried in a folder before the split layout.
    """
    target = hub_id if path is None else str(path)
    p = Path(target).expanduser()
    if p.is_file():
        return str(p), chain_files([p])
    if p.is_dir():
        named = [p / n for n in file_names if (p / n).is_file()]
        return str(p), chain_files(named or split_files(p, split, config))
    if is_hub_id(target):
        return target, hub_rows(
            target, split=split, config=config, config_is_data_dir=config_is_data_dir
        )
    raise FileNotFoundError(f"no such file or directory: {target}")


# ---------------------------------------------------------------- hub


def hub_rows(
    hub_id: str, *, split: str | None, config: str | None, config_is_data_dir: bool = False
) -> Iterator[Row]:
    """Rows of `datasets.load_dataset(hub_id, config, split=split)` (HH-RLHF passes its subset
    folder as data_dir). Loading happens here, eagerly, so an offline hub fails at once."""
    ds = _load_hub(hub_id, split, config, config_is_data_dir)
    label = f"{hub_id}[{config + ':' if config else ''}{split}]"
    return (Row(label, i, rec, i) for i, rec in enumerate(ds))


def hub_kwargs(split: str | None, config: str | None, data_dir: bool = False) -> dict[str, Any]:
    """`datasets.load_dataset`'s keyword arguments for a split and config (HH-RLHF's config is
    a data_dir): the one place a load, and `rmlib fetch` ahead of it, spell them."""
    kwargs: dict[str, Any] = {"split": split}
    if config is not None:
        kwargs["data_dir" if data_dir else "name"] = config
    return kwargs


def _load_hub(hub_id: str, split: str | None, config: str | None, data_dir: bool) -> Any:
    import datasets

    kwargs = hub_kwargs(split, config, data_dir)
    try:
        return datasets.load_dataset(hub_id, **kwargs)
    except datasets.exceptions.DatasetNotFoundError as e:
        raise FileNotFoundError(
            f"no dataset {hub_id!r} on the Hugging Face hub ({_first_line(e)})"
        ) from None
    except (ConnectionError, TimeoutError) as e:
        raise HubUnavailable(hub_id, e) from None
    except Exception as e:
        # httpx/requests errors are not ConnectionError subclasses; name them by their class
        if re.search(r"Connect|Timeout|Offline|Network", type(e).__name__):
            raise HubUnavailable(hub_id, e) from None
        raise


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
