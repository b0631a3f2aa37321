"""The status line `rmlib run` shows while a notebook's kernel works."""

import io
import json
import time

from rmlib import status


def test_reports_reach_the_file_only_under_a_run(tmp_path, monkeypatch):
    path = tmp_path / "status.json"
    monkeypatch.delenv(status.ENV, raising=False)
    status.report("generations (prompts)", 1, 10)
    assert not path.exists()  # a notebook opened in JupyterLab writes nothing

    monkeypatch.setenv(status.ENV, str(path))
    status.report("GRPO unified steps", 0, 4)
    status.report("GRPO unified steps", 4, 4)  # finished: written at once, however soon
    row = json.loads(path.read_text())
    assert (row["step"], row["done"], row["total"], row["first"]) == ("GRPO unified steps", 4, 4, 0)


def test_the_line_says_step_progress_and_eta():
    row = {"step": "warm-up steps", "done": 40, "total": 64, "first": 0, "since": 100.0}
    row["at"] = 180.0  # 40 steps in 80 s: 24 left take 48 s
    assert status.line("02_rollouts", 0.0, row, 192.0) == (
        "02_rollouts  3:12 · warm-up steps 40/64 (62%) · ETA 0:48"
    )
    assert status.line("05_results", 0.0, None, 3725.0) == "05_results  1:02:05"


def test_the_watcher_prints_a_line_a_period_when_not_a_terminal(tmp_path):
    path = tmp_path / "status.json"
    now = time.time()
    path.write_text(
        json.dumps({"step": "s", "done": 1, "total": 2, "first": 0, "since": now, "at": now + 1})
    )
    out = io.StringIO()
    watcher = status.Watcher(path, "04_inference", out, every=0.05)
    watcher.start()
    time.sleep(0.3)
    watcher.stop()
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("04_inference  0:00 · s 1/2 (50%)") for line in lines)
