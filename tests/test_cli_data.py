"""`rmlib data stats`: the JSON summary, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
FIX = ROOT / "tests" / "fixtures"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rmlib", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.data
def test_stats_rewardbench_subprocess() -> None:
    if not (SHARED / "rewardbench").exists():
        pytest.skip(f"real benchmark data not found at {SHARED / 'rewardbench'}")
    proc = run_cli("data", "stats", "rewardbench", "--path", str(SHARED / "rewardbench"))
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["source"] == "rewardbench" and stats["split"] == "filtered"
    assert stats["n_pairs"] == stats["n_rows"] == 2985
    assert len(stats["subsets"]) == 23 and stats["subsets"]["math-prm"] == 447
    assert stats["n_skipped"] == 0 and stats["n_dropped"] == 0
    assert 0.46 < stats["label_balance"]["share"] < 0.54


def test_error_is_one_line_without_traceback() -> None:
    bad = FIX / "bad" / "missing_field.jsonl"
    proc = run_cli("data", "stats", "judgebench", "--path", str(bad))
    assert proc.returncode == 1 and proc.stdout == ""  # a data error; 2 is for usage
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(bad) in lines[0] and "line 2" in lines[0] and "response_B" in lines[0]


def test_hub_offline_error_names_path_option() -> None:
    proc = run_cli("data", "stats", "rewardbench")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--path" in lines[0] and "allenai/reward-bench" in lines[0]


def test_skip_mode_and_options_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "data",
            "stats",
            "judgebench",
            "--path",
            str(FIX / "bad" / "mixed.jsonl"),
            "--on-error",
            "skip",
        ]
    )
    stats = json.loads(capsys.readouterr().out)
    assert code == 0 and stats["n_pairs"] == 3 and stats["n_skipped"] == 5
    assert stats["skipped_reasons"]["broken JSON"] == 1
    code = main(
        [
            "data",
            "stats",
            "ppe",
            "--path",
            str(FIX / "ppe"),
            "-o",
            "drop_ties=false",
            "--on-error",
            "skip",
        ]
    )
    stats = json.loads(capsys.readouterr().out)
    assert code == 0 and stats["skipped_reasons"] == {"bad label": 1}
    code = main(
        [
            "data",
            "stats",
            "hh-rlhf",
            "--path",
            str(FIX / "bad" / "hh_no_prefix.jsonl"),
            "--config",
            "harmless-base",
            "--split",
            "test",
            "--seed",
            "3",
        ]
    )
    assert code == 1 and "do not share" in capsys.readouterr().err


def test_unknown_source_and_missing_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "valid sources" in err and "rewardbench" in err
    assert main(["data", "stats", "llmbar"]) == 1
    assert "--path" in capsys.readouterr().err
    assert main(["data", "stats", "rewardbench", "--path", str(FIX / "nothing-here")]) == 1
    assert "nothing-here" in capsys.readouterr().err


def test_parser_has_data_stats_and_lists_sources() -> None:
    parser = build_parser()
    args = parser.parse_args(["data", "stats", "rm-bench", "--seed", "4", "-o", "x=1"])
    assert (args.source, args.seed, args.option) == ("rm-bench", 4, [("x", 1)])
    with pytest.raises(SystemExit):
        parser.parse_args(["data", "stats", "rm-bench", "--on-error", "ignore"])
