"""`rmlib score`: any judge's predictions file, scored the official way from the command line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JUDGEBENCH = ROOT.parent / "shared" / "data" / "judgebench"


def _score(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmlib", "score", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def judgebench_labels():
    if not JUDGEBENCH.is_dir():
        pytest.skip(f"{JUDGEBENCH} is absent: the real JudgeBench files are not on this machine")
    from rmlib.data import load

    return {p.id: p.label for p in load("judgebench", str(JUDGEBENCH)).pairs}


def test_oracle_judge_scores_100_and_slot_one_judge_scores_0(tmp_path, judgebench_labels):
    # JudgeBench's rule needs both orders: an oracle is right in both (+2), a judge that always
    # says "Response 1" is right in exactly one order of every pair (sum 0: not correct).
    oracle, slot1 = tmp_path / "oracle.jsonl", tmp_path / "slot1.jsonl"
    with oracle.open("w") as fo, slot1.open("w") as fs:
        for pid, label in judgebench_labels.items():
            fo.write(json.dumps({"id": pid, "order": "given", "verdict": label}) + "\n")
            fo.write(json.dumps({"id": pid, "order": "swapped", "verdict": 3 - label}) + "\n")
            for order in ("given", "swapped"):
                fs.write(json.dumps({"id": pid, "order": order, "verdict": 1}) + "\n")
    out = _score(
        str(oracle), "--benchmark", "judgebench", "--path", str(JUDGEBENCH), "--n-boot", "50"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    (method,) = result["methods"].values()
    assert method["score"] == pytest.approx(1.0)  # scores are fractions in [0, 1]
    assert method["n"] == 350
    out = _score(
        str(slot1), "--benchmark", "judgebench", "--path", str(JUDGEBENCH), "--n-boot", "50"
    )
    (method,) = json.loads(out.stdout)["methods"].values()
    assert method["score"] == pytest.approx(0.0)


def test_bad_predictions_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "order": "given", "verdict": 3}\n')
    out = _score(str(bad), "--benchmark", "judgebench", "--path", str(tmp_path / "none"))
    assert out.returncode == 1  # a data error; 2 is for command-line usage
    assert "bad.jsonl" in out.stderr and "verdict" in out.stderr
    assert "Traceback" not in out.stderr


def test_ids_not_in_the_data_are_refused_and_unchecked_ids_said(tmp_path):
    data = tmp_path / "judgebench.jsonl"
    row = {"source": "livebench-math", "question": "Q?", "response_A": "A", "response_B": "B"}
    data.write_text(json.dumps({**row, "pair_id": "p0", "label": "A>B"}) + "\n")
    preds = tmp_path / "made_up.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"id": i, "order": o, "verdict": 1, "label": 1, "subset": "math"}) + "\n"
            for i in ("x1", "x2")
            for o in ("given", "swapped")
        )
    )
    out = _score(str(preds), "--benchmark", "judgebench", "--path", str(data), "--n-boot", "10")
    assert out.returncode == 1 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"rmlib: error: {preds}, line 1, field 'id': 2 of 2 ids are not in the benchmark data: "
        "'x1', 'x2'"
    ]
    out = _score(str(preds), "--benchmark", "ppe", "--n-boot", "10")
    assert out.returncode == 0, out.stderr
    assert "not an official score" in out.stderr
    assert json.loads(out.stdout)["ids_checked"] is False
