"""The data loaders by property: whatever a file holds (any nesting depth, encoding, shape, size),
a load gives pairs and counts, or one located one-line error; never a traceback of another kind
(RecursionError, UnicodeError, KeyError, ...). Under on_error="skip" only a file-level fault (no
records, an unreadable file, a broken JSON array) may still raise, and every row is accounted
for. The example tests are in test_bad_input.py and test_data_loaders.py.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlib.data import load
from rmlib.data._io import MAX_JSON_DEPTH, jsonl_rows
from rmlib.data.pair import DataError
from rmlib.scoring.predictions import load_predictions

PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# a valid record of two readers (one pair per row: every row is a pair, a skip or a drop)
GOOD = {
    "rewardbench": {"prompt": "Q?", "chosen": "a", "rejected": "b", "subset": "xstest", "id": 1},
    "judgebench": {
        "pair_id": "p0",
        "source": "mmlu-pro-math",
        "question": "Q?",
        "response_A": "A",
        "response_B": "B",
        "label": "A>B",
    },
}
ID_FIELD = {"rewardbench": "id", "judgebench": "pair_id"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def records(draw, source: str) -> list:
    """Rows of `source`: valid ones, ones with a field replaced (any JSON value, a value nested
    `depth` levels, a long text), ones that are not objects at all."""
    good = GOOD[source]
    out = []
    for i in range(draw(st.integers(1, 8))):
        row = {**good, ID_FIELD[source]: f"r{i}"}
        kind = draw(st.sampled_from(["good", "value", "deep", "long", "shape"]))
        field = draw(st.sampled_from(sorted(good)))
        if kind == "value":
            row[field] = draw(json_values)
        elif kind == "deep":
            depth = draw(st.integers(1, 3000))
            row[field] = f"__DEEP{depth}__"
        elif kind == "long":
            row[field] = draw(st.text(min_size=1, max_size=20)) * draw(st.integers(1, 5000))
        elif kind == "shape":
            row = draw(json_values)
        out.append(row)
    return out


def _deepen(text: str) -> str:
    """Put the nested values in (json.dumps itself cannot write one past its recursion limit)."""
    import re

    return re.sub(r'"__DEEP(\d+)__"', lambda m: "[" * int(m[1]) + "1" + "]" * int(m[1]), text)


def _encode(rows: list, shape: str, encoding: str, crlf: bool) -> bytes:
    if shape == "json":
        text = json.dumps(rows, ensure_ascii=False)
    else:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    text = _deepen(text)
    if crlf:
        text = text.replace("\n", "\r\n")
    return text.encode(encoding, errors="replace")


def _check_one_line(err: BaseException, path: Path) -> None:
    line = str(err)
    assert "\n" not in line and str(path) in line, line[:300]
    assert len(line) < len(str(path)) + 600, line[:300]  # a huge value is cut, never printed


def _load(source: str, path: Path, on_error: str) -> None:
    try:
        result = load(source, path=str(path), on_error=on_error)
    except (DataError, FileNotFoundError) as err:
        _check_one_line(err, path)
        if on_error == "skip":  # only a file-level fault: rows are skipped and counted
            assert isinstance(err, DataError), str(err)[:300]
            # a JSON array's bad byte is the whole file's (located by its line), not a row's
            array_bytes = err.kind == "encoding" and path.name.endswith(".json")
            assert err.row is None or array_bytes, str(err)[:300]
        return
    skipped, dropped = sum(result.skipped.values()), sum(result.dropped.values())
    assert len(result.pairs) + skipped + dropped == result.n_rows
    if on_error == "raise":
        assert skipped == 0


@PROPERTY
@given(
    data=st.data(),
    source=st.sampled_from(sorted(GOOD)),
    shape=st.sampled_from(["jsonl", "json", "jsonl.gz"]),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16", "cp1252"]),
    crlf=st.booleans(),
    on_error=st.sampled_from(["raise", "skip"]),
)
def test_any_file_loads_or_is_one_located_line(
    tmp_path, data, source, shape, encoding, crlf, on_error
):
    rows = data.draw(records(source))
    raw = _encode(rows, shape.removesuffix(".gz"), encoding, crlf)
    path = tmp_path / f"data.{shape}"
    path.write_bytes(gzip.compress(raw) if shape.endswith(".gz") else raw)
    _load(source, path, on_error)


@PROPERTY
@given(depth=st.integers(1, 5000), field=st.sampled_from(["prompt", "chosen", "subset", "x"]))
def test_any_nesting_depth_is_a_pair_or_a_located_bad_row(tmp_path, depth, field):
    good = GOOD["rewardbench"]
    row = {**good, field: f"__DEEP{depth}__"}
    for shape, line in (("jsonl", ", line 2"), ("json", ", row 1")):
        path = tmp_path / f"deep.{shape}"
        path.write_bytes(_encode([good, row], shape, "utf-8", False))
        try:
            result = load("rewardbench", path=str(path))
        except DataError as err:
            _check_one_line(err, path)
            assert line in str(err)
            if depth > MAX_JSON_DEPTH:
                assert f"field '{field}'" in str(err) and err.kind == "nesting"
        else:  # a shallow value of an unread field
            assert depth <= MAX_JSON_DEPTH and field == "x" and len(result.pairs) == 2
        skipped = load("rewardbench", path=str(path), on_error="skip")
        assert skipped.n_rows == 2 and len(skipped.pairs) + sum(skipped.skipped.values()) == 2


@PROPERTY
@given(raw=st.binary(max_size=400))
def test_the_json_lines_reader_locates_any_bytes(tmp_path, raw):
    path = tmp_path / "any.jsonl"
    path.write_bytes(raw)
    for row in jsonl_rows(path):
        assert row.error is None or row.data is None  # a bad line carries its error, no data
        if row.error is not None:
            _check_one_line(row.error, path)
            assert f", line {row.index + 1}" in str(row.error)


@PROPERTY
@given(
    lines=st.lists(
        st.dictionaries(
            st.sampled_from(["id", "order", "verdict", "label", "method", "subset"]),
            json_values,
            max_size=6,
        )
        | json_values,
        max_size=6,
    ),
    depth=st.integers(0, 3000),
)
def test_any_predictions_file_reads_or_is_one_located_line(tmp_path, lines, depth):
    text = "".join(json.dumps(r) + "\n" for r in lines)
    if depth:
        text += '{"id": "p", "verdict": ' + "[" * depth + "1" + "]" * depth + "}\n"
    path = tmp_path / "preds.jsonl"
    path.write_text(text)
    try:
        load_predictions(path)
    except DataError as err:
        _check_one_line(err, path)
