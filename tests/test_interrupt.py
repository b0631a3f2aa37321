"""Ctrl-C (or SIGTERM) during `rmlib run`: one line, exit 130 (143), no traceback, no kernel left
behind; and a run whose kernels print nothing of their own on the terminal.

A helper script runs the real command line on a one-cell notebook that blocks (it writes its
kernel's pid, then sleeps); the test sends SIGINT to the process group, as a terminal's Ctrl-C
does, and checks what the user sees and that the kernel process is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripts import alive

HELPER = """
import sys
from pathlib import Path

import rmlib.workbook.execute
import rmlib.run.sections
from rmlib.cli import main

root = Path(sys.argv[1])
# notebooks/ of the test, not the project's (the params check and the runner both look there)
rmlib.workbook.execute.project_root = rmlib.run.sections.project_root = lambda: root
sys.exit(main(["run", str(root / "params.yaml")]))
"""

BLOCKING_CELL = """
import os, pathlib, time
pathlib.Path(os.environ["RMLIB_TEST_KERNEL_PID"]).write_text(str(os.getpid()))
time.sleep(120)
"""


def _notebook(source: str) -> dict:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    return {
        "cells": [{**cell, "source": source}],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.mark.parametrize(
    ("stop", "status", "said"),
    [
        ("SIGINT", 130, "interrupted"),  # a terminal's Ctrl-C: to the whole process group
        ("SIGTERM", 143, "terminated (SIGTERM)"),  # `kill PID`, a scheduler: to rmlib alone
    ],
)
def test_ctrl_c_during_a_run_prints_one_line_and_leaves_no_kernel(tmp_path, stop, status, said):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "block.ipynb").write_text(json.dumps(_notebook(BLOCKING_CELL)))
    run_dir = tmp_path / "outputs" / "block"
    params = {
        "run": {"name": "block", "output_root": str(tmp_path / "outputs"), "notebooks": ["block"]},
        "model": {
            "backbone": "embedded:tiny-qwen3",
            "precision": "fp32",
            "train_precision": "fp32",
        },
    }
    (tmp_path / "params.yaml").write_text(json.dumps(params))  # JSON is YAML
    (tmp_path / "helper.py").write_text(HELPER)
    pid_file = tmp_path / "kernel.pid"
    env = dict(os.environ, RMLIB_TEST_KERNEL_PID=str(pid_file), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "helper.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: the test's Ctrl-C reaches only it
    )
    try:
        # generous bounds on single operations: a loaded 2-core AVX2 machine took over 60 s to stop
        deadline = time.monotonic() + 300
        while not pid_file.exists() or not pid_file.read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the notebook's cell never started"
            time.sleep(0.2)
        kernel = int(pid_file.read_text())
        if stop == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        else:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in err + out, err
    assert proc.returncode == status, err
    lines = [line for line in err.splitlines() if line.startswith("rmlib:")]
    assert lines == [f"rmlib: {said}: run again with the same command to resume from {run_dir}"]
    state = run_dir / "state.json"  # the resume stays clean: the notebook is not marked done
    assert not state.exists() or "block" not in json.loads(state.read_text())
    deadline = time.monotonic() + 60
    while alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(kernel), "the notebook's kernel was left running"


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(monkeypatch, capsys):
    import rmlib.scoring
    from rmlib.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rmlib.scoring, "score_file", interrupted)
    assert main(["score", "predictions.jsonl", "--benchmark", "rewardbench"]) == 130
    assert capsys.readouterr().err == "rmlib: interrupted\n"


RECORD_CELL = """
import pathlib, ipykernel
from ipykernel.connect import get_connection_file
print('hello')
pathlib.Path(run_dir, 'connection.txt').write_text(get_connection_file())
"""


def test_two_runs_started_together_complete_with_no_kernel_noise(tmp_path):
    """Two runs started together (one notebooks/ folder, as two terminals in one checkout) both
    complete: each run's kernel has its connection file and sockets in a folder of its own (not
    notebooks/, where jupyter_client's default names collided), removed at the end. The kernels
    talk over Unix sockets: no '[IPKernelApp] WARNING | Kernel is running over TCP without
    encryption' on the user's terminal. Two one-cell runs side by side (about 30 s here)."""
    (tmp_path / "notebooks").mkdir()
    source = _notebook(RECORD_CELL)
    source["cells"].insert(
        0, {**source["cells"][0], "source": "run_dir = ''", "metadata": {"tags": ["parameters"]}}
    )
    (tmp_path / "notebooks" / "hello.ipynb").write_text(json.dumps(source))
    (tmp_path / "helper.py").write_text(HELPER)
    procs = []
    for name in ("one", "two"):
        params = {
            "run": {"name": name, "output_root": str(tmp_path / "outputs"), "notebooks": ["hello"]},
            "model": {"backbone": "embedded:tiny-qwen3", "precision": "fp32"},
        }
        root = tmp_path / name
        root.mkdir()
        (root / "notebooks").symlink_to(tmp_path / "notebooks")  # one source folder for both
        (root / "params.yaml").write_text(json.dumps(params))
        argv = [sys.executable, str(tmp_path / "helper.py"), str(root)]
        procs.append(subprocess.Popen(argv, stderr=subprocess.PIPE, text=True))
    errs = [p.communicate(timeout=300)[1] for p in procs]
    for proc, err in zip(procs, errs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert "IPKernelApp" not in err and "without encryption" not in err, err
    files = [
        Path((tmp_path / "outputs" / n / "connection.txt").read_text()) for n in ("one", "two")
    ]
    assert files[0].parent != files[1].parent
    assert all(f.parent.name.startswith("rmlib-kernels-") and not f.parent.exists() for f in files)
    assert not [p for p in tmp_path.rglob("*ipc*")]  # no socket files beside the notebooks
