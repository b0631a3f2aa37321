"""Every reader on malformed files, through the command line: one line naming the file (and the
line and field where there is one), never a traceback; `--on-error skip` counts the bad rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib.cli import EXIT_ERROR, main

ROOT = Path(__file__).resolve().parents[1]

# reader -> (a valid record, the extension it is read from, a required field that must be a
# string, or a list for skywork's messages)
READERS: dict[str, tuple[dict, str, str]] = {
    "judgebench": (
        {
            "pair_id": "p0",
            "source": "mmlu-pro-math",
            "question": "Q?",
            "response_A": "A",
            "response_B": "B",
            "label": "A>B",
        },
        ".jsonl",
        "question",
    ),
    "rewardbench": (
        {"prompt": "Q?", "chosen": "a", "rejected": "b", "subset": "donotanswer", "id": 1},
        ".jsonl",
        "prompt",
    ),
    "rm-bench": (
        {
            "id": "chat/1",
            "prompt": "Q?",
            "chosen": ["a", "b", "c"],
            "rejected": ["x", "y", "z"],
            "domain": "chat",
        },
        ".json",
        "prompt",
    ),
    "ppe": (
        {
            "question_id": "q",
            "prompt": "Q?",
            "response_1": "a",
            "response_2": "b",
            "winner": "model_a",
            "language": "en",
        },
        ".jsonl",
        "response_1",
    ),
    "helpsteer3": (
        {
            "domain": "general",
            "context": [{"role": "user", "content": "Q?"}],
            "response1": "a",
            "response2": "b",
            "overall_preference": -2,
        },
        ".jsonl",
        "response2",
    ),
    "hh-rlhf": (
        {"chosen": "\n\nHuman: Q?\n\nAssistant: a", "rejected": "\n\nHuman: Q?\n\nAssistant: b"},
        ".jsonl",
        "chosen",
    ),
    "skywork": (
        {
            "chosen": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "a"}],
            "rejected": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "b"}],
            "source": "s",
        },
        ".jsonl",
        "rejected",
    ),
    "llmbar": ({"input": "Q?", "output_1": "a", "output_2": "b", "label": 1}, ".json", "input"),
    "rmb": (
        {
            "pair_uid": "u1",
            "conversation_input": [{"role": "user", "content": "Q?"}],
            "chosen": {"answer": "a"},
            "reject": {"answer": "b"},
            "category_path": "Pairwise_set/Helpfulness/Code",
        },
        ".json",
        "category_path",
    ),
    "predictions": (
        {"id": "p0", "order": "given", "verdict": 1, "label": 1, "method": "m"},
        ".jsonl",
        "method",
    ),
}

# case -> (builds the bad record from the good one, the field the message names)
# JSON nested deeper than Python's recursion limit (its JSON reader raised RecursionError)
DEEP = "[" * 5000 + "]" * 5000
ROW_CASES = {
    "number_for_string": lambda good, field: {**good, field: 7},
    "too_deep": lambda good, field: {**good, field: "__DEEP__"},
    "missing_field": lambda good, field: {k: v for k, v in good.items() if k != field},
    "list_for_object": lambda good, field: [good],
}
FILE_CASES = ("truncated_json", "not_utf8", "empty_file", "directory")
# a predictions file's optional columns have defaults: its required one is a column, not a row
MISSING = {"predictions": "verdict"}


def _encode(records: list, ext: str) -> bytes:
    lines = "".join(json.dumps(r) + "\n" for r in records)
    text = json.dumps(records) if ext == ".json" else lines
    return text.replace('"__DEEP__"', DEEP).encode()


def _write(path: Path, case: str, good: dict, field: str) -> None:
    ext = path.suffix
    if case == "directory":
        path.mkdir()
    elif case == "empty_file":
        path.write_bytes(b"")
    elif case == "truncated_json":
        path.write_bytes(_encode([good, good], ext)[:-9])
    elif case == "not_utf8":  # Latin-1 bytes inside a string value
        path.write_bytes(_encode([good], ext).replace(b"Q?", b"Q\xe9?"))
        if b"\xe9" not in path.read_bytes():  # a record without the query text
            path.write_bytes(_encode([good], ext).replace(b'"', b'"\xe9', 1)[:-1] + b"\n")
    else:
        path.write_bytes(_encode([ROW_CASES[case](good, field)], ext))


def _field(reader: str, case: str) -> str:
    return (
        MISSING.get(reader, READERS[reader][2]) if case == "missing_field" else READERS[reader][2]
    )


def _argv(reader: str, path: Path, on_error: str = "raise") -> list[str]:
    if reader == "predictions":
        return ["score", str(path), "--benchmark", "ppe", "--n-boot", "5"]
    return ["data", "stats", reader, "--path", str(path), "--on-error", on_error]


@pytest.mark.parametrize("case", [*ROW_CASES, *FILE_CASES])
@pytest.mark.parametrize("reader", READERS)
def test_malformed_file_is_one_named_line(tmp_path, capsys, reader: str, case: str) -> None:
    good, ext, _ = READERS[reader]
    field = _field(reader, case)
    path = tmp_path / f"bad-{case}{ext}"
    _write(path, case, good, field)
    code = main(_argv(reader, path))
    out, err = capsys.readouterr()
    assert code == EXIT_ERROR and out == "", (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("rmlib: error: ") and str(path) in err
    if case in ("number_for_string", "missing_field", "too_deep"):
        assert f"field '{field}'" in err
    if case == "too_deep":
        assert "nested deeper than 64 levels" in err
    column = reader in MISSING and case == "missing_field"
    if (case in ROW_CASES or case == "not_utf8") and not column:
        assert ", line 1" in err or ", row 0" in err  # JSON lines name lines; arrays, records


@pytest.mark.parametrize("reader", [r for r in READERS if r != "predictions"])
def test_skip_counts_each_bad_row(tmp_path, capsys, reader: str) -> None:
    good, ext, field = READERS[reader]
    bad = [make(good, field) for make in ROW_CASES.values()]
    path = tmp_path / f"mixed{ext}"
    data = _encode([good, *bad], ext)
    if ext == ".jsonl":  # line-level faults are rows too: a cut line, a line of Latin-1 bytes
        data += (
            b'{"cut": \n'
            + json.dumps(good).replace("Q?", "Q\udce9?").encode("utf-8", "surrogateescape")
            + b"\n"
        )
    path.write_bytes(data)
    assert main(_argv(reader, path, "skip")) == 0
    stats = json.loads(capsys.readouterr().out)
    n_bad = len(bad) + (2 if ext == ".jsonl" else 0)
    assert stats["n_rows"] == 1 + n_bad and stats["n_skipped"] == n_bad, stats
    assert stats["n_pairs"] == (9 if reader == "rm-bench" else 1)


def test_bad_parquet_predictions_and_subprocess_have_no_traceback(tmp_path) -> None:
    bad = tmp_path / "preds.parquet"
    bad.write_bytes(b"PAR1 not parquet")
    proc = subprocess.run(
        [sys.executable, "-m", "rmlib", *_argv("predictions", bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_ERROR and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"rmlib: error: {bad}: unreadable parquet file")


@pytest.mark.parametrize("reader", ["judgebench", "predictions"])
def test_corrupt_gzip_is_one_named_line(tmp_path, capsys, reader: str) -> None:
    import gzip

    data = gzip.compress(_encode([READERS[reader][0]] * 500, ".jsonl"))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[:20] + b"\0" * 30 + data[50:])  # zlib's error, not an OSError
    assert main(_argv(reader, path)) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"rmlib: error: {path}: unreadable file") and "Traceback" not in err


def test_a_bad_byte_in_json_lines_named_json_is_one_located_row(tmp_path):
    """The hub names many JSON-lines files .json: a bad byte there is one bad row (skippable),
    as in a .jsonl, not a lost file."""
    from rmlib.data._io import read_file

    path = tmp_path / "pairs.json"
    path.write_bytes(b'{"pair_id": "a"}\n{"pair_id": "b\xe9"}\n')
    rows = list(read_file(path))
    assert rows[0].error is None and "line 2: not UTF-8 text" in str(rows[1].error)


def test_a_huge_value_is_cut_in_the_error_line(tmp_path, capsys) -> None:
    """A 100,000-character label printed whole made a 100 kB error line."""
    good = READERS["judgebench"][0]
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps({**good, "label": "x" * 100_000}) + "\n")
    assert main(_argv("judgebench", path)) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"rmlib: error: {path}, line 1, field 'label': label 'xxx")
    assert len(err) < len(str(path)) + 300 and err.count("\n") == 1


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ('{"prompt": "bad \\ud800 here", "response_a": "a", "response_b": "b"}', "prompt"),
        ('{"prompt": "q", "response_a": "a", "response_b": "\\udfff"}', "response_b"),
        (
            '{"messages": [{"role": "system", "content": "\\ud83d"}, {"role": "user", '
            '"content": "q"}], "response_a": "a", "response_b": "b"}',
            "messages[0].content",
        ),
    ],
)
def test_an_escaped_lone_surrogate_is_one_located_line(tmp_path, record, field):
    """Before: read as a string, then a UnicodeEncodeError traceback from the tokenizer."""
    from rmlib.data.pair import DataError
    from rmlib.tools.judge import read_pairs

    path = tmp_path / "pairs.jsonl"
    good = '{"prompt": "q", "response_a": "a", "response_b": "b"}'
    path.write_text(f"{good}\n{record}\n")
    with pytest.raises(DataError) as info:
        read_pairs(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 2, field '{field}': holds a lone surrogate U+")
    assert "\n" not in message
    assert len(read_pairs(path, on_error="skip").pairs) == 1
