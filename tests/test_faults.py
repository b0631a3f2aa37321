"""Faults, for real: `kill -9` of the whole `rmlib run` process group inside notebooks 02, 03 and
04, then the same command again. It completes, nothing is generated twice (the store holds as many
generations as a clean run's), no process of the killed run survives, and the final metrics equal
a clean run's with the same seed. That comparison also shows that two runs from scratch in two
processes give identical metrics on CPU (the killed run starts from scratch too, and what it made
before each kill is compared with the clean run's), so no third whole run checks that alone.

Each run is the smoke profile in a subprocess (about two minutes here), with two prompts per
generation call so that a kill lands between stored chunks.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import torch

from rmlib import status

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
TIMINGS = ("seconds", "elapsed", "wall", "tok_s", "per_s", "time")  # in a key: a timing


def _argv(root: Path) -> list[str]:
    argv = [sys.executable, "-m", "rmlib", "run", "params/smoke.yaml"]
    return argv + ["--set", f"run.output_root={root}", "--set", "generation.chunk_prompts=2"]


def _clean_run(root: Path) -> Path:
    out = subprocess.run(_argv(root), cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    return root / "smoke"


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return _clean_run(tmp_path_factory.mktemp("clean"))


def _generations(run: Path) -> int:
    if not (run / "generations.sqlite").exists():
        return 0
    try:
        with sqlite3.connect(f"file:{run / 'generations.sqlite'}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
    except sqlite3.OperationalError:  # created, its table not yet
        return 0


def _completed(run: Path) -> set[str]:
    try:
        state = json.loads((run / "state.json").read_text())
    except (OSError, ValueError):
        return set()
    return {k for k, v in state.items() if v.get("status") == "completed"}


def _metrics(run: Path) -> dict:
    """metrics.json less what tells runs apart but not results: timings, the store's hit and
    miss counts (a resumed run is served from the store: the point), the run folder's path."""

    def strip(node):
        if isinstance(node, dict):
            keep = {
                k: v for k, v in node.items() if k != "store" and not any(t in k for t in TIMINGS)
            }
            return {k: strip(v) for k, v in keep.items()}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    text = (run / "metrics.json").read_text().replace(str(run.resolve()), "<run>")
    return strip(json.loads(text))


def _survivors(run: Path) -> list[psutil.Process]:
    """Processes of a run: the kernel inherits RMLIB_STATUS=<run>/status.json from the runner."""
    mark = str((run / "status.json").resolve())
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(status.ENV) == mark:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _kill_when(root: Path, ready: Callable[[Path], bool], what: str) -> None:
    """Start the run, SIGKILL its whole process group the moment `ready(run)` holds."""
    run = root / "smoke"
    proc = subprocess.Popen(
        _argv(root), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.time() + 900
    while not ready(run):
        assert proc.poll() is None, f"the run ended before {what}: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline, f"never reached {what}"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # The kernel runs in a session of its own (jupyter_client starts it so); it must still go.
    deadline = time.time() + 120
    while (left := _survivors(run)) and time.time() < deadline:
        time.sleep(0.5)
    assert not left, f"still running after kill -9 {what}: {[p.cmdline() for p in left]}"


def test_kill_9_inside_02_03_and_04_resumes_with_nothing_lost_or_made_twice(tmp_path, clean):
    root = tmp_path / "killed"
    # 02: the first rollout chunks are stored, the notebook is not done
    _kill_when(root, lambda run: "01_data" in _completed(run) and _generations(run) > 0,
               "mid-rollouts (02)")  # fmt: skip
    assert "02_rollouts" not in _completed(root / "smoke")

    # 03: GRPO has saved its first checkpoint (of two steps)
    def mid_grpo(run: Path) -> bool:
        return any(run.glob("training/*/checkpoint-1")) and "03_training" not in _completed(run)

    _kill_when(root, mid_grpo, "mid-GRPO (03)")
    assert "02_rollouts" in _completed(root / "smoke")

    # 04: evaluation has stored some of its generations
    after_training = _generations(root / "smoke")

    def mid_inference(run: Path) -> bool:
        return "03_training" in _completed(run) and _generations(run) > after_training

    _kill_when(root, mid_inference, "mid-inference (04)")
    assert "04_inference" not in _completed(root / "smoke")

    run = _clean_run(root)
    assert _generations(run) == _generations(clean)  # every generation made exactly once
    assert _metrics(run) == _metrics(clean)
    # GRPO resumed from its checkpoint trains the same adapter as an uninterrupted run
    for name, weight in _adapter(clean).items():
        assert torch.equal(_adapter(run)[name], weight), name


def _adapter(run: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(run / "adapters" / "unified" / "adapter_model.safetensors")
